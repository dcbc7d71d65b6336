"""`serq-ref lean check`: the recorded answers against the mirror (and the
small-step interpreter once it runs step stages), in the default suite.

Issue 11: "for every scenario with its answer, the mirror's outcome equals
the theorem's right-hand side and equals the small-step interpreter's
answer; one line per disagreement naming the three answers; closing line
`N passed, M failed`. It runs on ../shared/oracle/vllm, ../shared/oracle/serve and, once it
exists, the campaign data under oracle/data/, in the default suite": a slice
of each campaign file here, the whole of both behind `campaign`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lean_bridge.interpreter import InterpreterUnavailable, interpreter_answer
from lean_bridge.scenario import load
from semantics.cli import main
from shared_paths import SHARED

VLLM, SERVE = SHARED / "oracle" / "vllm", SHARED / "oracle" / "serve"


def interpreter_runs_step_stages() -> bool:
    try:
        interpreter_answer(load(str(VLLM / "chunked.json")).program)
        return True
    except InterpreterUnavailable:
        return False


def test_lean_check_passes_on_the_recorded_scenarios(capsys) -> None:
    code = main(["lean", "check", str(VLLM), str(SERVE)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 0, lines
    assert lines[-1] == "11 passed, 0 failed"
    if interpreter_runs_step_stages():
        assert len(lines) == 1, lines  # no disagreement and nothing unavailable
    else:
        # the third column is reported, with the interpreter's reason, and not counted as agreeing
        assert len(lines) == 2 and lines[0].startswith("interpreter unavailable on 11 scenario(s) (vllm/alone, ")
        assert lines[0].endswith("step stages are not implemented yet")
        assert main(["lean", "check", str(VLLM), "--require-interpreter"]) == 1
        capsys.readouterr()


def test_a_wrong_answer_is_one_line_naming_the_answers(tmp_path, capsys) -> None:
    for name in ("preempt", "hol"):
        for suffix in (".json", ".out.json"):
            shutil.copy(VLLM / f"{name}{suffix}", tmp_path / f"{name}{suffix}")
    answer = json.loads((tmp_path / "preempt.out.json").read_text())
    answer["first"]["1"] = 32
    (tmp_path / "preempt.out.json").write_text(json.dumps(answer))
    code = main(["lean", "check", str(tmp_path)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 1
    group = tmp_path.name
    wrong = [line for line in lines if line.startswith(f"{group}/preempt: disagree: ")]
    assert len(wrong) == 1
    assert "recorded (firsts [(0, 1), (1, 32)]" in wrong[0] and "mirror (firsts [(0, 1), (1, 31)]" in wrong[0]
    assert "interpreter" in wrong[0]
    assert not any(line.startswith(f"{group}/hol") for line in lines)
    assert lines[-1] == "1 passed, 1 failed"


def test_a_scenario_outside_the_fragment_fails_the_check_with_its_location(tmp_path, capsys) -> None:
    (tmp_path / "cached.json").write_text('{"budget": 64, "max_seqs": 4, "block_size": 16, "num_blocks": 20, '
                                          '"prefix_caching": true, "requests": [{"prompt": 30, "out": 3}]}')
    (tmp_path / "cached.out.json").write_text('{"first": {"0": 1}, "done": {"0": 3}, "preemptions": 0}')
    code = main(["lean", "check", str(tmp_path)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 1
    assert lines[0].startswith(f"{tmp_path.name}/cached: not checked: {tmp_path / 'cached.json'}:1:")
    assert "prefix caching" in lines[0]
    assert lines[-1] == "0 passed, 1 failed"


def test_lean_check_needs_a_directory(capsys) -> None:
    assert main(["lean", "check", str(VLLM / "hol.json")]) == 2
    assert "is not a directory" in capsys.readouterr().err


# -- the campaign data (oracle/data/campaign, vLLM 0.33.0) ------------------------------------

CAMPAIGN = Path(__file__).resolve().parent.parent / "oracle" / "data" / "campaign"
SCENARIOS, SERVE_BY = CAMPAIGN / "scenarios.jsonl", CAMPAIGN / "serve.jsonl"
OUTSIDE_LINE = "outside the Lean fragment's scenarios: prefix caching"
D11_LINE = "campaign/serve.jsonl#311: documented divergence D11 (docs/divergences.md), outside the fragment: not checked"


def _lines(capsys, *argv: str) -> tuple[int, list[str]]:
    code = main(["lean", "check", *argv])
    return code, capsys.readouterr().out.strip().splitlines()


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _d1_cases() -> list[dict]:
    """serve.jsonl's cases whose answers under the two self-preemption rules differ (D1's)."""
    def key(a: dict) -> tuple:
        return a["first"], a["done"], a["preemptions"]

    return [r for r in _records(SERVE_BY) if key(r["answer"]) != key(r.get("answer_older_rule", r["answer"]))]


def test_lean_check_on_a_slice_of_the_fcfs_campaign(capsys) -> None:
    """Every 50th case of campaign/scenarios.jsonl: the 48 inside the fragment
    agree three ways; the 52 with prefix caching are reported, not dropped."""
    code, lines = _lines(capsys, str(SCENARIOS), "--every", "50")
    assert code == 0, lines
    assert lines[-1] == "48 passed, 0 failed"
    assert len(lines) == 2 and lines[0].startswith("not checked, outside the fragment: 52 campaign case(s) "
                                                   "(campaign/scenarios.jsonl#0, ")
    assert OUTSIDE_LINE in lines[0]


def test_lean_check_on_a_slice_of_the_serve_by_campaign_with_every_d1_case(capsys) -> None:
    """Every 50th case of campaign/serve.jsonl, every case whose two rules'
    answers differ (D1), #216 (preempted twice: computed keeps the furthest
    position) and #311, reported as the documented divergence D11."""
    code, lines = _lines(capsys, str(SERVE_BY), "--every", "50", "--variants", "--cases", "216")
    assert code == 0, lines
    assert lines[-1] == "23 passed, 0 failed"
    assert lines[0] == D11_LINE
    assert lines[1].startswith("not checked, outside the fragment: 27 campaign case(s) (campaign/serve.jsonl#0, ")
    assert len(lines) == 3


