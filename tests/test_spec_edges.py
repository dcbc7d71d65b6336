"""Speculative decoding's edges (issue 19, section 2; docs/design/speculative-decoding.md, section 8):
the clause's ``lookahead (A) slots (D) within (L)``, the rules step/pad and step/pad-stop, the draft-slot
budget, the lookahead slots and the model length's clamp, the scenario field ``spec_method``, and the
recorded corpus oracle/data/campaign/spec-edges.jsonl (vLLM 0.33.0's answers, n-gram, draft-model and
parallel draft-model drafters, one-token prompts, max_model_len near a request's end, both engines).

The default suite checks the clause on small programs and a slice of the corpus against its records (no
vLLM needed); behind ``vllm`` the driver reproduces the first records; behind ``campaign`` every record.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oracle import real
from oracle.campaign_cases import spec_edges_scenario
from oracle.scenario import run_scenario, scenario_program
from semantics import codec
from semantics.compiler import compile_source
from semantics.errors import ProgramError
from semantics.smallstep.driver import trace

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "oracle" / "data" / "campaign" / "spec-edges.jsonl"
FIELDS = ("first", "done", "preemptions", "steps")

#: Three one-request sessions arriving at 0, 1 and 2 on an engine of budget B with K = 3 drafts: session 0's
#: prompt of 8 then 12 decodes, sessions 1 and 2 a one-token prompt then 2 decodes (every draft rejected).
PROGRAM = """
let B = 10;
pool kv { cap 160; block 4; preempt lifo; }
pool reqs { cap 4; admit via engine; }
stage gate : delay;
stage engine : step { budget B; cost 1; memory kv; CLAUSE }
workload { arrive batch(3); }
session { run gate (serial); hold reqs (1), kv (serial == 0 ? 8 : 1) { prefill (serial == 0 ? 8 : 1) growing kv;
          decode (serial == 0 ? 12 : 2) growing kv; } observe done = now; }
run { horizon 60; seed 1; }
"""


def compile_with(clause: str, **sets: float):
    program, _ = compile_source(PROGRAM.replace("CLAUSE", clause), "<test>", sets=sets)
    return program


def records_of(program) -> list[dict]:
    return list(trace(program))


def records() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]


def scenario_of(record: dict) -> dict:
    return {k: v for k, v in record["case"].items() if k != "kind"}


# --- the clause --------------------------------------------------------------------------


def test_the_clause_lowers_its_slots_and_length_and_absent_parts_are_zero():
    kind = compile_with("speculate (3) accept (0) lookahead (3) slots (1) within (100);").stages[1].kind
    assert (kind.spec_tokens, kind.spec_lookahead, kind.spec_slots, kind.spec_within) == (3, 3, 1, 100)
    kind = compile_with("speculate (3) accept (0) within (50);").stages[1].kind
    assert (kind.spec_lookahead, kind.spec_slots, kind.spec_within) == (0, 0, 50)
    off = compile_with("speculate (K) accept (0) lookahead (K) slots (K) within (9);".replace("K", "0")).stages[1].kind
    assert (off.spec_tokens, off.spec_lookahead, off.spec_slots, off.spec_within) == (0, 0, 0, 0)


def test_the_ir_writes_the_new_fields_only_when_given_and_reads_them_back():
    program = compile_with("speculate (3) accept (0) lookahead (2) slots (1);")
    text = codec.dumps(program)
    step = json.loads(text)["stages"][1]["kind"]["Step"]
    assert step["spec_lookahead"] == 2 and step["spec_slots"] == 1 and "spec_within" not in step
    assert codec.loads(text) == program
    plain = json.loads(codec.dumps(compile_with("speculate (3) accept (0);")))["stages"][1]["kind"]["Step"]
    assert not {"spec_lookahead", "spec_slots", "spec_within"} & set(plain)


@pytest.mark.parametrize("clause, message", [
    ("speculate (3) accept (0) lookahead (1.5);", "lookahead slots"),
    ("speculate (3) accept (0) slots (-1);", "draft slots"),
    ("speculate (3) accept (0) within (now);", "model length"),
])
def test_bad_slots_and_lengths_are_located_errors(clause, message):
    with pytest.raises(ProgramError, match=message) as caught:
        compile_with(clause)
    assert caught.value.span is not None and caught.value.span.line == 6


def test_fmt_prints_the_parts_given_in_order(tmp_path, capsys):
    from semantics.cli import main

    path = tmp_path / "p.sq"
    path.write_text(PROGRAM.replace("CLAUSE", "speculate(3) accept(0)  slots(1) within( 100 );"))
    assert main(["fmt", str(path)]) == 0
    assert "speculate (3) accept (0) slots (1) within (100);" in capsys.readouterr().out


# --- the rules -----------------------------------------------------------------------------


def test_a_one_token_prefill_admitted_beside_a_decode_is_padded_and_rolled_back():
    rs = records_of(compile_with("speculate (3) accept (0);"))
    pads = [r for r in rs if r["rule"] == "step/pad"]
    assert pads and pads[0]["session"] == 1 and pads[0]["tokens"] == 4.0 and pads[0]["drafts"] == 3.0
    rollback = [r for r in rs if r["rule"] == "step/reject" and r["session"] == 1 and r["job"] == pads[0]["job"]]
    assert rollback and rollback[0]["rollback"] == 3.0 and rollback[0]["accepted"] == 0.0


def test_a_head_the_budget_cannot_pad_is_not_admitted():
    """Budget 10: session 0's decode takes 4, session 1's padded prefill 4; session 2's would need 4 of 2."""
    rs = records_of(compile_with("speculate (3) accept (0);"))
    stops = [r for r in rs if r["rule"] == "step/pad-stop"]
    assert stops and stops[0]["session"] == 2 and stops[0]["time"] == 2.0
    admitted = [r["time"] for r in rs if r["rule"] == "step/admit" and r["session"] == 2]
    assert admitted and admitted[0] > 2.0


