"""The digest corpus's link warnings are the ones tests/digest/warnings.json classifies (issue 23).

Every warning the linker gives a program of tests/digest/corpus.jsonl is listed there as true, with the run
that reaches it; every false one it gave before is listed with its class and the test that holds the class
(tests/test_bad_input.py). The default run links the programs the file names and every SUBSET_STEP-th other
random one (the examples are test_diagnostics'); the campaign links the whole corpus (about 8 s of CPU).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

DIGEST_DIR = Path(__file__).resolve().parent / "digest"
SUBSET_STEP = 8


def load_module(name: str):
    if str(DIGEST_DIR) not in sys.path:
        sys.path.insert(0, str(DIGEST_DIR))  # linkwarnings imports digest
    spec = importlib.util.spec_from_file_location(f"digest_{name}", DIGEST_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclass looks its module up)
    spec.loader.exec_module(module)
    return module


linkwarnings = load_module("linkwarnings")
CLASSIFICATION = linkwarnings.read_classification()
ENTRIES = linkwarnings.digest.read_corpus()
BY_NAME = {entry["name"]: entry for entry in ENTRIES}


def test_the_classification_is_whole_and_names_programs_of_the_corpus():
    assert CLASSIFICATION["programs"] == len(ENTRIES)
    for w in CLASSIFICATION["warnings"]:
        assert w["name"] in BY_NAME and w["true"] is True and w["why"] and w["reached"], w
    for w in CLASSIFICATION["fixed"]:
        assert w["name"] in BY_NAME and w["true"] is False and w["class"] and w["why"], w
        test_file, test_name = w["test"].split("::")
        assert f"def {test_name}(" in (Path(__file__).parent / test_file).read_text(encoding="utf-8"), w["test"]


def test_the_linker_gives_the_classified_warnings_and_no_other():
    named = {w["name"] for part in ("warnings", "fixed") for w in CLASSIFICATION[part]}
    # the examples (entries by path) are linked by test_diagnostics, which holds every one to no warning
    entries = [e for k, e in enumerate(ENTRIES) if e["name"] in named or (k % SUBSET_STEP == 0 and "path" not in e)]
    problems = linkwarnings.compare(entries, CLASSIFICATION)
    assert not problems, "\n".join(problems) + "\n(python3 tests/digest/linkwarnings.py --list; classify them)"


@pytest.mark.parametrize("warning", CLASSIFICATION["warnings"], ids=lambda w: f"{w['name']}@{w['at']}")
def test_every_true_warning_is_where_the_programs_own_run_stops(warning):
    """The witness is reached: the run stops at the warning's statement, with the fault it names."""
    linked = linkwarnings.link_entry(BY_NAME[warning["name"]], execute=True)
    assert linked.reached == warning["reached"]
    place, message = linked.reached.split(": ", 1)
    assert place == warning["at"]
    fault = "branch guard is" if warning["warning"].startswith("the guard") else "index"
    assert fault in message


@pytest.mark.campaign
def test_the_whole_corpus_gives_the_classified_warnings_and_no_other():
    problems = linkwarnings.compare(ENTRIES, CLASSIFICATION)
    assert not problems, "\n".join(problems)
