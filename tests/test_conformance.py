"""The conformance contract (docs/conformance.md): `serq-ref oracle check PATH
--engine COMMAND` grades any engine against the recorded answers of the
corpus in oracle/data; the pyserq adapter of examples/adapters passes it on
the recorded scenarios; an engine that fails says where, or why it gave no
answer, never with a traceback."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from oracle.check import shape_problem
from oracle.scenario import check_scenario, run_scenario
from semantics.cli import main
from shared_paths import SHARED

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "oracle" / "data"
ADAPTER = ROOT / "examples" / "adapters" / "pyserq_adapter.py"
PYSERQ = f"{shlex.quote(sys.executable)} {shlex.quote(str(ADAPTER))}"
MANIFEST = json.loads((DATA / "manifest.json").read_text())
#: docs/data/conformance-pyserq-campaign.json: the adapter's run over the campaign corpus
CAMPAIGN_RESULT = ROOT / "docs" / "data" / "conformance-pyserq-campaign.json"


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def engine(tmp_path: Path, body: str) -> str:
    """A fake engine: a Python script given the scenario's path as sys.argv[1]."""
    script = tmp_path / "engine.py"
    script.write_text("import json, sys\n" + body)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def preempt_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "cases"
    directory.mkdir()
    for suffix in (".json", ".out.json"):
        shutil.copy(DATA / "shared" / "vllm" / f"preempt{suffix}", directory / f"preempt{suffix}")
    return directory


# --- the pyserq adapter -------------------------------------------------------------


def test_the_pyserq_adapter_passes_the_recorded_corpus(capsys):
    # the corpus's recorded scenarios (vLLM 0.33.0's answers, D1's older rule
    # as a documented variant) and ../shared/oracle's (the older rule's answers)
    code, out, err = cli(capsys, "oracle", "check", str(DATA / "shared" / "vllm"), str(DATA / "shared" / "serve"),
                         str(SHARED / "oracle" / "vllm"), str(SHARED / "oracle" / "serve"),
                         "--engine", PYSERQ, "--jobs", "2")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "serve/newest_first_preempt.json: passed as the documented variant `older-rule` (its recorded answer), "
        "not as the recorded answer",
        "1 of the passes by a documented variant: older-rule 1",
        "22 passed, 0 failed"]


