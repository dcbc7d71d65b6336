"""Asynchronous scheduling, vLLM 0.33.0's default (issue 18, section 1;
docs/design/async-scheduling.md): the step stage's ``schedule ahead``
clause, its rules (step/park, step/apply, step/preempt-parked), lib/vllm.sq's
``async_scheduling`` and the oracle harness's modes, and the recorded async
corpora (oracle/data/campaign/async-*.jsonl, oracle/data/replay/async-*).

The default suite checks the clause and the rules on small programs, the
shared scenarios against vLLM 0.33.0's asynchronous answers (recorded here
from oracle/real/driver.py), and the first cases of each async corpus against
its records (no vLLM needed). Behind the ``vllm`` marker: the driver's async
answers again; behind ``campaign``: every async corpus, whole.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import ir_schema
from oracle import campaign, real
from oracle.scenario import flush_steps, run_scenario, scenario_program
from semantics import codec, ir
from semantics.cli import main
from semantics.compiler import compile_source
from semantics.errors import ProgramError
from semantics.smallstep.driver import run, trace
from semantics.smallstep.rules import REGISTRY
from shared_paths import SHARED
from test_oracle_harness import assert_full_trace_agrees  # the synchronous engine's check, on the async records

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "oracle" / "data"

#: vLLM 0.33.0's answers (oracle/real/driver.py, "async": true) to the
#: scenarios of ../shared/oracle/vllm: test_the_driver_gives_these_answers
#: asks it again when SERQ_VLLM_PYTHON is set.
ASYNC_ANSWERS = {
    "alone": {"first": {"2": 3, "0": 5, "3": 18, "1": 27}, "done": {"2": 14, "3": 23, "0": 24, "1": 50},
              "preemptions": 2, "steps": 52},
    "chunked": {"first": {"0": 3, "1": 4, "2": 4}, "done": {"0": 4, "2": 6, "1": 8}, "preemptions": 0, "steps": 10},
    "hol": {"first": {"0": 1, "1": 12, "2": 12}, "done": {"0": 10, "2": 14, "1": 21}, "preemptions": 0, "steps": 23},
    "longchunk": {"first": {"0": 3, "1": 3}, "done": {"0": 4, "1": 4}, "preemptions": 0, "steps": 6},
    "mixed": {"first": {"0": 1, "1": 3, "2": 34, "3": 42, "4": 55, "5": 66},
              "done": {"1": 32, "0": 40, "2": 53, "4": 64, "5": 90, "3": 101}, "preemptions": 0, "steps": 103},
}

#: Two requests on five blocks of 16 with room for one running at a time
#: past the first: request 0 (prompt 16, 3 tokens out) is admitted first;
#: request 1 waits behind it for blocks.
PROGRAM = """
let x = 1;
pool reqs { cap 2; admit via engine; }
pool kv { cap 48; block 16; preempt lifo; }
stage engine : step { budget 64; cost 1; memory kv; CLAUSE }
workload {
  arrive batch(2);
  init { set p = serial == 0 ? 30 : 20; }
}
session {
  hold reqs (1), kv (p) { prefill (p) growing kv; decode (2) growing kv; }
  observe done = now;
  end;
}
run { horizon 100; }
"""


def compile_with(clause: str, **sets: float) -> ir.Program:
    program, _ = compile_source(PROGRAM.replace("CLAUSE", clause), "<test>", sets=sets)
    return program


def done_times(program: ir.Program) -> list:
    result = run(program)
    done = next(o for o in result.observes if o.name == "done")
    return sorted((serial, time) for time, serial, _, _ in done.samples)


def shared_scenario(name: str) -> dict:
    return json.loads((SHARED / "oracle" / "vllm" / f"{name}.json").read_text())


# --- the clause ------------------------------------------------------------------


def test_the_clause_and_its_switch_lower_to_the_ir_field():
    assert compile_with("schedule ahead;").stages[0].kind.schedule_ahead is True
    assert compile_with("").stages[0].kind.schedule_ahead is False
    assert compile_with("schedule ahead when (x == 1);", x=1).stages[0].kind.schedule_ahead is True
    assert compile_with("schedule ahead when (x == 1);", x=0).stages[0].kind.schedule_ahead is False


def test_the_ir_writes_the_field_only_when_true_and_reads_it_back():
    ahead, plain = compile_with("schedule ahead;"), compile_with("")
    encoded = codec.encode_program(ahead)
    assert encoded["stages"][0]["kind"]["Step"]["schedule_ahead"] is True
    assert "schedule_ahead" not in codec.encode_program(plain)["stages"][0]["kind"]["Step"]
    ir_schema.validate(encoded)
    assert codec.decode_program(encoded) == ahead
    encoded["stages"][0]["kind"]["Step"]["schedule_ahead"] = 1
    with pytest.raises(codec.IRFormatError, match="expected true or false"):
        codec.decode_program(encoded)


def test_a_second_clause_is_an_error():
    with pytest.raises(ProgramError, match="a second `schedule_ahead`"):
        compile_with("schedule ahead; schedule ahead;")


def test_lean_translates_the_clause_where_the_ir_has_it(tmp_path, capsys):
    """The Lean fragment has schedule ahead now (docs/lean.md, "vLLM 0.33.0's
    default rules"): the IR's clause is the engine's `ahead`, and the
    mirror's outcome is the interpreter's."""
    from lean_bridge.check import mirror_answer
    from lean_bridge.interpreter import interpreter_answer
    from lean_bridge.scenario import load

    path = tmp_path / "ahead.ir.json"
    program = scenario_program({**shared_scenario("hol"), "async": True})
    path.write_text(json.dumps(codec.encode_program(program), indent=2))
    code = main(["lean", str(path), "--answer", "mirror"])
    out = capsys.readouterr().out
    assert code == 0 and "ahead := true" in out
    sc = load(str(path))
    assert sc.translation.program.engine.ahead
    assert mirror_answer(sc.translation.program).as_tuple() == interpreter_answer(sc.program).as_tuple()


# --- the rules -------------------------------------------------------------------


def test_the_rules_are_registered_with_vllm_sources():
    for name in ("step/park", "step/apply", "step/preempt-parked"):
        assert "scheduler.py" in REGISTRY[name].seed or "core.py" in REGISTRY[name].seed


def test_a_finished_request_keeps_its_blocks_until_the_next_iteration_is_formed():
    # request 1 waits for request 0's blocks. Synchronously it is admitted by the iteration after request 0's
    # last token; ahead, that iteration is formed while request 0 is parked, so request 1 comes one later.
    sync, ahead = done_times(compile_with("")), done_times(compile_with("schedule ahead;"))
    assert sync[0] == ahead[0] == (0, 3.0)
    assert ahead[1][1] == sync[1][1] + 1
    rules = [r["rule"] for r in trace(compile_with("schedule ahead;"))]
    park, apply = rules.index("step/park"), rules.index("step/apply")
    assert park < rules.index("step/iteration", park) < apply
    assert "step/park" not in [r["rule"] for r in trace(compile_with(""))]


def test_the_empty_iteration_formed_while_a_session_is_parked_is_an_iteration():
    records = list(trace(compile_with("schedule ahead;")))
    empty = [r for r in records if r["rule"] == "step/iteration" and r["tokens"] == 0 and not r["preempted"]]
    assert empty  # the iteration formed while request 0 is parked: nothing fits, nothing else runs
    assert not [r for r in records if r["rule"] == "step/idle"]


# --- lib/vllm.sq and the harness ---------------------------------------------------------


def test_lib_vllm_follows_the_asynchronous_default_and_the_harness_the_case():
    library = (ROOT / "examples" / "lib" / "vllm.sq").read_text()
    assert "let async_scheduling = 1;" in library and "schedule ahead when (async_scheduling == 1);" in library
    scenario = shared_scenario("hol")
    assert not scenario_program(scenario).stages[0].kind.schedule_ahead  # no "async": the synchronous engine
    engines = [s.kind for s in scenario_program({**scenario, "async": True}).stages if isinstance(s.kind, ir.Step)]
    assert [e.schedule_ahead for e in engines] == [True]
    assert flush_steps(scenario_program({**scenario, "async": True})) == 2


def test_a_scenario_whose_async_is_not_a_boolean_is_located():
    with pytest.raises(ProgramError, match="`async` is true") as raised:
        run_scenario({**shared_scenario("hol"), "async": 1})
    assert raised.value.span is not None


@pytest.mark.parametrize("name", sorted(ASYNC_ANSWERS))
def test_the_shared_scenarios_give_vllms_asynchronous_answers(name):
    assert run_scenario({**shared_scenario(name), "async": True}) == ASYNC_ANSWERS[name]


def test_the_asynchronous_answers_differ_from_the_synchronous_ones():
    # hol: the two waiting requests are admitted one step later (request 0's blocks are freed only after the
    # batch after its last token is formed); every finish moves with them
    sync = json.loads((SHARED / "oracle" / "vllm" / "hol.out.json").read_text())
    assert run_scenario(shared_scenario("hol"), older_rule=False) == {k: sync[k] for k in ASYNC_ANSWERS["hol"]}
    assert sync["first"]["1"] + 1 == ASYNC_ANSWERS["hol"]["first"]["1"]


# --- the recorded async corpora, without vLLM ----------------------------------------------

ASYNC_FILES = {"scenario": "async-scenarios.jsonl", "serve": "async-serve.jsonl", "replay": "async-replays.jsonl"}
#: The default suite's part of each async corpus (the first cases).
SAMPLE = {"scenario": 200, "serve": 60, "replay": 60}


def records(kind: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / "campaign" / ASYNC_FILES[kind]).read_text().splitlines()
            if line.strip()]


@pytest.mark.parametrize("kind", sorted(ASYNC_FILES))
def test_every_async_record_says_its_mode(kind):
    assert all(r["case"]["async"] is True for r in records(kind))


@pytest.mark.parametrize("kind", sorted(ASYNC_FILES))
def test_the_first_async_cases_agree_with_vllm(kind, tmp_path):
    lines: list[str] = []
    outcomes = campaign.run(kind, SAMPLE[kind], 1, 0, str(DATA / "campaign" / ASYNC_FILES[kind]),
                            python=str(tmp_path / "no-vllm" / "python"), report=lines.append, asynchronous=True)
    assert len(outcomes) == SAMPLE[kind]
    assert {o["index"]: o["verdict"] for o in outcomes if o["verdict"] != campaign.AGREE} == {}


# --- the real scheduler ----------------------------------------------------------------------


@pytest.mark.vllm
def test_the_driver_gives_these_answers():
    names = sorted(ASYNC_ANSWERS)
    answers = real.answer_all([real.scenario_job({**shared_scenario(n), "async": True}) for n in names])
    assert {n: {k: a[k] for k in ASYNC_ANSWERS[n]} for n, a in zip(names, answers)} == ASYNC_ANSWERS
    assert all(a["async"] is True for a in answers)


@pytest.mark.vllm
@pytest.mark.parametrize("kind", sorted(ASYNC_FILES))
def test_the_driver_reproduces_the_first_async_records(kind):
    cases = records(kind)[:20]
    answers = real.answer_all([dict(r["case"]) for r in cases])
    for record, answer in zip(cases, answers):
        assert {k: answer[k] for k in record["answer"]} == record["answer"], record["index"]


@pytest.mark.campaign
@pytest.mark.parametrize("kind", sorted(ASYNC_FILES))
def test_every_async_case_agrees_with_its_record(kind, tmp_path):
    count = len(records(kind))
    outcomes = campaign.run(kind, count, 1, 0, str(DATA / "campaign" / ASYNC_FILES[kind]),
                            python=str(tmp_path / "no-vllm" / "python"), report=lambda line: None,
                            asynchronous=True)
    assert {o["index"]: o["verdict"] for o in outcomes if o["verdict"] != campaign.AGREE} == {}


@pytest.mark.campaign
@pytest.mark.vllm
@pytest.mark.parametrize("spacing", (22, 23))
def test_the_full_async_replay_reproduces(spacing):
    (answer,) = real.answer_all([
        real.replay_job((SHARED / "traces" / "short_base.csv").read_text(), spacing=spacing,
                        budget=512, max_seqs=64, blocks=8010, **{"async": True})
    ])
    recorded = gzip.decompress((DATA / "replay" / f"async-short_base-s{spacing:02d}.csv.gz").read_bytes()).decode()
    assert answer["csv"] == recorded


def assert_full_async_trace_agrees(spacing: int) -> None:
    assert_full_trace_agrees(spacing, asynchronous=True)


def test_the_full_trace_on_the_asynchronous_engine_agrees_at_spacing_24():
    # every request's send, first-token and finish time and cached tokens, all 3 321, exactly
    assert_full_async_trace_agrees(24)


@pytest.mark.campaign
@pytest.mark.parametrize("spacing", [4, 8, 12, 16, 20, 22, 23, 28, 32, 40])
def test_the_full_trace_on_the_asynchronous_engine_agrees(spacing):
    assert_full_async_trace_agrees(spacing)


def test_a_parked_request_preempted_finishes_with_its_token_in_flight():
    # async-scenarios.jsonl case 128: at step 31 request 3 must grow, and the victim is request 1, whose last
    # token batch 30 sampled (vLLM: running[-1] preempted, its stale token then stops it while PREEMPTED)
    (record,) = [r for r in records("scenario") if r["index"] == 128]
    rules = [r for r in trace(scenario_program(campaign._scenario(record["case"]))) if r["rule"] == "step/preempt-parked"]
    assert [(r["time"], r["session"]) for r in rules] == [(30.0, 1), (40.0, 2)]
    assert run_scenario(campaign._scenario(record["case"])) == campaign.real_fields("scenario", record["answer"])
