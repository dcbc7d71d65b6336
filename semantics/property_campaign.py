"""``serq-ref property campaign NAME [--examples N] [--seed S] [--cases I,J,...]
[--report FILE] [--workers N | --ray ADDRESS|auto] [--resume FILE]``: a property
campaign's cases on worker processes or a Ray cluster (issue 21 §2;
docs/campaigns.md, "The property campaigns on workers and Ray").

The campaigns are tests/property_campaigns.py's (``properties``: the
invariants, settle, the trace and the IR round trip of tests/test_properties.py
on tests/strategies.py's programs; ``warnings``: tests/test_warning_property.py's
property on tests/warning_programs.py's). Case ``S/I`` is the program drawn
from the seeded stream ``"S/I"``, judged alone; the cases are those of
``semantics.workers.run_cases``, so the results come back in case order and
what the command prints, and the ``--report`` it writes, are the same bytes
with one process, N workers or a cluster. A case whose property does not hold
is listed with its label and program, and the command exits 1; ``--cases I``
draws it again alone.

The campaigns draw with the test suite's generators, so the command needs the
source tree's tests/ directory and the ``test`` extra (Hypothesis): a usage
error says so when either is missing. This module imports neither until a
campaign runs.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import sys
from typing import Any

from .arguments import positive, whole
from .errors import UsageError

#: the campaigns, named here so that the parser needs no import of the test tree (tests/property_campaigns.py
#: has each one's property; a test checks the two lists agree)
NAMES = ("properties", "warnings")
#: the examples a campaign runs without --examples
DEFAULT_EXAMPLES = 100

USAGE = ("usage: serq-ref property campaign NAME [--examples N] [--seed S] [--cases I,J,...] [--report FILE] "
         "[--workers N | --ray ADDRESS|auto] [--resume FILE]")


def add_parser(commands) -> None:
    p = commands.add_parser("property", help="run a property campaign's generated programs on worker processes or a "
                                             "Ray cluster (docs/campaigns.md)")
    p.add_argument("verb", metavar="campaign", choices=("campaign",), help="the one verb: campaign")
    p.add_argument("name", metavar="NAME", choices=NAMES,
                   help="the campaign: properties (tests/test_properties.py's invariants on every rule) or warnings "
                        "(tests/test_warning_property.py's no false warning, no missed fault)")
    p.add_argument("--examples", type=positive, metavar="N",
                   help=f"the cases 0 to N - 1 of the seed. Default: {DEFAULT_EXAMPLES}")
    p.add_argument("--seed", type=whole, default=1, metavar="S",
                   help="the seed: case I is the program drawn from the stream \"S/I\". Default: 1")
    p.add_argument("--cases", type=case_list, metavar="I,J,...",
                   help="only these cases (indices, ranges I-J), in this order: a failure drawn again alone. "
                        "Default: 0 to N - 1")
    p.add_argument("--report", metavar="FILE",
                   help="also write the record as JSON to FILE: the counts, every failure, each case's result's "
                        "digest. Default: none")
    from .workers import add_arguments

    add_arguments(p)


def case_list(text: str) -> tuple[int, ...]:
    """``I,J,...``: indices and ranges ``I-J`` (both ends in), in order, each once."""
    items: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        low, dash, high = part.partition("-")
        if dash and low.isdigit() and high.isdigit():
            if int(high) < int(low):
                raise argparse.ArgumentTypeError(f"{part}: a range goes up")
            if int(high) - int(low) >= 10_000_000:
                raise argparse.ArgumentTypeError(f"{part}: a range of at most ten million cases")
            items += range(int(low), int(high) + 1)
        elif part.isdigit():
            items.append(int(part))
        else:
            raise argparse.ArgumentTypeError(f"{part!r}: an index or a range I-J")
    if not items:
        raise argparse.ArgumentTypeError("no case named")
    return tuple(dict.fromkeys(items))


def tests_directory() -> str:
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")


def campaigns():
    """tests/property_campaigns.py, the tests directory put on the path first (a worker process or a Ray worker
    imports it through here, so it needs no PYTHONPATH of its own)."""
    directory = tests_directory()
    if not os.path.isfile(os.path.join(directory, "property_campaigns.py")):
        raise UsageError("property campaigns draw with the test suite's generators: they need the source tree's "
                         f"tests/ directory, and {directory} has no property_campaigns.py")
    if directory not in sys.path:
        sys.path.insert(0, directory)
    try:
        return importlib.import_module("property_campaigns")
    except ImportError as e:
        raise UsageError(f"property campaigns need the test extra ({e.name or e}): "
                         "python3 -m pip install -e '.[test]'") from None


def run_case(name: str, seed: int, index: int) -> dict:
    """Case ``seed/index`` of campaign ``name`` (a task of ``semantics.workers.run_cases``)."""
    return campaigns().case(name, seed, index)


def run(name: str, seed: int, indices: tuple[int, ...], *, workers: int = 1, ray: str | None = None,
        resume: str | None = None, progress=None) -> dict:
    """The record of the cases ``indices`` of campaign ``name``: what the campaign's summary counts over them
    (in case order), the failures with their labels and programs, and each case's result's digest."""
    from . import SERQ_VERSION
    from .workers import Journal, fingerprint, run_cases

    module = campaigns()
    if tuple(module.CAMPAIGNS) != NAMES:
        raise RuntimeError(f"the campaigns {tuple(module.CAMPAIGNS)} are not the command's {NAMES}")
    journal = None
    if resume is not None:
        journal = Journal(resume, fingerprint("property campaign", name, seed, list(indices), SERQ_VERSION),
                          len(indices))
    labels = [f"property {name} {seed}/{i}" for i in indices]
    results: list[dict] = []
    outcomes = run_cases(functools.partial(run_case, name, seed), list(indices), workers=workers, ray=ray,
                         progress=progress, journal=journal, labels=labels)
    try:
        results.extend(outcomes)
    finally:
        outcomes.close()
        if journal is not None:
            journal.close()
    failures = [{"case": i, "failure": r["failure"], **({"program": r["program"]} if "program" in r else {})}
                for i, r in zip(indices, results) if r["outcome"] == "failed"]
    record: dict[str, Any] = {"campaign": name, "seed": seed, "examples": len(indices)}
    if indices != tuple(range(len(indices))):
        record["cases"] = list(indices)
    record["failed"] = len(failures)
    record.update(module.CAMPAIGNS[name].summary(results))
    record["failures"] = failures
    record["digests"] = [module.digest(r) for r in results]
    return record


def format_record(record: dict) -> str:
    """What the command prints: the outcomes, the counts that say what the programs did, the features never
    drawn, then each failure with its label, message and program."""
    name, seed = record["campaign"], record["seed"]
    lines = [f"property campaign {name}, seed {seed}: {record['examples']:,} cases, {record['failed']:,} failed"]
    lines.append("  outcomes: " + (", ".join(f"{k} {n:,}" for k, n in record["outcomes"].items()) or "none"))
    if "rules_checked" in record:
        lines.append(f"  {record['rules_checked']:,} applied rules, each followed by RunInvariants")
    if "runs_with" in record:
        lines.append("  runs with: " + (", ".join(f"{k} {n:,}" for k, n in record["runs_with"].items()) or "none"))
    if "counts" in record:
        for key, n in record["counts"].items():
            lines.append(f"  {key}: {n:,}")
    never = [f for f, n in record["features"].items() if not n]
    seen = sorted((n, f) for f, n in record["features"].items() if n)
    if seen:
        lines.append("  features: " + f"{len(seen)} drawn, the rarest " + ", ".join(f"{f} {n:,}" for n, f in seen[:5])
                     + (f"; never drawn: {', '.join(never)}" if never else ""))
    for failure in record["failures"]:
        lines.append(f"FAILED property {name} {seed}/{failure['case']}: {failure['failure']}")
        if "program" in failure:
            lines.extend("    " + line for line in failure["program"].rstrip("\n").split("\n"))
        lines.append(f"  again: serq-ref property campaign {name} --seed {seed} --cases {failure['case']}")
    return "\n".join(lines) + "\n"


def command(args: argparse.Namespace) -> int:
    from .progress import CaseProgress

    if args.cases is not None and args.examples is not None:
        raise UsageError("--cases and --examples both name the cases: give one")
    indices = args.cases if args.cases is not None else tuple(range(args.examples or DEFAULT_EXAMPLES))
    campaigns()  # the test tree and Hypothesis, or a usage error before any case
    with CaseProgress(len(indices), f"property campaign {args.name}", unit="program") as progress:
        try:
            record = run(args.name, args.seed, indices, workers=args.workers, ray=args.ray, resume=args.resume,
                         progress=progress)
        except UsageError as e:
            raise UsageError(f"{e.message}\n{USAGE}") from None
    if args.report:
        try:
            with open(args.report, "w", encoding="utf-8") as f:
                f.write(json.dumps(record, indent=1) + "\n")
        except OSError as e:
            raise UsageError(f"--report {args.report}: cannot write it: {e.strerror}") from None
    sys.stdout.write(format_record(record))
    return 1 if record["failed"] else 0
