"""The result digest: run every program of tests/digest/corpus.jsonl and hash all it produced.

    python3 tests/digest/digest.py                 # run the corpus, compare with expected.txt (exit 1 on a change)
    python3 tests/digest/digest.py --only NAME     # one program (repeatable), compared with its expected line
    python3 tests/digest/digest.py --only NAME --show   # ... and print what was hashed, one value a line
    python3 tests/digest/digest.py --update        # rewrite expected.txt (a deliberate change of results)
    python3 tests/digest/digest.py --engine definition   # the same, on the definition (semantics/smallstep)

A guard for behaviour-preserving changes of the engine (tests/digest/README.md).
Each program is run the way `serq-ref run` runs a file: ``semantics.pipeline.load``
on a file in a temporary directory (with the command line's overrides, if the
entry has any), then the fast engine's ``semantics.fast.run`` as the command does
(``--engine definition``: ``semantics.smallstep.driver.run``, which must give the
same lines). What is hashed is the
whole ``RunResult`` (semantics/results.py: every field, every observation
sample, every gauge change point; floats by ``float.hex``, so that a change
in the last bit shows) and the link's warnings; or, when the program stops, the
error's class, message, statement, time and span (not its file, a temporary
path). Every example runs, step stages included (until the step engine
existed, an example with one was skipped and its reason hashed).

expected.txt has a line ``NAME HASH OUTCOME`` per program (HASH: the first 16
hex digits of the SHA-256 of the program's canonical text; OUTCOME: result,
ProgramError, RunError, LimitError, UsageError or skipped) and a last line ``TOTAL HASH``,
the SHA-256 of the lines above it.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
if str(ROOT) not in sys.path[:1]:
    sys.path.insert(0, str(ROOT))  # this tree's engine, not an installed one

from semantics.errors import LimitError, ProgramError, RunError, RunStop, SerqError, UsageError  # noqa: E402
from semantics.pipeline import Overrides, load  # noqa: E402
from semantics.cli_common import ENGINES, engine_run  # noqa: E402

CORPUS = HERE / "corpus.jsonl"
EXPECTED = HERE / "expected.txt"
#: hex digits of a program's hash kept in expected.txt
PREFIX = 16
#: the name a random program's file gets in its temporary directory
PROGRAM_FILE = "program.sq"


class Outcome(NamedTuple):
    name: str
    digest: str  # PREFIX hex digits
    kind: str  # result, ProgramError, RunError, LimitError, UsageError, skipped, or bug:<exception class>
    text: str  # the canonical text that was hashed
    seconds: float

    def line(self) -> str:
        return f"{self.name} {self.digest} {self.kind}"


# ---------------------------------------------------------------- canonical text


def scalar(value) -> str:
    """One value, typed, exactly: a float by its hex form (every bit), an int by its digits."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return f"i{value}"
    if isinstance(value, float):
        return f"f{value.hex()}"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=True)
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(scalar(v) for v in value) + ")"
    raise TypeError(f"no canonical form for {type(value).__name__}")