def test_no_padding_while_a_running_prefill_is_served():
    """Budget 6: session 0's prompt takes two iterations; session 1, admitted beside its second chunk, is not
    padded (vLLM's prefill_scheduled)."""
    rs = records_of(compile_with("speculate (3) accept (0);", B=6))
    first = next(r for r in rs if r["rule"] == "step/admit" and r["session"] == 1)
    assert first["time"] == 1.0
    assert not any(r["rule"] == "step/pad" and r["time"] == 1.0 for r in rs)


def test_draft_slots_take_budget_from_every_resident_served():
    """slots (3): budget 10 leaves 7 to the first resident served; at 2, session 0's decode of 4 (and its 3
    slots) leaves nothing: session 1, a resident since 1, is not served."""
    rs = records_of(compile_with("speculate (3) accept (0) slots (3);"))
    assert next(r for r in rs if r["rule"] == "step/admit" and r["session"] == 0)["left"] == 7.0
    served = [r for r in rs if r["rule"] == "step/schedule" and r["time"] == 2.0]
    assert [(r["session"], r["tokens"], r["left"]) for r in served] == [(0, 4.0, 7.0)]
    assert [r["session"] for r in rs if r["rule"] == "step/schedule" and r["time"] == 3.0] == [0]
    plain = records_of(compile_with("speculate (3) accept (0);"))
    assert {r["session"] for r in plain if r["rule"] in ("step/schedule", "step/pad") and r["time"] == 2.0} == {0, 1}


def test_within_clamps_the_drafts_and_lookahead_grows_the_hold():
    """within (14): session 0 at position 8 + 4k is given at most 14 - p - 1 tokens; lookahead (2) grows its
    hold to p + tokens + 2, never past 14."""
    rs = records_of(compile_with("speculate (3) accept (3) lookahead (2) within (14);"))
    decodes = [r for r in rs if r["rule"] == "step/schedule" and r["session"] == 0 and r["mode"] == "decode"]
    assert [r["tokens"] for r in decodes][:2] == [4.0, 1.0]
    grows = [r for r in rs if r["rule"] == "pool/grow" and r["session"] == 0]
    assert grows and max(sum(g["units"] for g in grows[:k + 1]) for k in range(len(grows))) + 8 <= 16


# --- the scenario field ----------------------------------------------------------------------


def test_spec_method_is_checked_and_maps_the_drafters_slots():
    base = {"budget": 64, "max_seqs": 4, "block_size": 4, "num_blocks": 40,
            "requests": [{"prompt": 10, "out": 12}]}
    with pytest.raises(ProgramError, match="no `spec_tokens`"):
        run_scenario({**base, "spec_method": "ngram"})
    with pytest.raises(ProgramError, match="one of"):
        run_scenario({**base, "spec_tokens": 2, "spec_method": "eagle"})
    kind = next(s.kind for s in scenario_program({**base, "spec_tokens": 3, "spec_method": "parallel_draft_model"})
                .stages if s.name == "engine")
    assert (kind.spec_lookahead, kind.spec_slots, kind.spec_within) == (3, 3, 8192)
    kind = next(s.kind for s in scenario_program({**base, "spec_tokens": 3, "spec_method": "draft_model",
                                                  "max_model_len": 30}).stages if s.name == "engine")
    assert (kind.spec_lookahead, kind.spec_slots, kind.spec_within) == (3, 1, 30)


