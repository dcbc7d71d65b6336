"""``serq-ref peer …``: serq-ref against pyserq, the serQ reference
implementation (docs/peer.md).

    serq-ref peer FILE [--seed S] [--horizon H] [--warmup W] [--arrivals N] [--set NAME=VALUE]
    serq-ref peer check DIR [DIR ...]
    serq-ref peer campaign N --seed S [--report FILE]

``peer FILE`` exits 0 when the engines agree, 1 when they differ (or a
program error), 2 on bad usage or without pyserq. ``peer check`` exits 0 when
no program failed (skipped ones and known divergences do not fail), 1
otherwise. ``campaign`` exits 0 when every disagreement is attributed to a
known divergence, 1 when some are not.

semantics/cli.py registers the subcommand (``add_parser``) and runs it
(``command``); pyserq is imported only when a program runs on it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from semantics.arguments import whole
from semantics.cli_common import overrides, print_warnings, program_arguments, with_statement_span
from semantics.errors import SerqError, UsageError
from semantics.workers import add_arguments as add_worker_arguments


def add_parser(commands, parser_class, registry: dict) -> None:
    """Register ``peer`` on the main parser's subcommands (its options are
    ``run``'s, from ``cli_common.program_arguments``; its first argument is a program
    FILE, or one of the verbs ``check``, ``campaign``) and its command in
    ``registry`` (semantics/cli.py's COMMANDS)."""
    del parser_class  # peer has no subparsers of its own: `check` and `campaign` are read from FILE
    p = commands.add_parser("peer", help="run a program on serq-ref and on pyserq (the reference implementation) "
                                         "and compare; `peer check DIR`, `peer campaign N --seed S`")
    program_arguments(p)
    p.add_argument("more", nargs="*", metavar="ARG",
                   help="after `check`: the directories; after `campaign`: the number of programs")
    p.add_argument("--report", metavar="FILE",
                   help="campaign: also write the results as JSON to FILE (docs/data/peer_campaign.json's format)")
    add_worker_arguments(p)  # campaign: the programs on processes or a Ray cluster, a journal to resume from
    registry["peer"] = command


def _pyserq_or_usage() -> None:
    from oracle.peer import INSTALL_HINT

    try:
        import pyserq  # noqa: F401 - only whether it is there
    except ImportError:
        raise UsageError(INSTALL_HINT) from None


def command(args: argparse.Namespace) -> int:
    if args.file == "check":
        return _check(args)
    if args.file == "campaign":
        return _campaign(args)
    if args.more:
        raise UsageError(f"peer FILE takes one program; found also {' '.join(args.more)}\n"
                         "usage: serq-ref peer FILE [options] | peer check DIR ... | peer campaign N --seed S")
    if args.report:
        raise UsageError("--report applies to `peer campaign`")
    if args.workers != 1 or args.ray is not None or args.resume is not None:
        raise UsageError("--workers, --ray and --resume apply to `peer campaign`")
    return _one(args)


def _one(args) -> int:
    from oracle import peer
    from semantics.pipeline import load

    _pyserq_or_usage()
    loaded = load(args.file, overrides(args), "run")
    print_warnings(loaded)
    drawn = peer.draws(loaded.program)
    if drawn:
        print(f"note: the program draws ({', '.join(drawn)}); the two engines' random streams differ, so "
              "their figures are compared as they are and need not agree")
    if continues(loaded.program):
        raise UsageError(f"{args.file}: a step stage has `self preemption continue` or `schedule ahead`, which "
                         "pyserq does not have (its pass ends when a grower preempts itself, and it applies an "
                         "iteration before it forms the next); a program of examples/lib/vllm.sq runs under those "
                         "rules with --set older_rule=1 --set async_scheduling=0")
    here = with_statement_span(loaded, lambda: peer.figures_here(loaded.program, loaded.base_dir))
    try:
        there = peer.figures_on_pyserq(loaded.program, loaded.base_dir)
    except ValueError as e:
        print(f"pyserq refuses or stops the program: {str(e).splitlines()[0]}")
        return 1
    lines = peer.differences(here, there)
    if not lines:
        print(f"agree: {_summary(here)}")
        return 0
    print(f"differ in {len(lines)} figure(s):")
    for line in lines:
        print(f"  {line}")
    if not drawn:
        known = _attribute(loaded.program, loaded.base_dir, tuple(lines))
        if known is not None:
            print(f"known divergence {known.id}: {known.title} (docs/divergences.md; without that feature the "
                  "engines agree)")
    return 1


def _attribute(program, base_dir: str, lines: tuple[str, ...]):
    from oracle import peer, peer_known

    def differ(candidate) -> tuple[str, ...]:
        return tuple(peer.differences(peer.figures_here(candidate, base_dir),
                                      peer.figures_on_pyserq(candidate, base_dir)))

    return peer_known.attribute(program, differ, lines)


def _summary(figures) -> str:
    samples = sum(len(rows) for per in figures.observations.values() for rows in per.values())
    return (f"{samples} observation sample(s) of {len(figures.observations)} observation(s), "
            f"{len(figures.pools)} pool(s), {len(figures.stages)} stage(s)")


def programs_under(directory: str) -> list[str]:
    """Every .sq and .ir.json file under ``directory``, sorted by path."""
    found = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in files:
            if name.endswith(".sq") or name.endswith(".ir.json"):
                found.append(os.path.join(root, name))
    return sorted(found)


def check_one(path: str) -> tuple[str, str]:
    """(verdict, what): verdict passed, FAILED, known or skipped."""
    from oracle import peer
    from semantics.pipeline import Overrides, load

    try:
        loaded = load(path, Overrides(), "run")
    except SerqError as e:
        reason = str(e).splitlines()[0]
        if "no horizon" in reason:
            return "skipped", "no horizon (a library)"
        return "FAILED", f"does not load: {reason}"
    drawn = peer.draws(loaded.program)
    if drawn:
        return "skipped", f"draws ({', '.join(drawn)})"
    if any(p.share_prefixes for p in loaded.program.pools):
        return "skipped", ("shares prefixes across requests (pyserq's cache is a session's own: "
                           "docs/design/shared-prefixes.md)")
    if any(p.groups for p in loaded.program.pools):
        return "skipped", ("KV cache groups (pyserq's pool is one full-attention group: "
                           "docs/design/sliding-window.md)")
    note = ""
    if continues(loaded.program):
        # pyserq has the seed's rule only (the pass ends when a grower preempts itself); a program of
        # examples/lib/vllm.sq chooses it with --set older_rule=1, and is compared under it, said so
        # (and the synchronous engine: --set async_scheduling=0, where the program has that switch)
        loaded = None
        for sets in ((("older_rule", 1.0), ("async_scheduling", 0.0)), (("older_rule", 1.0),)):
            try:
                loaded = load(path, Overrides(sets=sets), "run") if path.endswith(".sq") else None
                break
            except SerqError:
                loaded = None
        if loaded is None or continues(loaded.program):
            return "skipped", ("self preemption continue or schedule ahead (pyserq has only the seed's rules: the "
                               "pass ends, an iteration is applied before the next is formed)")
        note = ("with --set older_rule=1 --set async_scheduling=0 (pyserq has only the seed's self-preemption rule "
                "and synchronous engine); " if len(sets) == 2 else
                "with --set older_rule=1 (pyserq has only the seed's self-preemption rule); ")
    try:
        here = peer.figures_here(loaded.program, loaded.base_dir)
    except SerqError as e:
        return "FAILED", f"serq-ref stops: {str(e).splitlines()[0]}"
    try:
        there = peer.figures_on_pyserq(loaded.program, loaded.base_dir)
    except ValueError as e:
        return "FAILED", f"pyserq refuses or stops it: {str(e).splitlines()[0]}"
    lines = peer.differences(here, there)
    if not lines:
        return "passed", note + _summary(here)
    known = _attribute(loaded.program, loaded.base_dir, tuple(lines))
    if known is not None:
        return "known", f"{known.id} ({known.title}); {note}first: {lines[0]}"
    return "FAILED", note + f"{lines[0]}" + (f" (and {len(lines) - 1} more)" if len(lines) > 1 else "")


def continues(program) -> bool:
    """A step stage of ``program`` goes on with its pass after a grower
    preempted itself (``self preemption continue``) or forms an iteration
    before the last one is applied (``schedule ahead``), which pyserq cannot
    run."""
    from semantics import ir

    return any(isinstance(s.kind, ir.Step) and (s.kind.self_preemption != "End" or s.kind.schedule_ahead)
               for s in program.stages)


def _check(args) -> int:
    _pyserq_or_usage()
    if not args.more:
        raise UsageError("peer check needs a DIR\nusage: serq-ref peer check DIR [DIR ...]")
    paths = []
    for directory in args.more:
        if not os.path.isdir(directory):
            raise UsageError(f"not a directory: {directory}")
        paths += programs_under(directory)
    from semantics.progress import CaseProgress

    counts = {"passed": 0, "FAILED": 0, "known": 0, "skipped": 0}
    with CaseProgress(len(paths), "peer check", unit="program") as bar:
        for path in paths:
            verdict, what = check_one(path)
            counts[verdict] += 1
            label = {"known": "known divergence", "skipped": "skipped"}.get(verdict, verdict)
            bar.print(f"{path}: {label}: {what}" if verdict != "passed" else f"{path}: passed ({what})")
            bar.advance()
    print(f"{counts['passed']} passed, {counts['FAILED']} failed"
          f" ({counts['known']} known divergence(s), {counts['skipped']} skipped)")
    return 1 if counts["FAILED"] else 0


def _campaign(args) -> int:
    from oracle.peer_campaign import campaign

    _pyserq_or_usage()
    if len(args.more) != 1:
        raise UsageError("usage: serq-ref peer campaign N --seed S [--report FILE]")
    try:
        count = whole(args.more[0])
    except argparse.ArgumentTypeError as e:
        raise UsageError(f"campaign N: {e}") from None
    seed = 1 if args.seed is None else args.seed

    from semantics.progress import CaseProgress

    with CaseProgress(count, "peer campaign", unit="program") as bar:
        result = campaign(seed, count, workers=args.workers, ray=args.ray, resume=args.resume, bar=bar)
    print(f"{count} programs (seed {seed}): " + ", ".join(f"{n} {k}" for k, n in result["outcomes"].items()))
    for key, c in result["classes"].items():
        print(f"  {key}: {c['count']} ({c['title']})")
    if args.report:
        try:
            with open(args.report, "w", encoding="utf-8") as f:
                json.dump(result, f, indent=1, sort_keys=False)
                f.write("\n")
        except OSError as e:
            raise UsageError(f"cannot write {args.report}: {e.strerror}") from None
    unexplained = sum(c["count"] for key, c in result["classes"].items() if not key.startswith("P"))
    return 1 if unexplained else 0