def flatten(value, path: str, out: list[str]) -> None:
    """``path = value`` lines, one per field; a sequence of records one line per record."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out.append(f"{path} : {type(value).__name__}")
        for field in dataclasses.fields(value):
            flatten(getattr(value, field.name), f"{path}.{field.name}" if path else field.name, out)
    elif isinstance(value, (tuple, list)) and any(
            dataclasses.is_dataclass(v) or isinstance(v, (tuple, list)) for v in value):
        out.append(f"{path} : {len(value)} items")
        for k, v in enumerate(value):
            flatten(v, f"{path}[{k}]", out)
    else:
        out.append(f"{path} = {scalar(value)}")


def neutral(text: str, directories: tuple[str, ...]) -> str:
    """A message with the machine's directories (a temporary one, the repository's) taken out."""
    for directory, stand_in in zip(directories, ("<program dir>", "<repo>")):
        if directory:
            text = text.replace(directory, stand_in)
    return text


def error_lines(error: BaseException, directories: tuple[str, ...]) -> list[str]:
    lines = [f"error = {scalar(type(error).__name__)}"]
    if isinstance(error, SerqError):
        lines.append(f"message = {scalar(neutral(error.message, directories))}")
        span = error.span
        lines.append("span = " + ("None" if span is None else scalar((span.line, span.col, span.end_col))))
        lines.append(f"notes = {scalar(tuple(neutral(n, directories) for n in error.notes))}")
        if isinstance(error, RunStop):
            lines.append(f"stmt = {scalar(error.stmt)}")
            lines.append(f"time = {scalar(error.time)}")
    else:
        lines.append(f"message = {scalar(neutral(str(error), directories))}")
    return lines


def warning_lines(warnings, directories: tuple[str, ...]) -> list[str]:
    lines = [f"warnings : {len(warnings)} items"]
    for k, w in enumerate(warnings):
        span = None if w.span is None else (w.span.line, w.span.col, w.span.end_col)
        lines.append(f"warnings[{k}] = {scalar((neutral(w.message, directories), span))}")
    return lines


# ---------------------------------------------------------------- running one entry


def overrides_of(options: dict) -> Overrides:
    return Overrides(seed=options.get("seed"), horizon=options.get("horizon"), warmup=options.get("warmup"),
                     arrivals=options.get("arrivals"), sets=tuple(sorted(options.get("sets", {}).items())))


def outcome_lines(path: str, options: dict, directories: tuple[str, ...], engine: str = "fast") -> tuple[str, list[str]]:
    """Load and run ``path`` as `serq-ref run --engine ENGINE` would: (outcome kind, canonical lines)."""
    run = engine_run(engine)
    try:
        overrides = overrides_of(options)
        loaded = load(path, overrides, "run")
        cap = options.get("horizon_cap")
        if cap is not None and loaded.program.horizon > cap:
            loaded = load(path, dataclasses.replace(overrides, horizon=float(cap)), "run")
        lines = [f"horizon_run = {scalar(loaded.program.horizon)}"] if cap is not None else []
        lines += warning_lines(loaded.warnings, directories)
        result = run(loaded.program, base_dir=loaded.base_dir)
    except (ProgramError, RunError, LimitError, UsageError) as error:
        return type(error).__name__, error_lines(error, directories)
    except Exception as error:  # a bug of serq-ref: digested too, and reported
        return f"bug:{type(error).__name__}", error_lines(error, directories)
    flatten(result, "result", lines)
    return "result", lines


def run_entry(entry: dict, engine: str = "fast") -> Outcome:
    options = entry.get("options", {})
    started = time.perf_counter()
    if "path" in entry:
        kind, lines = outcome_lines(str(ROOT / entry["path"]), options, ("", str(ROOT)), engine)
    else:
        with tempfile.TemporaryDirectory(prefix="serq-digest-") as directory:
            for name, content in options.get("files", {}).items():
                (Path(directory) / name).write_text(content, encoding="utf-8")
            path = Path(directory) / PROGRAM_FILE
            path.write_text(entry["source"], encoding="utf-8")
            kind, lines = outcome_lines(str(path), options, (os.path.abspath(directory), str(ROOT)), engine)
    seconds = time.perf_counter() - started
    text = "\n".join([f"outcome = {kind}"] + lines) + "\n"
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:PREFIX]
    return Outcome(entry["name"], digest, kind, text, seconds)


# ---------------------------------------------------------------- the corpus and the expected file


def read_corpus(path: Path = CORPUS) -> list[dict]:
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    names = [e["name"] for e in entries]
    if len(set(names)) != len(names):
        raise SystemExit("corpus.jsonl names a program twice")
    return entries


def total_of(lines: list[str]) -> str:
    return hashlib.sha256("".join(line + "\n" for line in lines).encode("utf-8")).hexdigest()


def expected_text(outcomes: list[Outcome]) -> str:
    lines = [o.line() for o in outcomes]
    return "".join(line + "\n" for line in lines) + f"TOTAL {total_of(lines)}\n"


def read_expected(path: Path = EXPECTED) -> tuple[dict[str, str], str | None]:
    """{name: "HASH OUTCOME"}, and the recorded TOTAL."""
    table, total = {}, None
    if not path.is_file():
        return table, total
    for line in path.read_text(encoding="utf-8").splitlines():
        name, _, rest = line.partition(" ")
        if name == "TOTAL":
            total = rest
        elif name:
            table[name] = rest
    return table, total


def compare(outcomes: list[Outcome], expected: dict[str, str], whole: bool) -> list[str]:
    """The differences, one line each ("changed NAME: was ..., now ..."); empty when all agree."""
    problems = []
    for o in outcomes:
        now = f"{o.digest} {o.kind}"
        was = expected.get(o.name)
        if was is None:
            problems.append(f"new      {o.name}: {now} (not in expected.txt)")
        elif was != now:
            problems.append(f"changed  {o.name}: was {was}, now {now}")
    if whole:
        ran = {o.name for o in outcomes}
        problems += [f"missing  {name}: in expected.txt, not in the corpus" for name in expected if name not in ran]
    return problems


def run_all(entries: list[dict], progress: bool = False, engine: str = "fast") -> list[Outcome]:
    outcomes = []
    for k, entry in enumerate(entries):
        outcomes.append(run_entry(entry, engine))
        if progress and (k + 1) % 50 == 0:
            print(f"  {k + 1}/{len(entries)}", file=sys.stderr, flush=True)
    return outcomes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Run the digest corpus and compare its results with expected.txt.")
    parser.add_argument("--update", action="store_true", help="rewrite expected.txt from this run (the whole corpus)")
    parser.add_argument("--only", action="append", metavar="NAME", help="run only this program (repeatable)")
    parser.add_argument("--show", action="store_true", help="print the canonical text of each program run")
    parser.add_argument("--reverse", action="store_true", help="run the corpus in reverse order (a check that "
                        "no result depends on what ran before it in the process)")
    parser.add_argument("--engine", choices=ENGINES, default="fast",
                        help="the engine that runs the corpus (both must give expected.txt). Default: fast")
    parser.add_argument("--progress", action="store_true", help="a count on standard error every 50 programs")
    args = parser.parse_args(argv)

    entries = read_corpus()
    if args.only:
        by_name = {e["name"]: e for e in entries}
        unknown = [n for n in args.only if n not in by_name]
        if unknown:
            print(f"not in the corpus: {', '.join(unknown)}", file=sys.stderr)
            return 2
        if args.update:
            print("--update rewrites the whole file: run it without --only", file=sys.stderr)
            return 2
        entries = [by_name[n] for n in args.only]
    order = list(reversed(entries)) if args.reverse else entries

    started = time.perf_counter()
    outcomes = run_all(order, args.progress, args.engine)
    wall = time.perf_counter() - started
    if args.reverse:
        outcomes.reverse()

    if args.show:
        for o in outcomes:
            print(f"== {o.name} {o.digest} {o.kind}")
            print(o.text, end="")
    kinds: dict[str, int] = {}
    for o in outcomes:
        kinds[o.kind] = kinds.get(o.kind, 0) + 1
    import semantics

    engine = os.path.relpath(os.path.dirname(semantics.__file__))
    print(f"{len(outcomes)} programs in {wall:.1f} s (engine: {engine}): "
          + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
    for o in outcomes:
        if o.kind == "skipped":
            print(f"  skipped {o.name}: {o.text.splitlines()[-1].partition(' = ')[2]}")
        elif o.kind.startswith("bug:"):
            print(f"  BUG {o.name}: {o.kind} (an exception outside serq-ref's closed set of errors)")
    slowest = sorted(outcomes, key=lambda o: -o.seconds)[:3]
    print("  slowest: " + ", ".join(f"{o.name} {o.seconds:.2f} s" for o in slowest))

    if args.update:
        text = expected_text(outcomes)
        EXPECTED.write_text(text, encoding="utf-8")
        print(f"wrote {EXPECTED.relative_to(ROOT)}: {text.splitlines()[-1]}")
        return 0

    expected, total = read_expected()
    problems = compare(outcomes, expected, whole=not args.only)
    if not args.only:
        now_total = total_of([o.line() for o in outcomes])
        print(f"TOTAL {now_total} ({'the recorded one' if now_total == total else f'recorded: {total}'})")
    if problems:
        print(f"{len(problems)} program(s) differ from expected.txt:")
        for p in problems:
            print("  " + p)
        return 1
    print("every result is the recorded one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
