"""``self preemption end|continue [when (e)];`` (docs/syntax.md): what a step
stage's pass does after a grower preempted itself (rule step/grow), through
the syntax, the IR (the serq-ref extension ``Step.self_preemption``), the
codec and schema, the linker's warning, the exporters that refuse it, the
rule itself, lib/vllm.sq's switch ``older_rule``, and the oracle harness that
picks the rule by the vLLM a corpus was recorded on (docs/divergences.md, D1).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ir_schema
from oracle import campaign, campaign_cases
from oracle.peer import encode_for_pyserq
from oracle.scenario import older_rule_of, recorded_vllm, run_scenario, scenario_program
from semantics import codec, ir
from semantics.cli import main
from semantics.compiler import compile_source
from semantics.errors import ProgramError
from semantics.link import link
from semantics.smallstep.driver import run, trace
from shared_paths import SHARED

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "oracle" / "data"

#: Two requests on three blocks of 16, served newest first. Request 0 (24
#: tokens, two blocks) is admitted first, request 1 (16 tokens, one block)
#: second, and the pool is full. At the first decode step request 1, served
#: first, needs a block: the victim is the session admitted last, itself.
#: Under `end` the pass ends there (request 0 gets nothing in that step);
#: under `continue` request 0 decodes in the same step.
PROGRAM = """
let older = 0;
pool reqs { cap 2; admit via engine; }
pool kv { cap 48; block 16; preempt lifo; }
stage engine : step { budget 100; cost 1; serve by (-admission); memory kv; CLAUSE }
workload {
  arrive batch(2);
  init { set p = serial == 0 ? 24 : 16; }
}
session {
  hold reqs (1), kv (p) { prefill (p) growing kv; decode (4) growing kv; }
  observe done = now;
  end;
}
run { horizon 100; }
"""


def compile_with(clause: str, **sets: float) -> ir.Program:
    program, _ = compile_source(PROGRAM.replace("CLAUSE", clause), "<test>", sets=sets)
    return program


def engine(program: ir.Program) -> ir.Step:
    (stage,) = program.stages
    return stage.kind


def done_and_preemptions(program: ir.Program) -> tuple[list, int]:
    result = run(program)
    done = next(o for o in result.observes if o.name == "done")
    kv = next(p for p in result.pools if p.name == "kv")
    return sorted((serial, time) for time, serial, _, _ in done.samples), kv.preemptions


# --- the clause ------------------------------------------------------------------


@pytest.mark.parametrize("clause, expected", [
    ("", "End"),
    ("self preemption end;", "End"),
    ("self preemption continue;", "Continue"),
    ("self preemption continue when (older == 0);", "Continue"),
    ("self preemption continue when (older);", "End"),
    ("self preemption end when (older == 0);", "End"),
    ("self preemption end when (1 - older);", "End"),
    ("self preemption end when (older);", "Continue"),
])
def test_the_clause_chooses_the_rule(clause, expected):
    assert engine(compile_with(clause)).self_preemption == expected


def test_a_let_switches_it_from_the_command_line():
    # --set older=1 (lib/vllm.sq's --set older_rule=1)
    clause = "self preemption continue when (older == 0);"
    assert engine(compile_with(clause, older=1.0)).self_preemption == "End"
    assert engine(compile_with(clause, older=0.0)).self_preemption == "Continue"


def test_keywords_are_contextual():
    program, _ = compile_source(PROGRAM.replace("let older = 0;", "let older = 0; let preemption = 1; "
                                                "let self = 0;").replace("CLAUSE", "self preemption continue;"),
                                "<test>")
    assert engine(program).self_preemption == "Continue"


@pytest.mark.parametrize("clause, message", [
    ("self preemption continue; self preemption end;", "a second `self_preemption`"),
    ("self preemption continue when (residents);", "the condition of `self preemption` must be a constant"),
    ("self preemption continue when (0 / 0);", "is NaN"),
])
def test_the_clause_refused(clause, message):
    with pytest.raises(ProgramError, match=message):
        compile_with(clause)


def test_a_syntax_error_names_the_place():
    with pytest.raises(ProgramError) as e:
        compile_with("self preemption maybe;")
    assert e.value.span is not None and e.value.span.line == 5


# --- the IR: an optional field, written only when not the default -----------------


def test_the_default_is_not_written():
    encoded = codec.encode_program(compile_with("self preemption end;"))
    assert "self_preemption" not in encoded["stages"][0]["kind"]["Step"]
    assert encoded == codec.encode_program(compile_with(""))


def test_continue_is_written_and_round_trips():
    program = compile_with("self preemption continue;")
    text = codec.dumps(program)
    value = json.loads(text)
    assert value["stages"][0]["kind"]["Step"]["self_preemption"] == "Continue"
    ir_schema.validate(value)
    assert codec.loads(text) == program
    assert codec.dumps(codec.loads(text)) == text


def test_a_version_13_file_without_it_loads_as_the_seeds_rule():
    # every oracle IR file (the reference implementation's) has no such field
    path = SHARED / "oracle" / "serve" / "newest_first_preempt.ir.json"
    program = codec.loads(path.read_text())
    assert all(s.kind.self_preemption == "End" for s in program.stages if isinstance(s.kind, ir.Step))
    explicit = json.loads(path.read_text())
    for stage in explicit["stages"]:
        if "Step" in stage["kind"]:
            stage["kind"]["Step"]["self_preemption"] = "End"
    ir_schema.validate(explicit)
    assert codec.decode_program(explicit) == program


@pytest.mark.parametrize("value", ["continue", "Stop", 1, None])
def test_an_unknown_value_is_refused_by_both(value):
    encoded = codec.encode_program(compile_with("self preemption continue;"))
    encoded["stages"][0]["kind"]["Step"]["self_preemption"] = value
    with pytest.raises(codec.IRFormatError, match="self_preemption"):
        codec.decode_program(encoded)
    with pytest.raises(ProgramError, match="self_preemption"):
        ir_schema.validate(encoded)


# --- the linker's warning ------------------------------------------------------------


def test_continue_without_preemption_is_a_warning():
    text = PROGRAM.replace("CLAUSE", "self preemption continue;")
    program, smap = compile_source(text.replace("preempt lifo;", ""), "<test>")
    (warning,) = link(program, smap)
    assert warning.message.startswith("`self preemption continue` changes nothing: its memory `kv` has no "
                                      "`preempt lifo`")
    assert warning.span.line == 5
    program, smap = compile_source(text, "<test>")
    assert link(program, smap) == []


# --- the exporters that have only the seed's rule --------------------------------------


def test_pyserq_export_refuses_continue():
    encode_for_pyserq(compile_with("self preemption end;"))
    with pytest.raises(ProgramError, match="stage engine has `self preemption continue`, which pyserq does not have"):
        encode_for_pyserq(compile_with("self preemption continue;"))


def test_the_lean_fragment_takes_continue(tmp_path, capsys):
    # the rule is data of the Lean fragment (Engine.selfPreemption, docs/lean.md): an IR file with
    # Continue is emitted with `.continues`, and the mirror's outcome is vLLM 0.33.0's recorded answer
    value = json.loads((SHARED / "oracle" / "serve" / "newest_first_preempt.ir.json").read_text())
    step = next(s["kind"]["Step"] for s in value["stages"] if "Step" in s["kind"])
    step["self_preemption"] = "Continue"
    path = tmp_path / "continue.ir.json"
    path.write_text(json.dumps(value, indent=2) + "\n")
    assert main(["lean", str(path), "--answer", "mirror"]) == 0
    out = capsys.readouterr().out
    assert "selfPreemption := .continues }," in out
    answer = json.loads((ROOT / "oracle" / "data" / "shared" / "serve" / "newest_first_preempt.out.json").read_text())
    dones = ", ".join(f"({k}, {v})" for k, v in sorted((int(k), v) for k, v in answer["done"].items()))
    assert f"[{dones}], {answer['preemptions']})" in out


# --- the rule: step/grow ------------------------------------------------------------------


def test_step_grow_under_each_rule():
    # step/grow: "when it preempted itself, gets nothing and the pass ends (under self
    # preemption continue: the pass goes on with the next resident; either way it admits nothing)"
    end = compile_with("self preemption end;")
    cont = compile_with("self preemption continue;")
    assert done_and_preemptions(end) == ([(0, 9.0), (1, 13.0)], 4)
    assert done_and_preemptions(cont) == ([(0, 5.0), (1, 9.0)], 2)

    def second_iteration(program):
        records = list(trace(program))
        start = [k for k, r in enumerate(records) if r["rule"] == "step/iteration-start"][1]
        stop = next(k for k in range(start, len(records)) if records[k]["rule"] == "step/iteration")
        return [r["rule"] for r in records[start:stop + 1]]

    # pool/preempt, then its follow-up work (the victim's job leaves, its holds go back, it queues again)
    grew = ["step/iteration-start", "step/schedule", "pool/preempt", "stage/leave", "pool/release", "pool/release",
            "session/hold-enter", "step/grow"]
    assert second_iteration(end) == grew + ["step/iteration"]  # the pass ended: request 0 has nothing
    assert second_iteration(cont) == grew + ["step/schedule", "step/iteration"]  # request 0 decodes; no admit


# --- lib/vllm.sq and the oracle harness -------------------------------------------------------


D1_MINIMAL = {"budget": 2, "max_seqs": 2, "block_size": 32, "num_blocks": 14, "chunk": 0, "prefix_caching": False,
              "serve": "-admission", "requests": [{"prompt": 347, "out": 9, "arrive": 0}, {"prompt": 25, "out": 9}]}


def test_the_library_follows_vllm_0_33_and_the_older_rule_is_a_switch():
    assert engine_of(scenario_program(D1_MINIMAL)).self_preemption == "Continue"
    assert engine_of(scenario_program(D1_MINIMAL, older_rule=True)).self_preemption == "End"
    # docs/divergences.md, D1's minimal case: vLLM 0.33.0's answer and the older rule's
    assert run_scenario(D1_MINIMAL) == {"first": {"0": 174, "1": 186}, "done": {"0": 194, "1": 211},
                                        "preemptions": 1, "steps": 212}
    assert run_scenario(D1_MINIMAL, older_rule=True) == {"first": {"0": 174, "1": 186}, "done": {"0": 195, "1": 212},
                                                         "preemptions": 1, "steps": 213}
    # at step 194 request 1 preempts itself; 0.33.0 decodes request 0 in that step
    assert [s for s in campaign.serq_steps("serve", D1_MINIMAL) if s[2]] == [[194, {"0": 1}, ["1"]]]
    assert [s for s in campaign.serq_steps("serve", D1_MINIMAL, True) if s[2]] == [[194, {}, ["1"]]]


def engine_of(program: ir.Program) -> ir.Step:
    return next(s.kind for s in program.stages if isinstance(s.kind, ir.Step))


def test_the_corpora_say_which_vllm_they_were_recorded_on():
    assert recorded_vllm(str(SHARED / "oracle" / "serve" / "admission.json")) == "0c87a197"
    assert recorded_vllm(str(SHARED / "oracle" / "vllm" / "preempt.json")) == "0c87a197"
    assert recorded_vllm(str(DATA / "shared" / "serve" / "admission.out.json")) == "0.33.0"
    assert recorded_vllm(str(DATA / "campaign" / "serve.jsonl")) == "0.33.0"
    assert [older_rule_of(v) for v in ("0c87a197", "0.32.1", "0.33.0", "0.34", "1.0.0", None)] == \
        [True, True, False, False, False, False]


@pytest.mark.parametrize("name", ["admission", "newest_first", "newest_first_preempt", "prefill_first"])
def test_the_serve_oracles_under_both_rules(name):
    # ../shared/oracle/serve's answers are 0c87a197's, oracle/data/shared/serve's 0.33.0's (and the
    # older rule's beside them): serq-ref gives each under its rule
    path = SHARED / "oracle" / "serve" / f"{name}.json"
    scenario = json.loads(path.read_text())
    recorded = json.loads((SHARED / "oracle" / "serve" / f"{name}.out.json").read_text())
    fields = ("first", "done", "preemptions", "steps")
    for older, answer_file in ((False, f"{name}.out.json"), (True, f"{name}.older-rule.out.json")):
        vllm = json.loads((DATA / "shared" / "serve" / answer_file).read_text())
        assert run_scenario(scenario, str(path), older) == {k: vllm[k] for k in fields}
    assert run_scenario(scenario, str(path)) == {k: recorded[k] for k in fields}  # the corpus's rule


def test_oracle_check_picks_the_rule_of_the_corpus(capsys):
    assert main(["oracle", "check", str(SHARED / "oracle" / "serve")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "8 passed, 0 failed"
    assert main(["oracle", "check", str(SHARED / "oracle" / "serve"), "--no-older-rule"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "7 passed, 1 failed"
    assert "serve/newest_first_preempt.json: steps: recorded 50, serq-ref 49" in out
    assert main(["oracle", "run", str(SHARED / "oracle" / "serve" / "newest_first_preempt.json"), "--json",
                 "--no-older-rule"]) == 0
    assert json.loads(capsys.readouterr().out)["done"] == {"0": 25, "1": 48, "2": 15, "3": 22}


# --- serve admission: the two rules are one ---------------------------------------------------


def self_preempting_scenarios() -> list[dict]:
    """The recorded FCFS scenarios where vLLM counted a self-preemption, fewest steps first."""
    records = [json.loads(line) for line in (DATA / "campaign" / "scenarios.jsonl").read_text().splitlines()]
    found = [r for r in records if r["answer"]["features"]["self_preemptions"] > 0]
    return sorted(found, key=lambda r: (r["answer"]["steps"], r["index"]))


def self_preempted(case: dict, older_rule: bool) -> int:
    program = scenario_program(campaign._scenario(case), older_rule=older_rule)
    return sum(r["rule"] == "step/grow" and r.get("outcome") == "preempted" for r in trace(program))


def test_serve_admission_gives_the_same_answers_under_both_rules():
    # under serve admission the self-victim (admitted last) is served last: nothing follows it
    # in the pass, so continue and end are one (the campaign marker runs all 481 such scenarios)
    cases = self_preempting_scenarios()[:12]
    assert len(cases) == 12
    for record in cases:
        case = record["case"]
        answer = campaign.serq_answer("scenario", case)
        assert answer == campaign.serq_answer("scenario", case, older_rule=True), record["index"]
        assert answer == campaign.real_fields("scenario", record["answer"])
    assert self_preempted(cases[0]["case"], False) > 0  # the rule is exercised, not bypassed


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=10**6))
def test_serve_admission_property(index):
    case = campaign_cases.scenario(7, index)
    assert campaign.serq_answer("scenario", case) == campaign.serq_answer("scenario", case, older_rule=True)


@pytest.mark.campaign
def test_every_recorded_self_preempting_fcfs_scenario_is_the_same_under_both_rules():
    for record in self_preempting_scenarios():
        case = record["case"]
        assert campaign.serq_answer("scenario", case) == campaign.serq_answer("scenario", case, older_rule=True), \
            record["index"]
