"""The digest corpus's link warnings, against their classification in warnings.json (issue 23).

    python3 tests/digest/linkwarnings.py            # link every program of corpus.jsonl, compare with warnings.json
    python3 tests/digest/linkwarnings.py --list     # ... and print every warning the linker gives now

A warning must be true: some run reaches its witness (issue 13, "a warning only when it is true of some
run"). warnings.json classifies every warning the corpus's programs got: ``warnings`` are the ones the
linker gives now, each true, with the run that reaches it (the program's own run stops there, with the
error recorded under ``reached``); ``fixed`` are the false ones the linker gave before, each with the
class of false warning it belonged to, why no run reaches it, and the test that holds the class. Each
program is linked as digest.py runs it (the entry's overrides, an example's horizon capped).
tests/test_digest_warnings.py holds the linker to the file (a subset by default, the whole corpus under
the campaign marker), so that a new warning or a vanished one is noticed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
if str(ROOT) not in sys.path[:1]:
    sys.path.insert(0, str(ROOT))  # this tree's engine, not an installed one
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import digest  # noqa: E402
from semantics.errors import ProgramError, RunError, UsageError  # noqa: E402
from semantics.pipeline import load  # noqa: E402
from semantics.smallstep.driver import run  # noqa: E402

CLASSIFICATION = HERE / "warnings.json"


def read_classification(path: Path = CLASSIFICATION) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@dataclasses.dataclass(frozen=True)
class Linked:
    """A program as digest.py loads it: its warnings (at, message), or the error that stopped the load;
    ``reached``: with ``run``, the run's error message (None: the run ended without one)."""

    warnings: tuple[tuple[str, str], ...]
    error: str | None = None
    reached: str | None = None


def link_entry(entry: dict, execute: bool = False) -> Linked:
    """Load ``entry`` as digest.py does (in a directory of its own with its files), and with ``execute``
    run it too."""
    options = entry.get("options", {})
    with tempfile.TemporaryDirectory(prefix="serq-warnings-") as directory:
        if "path" in entry:
            path = str(ROOT / entry["path"])
        else:
            for name, content in options.get("files", {}).items():
                (Path(directory) / name).write_text(content, encoding="utf-8")
            path = os.path.join(directory, digest.PROGRAM_FILE)
            Path(path).write_text(entry["source"], encoding="utf-8")
        overrides = digest.overrides_of(options)
        try:
            loaded = load(path, overrides, "run")
            cap = options.get("horizon_cap")
            if cap is not None and loaded.program.horizon > cap:
                loaded = load(path, dataclasses.replace(overrides, horizon=float(cap)), "run")
        except (ProgramError, RunError, UsageError) as error:
            return Linked((), error=type(error).__name__)
        warnings = tuple((f"{w.span.line}:{w.span.col}" if w.span is not None else "", w.message)
                         for w in loaded.warnings)
        if not execute:
            return Linked(warnings)
        try:
            run(loaded.program, base_dir=loaded.base_dir)
        except RunError as error:  # located as the CLI locates it, and when
            span = error.span or (loaded.smap.stmt(*error.stmt) if error.stmt is not None else None)
            place = f"{span.line}:{span.col}" if span is not None else ""
            return Linked(warnings, reached=f"{place}: {error.message} (at time {error.time:g})")
        return Linked(warnings)


def compare(entries: list[dict], classification: dict) -> list[str]:
    """What differs between the linker's warnings on ``entries`` and the classification's: a warning it
    does not list as true (new, or one of the false ones back), or one it lists that the linker no longer
    gives."""
    recorded: dict[str, set[tuple[str, str]]] = {}
    for w in classification["warnings"]:
        recorded.setdefault(w["name"], set()).add((w["at"], w["warning"]))
    problems = []
    for entry in entries:
        name = entry["name"]
        now = set(link_entry(entry).warnings)
        for at, message in sorted(now - recorded.get(name, set())):
            problems.append(f"{name} {at}: a warning warnings.json does not classify: {message}")
        for at, message in sorted(recorded.get(name, set()) - now):
            problems.append(f"{name} {at}: warnings.json's warning is no longer given: {message}")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print every warning the linker gives now")
    args = parser.parse_args(argv)
    entries = digest.read_corpus()
    if args.list:
        for entry in entries:
            for at, message in link_entry(entry).warnings:
                print(f"{entry['name']} {at}: {message}")
    problems = compare(entries, read_classification())
    for problem in problems:
        print(problem)
    print(f"{len(entries)} programs linked; {len(problems)} difference(s) from warnings.json")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
