"""The result digest (tests/digest/README.md): the programs of tests/digest/corpus.jsonl give
the results recorded in tests/digest/expected.txt, hash for hash.

A guard for changes that mean to keep behaviour (a refactor of semantics/smallstep/): any
change of any result (a field of a RunResult, one observation sample, one gauge change
point, to the last bit of a float; an error's message or place) fails it, naming the
programs. The whole corpus takes about a minute here, more than the default suite should
spend on one check, so the default run digests a fixed subset (every SUBSET_STEP-th program
of the corpus, examples included) and the campaign the whole.

Both engines must give the recorded results: the fast one (semantics/fast), which `serq-ref
run` uses, and the definition (semantics/smallstep), which it stands for. The default run
digests the subset on the fast engine and another slice (entries DEFINITION_OFFSET,
DEFINITION_OFFSET + SUBSET_STEP, ...) on the definition; the campaign the whole corpus on each.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

DIGEST_DIR = Path(__file__).resolve().parent / "digest"
#: the default run digests corpus entries 0, SUBSET_STEP, 2 * SUBSET_STEP, ...
SUBSET_STEP = 8
#: the default run digests corpus entries DEFINITION_OFFSET, DEFINITION_OFFSET + SUBSET_STEP, ... on the definition
DEFINITION_OFFSET = 4


def load_module(name: str):
    spec = importlib.util.spec_from_file_location(f"digest_{name}", DIGEST_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


digest = load_module("digest")


def check(entries: list[dict], whole: bool, engine: str = "fast") -> None:
    expected, total = digest.read_expected()
    outcomes = digest.run_all(entries, engine=engine)
    problems = digest.compare(outcomes, expected, whole=whole)
    if whole and not problems:
        assert digest.total_of([o.line() for o in outcomes]) == total
    assert not problems, (
        f"{len(problems)} program(s) of the digest corpus give other results on the {engine} engine than "
        "expected.txt records:\n  "
        + "\n  ".join(problems)
        + "\nSee what changed: python3 tests/digest/digest.py --only NAME --show (before and after the change); "
        "a deliberate change re-records with --update (tests/digest/README.md)."
    )


def test_the_expected_file_covers_the_corpus_and_its_total_is_its_lines():
    entries = digest.read_corpus()
    expected, total = digest.read_expected()
    assert list(expected) == [e["name"] for e in entries]
    lines = [f"{name} {rest}" for name, rest in expected.items()]
    assert total == digest.total_of(lines)


def test_the_corpus_is_what_generate_py_writes():
    """The corpus is data; generate.py says how it was made, and still makes it byte for byte."""
    generate = load_module("generate")
    assert generate.corpus_text() == digest.CORPUS.read_text(encoding="utf-8")


def test_a_subset_of_the_corpus_gives_the_recorded_results():
    check(digest.read_corpus()[::SUBSET_STEP], whole=False)


def test_another_subset_gives_the_recorded_results_on_the_definition():
    check(digest.read_corpus()[DEFINITION_OFFSET::SUBSET_STEP], whole=False, engine="definition")


@pytest.mark.campaign
def test_the_whole_corpus_gives_the_recorded_results():
    check(digest.read_corpus(), whole=True)


@pytest.mark.campaign
def test_the_whole_corpus_gives_the_recorded_results_on_the_definition():
    check(digest.read_corpus(), whole=True, engine="definition")
