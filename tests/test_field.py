"""The field's simulators graded by the conformance contract (issue 24,
docs/field.md): the contract's "unsupported" verdict, the peers' adapters
without their peers installed (what they refuse, and why), and the recorded
grading's consistency (docs/data/field.json)."""

from __future__ import annotations

import hashlib
import os
import importlib.util
import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from semantics.cli import main

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "oracle" / "data"
ADAPTERS = ROOT / "examples" / "adapters"
FIELD = ROOT / "docs" / "data" / "field.json"


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def engine(tmp_path: Path, body: str) -> str:
    script = tmp_path / "engine.py"
    script.write_text("import json, sys\n" + body)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def two_cases(tmp_path: Path) -> Path:
    directory = tmp_path / "cases"
    directory.mkdir()
    for name in ("preempt", "alone"):
        for suffix in (".json", ".out.json"):
            shutil.copy(DATA / "shared" / "vllm" / f"{name}{suffix}", directory / f"{name}{suffix}")
    return directory


def adapter(name: str):
    """An adapter module, loaded without its peer (it imports the peer only to run a scenario)."""
    spec = importlib.util.spec_from_file_location(name, ADAPTERS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the contract's "unsupported" verdict ----------------------------------------------


def test_an_unsupported_case_is_counted_apart_and_fails_nothing(tmp_path, capsys):
    # the engine answers preempt.json as recorded and says it cannot express alone.json
    body = ("p = sys.argv[1]\n"
            "if p.endswith('alone.json'): print(json.dumps({'unsupported': 'no long-prefill threshold'}))\n"
            "else: print(open(p[:-5] + '.out.json').read())\n")
    code, out, err = cli(capsys, "oracle", "check", str(two_cases(tmp_path)), "--engine", engine(tmp_path, body))
    assert (code, err) == (0, "")
    assert out.splitlines() == ["cases/alone.json: unsupported by the engine: no long-prefill threshold",
                                "1 passed, 0 failed, 1 unsupported"]


def test_an_unsupported_case_beside_a_failed_one(tmp_path, capsys):
    body = ("p = sys.argv[1]\n"
            "if p.endswith('alone.json'): print(json.dumps({'unsupported': 'a knob it lacks'}))\n"
            "else: a = json.load(open(p[:-5] + '.out.json')); a['preemptions'] = 7; print(json.dumps(a))\n")
    code, out, _ = cli(capsys, "oracle", "check", str(two_cases(tmp_path)), "--engine", engine(tmp_path, body))
    assert code == 1
    assert out.splitlines()[-1] == "0 passed, 1 failed, 1 unsupported"
    assert "cases/preempt.json: preemptions: recorded 1, engine 7" in out


@pytest.mark.parametrize("why", ["", "   ", 3, None])
def test_an_unsupported_answer_needs_a_reason(tmp_path, capsys, why):
    body = f"print(json.dumps({{'unsupported': {why!r}}}))\n"
    code, out, _ = cli(capsys, "oracle", "check", str(two_cases(tmp_path)), "--engine", engine(tmp_path, body))
    assert code == 1
    assert "the engine's answer is not the .out.json shape: `unsupported` is not a reason (a string)" in out
    assert out.splitlines()[-1] == "0 passed, 2 failed"


# --- the adapters, without their peers ----------------------------------------------


@pytest.mark.parametrize("name", ["dynamo_adapter", "vidur_adapter"])
def test_an_adapter_says_which_knob_it_lacks(name):
    module = adapter(name)
    base = {"budget": 100, "max_seqs": 4, "block_size": 16, "num_blocks": 40, "chunk": 0, "prefix_caching": False,
            "requests": [{"prompt": 50, "out": 3}, {"prompt": 60, "out": 2, "arrive": 1}]}
    assert module.unsupported(base) is None
    assert "serve-by key" in module.unsupported(dict(base, serve="decoding ? 1 : 0"))
    assert "priority" in module.unsupported(dict(base, policy="priority"))
    assert "asynchronous" in module.unsupported(dict(base, **{"async": True}))
    assert "long-prefill token threshold (20)" in module.unsupported(dict(base, chunk=20))
    assert module.unsupported(dict(base, chunk=62)) is None  # a threshold above every prompt + output never binds
    assert "max_model_len" in module.unsupported(dict(base, max_model_len=64))
    assert "does not map: tokens" in module.unsupported(dict(base, tokens=[1]))
    with (DATA / "campaign" / "replays.jsonl").open() as f:
        replay = json.loads(f.readline())["case"]
    assert module.unsupported(replay).startswith("a multi-turn replay (a session's turn is sent when its previous")
    assert module.answer(dict(base, serve="decoding ? 1 : 0"), *(["vllm"] if name == "vidur_adapter" else [])) \
        == {"unsupported": module.unsupported(dict(base, serve="decoding ? 1 : 0"))}


def test_the_peers_lack_different_knobs():
    dynamo, vidur = adapter("dynamo_adapter"), adapter("vidur_adapter")
    same = {"budget": 100, "max_seqs": 4, "block_size": 16, "num_blocks": 40, "prefix_caching": False,
            "requests": [{"prompt": 50, "out": 3}, {"prompt": 50, "out": 3}]}
    # the mocker's report names a request by a random uuid; Vidur's by its position
    assert "cannot be told apart" in dynamo.unsupported(same) and vidur.unsupported(same) is None
    cached = dict(same, requests=same["requests"][:1], prefix_caching=True)
    assert dynamo.unsupported(cached) is None and "prefix caching" in vidur.unsupported(cached)


# --- the recorded grading (docs/data/field.json) --------------------------------------

RECORD = json.loads(FIELD.read_text()) if FIELD.exists() else None
MANIFEST = json.loads((DATA / "manifest.json").read_text())


def test_the_grading_is_recorded():
    assert RECORD is not None, "docs/data/field.json: examples/adapters/field.py record writes it"
    assert {run["peer"] for run in RECORD["runs"]} == {"dynamo", "vidur-vllm", "vidur-sarathi"}
    graded = {}
    for run in RECORD["runs"]:
        graded[run["peer"].split("-")[0]] = graded.get(run["peer"].split("-")[0], 0) + run["graded"]
    assert all(n >= 5000 for n in graded.values()), graded  # the "at least 5,000 cases" per peer


def test_the_counts_add_up():
    from oracle.check import Selection, cases_of

    for run in RECORD["runs"]:
        assert run["agree"] + run["differ"] + run["unsupported"] == run["graded"], run["name"]
        assert sum(run["unsupported_reasons"].values()) == run["unsupported"], run["name"]
        assert len(run["differences"]) == run["differ"], run["name"]
        # graded is the slice the command chose: every case, or every N-th (the multi-turn replays, outside
        # oracle check's contract, are asked of the adapter case by case: every line of the file)
        if run["corpus"] == ["oracle/data/campaign/replays.jsonl"]:
            labels = [f"campaign/replays.jsonl#{i}" for i, _ in enumerate((DATA / "campaign" / "replays.jsonl").open())]
            assert "field.py replays" in run["command"], run["name"]
        else:
            labels = [c.label for c in Selection((), run["every"], None).choose(
                [c for p in run["corpus"] for c in cases_of(str(ROOT / p), True)])]
        assert run["graded"] == len(labels), run["name"]
        assert {d["case"] for d in run["differences"]} <= set(labels), run["name"]
        # the parts' closing lines are oracle check's own: one run's (its first part; a second part, when
        # there is one, graded some of its cases again), or a run graded in parts, every case in one part
        counted = run["parts"] if run.get("composed") else run["parts"][:1]
        assert sum(part["cases"] for part in counted) == run["graded"], run["name"]


def test_every_difference_has_a_class_and_every_class_a_minimised_valid_case():
    from oracle.campaign import scenario_valid
    from oracle.scenario import check_scenario

    counted: dict[str, int] = {}
    for run in RECORD["runs"]:
        for difference in run["differences"]:
            assert difference["class"] in RECORD["classes"], difference
            counted[difference["class"]] = counted.get(difference["class"], 0) + 1
    assert counted == {key: cls["cases"] for key, cls in RECORD["classes"].items()}
    for key, cls in RECORD["classes"].items():
        small = cls.get("minimised")
        assert small is not None, f"class {key} has no minimised case"
        check_scenario(small["scenario"])  # a scenario of the contract (raises if not)
        assert scenario_valid(small["scenario"]), key
        assert small["peer"] != small["vllm"], f"class {key}: the minimised case does not differ"
        assert small["first_difference"]["class"] == key, key
        # minimised: no more requests than the class's smallest case, and no more tokens either
        smallest = cls["smallest"]["scenario"]["requests"]
        assert len(small["scenario"]["requests"]) <= len(smallest), key
        assert sum(r["prompt"] + r["out"] for r in small["scenario"]["requests"]) <= \
            sum(r["prompt"] + r["out"] for r in smallest), key


def test_the_minimised_cases_are_vllm_s_answers():
    # serq-ref answers the corpus as vLLM 0.33.0 (docs/conformance.md): the recorded "vllm" side of a
    # minimised case is serq-ref's answer now, so a change of semantics shows here
    from oracle.scenario import run_scenario

    for key, cls in RECORD["classes"].items():
        small = cls["minimised"]
        answer = run_scenario(small["scenario"], key, False)
        assert {k: answer[k] for k in ("first", "done", "preemptions", "steps")} == small["vllm"], key


def test_the_graded_corpora_are_the_manifest_s():
    for path, digest in RECORD["corpora"].items():
        relative = os.path.relpath(ROOT / path, DATA)
        assert relative in MANIFEST["files"], path
        assert MANIFEST["files"][relative]["sha256"] == digest, path
        assert hashlib.sha256((ROOT / path).read_bytes()).hexdigest() == digest, path
