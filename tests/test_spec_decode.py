"""Speculative decoding (issue 19, section 2; docs/design/speculative-decoding.md):
the step clause ``speculate (K) accept (e)``, its rules (step/schedule's 1 + K
tokens, step/iteration-end's tokens produced, step/reject, and under
``schedule ahead`` the roll-back deferred to step/apply and the request served
once more), lib/vllm.sq's ``spec_tokens``, the scenario fields (``spec_tokens``,
a request's ``accept``), and the recorded corpus
oracle/data/campaign/spec-decode.jsonl (vLLM 0.33.0's answers, synchronous and
asynchronous).

The default suite checks the clause on small programs and a slice of the
corpus against its records (no vLLM needed); behind ``vllm`` the driver
reproduces the first records; behind ``campaign`` every record.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import ir_schema
from oracle import real
from oracle.scenario import run_scenario, scenario_program
from semantics import codec
from semantics.cli import main
from semantics.compiler import compile_source
from semantics.errors import ProgramError
from semantics.smallstep.driver import run, trace
from semantics.smallstep.rules import REGISTRY

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "oracle" / "data" / "campaign" / "spec-decode.jsonl"

#: Two requests of 10 and 7 tokens on a KV pool of 40 blocks of 4, one engine
#: with K drafts per decode: session 0 accepts every draft, session 1 one.
PROGRAM = """
let K = 3;
pool kv { cap 160; block 4; evict lru; preempt lifo; }
pool reqs { cap 4; queue fifo; admit via engine; }
stage engine : step { budget 64; cost 1; serve admission; memory kv; CLAUSE }
workload {
  arrive batch(2);
  hidden acc;
  init { set acc = serial == 0 ? 3 : 1; }
}
session {
  hold reqs (1), kv (10) {
    prefill (10) growing kv;
    observe ttft = now;
    decode (11) growing kv;
  }
  observe done = now;
}
run { horizon 1000; }
"""


def compile_with(clause: str, **sets: float):
    program, _ = compile_source(PROGRAM.replace("CLAUSE", clause), "<test>", sets=sets)
    return program


def done_times(program) -> list:
    done = next(o for o in run(program).observes if o.name == "done")
    return sorted((serial, time) for time, serial, _, _ in done.samples)


def records() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]


def scenario_of(record: dict) -> dict:
    return {k: v for k, v in record["case"].items() if k != "kind"}


# --- the clause --------------------------------------------------------------------------


def test_the_clause_lowers_to_the_ir_fields_and_zero_is_no_clause():
    kind = compile_with("speculate (K) accept (acc);").stages[0].kind
    assert kind.spec_tokens == 3 and kind.spec_accept is not None
    off = compile_with("speculate (K) accept (acc);", K=0).stages[0].kind
    assert off.spec_tokens == 0 and off.spec_accept is None
    assert off == compile_with("").stages[0].kind


def test_the_ir_writes_the_fields_only_when_speculating_and_reads_them_back():
    spec, plain = compile_with("speculate (K) accept (acc);"), compile_with("")
    encoded = codec.encode_program(spec)
    step = encoded["stages"][0]["kind"]["Step"]
    assert step["spec_tokens"] == 3 and "spec_accept" in step
    assert not {"spec_tokens", "spec_accept"} & set(codec.encode_program(plain)["stages"][0]["kind"]["Step"])
    ir_schema.validate(encoded)
    assert codec.decode_program(encoded) == spec


def test_the_library_default_leaves_every_program_as_it_was():
    """lib/vllm.sq says `speculate (spec_tokens) ...` with spec_tokens 0: the IR has no spec field."""
    program = scenario_program({"budget": 64, "max_seqs": 4, "block_size": 16, "num_blocks": 20,
                                "requests": [{"prompt": 20, "out": 3}]})
    assert all("spec_tokens" not in s["kind"].get("Step", {}) for s in codec.encode_program(program)["stages"])


def test_bad_draft_counts_and_acceptances_are_errors():
    with pytest.raises(ProgramError, match="the draft tokens are a natural number"):
        compile_with("speculate (1.5) accept (1);")
    with pytest.raises(ProgramError, match="must be a constant"):
        compile_with("speculate (now) accept (1);")
    from semantics.link import link

    program, smap = compile_source(PROGRAM.replace("CLAUSE", "speculate (K) accept (tokens);"), "<test>")
    with pytest.raises(ProgramError, match="tokens"):  # a cost's context variable is no acceptance's
        link(program, smap)
    with pytest.raises(ProgramError, match="a second `speculate`"):
        compile_with("speculate (K) accept (1); speculate (K) accept (1);")


def test_drafts_shorten_the_decode_by_what_is_accepted():
    """Session 0 accepts all 3 drafts (4 tokens an iteration: 11 in 3), session 1 one (2 an iteration: 6)."""
    assert done_times(compile_with("")) == [(0, 12.0), (1, 12.0)]
    assert done_times(compile_with("speculate (K) accept (acc);")) == [(0, 4.0), (1, 7.0)]


def test_step_reject_rolls_the_rejected_drafts_back():
    records_ = list(trace(compile_with("speculate (K) accept (acc);")))
    rejects = [r for r in records_ if r["rule"] == "step/reject"]
    assert {(r["session"], r["drafts"], r["accepted"], r["rollback"]) for r in rejects} == \
        {(1, 3.0, 1.0, 2.0), (1, 3.0, 1.0, 3.0), (0, 3.0, 3.0, 1.0)}  # the last: rejected, or past its end
    assert "step/reject" in REGISTRY


def test_the_fast_engine_gives_the_definitions_bytes(tmp_path, capsys):
    path = tmp_path / "spec.sq"
    path.write_text(PROGRAM.replace("CLAUSE", "speculate (K) accept (acc);"))
    outputs = []
    for engine in ("fast", "definition"):
        assert main(["run", str(path), "--engine", engine]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]


def test_fmt_prints_the_clause(tmp_path, capsys):
    path = tmp_path / "spec.sq"
    path.write_text(PROGRAM.replace("CLAUSE", "speculate(K) accept( acc );"))
    assert main(["fmt", str(path)]) == 0
    assert "speculate (K) accept (acc);" in capsys.readouterr().out


# --- the scenario fields -----------------------------------------------------------------


def test_the_scenario_fields_are_checked():
    base = {"budget": 64, "max_seqs": 4, "block_size": 4, "num_blocks": 40,
            "requests": [{"prompt": 10, "out": 12, "accept": [3]}]}
    with pytest.raises(ProgramError, match="no `spec_tokens`"):
        run_scenario(base)
    with pytest.raises(ProgramError, match="at most 8"):
        run_scenario({**base, "spec_tokens": 9})
    with pytest.raises(ProgramError, match="a list of 1 to 8"):
        run_scenario({**base, "spec_tokens": 3, "requests": [{"prompt": 10, "out": 12, "accept": []}]})


#: vLLM 0.33.0's answers (oracle/real/driver.py) to SCENARIO, synchronous and asynchronous.
SCENARIO = {"budget": 64, "max_seqs": 4, "block_size": 4, "num_blocks": 40, "spec_tokens": 3,
            "requests": [{"prompt": 10, "out": 12, "accept": [3]}, {"prompt": 7, "out": 9, "accept": [0, 1, 2]},
                         {"prompt": 5, "out": 6, "arrive": 2}]}
ANSWERS = {False: {"first": {"0": 1, "1": 1, "2": 3}, "done": {"0": 4, "1": 4, "2": 8}, "preemptions": 0, "steps": 9},
           True: {"first": {"0": 1, "1": 1, "2": 3}, "done": {"0": 4, "1": 4, "2": 8}, "preemptions": 0,
                  "steps": 10}}


@pytest.mark.parametrize("asynchronous", (False, True))
def test_the_harness_answers_as_vllm(asynchronous):
    answer = run_scenario({**SCENARIO, "async": asynchronous})
    assert answer == ANSWERS[asynchronous]


def test_pyserq_reports_speculative_decoding_unsupported(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(SCENARIO))
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "adapters" / "pyserq_adapter.py"), str(path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "unsupported" in json.loads(out.stdout)


# --- the recorded corpus -------------------------------------------------------------------


def test_the_corpus_covers_the_space():
    rs = records()
    assert len(rs) >= 3000
    cases = [r["case"] for r in rs]
    assert {c["spec_tokens"] for c in cases} == set(range(1, 9))
    assert {bool(c.get("async")) for c in cases} == {False, True}
    assert {bool(c["prefix_caching"]) for c in cases} == {False, True}
    assert all(r["answer"]["mode"] == ("async" if r["case"].get("async") else "sync") for r in rs)
    assert sum(r["answer"]["preemptions"] > 0 for r in rs) > 100


#: Every 50th case of the corpus (60 cases, both modes): the harness's answers are vLLM's.
SLICE = range(0, 3000, 50)


@pytest.mark.parametrize("start", (0, 1000, 2000))
def test_a_slice_of_the_corpus_agrees_with_vllm(start):
    rs = records()
    for index in (i for i in SLICE if start <= i < start + 1000):
        record = rs[index]
        answer = run_scenario(scenario_of(record))
        want = {k: record["answer"][k] for k in ("first", "done", "preemptions", "steps")}
        assert answer == want, index


@pytest.mark.vllm
def test_the_driver_reproduces_the_first_records_and_these_answers():
    rs = records()[:20]
    jobs = [dict(r["case"]) for r in rs] + [real.scenario_job({**SCENARIO, "async": a}) for a in (False, True)]
    answers = real.answer_all(jobs)
    for record, answer in zip(rs, answers):
        assert {k: answer[k] for k in ("first", "done", "preemptions", "steps")} == \
            {k: record["answer"][k] for k in ("first", "done", "preemptions", "steps")}, record["index"]
    for a, answer in zip((False, True), answers[20:]):
        assert {k: answer[k] for k in ANSWERS[a]} == ANSWERS[a]


@pytest.mark.campaign
def test_every_record_agrees(tmp_path):
    failed = []
    for record in records():
        answer = run_scenario(scenario_of(record))
        if answer != {k: record["answer"][k] for k in ("first", "done", "preemptions", "steps")}:
            failed.append(record["index"])
    assert failed == []


def test_the_invariants_hold_after_every_rule_on_generated_spec_programs():
    """The campaign's generator (oracle/campaign_cases.py, spec_scenario) draws programs that use the
    extension; on twelve of them with preemptions, both modes, every configuration each rule leaves is
    held to RunInvariants (allocated + cached <= cap, tokens within the budget, time never back...)."""
    from semantics.smallstep.driver import configurations
    from semantics.smallstep.invariants import RunInvariants

    chosen = [r for r in records() if r["answer"]["preemptions"] > 0 and len(r["case"]["requests"]) <= 4]
    chosen = [r for r in chosen if r["case"].get("async")][:6] + [r for r in chosen if not r["case"].get("async")][:6]
    assert len(chosen) == 12
    applied = set()
    for record in chosen:
        program = scenario_program(scenario_of(record))
        checker = RunInvariants(program.warmup, program.horizon)
        for rule, c in configurations(program):
            applied.add(rule)
            checker.check(c)
    assert {"step/reject", "step/apply", "pool/preempt"} <= applied
