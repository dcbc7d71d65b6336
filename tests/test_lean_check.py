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
    (tmp_path / "served.json").write_text('{"budget": 64, "max_seqs": 4, "block_size": 16, "num_blocks": 20,\n'
                                          ' "serve": "free(kv)", "requests": [{"prompt": 30, "out": 3}]}')
    (tmp_path / "served.out.json").write_text('{"first": {"0": 1}, "done": {"0": 3}, "preemptions": 0}')
    code = main(["lean", "check", str(tmp_path)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 1
    assert lines[0] == (f"{tmp_path.name}/served: not checked: {tmp_path / 'served.json'}:2:11: outside the Lean "
                        f"fragment: the function `free`")
    assert lines[-1] == "0 passed, 1 failed"


def test_lean_check_needs_a_directory(capsys) -> None:
    assert main(["lean", "check", str(VLLM / "hol.json")]) == 2
    assert "is not a directory" in capsys.readouterr().err


# -- the campaign data (oracle/data/campaign, vLLM 0.33.0) ------------------------------------

CAMPAIGN = Path(__file__).resolve().parent.parent / "oracle" / "data" / "campaign"
SCENARIOS, SERVE_BY = CAMPAIGN / "scenarios.jsonl", CAMPAIGN / "serve.jsonl"
#: D11 (docs/divergences.md): vLLM 0.33.0 keeps cached blocks a withdrawn victim never computed and
#: preempts 7 times; the mirror and the interpreter agree with each other on 8.
D11_LINE = "campaign/serve.jsonl#311: documented divergence D11 (docs/divergences.md): recorded (firsts "


def _d11(line: str) -> bool:
    recorded, mirror = line.split("; mirror ", 1)
    mirror, interpreter = mirror.split("; interpreter ", 1)
    return (line.startswith(D11_LINE) and recorded.endswith("preemptions 7)") and mirror.endswith("preemptions 8)")
            and interpreter == mirror)


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
    """Every 50th case of campaign/scenarios.jsonl agrees three ways, the 52
    with prefix caching among them (translated from the harness's program)."""
    code, lines = _lines(capsys, str(SCENARIOS), "--every", "50")
    assert code == 0, lines
    assert lines == ["100 passed, 0 failed"]


def test_lean_check_on_a_slice_of_the_serve_by_campaign_with_every_d1_case(capsys) -> None:
    """Every 50th case of campaign/serve.jsonl, every case whose two rules'
    answers differ (D1), #216 (preempted twice: computed keeps the furthest
    position) and #311, reported as the documented divergence D11 with its
    three answers and not counted."""
    code, lines = _lines(capsys, str(SERVE_BY), "--every", "50", "--variants", "--cases", "216")
    assert code == 0, lines
    assert len(lines) == 2 and _d11(lines[0])
    assert lines[-1] == "49 passed, 0 failed"


def test_the_d1_cases_check_under_their_rule_and_not_under_the_other() -> None:
    """The self-preemption rule is data of the fragment: each D1 case (all
    but D11's #311) gives vLLM 0.33.0's answer under `continues` and the
    older revision's under `ends`, and neither under the other rule."""
    from lean_bridge.check import mirror_answer
    from lean_bridge.scenario import answer_of, load_case

    cases = _d1_cases()
    # 28 of D1 (14 with prefix caching) and #311, whose answers differ too (D11's under either rule)
    assert len(cases) == 29 and 311 in [r["index"] for r in cases]
    assert sum(1 for r in cases if r["case"].get("prefix_caching")) == 15
    for r in cases:
        if r["index"] == 311:
            continue
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
    assert _d11(lines[0])
    assert lines[-1] == "29 passed, 0 failed"  # the 28 D1 cases and #0


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


def test_lean_check_on_workers_and_resumed_prints_the_same_lines(tmp_path, capsys) -> None:
    """--workers N: the same lines in the same order whatever N (a disagreement among them); --resume
    FILE: the checks a journal records are not run again (a journal whose checks are all wrong shows)."""
    records = [r for r in _records(SERVE_BY) if not r["case"].get("prefix_caching")][:4]
    records[2]["answer"]["preemptions"] += 1
    path = tmp_path / "serve.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    one = _lines(capsys, str(path))
    assert one[0] == 1 and one[1][-1] == "3 passed, 1 failed"
    journal = tmp_path / "journal.jsonl"
    assert _lines(capsys, str(path), "--workers", "2", "--resume", str(journal)) == one
    lines = journal.read_text().splitlines()
    assert len(lines) == 1 + 4
    # the journal is what a resumed run reads: a record made to disagree there is reported, not run again
    first = json.loads(lines[1])
    first["result"][2][2] += 5  # its mirror's preemptions
    journal.write_text("\n".join([lines[0], json.dumps(first), *lines[2:]]) + "\n")
    code, again = _lines(capsys, str(path), "--resume", str(journal))
    assert code == 1 and again[-1] == "2 passed, 2 failed"
    assert main(["lean", "check", str(path), "--workers", "0"]) == 2
    assert "--workers" in capsys.readouterr().err


def test_lean_check_takes_only_directories_and_campaign_files(tmp_path, capsys) -> None:
    (tmp_path / "x.txt").write_text("")
    assert main(["lean", "check", str(tmp_path / "x.txt")]) == 2
    assert "not a directory or a campaign file" in capsys.readouterr().err
    assert main(["lean", "check", str(SERVE_BY), "--every", "0"]) == 2
    capsys.readouterr()


@pytest.mark.campaign
@pytest.mark.parametrize("path,passed", [(SCENARIOS, 5000), (SERVE_BY, 999)])
def test_lean_check_on_the_whole_campaign(path: Path, passed: int, capsys) -> None:
    """docs/campaigns.md, "lean check on the campaign data": every case
    agrees three ways but D11's, which is reported with its answers."""
    code, lines = _lines(capsys, str(path))
    assert code == 0, lines[:5]
    assert lines[-1] == f"{passed} passed, 0 failed"
    assert len(lines) == (2 if path == SERVE_BY else 1) and (path != SERVE_BY or _d11(lines[0]))