def test_the_d1_cases_check_under_their_rule_and_not_under_the_other() -> None:
    """The self-preemption rule is data of the fragment: each D1 case inside
    the fragment gives vLLM 0.33.0's answer under `continues` and the older
    revision's under `ends`, and neither under the other rule."""
    from lean_bridge.check import mirror_answer
    from lean_bridge.scenario import answer_of, load_case

    cases = _d1_cases()
    inside = [r for r in cases if not r["case"].get("prefix_caching")]
    # 28 of D1 and #311, whose answers differ too (D11's under either rule; prefix caching)
    assert len(cases) == 29 and 311 in [r["index"] for r in cases] and len(inside) == 14
    for r in inside:
        case = {k: v for k, v in r["case"].items() if k != "kind"}
        newer, older = answer_of(r["answer"]), answer_of(r["answer_older_rule"])
        label = f"campaign/serve.jsonl#{r['index']}"
        continuing = load_case(label, case, r["answer"], True)
        ending = load_case(label, case, r["answer_older_rule"], False)
        assert mirror_answer(continuing.translation.program) == newer != older, label
        assert mirror_answer(ending.translation.program) == older, label
        assert interpreter_answer(continuing.program) == newer and interpreter_answer(ending.program) == older


def test_lean_check_takes_the_older_rule(capsys) -> None:
    """--older-rule: the cases run under the older revision's rule and are
    compared with answer_older_rule; the D11 case is D11 under it too."""
    code, lines = _lines(capsys, str(SERVE_BY), "--older-rule", "--variants", "--every", "100000")
    assert code == 0, lines
    assert lines[0] == D11_LINE
    assert lines[-1] == "14 passed, 0 failed"


def test_a_wrong_campaign_answer_is_one_line(tmp_path, capsys) -> None:
    records = [r for r in _records(SERVE_BY) if not r["case"].get("prefix_caching")][:3]
    records[1]["answer"]["preemptions"] += 1
    path = tmp_path / "serve.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, lines = _lines(capsys, str(path))
    assert code == 1
    wrong = f"{tmp_path.name}/serve.jsonl#{records[1]['index']}: disagree: recorded "
    assert len(lines) == 2 and lines[0].startswith(wrong), lines
    assert lines[-1] == "2 passed, 1 failed"


def test_lean_check_takes_only_directories_and_campaign_files(tmp_path, capsys) -> None:
    (tmp_path / "x.txt").write_text("")
    assert main(["lean", "check", str(tmp_path / "x.txt")]) == 2
    assert "not a directory or a campaign file" in capsys.readouterr().err
    assert main(["lean", "check", str(SERVE_BY), "--every", "0"]) == 2
    capsys.readouterr()


@pytest.mark.campaign
@pytest.mark.parametrize("path,passed,outside", [(SCENARIOS, 2481, 2519), (SERVE_BY, 489, 511)])
def test_lean_check_on_the_whole_campaign(path: Path, passed: int, outside: int, capsys) -> None:
    """docs/campaigns.md, "lean check on the campaign data": every case
    inside the fragment agrees three ways."""
    code, lines = _lines(capsys, str(path))
    assert code == 0, lines[:5]
    assert lines[-1] == f"{passed} passed, 0 failed"
    assert any(line.startswith(f"not checked, outside the fragment: {outside} campaign case(s)") for line in lines)
    assert (D11_LINE in lines) == (path == SERVE_BY)
