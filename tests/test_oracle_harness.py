"""The vLLM oracle harness (`serq-ref oracle run / check / replay`) against the
recorded answers (../shared/oracle/README.md) and vLLM 0.33.0's
(oracle/data/README.md).

Seed 002 §7: the program of vLLM's engine "reproduces the real scheduler
request for request"; §3: "examples/oracle/vllm_request.sq runs on the step
clock with cost 1, so its times are iterations".
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import pathlib
import shutil

import pytest

from oracle.replay import replay
from oracle.scenario import run_scenario
from semantics.cli import main
from shared_paths import SHARED

ORACLE = SHARED / "oracle"
#: vLLM 0.33.0's replays of the full trace (oracle/data/README.md)
REPLAYS = pathlib.Path(__file__).resolve().parent.parent / "oracle" / "data" / "replay"


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_check_passes_every_recorded_scenario_and_ir_file(capsys):
    code, out, err = cli(capsys, "oracle", "check", str(ORACLE / "vllm"), str(ORACLE / "serve"))
    assert (code, err) == (0, "")
    # 7 + 4 scenarios, and the reference implementation's 7 + 4 compiled programs
    assert out.splitlines() == ["22 passed, 0 failed"]


def test_check_names_the_scenario_the_request_and_both_answers(capsys, tmp_path):
    for suffix in (".json", ".out.json"):
        shutil.copy(ORACLE / "vllm" / f"preempt{suffix}", tmp_path / f"preempt{suffix}")
    answer = json.loads((tmp_path / "preempt.out.json").read_text())
    answer["first"]["1"] = 32
    answer["preemptions"] = 2
    (tmp_path / "preempt.out.json").write_text(json.dumps(answer))
    code, out, _ = cli(capsys, "oracle", "check", str(tmp_path))
    assert code == 1
    name = f"{tmp_path.name}/preempt.json"
    assert out.splitlines() == [f"{name}: request 1: recorded first 32 done 60, serq-ref first 31 done 60",
                                f"{name}: preemptions: recorded 2, serq-ref 1",
                                "0 passed, 1 failed"]


def test_run_prints_the_answer_in_the_recorded_format(capsys):
    code, out, _ = cli(capsys, "oracle", "run", str(ORACLE / "vllm" / "preempt.json"), "--json")
    recorded = json.loads((ORACLE / "vllm" / "preempt.out.json").read_text())
    assert code == 0
    assert json.loads(out) == {key: recorded[key] for key in ("first", "done", "preemptions", "steps")}


@pytest.mark.parametrize("group", ["vllm", "serve"])
def test_the_scenario_programs_link_with_their_verdicts(group):
    # the harness links without Z3's range verdicts (warnings only); here they run, and find no error
    from oracle.scenario import scenario_program

    for path in sorted((ORACLE / group).glob("*.json")):
        if path.name.count(".") == 1 and path.with_suffix(".out.json").exists():
            scenario_program(json.loads(path.read_text()), str(path), verdicts=True)


def test_a_scenario_with_a_serve_order_and_prefix_caching_runs():
    path = ORACLE / "serve" / "newest_first_preempt.json"
    scenario = json.loads(path.read_text())
    recorded = json.loads((ORACLE / "serve" / "newest_first_preempt.out.json").read_text())
    # the file's corpus was recorded on vLLM 0c87a197: the older self-preemption rule (docs/oracle.md)
    assert run_scenario(scenario, str(path))["first"] == recorded["first"]
    cached = dict(scenario, prefix_caching=True)
    assert set(run_scenario(cached)["done"]) == {"0", "1", "2", "3"}


def test_a_bad_scenario_is_a_located_program_error(capsys, tmp_path):
    """Located at the JSON node that is wrong: here the request without `out`, its `{`."""
    path = tmp_path / "bad.json"
    text = json.dumps({"budget": 64, "max_seqs": 2, "block_size": 16, "num_blocks": 10, "requests": [{"prompt": 3}]},
                      indent=1)
    path.write_text(text)
    lines = text.splitlines()
    line = lines.index('   "prompt": 3')  # the line above it (1-based: this index) holds the request's `{`
    assert lines[line - 1] == "  {"
    code, out, err = cli(capsys, "oracle", "run", str(path))
    assert code == 1 and out == ""
    assert err.splitlines()[:3] == [f"{path}:{line}:3: error: request 0 is not {{prompt, out, arrive?}}",
                                    "    {", "    ^"]  # the line, indented by two, and a caret under col 3


#: A scenario with one thing wrong, the line of the node it is located at (1-based), what the error says.
BAD_SCENARIOS = [
    ({"requests": [{"prompt": 3, "out": -1}]}, '   "out": -1', "`requests[0].out` is -1, not a natural number"),
    ({"budget": 0.5}, ' "budget": 0.5,', "`budget` is 0.5, not a natural number"),
    ({"chunk": None}, ' "chunk": null', "`chunk` is null, not a natural number"),
    ({"num_blocks": 1}, ' "num_blocks": 1,', "`num_blocks` counts vLLM's null block: at least 2"),
    ({"serve": 3}, ' "serve": 3', '`serve` is a serve-by key in serQ syntax, e.g. "-admission"'),
    ({"arrive": 3}, ' "arrive": 3', "`arrive` is not a field of a scenario (fields: budget, max_seqs, "
                                    "block_size, num_blocks, requests, chunk, prefix_caching, serve, async, "
                                    "policy, max_model_len, watermark, spec_tokens, kv_groups, spec_method, offload)"),
    ({"serve": "free("}, ' "serve": "free("', "the scenario's serve key `free(` does not compile: "),
]


@pytest.mark.parametrize("change,line,message", BAD_SCENARIOS)
def test_one_check_of_a_scenario_locates_its_error_for_the_oracle_and_the_lean_bridge(change, line, message, capsys,
                                                                                      tmp_path):
    """`oracle run` and `lean` check a scenario with the one check (oracle.scenario.check_scenario): the
    same error at the offending JSON node, its line and a caret under it, exit 1."""
    scenario = dict({"budget": 64, "max_seqs": 2, "block_size": 16, "num_blocks": 10,
                     "requests": [{"prompt": 3, "out": 4}]}, **change)
    path = tmp_path / "bad.json"
    text = json.dumps(scenario, indent=1)
    path.write_text(text)
    number = text.splitlines().index(line) + 1
    column = len(line) - len(line.split(": ", 1)[1]) + 1  # the value's first character
    errors = []
    for command in (["oracle", "run"], ["lean"]):
        code, out, err = cli(capsys, *command, str(path))
        assert code == 1 and out == "", (command, err)
        first, source, caret = err.splitlines()[:3]
        assert first.startswith(f"{path}:{number}:{column}: error: {message}"), (command, first)
        assert source == "  " + line and caret == " " * (column + 1) + "^"
        errors.append(err)
    assert errors[0] == errors[1]


def test_a_scenario_without_its_text_is_located_at_its_label():
    """A scenario that is no file (a campaign case, a generated one): at its label, line 1, column 1."""
    from oracle.scenario import check_scenario
    from semantics.errors import ProgramError, Span

    with pytest.raises(ProgramError) as raised:
        check_scenario({"budget": 64, "max_seqs": 2, "block_size": 16, "num_blocks": 10, "requests": []}, "cases.jsonl#4")
    assert raised.value.span == Span("cases.jsonl#4", 1, 1)
    assert raised.value.message == "`requests` is a non-empty list of {prompt, out, arrive?}"


def test_a_missing_file_is_a_usage_error(capsys, tmp_path):
    code, _, err = cli(capsys, "oracle", "run", str(tmp_path / "nothing.json"))
    assert code == 2 and "no such file" in err


def test_replay_gives_the_recorded_prefix_cache_rows(capsys):
    code, out, _ = cli(capsys, "oracle", "replay", str(ORACLE / "prefix_cache" / "cache_trace.csv"),
                       "--spacing", "3", "--budget", "64", "--max-seqs", "4", "--blocks", "20")
    assert code == 0
    assert out == (ORACLE / "prefix_cache" / "cache_trace.out.csv").read_text()


def test_the_reference_replay_program_dumps_the_same_rows(capsys, tmp_path):
    code, _, _ = cli(capsys, "run", str(ORACLE / "prefix_cache" / "cache_trace.ir.json"), "--dump", str(tmp_path))
    assert code == 0
    samples = {}
    for name in ("sent", "ttft", "response", "cached_tokens"):
        for row in csv.DictReader(open(tmp_path / f"{name}.csv")):
            samples.setdefault((int(row["session"]), int(row["turn"])), {})[name] = float(row["value"])
    for row in csv.DictReader(open(ORACLE / "prefix_cache" / "cache_trace.out.csv")):
        s = samples[(int(row["session"]), int(row["turn"]))]
        assert (s["sent"], s["sent"] + s["ttft"], s["sent"] + s["response"], s["cached_tokens"]) == \
            (float(row["sent"]), float(row["first"]), float(row["done"]), float(row["cached"]))


def real_rows(spacing: int, asynchronous: bool = False) -> list[tuple]:
    """vLLM's recorded rows of the full trace at ``spacing``, of the synchronous engine or the asynchronous one."""
    prefix = "async-" if asynchronous else ""
    text = gzip.decompress((REPLAYS / f"{prefix}short_base-s{spacing:02d}.csv.gz").read_bytes()).decode()
    return [(int(r["session"]), int(r["turn"]), float(r["sent"]), float(r["first"]), float(r["done"]),
             int(r["prompt"]), int(r["cached"]), int(r["out"])) for r in csv.DictReader(io.StringIO(text))]


def assert_full_trace_agrees(spacing: int, asynchronous: bool = False) -> None:
    rows = [tuple(r) for r in replay(str(SHARED / "traces" / "short_base.csv"), spacing, 512, 64, 8010,
                                     asynchronous=asynchronous)]
    real = real_rows(spacing, asynchronous)
    assert len(rows) == len(real) == 3321
    differing = [(ours, theirs) for ours, theirs in zip(rows, real) if ours != theirs]
    assert differing == [], f"{len(differing)} of 3321 requests differ; the first: {differing[0]}"


def test_the_full_trace_agrees_with_vllm_on_every_request_at_spacing_24():
    # issue 9/10: every request's send, first-token and finish time and cached tokens, all 3 321, exactly
    assert_full_trace_agrees(24)


@pytest.mark.campaign
@pytest.mark.parametrize("spacing", [4, 8, 12, 16, 20, 22, 23, 28, 32, 40])
def test_the_full_trace_agrees_with_vllm_on_every_request(spacing):
    assert_full_trace_agrees(spacing)
