"""The campaign against vLLM 0.33.0 (issue 10): serq-ref's answers to the
recorded random cases (oracle/data/campaign/), and the commands of the real
scheduler (`serq-ref oracle regenerate / replay --real / campaign`).

The default suite replays a deterministic part of the recorded campaign
without vLLM; the whole of it (5 000 scenarios, 1 000 serve-by scenarios,
1 000 replays, some seven minutes) runs under the campaign marker, its last
result recorded in docs/campaigns.md:

    python -m pytest -m campaign -o timeout=0 tests/test_oracle_campaign.py

The tests that drive the real scheduler need its environment
(oracle/real/setup-vllm.sh) named by SERQ_VLLM_PYTHON, and are deselected,
said in the run's summary, without it. Every divergence found is documented in
docs/divergences.md (D11; D1 is fixed: lib/vllm.sq follows vLLM 0.33.0's
self-preemption rule, the older one with ``older_rule``); the cases of each
are listed here.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from oracle import campaign, real
from oracle.replay import replay
from semantics.cli import main
from shared_paths import SHARED

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "oracle" / "data" / "campaign"
STEP_TRACES = Path(__file__).resolve().parent / "data" / "vllm_step_traces.json"

needs_vllm = pytest.mark.vllm  # deselected without SERQ_VLLM_PYTHON (tests/conftest.py)

#: The recorded serve-by cases (seed 1) that vLLM 0.33.0's priority path
#: answers differently from the older rule (a request that preempts itself
#: ends the pass: docs/divergences.md, D1, fixed). serq-ref gives 0.33.0's
#: answer on every one of them (lib/vllm.sq's default) and the older rule's
#: with the library's switch (older_rule = 1); 311 is D11's under both.
D1_CASES = (25, 26, 81, 85, 197, 205, 243, 252, 282, 380, 411, 421, 448, 553, 643, 654, 684, 685, 749, 769, 778,
            814, 828, 880, 885, 905, 915, 929)
#: The one recorded case where a victim withdrawn from a pass keeps cached the
#: blocks it never computed (docs/divergences.md, D11).
D11_CASES = (311,)
#: The minimal cases of docs/divergences.md (shrunk by `serq-ref oracle campaign`).
D11_MINIMAL = {"kind": "scenario", "budget": 28, "max_seqs": 3, "block_size": 16, "num_blocks": 13, "chunk": 13,
               "prefix_caching": True, "serve": "-admission",
               "requests": [{"prompt": 65, "out": 1, "arrive": 1}, {"prompt": 69, "out": 1, "arrive": 0},
                            {"prompt": 33, "out": 1, "arrive": 2}]}
D1_MINIMAL = {"kind": "scenario", "budget": 2, "max_seqs": 2, "block_size": 32, "num_blocks": 14, "chunk": 0,
              "prefix_caching": False, "serve": "-admission",
              "requests": [{"prompt": 347, "out": 9, "arrive": 0}, {"prompt": 25, "out": 9}]}
#: vLLM 0.33.0's answers to them (oracle/real/driver.py; test_the_minimal_d1_case
#: and test_the_minimal_d11_case ask it again when SERQ_VLLM_PYTHON is set), and
#: D1's under the older rule, D11's with cache_computed_only (serq-ref's, under
#: either rule).
MINIMAL_ANSWERS = {
    "D11": ({"first": {"0": 6, "1": 7, "2": 7}, "done": {"0": 6, "1": 7, "2": 7}, "preemptions": 1, "steps": 8},
            {"first": {"0": 6, "1": 7, "2": 8}, "done": {"0": 6, "1": 7, "2": 8}, "preemptions": 1, "steps": 9}),
    "D1": ({"first": {"0": 174, "1": 186}, "done": {"0": 194, "1": 211}, "preemptions": 1, "steps": 212},
           {"first": {"0": 174, "1": 186}, "done": {"0": 195, "1": 212}, "preemptions": 1, "steps": 213}),
}

#: The default suite's part: the first cases of each file, and every serve-by
#: case of a documented divergence (the whole file: 33 s on the project's 2-core machine, idle;
#: the first 500, 150 and 120 took 36 s at load 5).
SAMPLE = {"scenario": 800, "serve": 200, "replay": 200}


def no_vllm(tmp_path) -> str:
    """A python that does not exist: the campaign runs on the records alone."""
    return str(tmp_path / "no-vllm" / "python")


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_recorded(kind: str, count: int, start: int, tmp_path, older_rule: bool = False) -> list[dict]:
    lines: list[str] = []
    outcomes = campaign.run(kind, count, 1, start, str(DATA / campaign.FILES[kind]), python=no_vllm(tmp_path),
                            report=lines.append, older_rule=older_rule)
    assert len(outcomes) == count
    return outcomes


# --- the recorded campaign, without vLLM ---------------------------------------


@pytest.mark.parametrize("kind", ["scenario", "serve", "replay"])
def test_the_first_recorded_cases_agree_with_vllm(kind, tmp_path):
    outcomes = run_recorded(kind, SAMPLE[kind], 0, tmp_path)
    verdicts = {o["index"]: o["verdict"] for o in outcomes if o["verdict"] != campaign.AGREE}
    assert verdicts == {}


@pytest.mark.parametrize("older_rule", [False, True], ids=["0.33.0", "older rule"])
def test_the_d1_cases_agree_under_each_rule(older_rule, tmp_path):
    # docs/divergences.md, D1 (fixed): the cases where vLLM's two rules answer differently agree with
    # the rule lib/vllm.sq is switched to, and 311 is D11's under either
    outcomes = [o for index in D1_CASES + D11_CASES for o in run_recorded("serve", 1, index, tmp_path, older_rule)]
    assert {o["index"]: o["verdict"] for o in outcomes} == {
        **{i: campaign.AGREE for i in D1_CASES}, **{i: campaign.D11 for i in D11_CASES}}
    assert all(o["differences"] for o in outcomes if o["verdict"] == campaign.D11)  # else the docs are stale


def test_the_minimal_cases_of_docs():
    # docs/divergences.md: D1's minimal case is vLLM 0.33.0's answer, or the older rule's with the switch;
    # D11's is the answer of vLLM with cache_computed_only, not vLLM's own, under either rule
    vllm_answer, older_answer = MINIMAL_ANSWERS["D1"]
    assert campaign.serq_answer("serve", D1_MINIMAL) == vllm_answer
    assert campaign.serq_answer("serve", D1_MINIMAL, older_rule=True) == older_answer
    # request 1 preempts itself at step 194: 0.33.0 decodes request 0 in that step, the older rule nothing
    assert [s for s in campaign.serq_steps("serve", D1_MINIMAL) if s[2]] == [[194, {"0": 1}, ["1"]]]
    assert [s for s in campaign.serq_steps("serve", D1_MINIMAL, older_rule=True) if s[2]] == [[194, {}, ["1"]]]
    vllm_answer, serq_rule_answer = MINIMAL_ANSWERS["D11"]
    for older_rule in (False, True):
        assert campaign.serq_answer("serve", D11_MINIMAL, older_rule) == serq_rule_answer != vllm_answer
        steps = campaign.serq_steps("serve", D11_MINIMAL, older_rule)
        # request 2, withdrawn at step 6, is readmitted with 16 tokens cached (vLLM: 32)
        assert steps[-3:] == [[6, {"0": 13, "1": 10}, ["2"]], [7, {"1": 1, "2": 13}, []], [8, {"2": 4}, []]]


def test_d11_differs_from_both_rules_by_one_preemption(tmp_path):
    # docs/divergences.md, D11: serve 1/311; serq-ref preempts once more; under the older rule three
    # requests also end a step later
    record = [json.loads(line) for line in (DATA / "serve.jsonl").read_text().splitlines()][311]
    for answer in (record["answer"], record["answer_older_rule"]):
        assert answer["preemptions"] == 7
    ours = campaign.serq_answer("serve", record["case"])
    assert ours["preemptions"] == 8
    assert {k: ours[k] for k in ("first", "done", "steps")} == {k: record["answer"][k] for k in ("first", "done", "steps")}
    older = campaign.serq_answer("serve", record["case"], older_rule=True)
    assert older["preemptions"] == 8
    assert (older["first"]["1"], older["done"]["1"]) == (132, 202)
    assert (record["answer_older_rule"]["first"]["1"], record["answer_older_rule"]["done"]["1"]) == (131, 201)


def test_the_recorded_files_hold_the_counts_of_docs():
    # the counts docs/divergences.md cites: 29 serve cases differ between the two rules
    records = [json.loads(line) for line in (DATA / "serve.jsonl").read_text().splitlines()]
    differ = [r["index"] for r in records if campaign.real_fields("serve", r["answer"])
              != campaign.real_fields("serve", r["answer_older_rule"])]
    assert differ == sorted(D1_CASES + D11_CASES)


# --- the replay's cached tokens: the first admission's ---------------------------


#: vLLM 0.33.0's answer (oracle/real/driver.py): session 1's prompt of 241
#: tokens, 230 of them computed, is preempted at clock 10 by session 0's growth
#: and readmitted at 11 with 224 of its own tokens cached; vLLM reports the
#: prefix hit of its first admission, 0 (the library reported 224 until
#: first_cached, as on 96 of the 1 000 recorded replays).
FIRST_CACHED = {"kind": "replay", "trace": "session,turn,new,out,think,forced\n0,1,154,8,0.0,0\n1,1,241,1,0.0,0\n",
                "spacing": 0, "budget": 39, "max_seqs": 2, "blocks": 26, "block_size": 16, "chunk": 0}
FIRST_CACHED_ROWS = [[0, 1, 0.0, 4.0, 11.0, 154, 0, 8], [1, 1, 0.0, 12.0, 12.0, 241, 0, 1]]


def test_a_replay_reports_the_prefix_hit_of_the_first_admission(tmp_path):
    # lib/vllm.sq's first_cached: vLLM's num_cached_tokens is set at the first
    # scheduling only (vllm/v1/core/sched/scheduler.py:1251-1258, while
    # num_preemptions is 0); the readmission's hit (224) is not reported
    trace = tmp_path / "trace.csv"
    trace.write_text(FIRST_CACHED["trace"])
    assert [list(row) for row in replay(str(trace), 0, 39, 2, 26)] == FIRST_CACHED_ROWS
    assert campaign.serq_answer("replay", FIRST_CACHED) == {"rows": FIRST_CACHED_ROWS}
    steps = campaign.serq_steps("replay", FIRST_CACHED)
    assert [s for s in steps if s[2]] == [[10, {"0:0": 1}, ["1:0"]]]
    assert steps[-1] == [11, {"1:0": 17}, []]


# --- the step traces: the first step at which the two differ ---------------------


def step_traces() -> dict:
    return {c["name"]: c for c in json.loads(STEP_TRACES.read_text())["cases"]}


@pytest.mark.parametrize("name", ["scenario 1/514", "replay 1/82"])
def test_serq_ref_takes_vllms_decisions_step_by_step(name):
    # vLLM 0.33.0's step traces (tests/data/vllm_step_traces.json): every step's
    # tokens per request and preemptions, serq-ref's the same
    case = step_traces()[name]
    assert case["step_trace"]
    assert campaign.first_step_difference(case["step_trace"], campaign.serq_steps(case["kind"], case["job"]),
                                          case["kind"]) is None


def test_the_first_step_that_differs_is_named():
    # serve 1/311 under the older rule: vLLM's withdrawn victim (request 1)
    # found 64 of its tokens cached at step 66, where serq-ref has 48 (D11)
    case = step_traces()["serve 1/311 (older rule)"]
    ours = campaign.serq_steps("serve", case["job"], older_rule=True)
    assert campaign.first_step_difference(case["step_trace"], ours, "serve") == \
        "at step 66: vLLM schedules {1: 13, 2: 13}; serq-ref {1: 13, 2: 13, 4: 13}"
    assert ours[:64] == case["step_trace"][:64]


def test_first_step_difference_of_made_up_traces():
    a = [[1, {"0": 16}, []], [2, {"0": 1, "1": 15}, []]]
    assert campaign.first_step_difference(a, a, "scenario") is None
    assert campaign.first_step_difference(a, [a[0], [2, {"0": 1}, ["1"]]], "scenario") == \
        "at step 2: vLLM schedules {0: 1, 1: 15}; serq-ref {0: 1}, preempting 1"
    assert campaign.first_step_difference(a, [a[0], [3, {"0": 1}, []]], "scenario") == \
        "vLLM's next step is at 2 ({0: 1, 1: 15}), serq-ref's at 3 ({0: 1})"
    assert campaign.first_step_difference(a[:1], a, "scenario").startswith("vLLM's run has ended")


# --- shrinking -----------------------------------------------------------------


def test_shrinking_finds_the_smallest_case_that_keeps_a_property():
    def still(case):  # two requests, one of them of 50 tokens or more
        return len(case["requests"]) >= 2 and any(r["prompt"] >= 50 for r in case["requests"])

    case = campaign.draw("scenario", 1, 0)
    small, tries = campaign.shrink(case, still, campaign.scenario_candidates, campaign.scenario_valid)
    assert still(small) and campaign.scenario_valid(small)
    assert sorted(r["prompt"] for r in small["requests"]) == [1, 50]
    assert all(r["out"] == 1 for r in small["requests"])
    assert (small["budget"], small["max_seqs"], small["chunk"], small["prefix_caching"]) == (1, 1, 0, False)
    assert small["num_blocks"] == 5  # 50 tokens: four blocks of 16, and the null block
    assert 0 < tries <= 1000


def test_shrinking_a_replay_drops_sessions_and_turns():
    def still(case):  # a turn of 100 tokens or more after another turn
        rows = campaign._trace_rows(case["trace"])
        return any(int(r["new"]) >= 100 and int(r["turn"]) > 1 for r in rows)

    case = campaign.draw("replay", 1, 0)
    small, _ = campaign.shrink(case, still, campaign.replay_candidates, campaign.replay_valid)
    assert small["trace"] == "session,turn,new,out,think,forced\n0,1,1,1,0.0,0\n0,2,100,1,0.0,0\n"
    assert (small["spacing"], small["budget"], small["max_seqs"], small["chunk"]) == (0, 1, 1, 0)
    assert small["blocks"] == 7


def test_every_candidate_is_smaller_and_the_generator_accepts_the_valid_ones():
    case = campaign.draw("scenario", 1, 2)
    for drop, candidate in campaign.scenario_candidates(case):
        assert candidate != case
        assert len(candidate["requests"]) == len(case["requests"]) - drop
    for index in range(20):
        assert campaign.scenario_valid(campaign.draw("scenario", 1, index))
        assert campaign.replay_valid(campaign.draw("replay", 1, index))


# --- the commands ----------------------------------------------------------------


def test_oracle_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit):
        main(["oracle", "--help"])
    out = capsys.readouterr().out
    for command in ("run", "check", "replay", "regenerate", "campaign"):
        assert f"    {command}" in out


def test_campaign_against_the_records(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv(real.PYTHON_VARIABLE, no_vllm(tmp_path))
    # 25 and 26 are D1 cases (the two rules of vLLM answer differently): each agrees under its rule
    for option, against in (((), ""), (("--older-rule",), " (the older rule)")):
        code, out, err = cli(capsys, "oracle", "campaign", "3", "--seed", "1", "--kind", "serve", "--start", "24",
                             "--recorded", str(DATA / "serve.jsonl"), *option)
        assert (code, err) == (0, "")
        (line,) = out.splitlines()
        assert line.startswith("serve: 3 cases, 3 agree, 0 D11, 0 differ (")
        assert line.endswith(f"s), against the answers recorded in {DATA / 'serve.jsonl'}{against}")


def test_campaign_report_file(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv(real.PYTHON_VARIABLE, no_vllm(tmp_path))
    report = tmp_path / "report.jsonl"
    code, _, _ = cli(capsys, "oracle", "campaign", "2", "--seed", "1", "--kind", "serve", "--start", "310",
                     "--recorded", str(DATA / "serve.jsonl"), "--report", str(report))
    assert code == 0
    outcomes = [json.loads(line) for line in report.read_text().splitlines()]
    assert [(o["index"], o["verdict"]) for o in outcomes] == [(310, "agree"), (311, "D11")]
    assert "preemptions: vLLM 7, serq-ref 8" in outcomes[1]["differences"]


def test_a_divergence_nobody_documented_fails_the_campaign(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv(real.PYTHON_VARIABLE, no_vllm(tmp_path))
    records = [json.loads(line) for line in (DATA / "scenarios.jsonl").read_text().splitlines()[:2]]
    records[1]["answer"]["done"]["2"] += 1
    path = tmp_path / "scenarios.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, out, _ = cli(capsys, "oracle", "campaign", "2", "--seed", "1", "--recorded", str(path))
    assert code == 1
    assert out.splitlines()[:3] == [
        "scenario 1/1: differs from vLLM",
        "  request 2: vLLM first 9 done 12, serq-ref first 9 done 11",
        "  (the first step that differs and a minimal reproduction need the real scheduler: --vllm-python)"]


@pytest.mark.parametrize("argv, message", [
    (("--kind", "replay", "--recorded", "SERVE"), "is not the replay case oracle/campaign_cases.py draws"),
    (("--seed", "2", "--recorded", "SERVE"), "has no case 2/0"),
    (("--recorded", "NOWHERE"), "no such file"),
])
def test_campaign_usage_errors(capsys, monkeypatch, tmp_path, argv, message):
    monkeypatch.setenv(real.PYTHON_VARIABLE, no_vllm(tmp_path))
    argv = [{"SERVE": str(DATA / "serve.jsonl"), "NOWHERE": str(tmp_path / "nothing.jsonl")}.get(a, a) for a in argv]
    if "--seed" not in argv:
        argv += ["--seed", "1"]
    code, out, err = cli(capsys, "oracle", "campaign", "1", *argv)
    assert (code, out) == (2, "")
    assert message in err and "usage: serq-ref oracle campaign N --seed S" in err


@pytest.mark.parametrize("argv", [
    ("regenerate", "DIR"),
    ("replay", "TRACE", "--spacing", "3", "--budget", "64", "--max-seqs", "4", "--blocks", "20", "--real"),
    ("campaign", "2", "--seed", "1"),
])
def test_the_real_scheduler_missing_is_a_usage_error(capsys, monkeypatch, tmp_path, argv):
    monkeypatch.setenv(real.PYTHON_VARIABLE, no_vllm(tmp_path))
    argv = [{"DIR": str(SHARED / "oracle" / "vllm"),
             "TRACE": str(SHARED / "oracle" / "prefix_cache" / "cache_trace.csv")}.get(a, a) for a in argv]
    code, out, err = cli(capsys, "oracle", *argv)
    assert (code, out) == (2, "")
    assert "oracle/real/setup-vllm.sh" in err and "--vllm-python" in err and no_vllm(tmp_path) in err
    assert "Traceback" not in err


def test_vllm_python_needs_real(capsys):
    code, _, err = cli(capsys, "oracle", "replay", str(SHARED / "oracle" / "prefix_cache" / "cache_trace.csv"),
                       "--spacing", "3", "--budget", "64", "--max-seqs", "4", "--blocks", "20",
                       "--vllm-python", "python3")
    assert code == 2 and "--vllm-python goes with --real" in err


# --- the whole recorded campaign (campaign marker) -------------------------------


@pytest.mark.campaign
@pytest.mark.parametrize("kind", ["scenario", "serve", "replay"])
def test_the_whole_recorded_campaign(kind, tmp_path):
    count = {"scenario": 5000, "serve": 1000, "replay": 1000}[kind]
    outcomes = run_recorded(kind, count, 0, tmp_path)
    verdicts = {o["index"]: o["verdict"] for o in outcomes if o["verdict"] != campaign.AGREE}
    assert verdicts == ({i: campaign.D11 for i in D11_CASES} if kind == "serve" else {})


@pytest.mark.campaign
def test_the_whole_recorded_serve_campaign_under_the_older_rule(tmp_path):
    # lib/vllm.sq's switch (older_rule = 1) against the records' answer_older_rule
    outcomes = run_recorded("serve", 1000, 0, tmp_path, older_rule=True)
    verdicts = {o["index"]: o["verdict"] for o in outcomes if o["verdict"] != campaign.AGREE}
    assert verdicts == {i: campaign.D11 for i in D11_CASES}


# --- with the real scheduler -----------------------------------------------------


@needs_vllm
def test_campaign_with_the_real_scheduler_confirms_d11(capsys):
    code, out, _ = cli(capsys, "oracle", "campaign", "2", "--seed", "1", "--kind", "serve", "--start", "310")
    assert code == 0
    assert out.splitlines()[0].startswith("serve 1/311: agrees with vLLM when a victim withdrawn")
    assert "1 D11, 0 differ" in out.splitlines()[-1]


@pytest.fixture(scope="module")
def vllm():
    """One driver process for the tests below that ask the real scheduler."""
    scheduler = campaign.RealScheduler()
    yield scheduler
    scheduler.close()


@needs_vllm
def test_the_minimal_d11_case(vllm):
    answers = {rule: vllm.fields("serve", D11_MINIMAL, rule) for rule in campaign.RULES}
    steps = vllm.answer("serve", D11_MINIMAL, "0.33.0", step_trace=True)["step_trace"]
    ours = campaign.serq_answer("serve", D11_MINIMAL)
    assert ours == campaign.serq_answer("serve", D11_MINIMAL, older_rule=True)
    assert answers["0.33.0"] == answers["older rule"] != ours
    assert answers["0.33.0, cache computed only"] == answers["older rule, cache computed only"] == ours
    assert (answers["0.33.0"]["first"]["2"], ours["first"]["2"]) == (7, 8)
    assert campaign.first_step_difference(steps, campaign.serq_steps("serve", D11_MINIMAL), "serve") == \
        "at step 7: vLLM schedules {1: 1, 2: 1}; serq-ref {1: 1, 2: 13}"


@needs_vllm
def test_the_minimal_d1_case(vllm):
    for rule, older_rule in (("0.33.0", False), ("older rule", True)):
        answer = vllm.fields("serve", D1_MINIMAL, rule)
        assert answer == campaign.serq_answer("serve", D1_MINIMAL, older_rule) == MINIMAL_ANSWERS["D1"][older_rule]
        steps = vllm.answer("serve", D1_MINIMAL, rule, step_trace=True)["step_trace"]
        assert campaign.first_step_difference(steps, campaign.serq_steps("serve", D1_MINIMAL, older_rule),
                                              "serve") is None


@needs_vllm
def test_the_step_traces_are_the_drivers(vllm):
    for case in step_traces().values():
        assert vllm.driver.answer(dict(case["job"], step_trace=True))["step_trace"] == case["step_trace"], \
            case["name"]


@needs_vllm
def test_first_cached_is_vllms(vllm):
    assert vllm.driver.answer(FIRST_CACHED)["rows"] == FIRST_CACHED_ROWS


@needs_vllm
def test_regenerate_reproduces_the_recorded_answers(capsys, tmp_path):
    shutil.copytree(SHARED / "oracle" / "vllm", tmp_path / "vllm")
    code, out, _ = cli(capsys, "oracle", "regenerate", str(tmp_path / "vllm"))
    assert code == 0
    assert out.splitlines()[-1] == \
        f"7 scenarios: 7 equal, 0 differ, 0 new; NAME.out.json written in {tmp_path / 'vllm'}"
    for path in (SHARED / "oracle" / "vllm").glob("*.out.json"):
        assert (tmp_path / "vllm" / path.name).read_bytes() == path.read_bytes()
    # ../shared/oracle/serve's answers are the older rule's (docs/divergences.md, D1)
    code, out, _ = cli(capsys, "oracle", "regenerate", str(SHARED / "oracle" / "serve"), "--older-rule", "--no-write")
    assert code == 0 and out.splitlines()[-1] == "4 scenarios: 4 equal, 0 differ, 0 new"


def test_regenerate_says_how_an_answer_differs(capsys, monkeypatch, tmp_path):
    # without vLLM: the driver is a stand-in that answers every scenario with the same made-up answer
    stand_in = tmp_path / "python"
    answer = {"first": {"0": 2, "1": 31}, "done": {"0": 30, "1": 60}, "preemptions": 1, "steps": 61,
              "config": {"budget": 100, "max_seqs": 16, "chunk": 0, "block_size": 16, "num_blocks": 11},
              "status": "finished"}
    stand_in.write_text("#!/bin/sh\nwhile read line; do echo '" + json.dumps(answer) + "'; done\n")
    stand_in.chmod(0o755)
    for suffix in (".json", ".out.json"):
        shutil.copy(SHARED / "oracle" / "vllm" / f"preempt{suffix}", tmp_path / f"preempt{suffix}")
    shutil.copy(SHARED / "oracle" / "vllm" / "hol.json", tmp_path / "hol.json")
    code, out, _ = cli(capsys, "oracle", "regenerate", str(tmp_path), "--out", str(tmp_path / "out"),
                       "--vllm-python", str(stand_in))
    assert code == 1
    assert out.splitlines() == [
        "hol: new",
        "preempt: differs: request 0: there first 1 done 30, now first 2 done 30",
        f"2 scenarios: 0 equal, 1 differ, 1 new; NAME.out.json written in {tmp_path / 'out'}"]
    assert json.loads((tmp_path / "out" / "hol.out.json").read_text()) == {
        k: answer[k] for k in ("first", "done", "preemptions", "steps", "config")}
    assert not (tmp_path / "hol.out.json").exists()


@needs_vllm
def test_replay_real_prints_the_recorded_rows(capsys):
    code, out, _ = cli(capsys, "oracle", "replay", str(SHARED / "oracle" / "prefix_cache" / "cache_trace.csv"),
                       "--spacing", "3", "--budget", "64", "--max-seqs", "4", "--blocks", "20", "--real")
    assert code == 0
    assert out == (SHARED / "oracle" / "prefix_cache" / "cache_trace.out.csv").read_text()


@needs_vllm
@pytest.mark.campaign
def test_the_full_trace_by_the_real_scheduler_at_spacing_4():
    (answer,) = real.answer_all([real.replay_job((SHARED / "traces" / "short_base.csv").read_text(), spacing=4,
                                                 budget=512, max_seqs=64, blocks=8010)])
    recorded = gzip.decompress((ROOT / "oracle" / "data" / "replay" / "short_base-s04.csv.gz").read_bytes()).decode()
    assert answer["csv"] == recorded