def test_the_harness_extends_the_librarys_admission_units_with_the_lookahead():
    """lib/vllm.sq's kv units are what oracle/scenario.py's _with_lookahead extends (KV_UNITS), and only a
    scenario with lookahead slots gets them."""
    from oracle.scenario import KV_UNITS, LIBRARY

    assert f"kv ({KV_UNITS})" in LIBRARY.read_text()
    base = {"budget": 64, "max_seqs": 4, "block_size": 4, "num_blocks": 40, "requests": [{"prompt": 10, "out": 12}],
            "spec_tokens": 3}
    texts = [codec.dumps(scenario_program({**base, "spec_method": m})) for m in ("ngram", "draft_model")]
    assert texts[0].count('"Min"') < texts[1].count('"Min"')


# --- the recorded corpus ---------------------------------------------------------------------


def test_the_corpus_covers_the_edges():
    rs = records()
    assert len(rs) >= 1000
    cases = [r["case"] for r in rs]
    assert {c["spec_tokens"] for c in cases} == set(range(1, 9))
    assert {c["spec_method"] for c in cases} == {"ngram", "draft_model", "parallel_draft_model"}
    assert {bool(c.get("async")) for c in cases} == {False, True}
    assert sum(any(q["prompt"] == 1 for q in c["requests"]) for c in cases) > 300
    near = [c for c in cases if "max_model_len" in c
            and any(abs(q["prompt"] + q["out"] - c["max_model_len"]) <= c["spec_tokens"] + 2 for q in c["requests"])]
    assert len(near) > 300
    assert sum("refused" in r["answer"] for r in rs) > 20
    assert all((r["answer"]["spec_lookahead"], r["answer"]["spec_draft_slots"])
               == {"ngram": (0, 0), "draft_model": (r["case"]["spec_tokens"], 1),
                   "parallel_draft_model": (r["case"]["spec_tokens"], r["case"]["spec_tokens"])}[r["case"]["spec_method"]]
               for r in rs)
    assert sum(r["answer"]["preemptions"] > 0 for r in rs) > 50


def test_the_generator_draws_the_recorded_cases():
    rs = records()
    for record in rs[:50]:
        assert spec_edges_scenario(record["seed"], record["index"]) == record["case"]


#: Every 40th case of the corpus (30 cases, both modes, every drafter): the harness's answers are vLLM's.
@pytest.mark.parametrize("start", (0, 600))
def test_a_slice_of_the_corpus_agrees_with_vllm(start):
    rs = records()
    for index in range(start, start + 600, 40):
        record = rs[index]
        answer = run_scenario(scenario_of(record))
        want = {k: record["answer"][k] for k in FIELDS}
        if "refused" in record["answer"]:
            want["refused"] = record["answer"]["refused"]
        assert answer == want, index


@pytest.mark.vllm
def test_the_driver_reproduces_the_first_records():
    rs = records()[:10]
    answers = real.answer_all([dict(r["case"]) for r in rs])
    for record, answer in zip(rs, answers):
        assert {k: answer[k] for k in FIELDS} == {k: record["answer"][k] for k in FIELDS}, record["index"]


@pytest.mark.campaign
def test_every_record_agrees():
    failed = []
    for record in records():
        answer = run_scenario(scenario_of(record))
        if any(answer.get(k) != record["answer"].get(k) for k in FIELDS + ("refused",)):
            failed.append(record["index"])
    assert failed == []


def test_the_invariants_hold_after_every_rule_on_generated_edge_programs():
    """The campaign's generator (spec_edges_scenario) draws programs that use the edges; on twelve of them
    with one-token prompts, both modes and the three drafters, every configuration each rule leaves is held
    to RunInvariants, and step/pad applies."""
    from semantics.smallstep.driver import configurations
    from semantics.smallstep.invariants import RunInvariants

    chosen = [r for r in records() if len(r["case"]["requests"]) <= 5 and r["answer"]["preemptions"] > 0
              and any(q["prompt"] == 1 for q in r["case"]["requests"])]
    chosen = [r for r in chosen if r["case"].get("async")][:6] + [r for r in chosen if not r["case"].get("async")][:6]
    assert len(chosen) == 12
    applied = set()
    for record in chosen:
        program = scenario_program(scenario_of(record))
        checker = RunInvariants(program.warmup, program.horizon)
        for rule, c in configurations(program):
            applied.add(rule)
            checker.check(c)
    assert {"step/pad", "step/reject", "pool/preempt"} <= applied
