"""What every command that takes a program shares, on the main command line
(``semantics.cli``: check, ir, run, trace) and on its sub-command lines
(``oracle.peer_cli``: peer): the program argument and the run settings'
options, the overrides they make, the warnings printed with their source
line, a run-time error given its statement's source span.

Below every command line, so that the main one may register the others'
subcommands without their importing it back.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import textfile
from .arguments import arrival_count, assignment, horizon, warmup, whole
from .errors import RunStop, format_diagnostic
from .pipeline import Loaded, Overrides


def program_arguments(p: argparse.ArgumentParser, optional_file: bool = False) -> None:
    """A command's program FILE and the run settings' options (``--set``, ``--horizon``, ``--warmup``,
    ``--seed``, ``--arrivals``)."""
    p.add_argument("file", metavar="FILE", nargs="?" if optional_file else None,
                   help="the program: a .sq source or a .json IR file; - reads a program (either) from "
                        "standard input")
    p.add_argument("--set", dest="sets", action="append", type=assignment, default=[], metavar="NAME=VALUE",
                   help="replace the value of the constant `let NAME = …;` (a .sq program only; repeatable). "
                        "Default: the file's values")
    p.add_argument("--horizon", type=horizon, metavar="T",
                   help="the run's deadline, a positive time (inf with an arrival limit: until the arrivals "
                        "drain); overrides `run { horizon T; }`. Default: the file's; a program without one "
                        "needs this option to run or trace")
    p.add_argument("--warmup", type=warmup, metavar="T",
                   help="the time the statistics start, 0 or later and before the horizon; overrides "
                        "`run { warmup T; }`. Default: the file's, else 0")
    p.add_argument("--seed", type=whole, metavar="N",
                   help="the random seed, a whole number of 0 or more, read exactly; overrides "
                        "`run { seed N; }`. Default: the file's, else 1")
    p.add_argument("--arrivals", type=arrival_count, metavar="N",
                   help="exactly N arrivals of an open workload, then the run drains them and ends; "
                        "overrides `run { arrivals N; }`. Default: the file's, else no limit (the run ends at "
                        "the horizon)")


#: The engines a run can take (--engine): the fast one (semantics/fast), the default, and the
#: definition (semantics/smallstep), which gives the same results byte for byte, slower.
ENGINES = ("fast", "definition")


def engine_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=ENGINES, default="fast",
                   help="which engine runs the program: fast (semantics/fast) or definition (the small-step rules of "
                        "semantics/smallstep, one by one); the same results byte for byte. Default: fast")


def engine_run(name: str):
    """The run function (program, *, base_dir, progress) -> RunResult of engine ``name`` (ENGINES)."""
    if name == "definition":
        from .smallstep.driver import run
    else:
        from .fast import run
    return run


def overrides(args: argparse.Namespace) -> Overrides:
    """The run settings given by ``program_arguments``' options."""
    return Overrides(seed=args.seed, horizon=args.horizon, warmup=args.warmup, arrivals=args.arrivals,
                     sets=tuple(args.sets))


def print_warnings(loaded: Loaded) -> None:
    for w in loaded.warnings:
        source = source_of(w.span.file) if w.span else None
        print(format_diagnostic("warning", w.message, w.span, w.file, source), file=sys.stderr)


def with_statement_span(loaded: Loaded, action):
    """Run ``action``; a RunError or a LimitError (a RunStop) gets its statement's source span."""
    try:
        return action()
    except RunStop as e:
        trace = loaded.smap.trace
        if e.in_trace and trace is not None:  # located in the trace file, and where the program names it
            e.notes = tuple(e.notes) + (f"{trace.file}:{trace.line}:{trace.col}: the program reads the trace "
                                        "here",)
            if e.span is None:
                e.file = e.file or loaded.smap.file
            raise
        if e.span is None and e.stmt is not None:
            e.span = loaded.smap.stmt(*e.stmt)
        if e.span is None:
            e.file = loaded.smap.file
            if e.stmt is not None:
                e.message = f"{e.message} (statement blocks[{e.stmt[0]}][{e.stmt[1]}])"
        if e.time is not None:
            e.message = f"{e.message} (at time {e.time:g})"
        raise


def source_of(path: str | None) -> str | None:
    """The text of the file an error or a warning is in, for the source line under it; None when there is
    none to show."""
    if path == textfile.STDIN:
        return textfile.stdin_text
    if path is None or not os.path.isfile(path):
        return None  # a campaign case's label (FILE.jsonl#INDEX) or a file gone: the location alone
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None