def test_the_pyserq_adapter_answers_by_running_pyserq(tmp_path):
    # a scenario nobody recorded (so no answer to read anywhere): the
    # adapter's answer is pyserq's run, equal to serq-ref's on this one
    import subprocess

    scenario = json.loads((DATA / "shared" / "vllm" / "preempt.json").read_text())
    scenario["num_blocks"] = 12
    scenario["requests"].append({"prompt": 7, "out": 3, "arrive": 5})
    path = tmp_path / "new.json"
    path.write_text(json.dumps(scenario))
    done = subprocess.run([sys.executable, str(ADAPTER), str(path)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert shape_problem(answer) is None
    assert answer == run_scenario(scenario)
    assert sorted(answer["done"]) == ["0", "1", "2"] and answer["done"]["2"] < answer["done"]["1"]


def test_the_adapter_is_about_twenty_lines():
    code = [line for line in ADAPTER.read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")]
    docstring_end = next(i for i, line in enumerate(code[1:], 1) if line.strip().endswith('"""'))
    assert len(code) - docstring_end - 1 <= 25


def test_the_adapter_reports_a_bad_scenario_without_a_traceback(tmp_path, capsys):
    directory = tmp_path / "bad"
    directory.mkdir()
    (directory / "x.json").write_text('{"budget": 8}')
    (directory / "x.out.json").write_text('{"first": {}, "done": {}, "preemptions": 0, "steps": 1}')
    code, out, _ = cli(capsys, "oracle", "check", str(directory), "--engine", PYSERQ)
    assert code == 1
    (line, closing) = out.splitlines()
    assert line.startswith("bad/x.json: the engine exited with status 1: pyserq_adapter: ")
    assert "has no `max_seqs`" in line and "Traceback" not in out
    assert closing == "0 passed, 1 failed"


# --- what check says about an engine ---------------------------------------------------


def test_a_wrong_answer_is_named_per_request_and_figure(tmp_path, capsys):
    recorded = json.loads((DATA / "shared" / "vllm" / "preempt.out.json").read_text())
    wrong = dict(recorded, first={"0": 1, "1": 32}, done={"0": 30.0, "1": 60}, preemptions=2)
    directory = preempt_dir(tmp_path)
    command = engine(tmp_path, f"print(json.dumps({json.dumps(wrong)}))\n")
    code, out, _ = cli(capsys, "oracle", "check", str(directory), "--engine", command)
    assert code == 1
    assert out.splitlines() == ["cases/preempt.json: request 1: recorded first 31 done 60, engine first 32 done 60",
                                "cases/preempt.json: preemptions: recorded 1, engine 2",
                                "0 passed, 1 failed"]


def test_the_engine_gets_the_scenario_path_and_numbers_compare_by_value(tmp_path, capsys):
    # an engine that answers from the scenario it is given (here: by reading
    # the answer beside it), with floats for steps and no config
    directory = preempt_dir(tmp_path)
    body = ("path = sys.argv[1]\nassert path.endswith('preempt.json'), path\n"
            "a = json.load(open(path[:-5] + '.out.json'))\n"
            "a['first'] = {k: float(v) for k, v in a['first'].items()}\na.pop('config')\nprint(json.dumps(a))\n")
    code, out, _ = cli(capsys, "oracle", "check", str(directory), "--engine", engine(tmp_path, body))
    assert (code, out) == (0, "1 passed, 0 failed\n")


@pytest.mark.parametrize("body, reason", [
    ("sys.stderr.write('boom\\n'); sys.exit(3)\n", "the engine exited with status 3: boom"),
    ("print('no answer here')\n", "the engine's output is not JSON (Expecting value): 'no answer here'"),
    ("print(json.dumps([1, 2]))\n", "the engine's answer is not the .out.json shape: not a JSON object"),
    ("print(json.dumps({'first': {}, 'done': {}, 'steps': 3}))\n",
     "the engine's answer is not the .out.json shape: no `preemptions`"),
    ("print(json.dumps({'first': {'0': 'one'}, 'done': {}, 'preemptions': 0, 'steps': 3}))\n",
     "the engine's answer is not the .out.json shape: `first` of request 0 is \"one\", not a number"),
    ("import time; time.sleep(30)\n", "the engine gave no answer within 0.5 s"),
])
def test_an_engine_without_an_answer_fails_with_the_reason(tmp_path, capsys, body, reason):
    # the engine that sleeps is given 0.5 s; the others 60, which a python's start-up takes on no loaded
    # machine (under a load of 20 on 2 cores it took more than 0.5 s, and the engine "gave no answer")
    timeout = "0.5" if "sleep" in body else "60"
    directory = preempt_dir(tmp_path)
    code, out, err = cli(capsys, "oracle", "check", str(directory), "--engine", engine(tmp_path, body),
                         "--timeout", timeout)
    assert (code, err) == (1, "")
    assert out.splitlines() == [f"cases/preempt.json: {reason}", "0 passed, 1 failed"]


def test_an_engine_that_does_not_exist_is_bad_usage(tmp_path, capsys):
    code, _, err = cli(capsys, "oracle", "check", str(preempt_dir(tmp_path)), "--engine", "no-such-engine-xyz --flag")
    assert code == 2
    assert "no such program: no-such-engine-xyz" in err


@pytest.mark.parametrize("argv, message", [
    (["--jobs", "2"], "--jobs and --timeout go with --engine"),
    (["--engine", ""], "--engine: an empty command"),
    (["--engine", "python3 'unclosed"], "No closing quotation"),
])
def test_usage_errors(tmp_path, capsys, argv, message):
    code, _, err = cli(capsys, "oracle", "check", str(preempt_dir(tmp_path)), *argv)
    assert code == 2 and message in err


# --- campaign files ----------------------------------------------------------------


def campaign_lines(name: str, indices: tuple[int, ...]) -> list[dict]:
    wanted, out = set(indices), []
    with (DATA / "campaign" / name).open() as f:
        for line in f:
            record = json.loads(line)
            if record["index"] in wanted:
                out.append(record)
    return out


def test_campaign_cases_are_written_out_for_the_engine(tmp_path, capsys):
    # serve case 25 is one of D1's: 0.33.0's answer differs from the older rule's
    records = campaign_lines("serve.jsonl", (0, 25))
    assert records[1]["answer"] != records[1]["answer_older_rule"]
    path = tmp_path / "serve.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    seen = tmp_path / "seen.txt"
    body = (f"open({str(seen)!r}, 'a').write(sys.argv[1].rsplit('/', 1)[-1] + '\\n')\n"
            "s = json.load(open(sys.argv[1]))\nassert 'kind' not in s and 'serve' in s\n"
            f"answers = {{json.dumps(r['case']['requests']): r['answer_older_rule'] for r in "
            f"map(json.loads, open({str(path)!r}))}}\n"
            "print(json.dumps(answers[json.dumps(s['requests'])]))\n")
    code, out, _ = cli(capsys, "oracle", "check", str(path), "--engine", engine(tmp_path, body))
    assert code == 0
    assert out.splitlines() == [
        f"{tmp_path.name}/serve.jsonl#25: passed as the documented variant `older-rule` (its recorded answer), "
        "not as the recorded answer",
        "1 of the passes by a documented variant: older-rule 1",
        "2 passed, 0 failed"]
    assert sorted(seen.read_text().split()) == ["serve-0.json", "serve-25.json"]


def test_serq_ref_checks_a_campaign_file_in_process(tmp_path, capsys):
    path = tmp_path / "scenarios.jsonl"
    records = campaign_lines("scenarios.jsonl", (0, 1, 2))
    records[2]["answer"]["done"]["0"] += 1
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, out, _ = cli(capsys, "oracle", "check", str(path))
    assert code == 1
    done = records[2]["answer"]["done"]["0"]
    first = records[2]["answer"]["first"]["0"]
    assert out.splitlines() == [
        f"{tmp_path.name}/scenarios.jsonl#2: request 0: recorded first {first} done {done}, "
        f"serq-ref first {first} done {done - 1}",
        "2 passed, 1 failed"]


# --- the corpus ---------------------------------------------------------------------


def test_the_corpus_is_versioned_and_every_case_is_listed_with_its_checksum():
    assert MANIFEST["format"] == 2
    sets = MANIFEST["corpus"]["sets"]
    assert [s["path"] for s in sets] == ["shared/vllm", "shared/serve", "campaign/scenarios.jsonl",
                                         "campaign/serve.jsonl"]
    for entry in sets:
        assert entry["vllm"] == MANIFEST["vllm"] == "0.33.0"
        path = DATA / entry["path"]
        if path.suffix == ".jsonl":
            records = [json.loads(line) for line in path.read_text().splitlines()]
            assert MANIFEST["files"][entry["path"]]["cases"] == entry["cases"] == len(records)
            for record in records:
                check_scenario({k: v for k, v in record["case"].items() if k != "kind"})
                for variant in entry["variants"]:
                    assert "answer_" + variant.replace("-", "_") in record
            continue
        scenarios = sorted(p for p in path.glob("*.json") if p.name.count(".") == 1)
        assert len(scenarios) == entry["cases"]
        for scenario in scenarios:
            check_scenario(json.loads(scenario.read_text()))
            for name in [scenario.name, scenario.stem + ".out.json"] + [
                    f"{scenario.stem}.{variant}.out.json" for variant in entry["variants"]]:
                assert f"{entry['path']}/{name}" in MANIFEST["files"], name
            # the scenario is the shared one, byte for byte
            assert scenario.read_bytes() == (SHARED / "oracle" / path.name / scenario.name).read_bytes()


def test_the_shape_of_an_answer():
    good = {"first": {"0": 1}, "done": {"0": 2.0}, "preemptions": 0, "steps": 3, "config": {}}
    assert shape_problem(good) is None
    assert shape_problem({**good, "steps": True}) == "`steps` is true, not a number"
    assert shape_problem({**good, "done": [1]}) == "`done` is not an object of request id to step"
    assert shape_problem({**good, "first": {"0": None}}) == "`first` of request 0 is null, not a number"


# --- the campaign corpus (pytest -m campaign) ------------------------------------------


def adapter_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("pyserq_adapter", ADAPTER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CAMPAIGN_FILES = ("scenarios.jsonl", "serve.jsonl")


@pytest.mark.campaign
def test_the_pyserq_adapter_on_the_whole_campaign_corpus():
    """The 6 000 campaign cases answered by the adapter's own function in
    process (the command, less a Python start per case) and judged by
    `oracle check`'s rules: the cases that fail, and those that pass as the
    older rule, are the recorded ones (docs/campaigns.md, "The conformance
    corpus and pyserq")."""
    from oracle.check import judge, jsonl_cases

    recorded = json.loads(CAMPAIGN_RESULT.read_text())
    adapter = adapter_module()
    failed, variants, passed = [], [], 0
    for name in CAMPAIGN_FILES:
        for case in jsonl_cases(str(DATA / "campaign" / name)):
            outcome = judge(case, adapter.answer(case.scenario), None, "engine")
            passed += outcome.passed
            if not outcome.passed:
                failed.append(outcome.label)
            elif outcome.variant == "older-rule":
                variants.append(outcome.label)
    assert failed == recorded["failed"]
    assert variants == recorded["passed_as_older_rule"]
    assert passed == recorded["passed"] == 6000 - len(failed)


@pytest.mark.campaign
def test_the_pyserq_adapter_through_oracle_check_on_the_campaign_sample(tmp_path, capsys):
    """`oracle check --engine` with the adapter as a command on every tenth
    case of the campaign corpus and on every case recorded as failing or as
    passing by the older rule: the same verdicts."""
    recorded = json.loads(CAMPAIGN_RESULT.read_text())
    marked = set(recorded["failed"]) | set(recorded["passed_as_older_rule"])
    sample = tmp_path / "campaign"
    sample.mkdir()
    for name in CAMPAIGN_FILES:
        with (DATA / "campaign" / name).open() as f, (sample / name).open("w") as out:
            for line in f:
                index = json.loads(line)["index"]
                if index % 10 == 0 or f"campaign/{name}#{index}" in marked:
                    out.write(line)
    code, out, err = cli(capsys, "oracle", "check", *(str(sample / name) for name in CAMPAIGN_FILES),
                         "--engine", PYSERQ, "--jobs", "2")
    assert err == ""
    lines = out.splitlines()
    in_sample = {f"campaign/{name}#{json.loads(line)['index']}" for name in CAMPAIGN_FILES
                 for line in (sample / name).read_text().splitlines()}
    failed = sorted({line.split(":", 1)[0] for line in lines[:-2] if "passed as the documented variant" not in line},
                    key=_label_key)
    variants = [line.split(":", 1)[0] for line in lines if "passed as the documented variant" in line]
    assert failed == [label for label in recorded["failed"] if label in in_sample]
    assert variants == [label for label in recorded["passed_as_older_rule"] if label in in_sample]
    assert lines[-1] == f"{len(in_sample) - len(failed)} passed, {len(failed)} failed"
    assert code == 1


def _label_key(label: str) -> tuple:
    name, index = label.split("#")
    return (CAMPAIGN_FILES.index(name.split("/")[1]), int(index))


def test_a_path_without_cases_is_bad_usage(tmp_path, capsys):
    (tmp_path / "alone.json").write_text((DATA / "shared" / "vllm" / "alone.json").read_text())
    code, out, err = cli(capsys, "oracle", "check", str(tmp_path), "--engine", PYSERQ)
    assert (code, out) == (2, "")
    assert "has no case: no scenario NAME.json with its answer NAME.out.json beside it" in err
