"""serq-ref against pyserq (oracle/peer.py, oracle/peer_cli.py, docs/peer.md):
the comparison, which programs are deterministic, `serq-ref peer`, `peer
check` on the shared oracle's IR and on the examples, and a slice of the
campaign against its recorded results (docs/data/peer_campaign.json)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from oracle import peer, peer_known
from oracle.peer_campaign import outcome_of, program_at, run_program
from oracle.peer_cli import check_one, programs_under
from oracle.peer_programs import build, build_text, render
from semantics import ir
from semantics.cli import main
from semantics.compiler import compile_source
from shared_paths import SHARED

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "data" / "peer_campaign.json"


def compiled(text: str) -> ir.Program:
    return compile_source(text, "<peer test>")[0]


QUEUE = """
pool p { cap 2; }
stage s : fifo(1);
stage d : delay;
workload { arrive batch(3); }
session {
  run d (serial);
  hold p (serial + 1) { run s (2); observe got = now; }
  run d (1);
  observe left = used(p);
}
run { horizon 50; }
"""


def test_a_deterministic_program_agrees_sample_for_sample():
    comparison = peer.compare(compiled(QUEUE))
    assert comparison.agree, comparison.differences
    # every session's samples, by serial, with turn, time and value
    assert comparison.here.observations["got"] == comparison.there.observations["got"]
    assert sorted(comparison.here.observations["got"]) == [0, 1]  # session 2 asks for 3 of 2: rejected
    assert comparison.here.pools[0][1]["rejected"] == 1


def test_the_settle_order_divergence_pinned():
    """P6 (docs/divergences.md): session 0's hold body ends at 2 while session
    1 waits for the pool. Here session 0 runs on first (seed 002 §3: "it runs
    every ready session, then retries growers and admissions") and reads the
    pool empty; pyserq admits session 1 at the release, before session 0
    runs on, and session 0 reads 2 units used."""
    program = compiled(QUEUE.replace("run d (1);\n  observe left", "observe left"))
    comparison = peer.compare(program)
    assert comparison.here.observations["left"][0] == ((0, 2.0, 0.0),)
    assert comparison.there.observations["left"][0] == ((0, 2.0, 2.0),)
    assert [line.split(":")[0] for line in comparison.differences] == ["observe left, session 0, sample 1 of 1 here, 1 there"]


def test_a_changed_figure_is_reported_with_both_values():
    here = peer.figures_here(compiled(QUEUE))
    there = dataclasses.replace(here, observations={**here.observations, "got": {0: ((0, 2.0, 2.0),), 1: ((0, 5.0, 5.0),)}})
    lines = peer.differences(here, there)
    assert len(lines) == 1 and lines[0].startswith("observe got, session 1, sample 1 of 1 here, 1 there: serq-ref")
    assert "pyserq turn 0 at 5.0 = 5.0" in lines[0]
    pools = ((here.pools[0][0], {**here.pools[0][1], "admissions": 7}),)
    assert peer.differences(here, dataclasses.replace(here, pools=pools)) == [
        f"pool p admissions: serq-ref {here.pools[0][1]['admissions']}, pyserq 7"]


def test_time_averages_agree_to_a_relative_1e_9_and_counts_exactly():
    assert peer._same("mean_used", 1.0, 1.0 + 1e-12)
    assert not peer._same("mean_used", 1.0, 1.0 + 1e-6)
    assert not peer._same("admissions", 3, 3.0000000001)
    assert peer._same("mean_wait", float("nan"), None)
    assert not peer._same("mean_wait", 1.0, None)


def test_draws_name_what_is_random():
    assert peer.draws(compiled(QUEUE)) == []
    drawn = compiled(QUEUE.replace("arrive batch(3);", "arrive poisson(1);").replace("run s (2)", "run s (~exp(2))"))
    assert peer.draws(drawn) == ["poisson arrivals", "~exp draws"]
    fixed = compiled(QUEUE.replace("run s (2)", "run s (~det(2))"))
    assert peer.draws(fixed) == []


def test_the_encoding_makes_a_relative_trace_absolute(tmp_path):
    program = dataclasses.replace(compiled(QUEUE), trace="t.csv", trace_ordered=True)
    assert peer.encode_for_pyserq(program, str(tmp_path))["trace"] == str(tmp_path / "t.csv")
    assert peer.encode_for_pyserq(program)["trace"] == "t.csv"


@pytest.mark.parametrize("path", sorted(str(p) for p in SHARED.glob("oracle/**/*.ir.json")), ids=os.path.basename)
def test_peer_check_passes_on_the_reference_implementations_own_ir(path):
    verdict, what = check_one(path)
    assert verdict == "passed", what


def test_peer_check_on_the_examples(capsys):
    """Every deterministic example passes or is a known divergence (spill
    timing, a cost that reads the residents); the others are skipped with
    the reason."""
    verdicts = {os.path.relpath(p, ROOT): check_one(p) for p in programs_under(str(ROOT / "examples"))}
    assert not [p for p, (v, _) in verdicts.items() if v == "FAILED"], verdicts
    known = {p: what.split(" ")[0] for p, (v, what) in verdicts.items() if v == "known"}
    assert known == {"examples/pools/spill.sq": "P1", "examples/replay/vllm_replay.sq": "P2"}
    assert verdicts["examples/single-turn/mm1.sq"] == ("skipped", "draws (poisson arrivals, ~exp draws)")
    assert sum(v == "passed" for v, _ in verdicts.values()) >= 10


def test_peer_file_exit_codes(capsys):
    assert main(["peer", "examples/pools/queue_by.sq"]) == 0
    assert capsys.readouterr().out.startswith("agree: ")
    assert main(["peer", "examples/pools/spill.sq"]) == 1
    out = capsys.readouterr().out
    assert "pool host mean_cached: serq-ref 150.0, pyserq 170.0" in out and "known divergence P1" in out
    assert main(["peer", "check"]) == 2
    assert main(["peer", "no/such.sq"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_peer_check_closing_line(capsys):
    code = main(["peer", "check", str(SHARED / "oracle" / "vllm")])
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and out[-1] == "7 passed, 0 failed (0 known divergence(s), 0 skipped)"


def test_without_pyserq_peer_says_how_to_install_it():
    code = ("import sys; sys.modules['pyserq'] = None\n"
            "from semantics.cli import main\n"
            "sys.exit(main(['peer', 'examples/pools/queue_by.sq']))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "pyserq is missing" in done.stderr and "pip install" in done.stderr


def test_nothing_under_semantics_imports_pyserq():
    import re

    for path in (ROOT / "semantics").rglob("*.py"):
        assert not re.search(r"^\s*(import|from)\s+pyserq", path.read_text(encoding="utf-8"), re.M), path


def test_a_known_divergence_is_attributed_only_when_taking_its_feature_out_makes_them_agree():
    spill = (ROOT / "examples" / "pools" / "spill.sq").read_text(encoding="utf-8")
    program = compiled(spill)
    spill_timing = peer_known.by_id("P1")
    assert spill_timing.has(program)
    agree = spill_timing.neutralise(program)
    assert all(p.spill is None or p.spill.when == ir.Num(0.0) for p in agree.pools)
    assert peer.compare(agree).agree
    # a program with none of the features: nothing to attribute to, whatever the engines say
    plain = compiled(REQUEST.format(reqs=1, kv=20, stages="", budget=1, cost=1, n=1, before="", units=3, out=2,
                                    horizon=60))
    assert peer_known.attribute(plain, lambda p: ()) is None
    assert peer_known.attribute(compiled(QUEUE), lambda p: ()).id == "P6"  # it has holds and a delay stage


# --------------------------------------------------------------------------
# the campaign: its recorded results, a slice of them run again
# --------------------------------------------------------------------------

def recorded() -> dict:
    return json.loads(DATA.read_text(encoding="utf-8"))


SLICE = 25


def test_the_first_programs_of_the_campaign_end_as_recorded():
    """The first SLICE programs of the recorded campaign (seed 1), run again:
    each agrees, or disagrees in the recorded class."""
    data = recorded()
    classes = {d["index"]: d["class"] for d in data["disagreements"]}
    for k in range(SLICE):
        outcome = outcome_of(program_at(data["seed"], k))
        assert outcome.key == classes.get(k, "agree"), (k, outcome)


def test_every_recorded_class_has_a_minimal_program_that_still_shows_it():
    for key, c in recorded()["classes"].items():
        smallest = c["smallest"]
        outcome = run_program(build_text(smallest["minimal"], smallest["sessions"]))
        assert outcome.key == key, (key, outcome)


def test_the_campaign_ran_at_least_a_thousand_programs_with_step_stages():
    data = recorded()
    assert data["programs"] >= 1000 and sum(data["outcomes"].values()) == data["programs"]
    assert data["features"]["step stage"]["programs"] >= 200
    assert render(program_at(1, 0)) == render(program_at(1, 0))  # the same program for the same seed
    assert build(program_at(1, 0)).arrival.__class__ is ir.Sessions


# --------------------------------------------------------------------------
# the minimal programs of docs/divergences.md, "serq-ref against pyserq"
# --------------------------------------------------------------------------

REQUEST = """pool reqs {{ cap {reqs}; admit via eng; }}
pool kv {{ cap {kv}; block 1; }}
{stages}
stage eng : step {{ budget {budget}; cost {cost}; memory kv; }}
workload {{ arrive batch({n}); init {{ set a = 0; }} }}
session {{
  {before}
  hold reqs (1), kv ({units}) {{
    run eng prefill ({units}) growing kv;
    observe first = now;
    run eng decode ({out}) growing kv;
  }}
}}
run {{ horizon {horizon}; }}
"""

MINIMAL = {
    "P2": (REQUEST.format(reqs=1, kv=20, stages="", budget=1, cost="residents + 1", n=1, before="", units=3, out=2,
                          horizon=60), None,
           "observe first, session 0, sample 1 of 1 here, 1 there: serq-ref turn 0 at 5.0 = 5.0; pyserq turn 0 at 6.0"),
    "P8": ("stage s0 : fifo(1);\nworkload { arrive batch(2); init { set a = 0; } }\n"
           "session {\n  run s0 (a);\n  run s0 (1);\n}\nrun { horizon 60; }\n", [0, 1],
           "run mean_live: serq-ref 0.06666666666666667, pyserq 0.08333333333333333"),
    "P9": (REQUEST.format(reqs=1, kv=8, stages="", budget=1, cost=1, n=1, before="", units=6, out=3, horizon=200),
           None, "stage eng utilization: serq-ref 0.04, pyserq 1.0"),
    "P10": (REQUEST.format(reqs=2, kv=12, stages="stage s0 : ps(2);", budget=2, cost=1, n=2, before="run s0 (2);",
                           units="a + 1", out=1, horizon=60), [0, 0],
            "observe first, session 1, sample 1 of 1 here, 1 there: serq-ref turn 0 at 3.0 = 3.0; pyserq turn 0 at 4.0"),
}


#: P7's program (docs/divergences.md): serq-ref counted a session's lease and hold in one pool as two holders;
#: fixed (holders(p) counts sessions), the two engines now agree on it
HOLDERS = ("pool p0 { cap 2; }\nstage d : delay;\nworkload { arrive batch(1); }\nsession {\n"
           "  hold p0 (1) { } lease p0 (2);\n  observe h = holders(p0);\n"
           "  hold p0 (1) { observe h2 = holders(p0); run d (1); }\n  run d (5);\n}\nrun { horizon 10; }\n")


def test_p7_holders_counts_sessions_and_agrees():
    program = compiled(HOLDERS)
    outcome = run_program(program)
    assert outcome.status == "agree", outcome
    from semantics.smallstep.driver import run
    result = run(program)
    assert [value for *_, value in next(o for o in result.observes if o.name == "h2").samples] == [1.0]


@pytest.mark.parametrize("known", sorted(MINIMAL))
def test_each_minimal_divergence_differs_as_written_and_is_attributed_to_its_entry(known):
    text, values, first = MINIMAL[known]
    program = compiled(text)
    if values is not None:
        slot = program.attrs.index("a")
        program = dataclasses.replace(program, arrival=ir.Sessions(
            tuple(ir.SessionSpec(((slot, float(v)),), None) for v in values)))
    outcome = run_program(program)
    assert outcome.status == "differ" and outcome.detail[0].startswith(first), outcome
    assert outcome.key == known, outcome


@pytest.mark.campaign
def test_the_recorded_campaign_is_reproduced():
    """The whole recorded campaign run again (about 15 minutes): the same
    programs, outcomes, classes and minimal programs (`serq-ref peer campaign
    1000 --seed 1 --report docs/data/peer_campaign.json` writes it)."""
    from oracle.peer_campaign import campaign

    data = recorded()
    assert campaign(data["seed"], data["programs"], minimise_budget=data["minimise_budget"]) == data


def test_a_program_with_self_preemption_continue_is_compared_under_the_older_rule_or_refused(capsys):
    verdict, what = check_one(str(ROOT / "examples" / "oracle" / "vllm_scenario.sq"))
    assert verdict == "passed" and what.startswith("with --set older_rule=1")
    assert main(["peer", "examples/oracle/vllm_scenario.sq"]) == 2
    assert "self preemption continue" in capsys.readouterr().err
    assert main(["peer", "examples/oracle/vllm_scenario.sq", "--set", "older_rule=1"]) == 2  # schedule ahead
    assert "schedule ahead" in capsys.readouterr().err
    assert main(["peer", "examples/oracle/vllm_scenario.sq", "--set", "older_rule=1", "--set",
                 "async_scheduling=0"]) == 0


def test_campaign_program_157_is_p6_for_the_sessions_already_ready():
    """docs/divergences.md, "Open, then read by hand": with P6's attribution applied, the one difference left is
    session 3's read at 8 (2 here: it runs before session 2's hold is admitted at session 0's release; 6 in
    pyserq, which admits that hold at the release)."""
    from oracle.peer_known import _pause_after_holds
    from oracle.peer_programs import build_text

    data = json.loads(DATA.read_text())
    case = data["classes"]["unexplained"]["smallest"]
    assert case["index"] == 157
    outcome = run_program(_pause_after_holds(build_text(case["minimal"], case["sessions"])))
    assert outcome.status == "differ"
    assert list(outcome.detail) == [
        "observe o5, session 3, sample 1 of 1 here, 1 there: serq-ref turn 0 at 8.0 = 2.0; pyserq turn 0 at 8.0 = 6.0"]


def test_p4_minimal_a_request_preempted_again_while_recomputing():
    """docs/divergences.md, P4: scenarios.jsonl#216 shrunk (4,213 runs of both
    engines) to three requests. Request 2 is preempted after its first token
    (step 42), preempted again while recomputing (step 57) and recomputes to
    the position it had reached: the real vLLM 0.33.0 scheduler
    (p4_preempted_twice.out.json, recorded with `serq-ref oracle run FILE
    --real --json` on 2026-12-02) and serq-ref finish it at 69; pyserq, run
    by the conformance adapter, samples its first token a second time and
    finishes it at 70."""
    import importlib.util

    from oracle.scenario import run_scenario, scenario_program

    here = Path(__file__).resolve().parent / "data" / "peer"
    scenario = json.loads((here / "p4_preempted_twice.json").read_text())
    vllm = json.loads((here / "p4_preempted_twice.out.json").read_text())
    adapter_path = Path(__file__).resolve().parents[1] / "examples" / "adapters" / "pyserq_adapter.py"
    spec = importlib.util.spec_from_file_location("pyserq_adapter", adapter_path)
    adapter = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(adapter)
    ours = run_scenario(scenario, older_rule=False)
    assert {k: ours[k] for k in ("first", "done", "preemptions")} == {k: vllm[k] for k in ("first", "done", "preemptions")}
    theirs = adapter.answer(scenario)
    assert theirs["done"] == {"0": 42, "1": 57, "2": 70} and theirs["first"] == vllm["first"]
    assert theirs["preemptions"] == 2
    # the first token twice: at the second preemption pyserq's computed went back behind the prompt
    ttft = peer.run_on_pyserq(scenario_program(scenario, older_rule=True)).observes["ttft"]
    assert [(int(s), t) for s, t in zip(ttft.sessions, ttft.times) if int(s) == 2] == [(2, 41.0), (2, 69.0)]
