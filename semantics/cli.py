"""The command line: ``serq-ref check | ir | run | trace``.

Exit codes: 0 success; 1 a bad program (syntax, link, IR format, run-time
error); 2 bad usage; 3 a bug of serq-ref itself (reported in one line, with
a request to file it, never as a raw traceback unless SERQ_REF_DEBUG is set).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from . import SERQ_VERSION
from .errors import ProgramErrors, SerqError, UsageError, render

# Each command imports what it needs when it runs, and the parser of the command given is the only one built
# (build_parser): `serq-ref oracle replay` imports neither the program loader nor the sweep, the campaigns, peer
# or lean.

EXIT_OK, EXIT_PROGRAM, EXIT_USAGE, EXIT_BUG = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors as UsageError (exit 2, a `usage:` line)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # the innermost command's parser, for the usage line under an error found after parsing (a subcommand's
        # defaults override its parent's: `oracle replay` leaves its own)
        self.set_defaults(usage_parser=self)

    def error(self, message: str):  # noqa: D102 - argparse's hook
        raise UsageError(f"{message}\n{self.format_usage().rstrip()}")


#: How many rules `serq-ref trace` prints without --steps.
DEFAULT_TRACE_STEPS = 10_000
#: --steps not given (its default depends on --coverage)
_UNSET = object()


def _steps(text: str) -> int | None:
    from .arguments import whole

    if text == "all":
        return None
    value = whole(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1, or `all`")
    return value


def build_parser(command: str | None = None, subcommand: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every command's (``serq-ref --help`` lists them in PARSERS' order), or, given
    ``command`` (one of PARSERS), that one's alone, and under ``oracle`` given ``subcommand`` (one of
    oracle.cli.PARSERS), that one's alone: what parses a command line that begins with their names, the other
    commands' modules not imported and their parsers not built (argparse's cost is per parser, gettext's
    lookups among it). The usage lines, options and errors of the parsers built are the same either way."""
    parser = _Parser(prog="serq-ref", description="The reference semantics of serQ.")
    parser.add_argument("--version", action="version", version=f"serq-ref {SERQ_VERSION}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    for name, add in PARSERS.items():
        if command is None or name == command:
            if name == "oracle":
                _add_oracle(commands, subcommand)
            else:
                add(commands)
    return parser


def _add_check(commands) -> None:
    from .cli_common import program_arguments

    p = commands.add_parser("check", help="compile and link; print a one-line summary or the errors")
    program_arguments(p)


def _add_ir(commands) -> None:
    from .cli_common import program_arguments

    p = commands.add_parser("ir", help="print the IR (version 13) of a program")
    program_arguments(p)


def _add_run(commands) -> None:
    from .cli_common import engine_argument, program_arguments

    p = commands.add_parser("run", help="simulate a program and report")
    program_arguments(p)
    p.add_argument("--json", action="store_true",
                   help="print the report as JSON (docs/reports.md) instead of text. Default: text")
    p.add_argument("--dump", metavar="DIR",
                   help="also write every observation and gauge as CSV files under DIR, created if needed "
                        "(docs/reports.md). Default: no files")
    engine_argument(p)


def _add_trace(commands) -> None:
    from .arguments import number
    from .cli_common import program_arguments

    p = commands.add_parser("trace", help="print the step trace: one JSON line per rule applied")
    program_arguments(p, optional_file=True)
    p.add_argument("--rules", action="store_true",
                   help="list every rule of the semantics (its name, meaning and the seed sentence it implements) "
                        "instead of a trace; takes no FILE")
    p.add_argument("--steps", type=_steps, default=_UNSET, metavar="N",
                   help=f"print at most N rules, or every one with `--steps all`. Default: {DEFAULT_TRACE_STEPS:,} "
                        "(a run's trace can be millions of lines; a note says when it stopped there); with "
                        "--coverage: all")
    p.add_argument("--from", dest="from_time", type=number, default=0.0, metavar="T",
                   help="print only the rules applied at time T or later (the run itself starts at 0). Default: 0")
    p.add_argument("--coverage", action="store_true",
                   help="instead of the records, print how often each rule of the semantics applied in the run "
                        "(within --steps and --from) and which never did (docs/step-trace.md, Coverage). Default: off, "
                        "the records are printed")


def _add_fmt(commands) -> None:
    p = commands.add_parser("fmt", help="print a .sq program in the canonical layout, comments kept "
                                        "(docs/syntax.md)")
    p.add_argument("files", metavar="FILE", nargs="+",
                   help="a .sq program (it must parse; it need not compile: a library formats too); - reads one "
                        "from standard input. Several FILEs with --check or --in-place")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="write nothing: name each FILE not in the canonical layout (`would reformat FILE`) and "
                           "exit 1 if there is one. Default: print the canonical text")
    mode.add_argument("-i", "--in-place", action="store_true",
                      help="rewrite each FILE not in the canonical layout (`reformatted FILE` on standard error). "
                           "Default: print the canonical text")


def _add_lean(commands) -> None:
    from lean_bridge import cli as lean_cli

    lean_cli.add_parser(commands)


def _add_sweep(commands) -> None:
    from . import sweep  # serq-ref sweep: a program over a cross product of settings (docs/sweep.md)

    sweep.add_parser(commands)


def _add_property(commands) -> None:
    from . import property_campaign  # serq-ref property campaign: the property campaigns on workers (docs/campaigns.md)

    property_campaign.add_parser(commands)


def _add_oracle(commands, subcommand: str | None = None) -> None:
    from oracle import cli as oracle_cli

    oracle_cli.add_parser(commands, _Parser, subcommand if subcommand in oracle_cli.PARSERS else None)


def _add_peer(commands) -> None:
    from oracle import peer_cli  # serq-ref peer: the reference implementation, imported when a program runs on it

    peer_cli.add_parser(commands, _Parser, COMMANDS)


#: Each command's parser, registered on the main parser's subcommands, in the order `serq-ref --help` lists them.
PARSERS = {"check": _add_check, "ir": _add_ir, "run": _add_run, "trace": _add_trace, "fmt": _add_fmt,
           "lean": _add_lean, "sweep": _add_sweep, "property": _add_property, "oracle": _add_oracle, "peer": _add_peer}


def command_check(args: argparse.Namespace) -> int:
    from . import ir
    from .cli_common import overrides, print_warnings
    from .pipeline import load

    loaded = load(args.file, overrides(args), "check")
    print_warnings(loaded)
    p = loaded.program
    library = ""
    if isinstance(p.arrival, ir.NoArrival) and not p.blocks[p.session]:  # nothing runs: say what was checked
        empty = not (p.pools or p.stages or p.gauges or len(p.attrs) > len(ir.BUILTIN_ATTRS))
        library = ("; an empty program: nothing to run" if empty else
                   "; a library (no workload, no session): definitions only, nothing to run")
    print(f"OK: {len(p.pools)} pool(s), {len(p.stages)} stage(s), {len(p.attrs)} attribute(s), {len(p.blocks)} "
          f"block(s){library}")
    return EXIT_OK


def command_ir(args: argparse.Namespace) -> int:
    from . import codec
    from .cli_common import overrides, print_warnings
    from .pipeline import load, validate_schema

    loaded = load(args.file, overrides(args), "ir")
    print_warnings(loaded)
    validate_schema(codec.encode_program(loaded.program), args.file)  # what other tools will read
    sys.stdout.write(codec.dumps(loaded.program))
    return EXIT_OK


def command_run(args: argparse.Namespace) -> int:
    from .cli_common import engine_run, overrides, print_warnings, with_statement_span
    from .pipeline import load
    from .report import build_report, check_dump, dumps_json, format_text, write_dump

    run = engine_run(args.engine)
    loaded = load(args.file, overrides(args), "run")
    if args.dump:  # refused before the run, not after a long one
        check_dump(args.dump, loaded.program.observes, tuple(g.name for g in loaded.program.gauges))
    print_warnings(loaded)
    bar = None
    if sys.stderr.isatty():
        from .progress import ProgressBar

        bar = ProgressBar(sys.stderr)
    try:
        result = with_statement_span(loaded, lambda: run(loaded.program, base_dir=loaded.base_dir, progress=bar))
    finally:
        if bar is not None:
            bar.close()
    report = build_report(result)
    sys.stdout.write(dumps_json(report) if args.json else format_text(report))
    if args.dump:
        write_dump(result, args.dump)  # an unwritable DIR is a UsageError of its own
    return EXIT_OK


def command_trace(args: argparse.Namespace) -> int:
    import json

    from .cli_common import overrides, print_warnings, with_statement_span
    from .pipeline import load
    from .smallstep.driver import all_rules, trace
    from .tracefile import header

    if args.rules:
        for rule in all_rules():
            print(f"{rule.name}\n    {rule.meaning}\n    seed: {rule.seed}")
        return EXIT_OK
    if args.file is None:
        raise UsageError("trace needs a FILE (or --rules)\nusage: serq-ref trace FILE [options] | serq-ref trace --rules")
    loaded = load(args.file, overrides(args), "trace")
    print_warnings(loaded)
    steps = args.steps if args.steps is not _UNSET else (None if args.coverage else DEFAULT_TRACE_STEPS)
    records = lambda: trace(loaded.program, base_dir=loaded.base_dir, steps=steps, from_time=args.from_time)
    if args.coverage:
        counts = {rule.name: 0 for rule in all_rules()}

        def count() -> None:
            for step in records():
                counts[step["rule"]] += 1

        with_statement_span(loaded, count)
        sys.stdout.write(format_coverage(counts))
        return EXIT_OK
    printed = 0

    def emit() -> None:
        nonlocal printed
        sys.stdout.write(json.dumps(header(loaded.program, from_time=args.from_time), separators=(",", ":")) + "\n")
        for step in records():
            sys.stdout.write(json.dumps(step, separators=(",", ":")) + "\n")
            printed += 1

    with_statement_span(loaded, emit)
    if steps is not None and printed == steps:
        sys.stdout.flush()
        print(f"serq-ref: the trace stopped after {printed:,} rules (--steps {steps}"
              f"{', the default' if args.steps is _UNSET else ''}); `--steps all` prints every one",
              file=sys.stderr)
    return EXIT_OK


def command_fmt(args: argparse.Namespace) -> int:
    """``serq-ref fmt``: the canonical layout (semantics/syntax/printer.py). Every FILE is read first (a
    missing one is a usage error before anything is written); a FILE that does not parse gets `check`'s
    error and the others are still done; exit 1 if one did not parse or, with --check, is not canonical."""
    from .syntax.printer import format_text
    from .textfile import STDIN, read_stdin, read_text

    if len(args.files) > 1 and not (args.check or args.in_place):
        raise UsageError("fmt prints one FILE; give --check or --in-place for several\n"
                         "usage: serq-ref fmt [--check | -i] FILE...")
    if args.in_place and "-" in args.files:
        raise UsageError("--in-place rewrites files, and standard input (-) is none\n"
                         "usage: serq-ref fmt [--check | -i] FILE...")
    if args.files.count("-") > 1:
        raise UsageError("standard input (-) can be read once")
    for path in args.files:
        if path != "-" and not path.endswith(".sq"):
            raise UsageError(f"{path}: expected a .sq program (or - for standard input); fmt prints the text syntax")
    texts = [(STDIN, read_stdin()) if path == "-" else (path, read_text(path)) for path in args.files]
    status = EXIT_OK
    for path, text in texts:
        try:
            canonical = format_text(text, path)
        except SerqError as e:
            print(render(e, text if e.span is not None and e.span.file == path else None), file=sys.stderr)
            status = EXIT_PROGRAM
            continue
        if args.check:
            if canonical != text:
                print(f"would reformat {path}")
                status = EXIT_PROGRAM
        elif args.in_place:
            if canonical != text:
                try:
                    with open(path, "w", encoding="utf-8", newline="") as f:
                        f.write(canonical)
                except OSError as e:
                    raise UsageError(f"cannot write {path}: {e.strerror}") from None
                print(f"reformatted {path}", file=sys.stderr)
        else:
            sys.stdout.write(canonical)
    return status


def format_coverage(counts: dict[str, int]) -> str:
    """`serq-ref trace --coverage`: every rule with how often it applied (by family, then name), then the
    rules that never did."""
    never = [name for name, n in counts.items() if n == 0]
    width = max(len(f"{n:,}") for n in counts.values())
    lines = [f"{n:>{width},}  {name}" for name, n in counts.items()]
    applied = len(counts) - len(never)
    lines.append(f"{applied} of {len(counts)} rules applied, {sum(counts.values()):,} times in all")
    lines.append(f"never applied ({len(never)}): {', '.join(never)}" if never else "never applied: none")
    return "\n".join(lines) + "\n"


COMMANDS = {"check": command_check, "ir": command_ir, "run": command_run, "trace": command_trace,
            "fmt": command_fmt,
            "lean": lambda args: __import__("lean_bridge.cli", fromlist=["command"]).command(args),
            "oracle": lambda args: __import__("oracle.cli", fromlist=["command"]).command(args),
            "sweep": lambda args: __import__("semantics.sweep", fromlist=["command"]).command(args),
            "property": lambda args: __import__("semantics.property_campaign", fromlist=["command"]).command(args),
            "peer": lambda args: __import__("oracle.peer_cli", fromlist=["command"]).command(args)}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (None: the process's own, ``sys.argv[1:]``); the exit code.

    Called for the process's own command line (the console script, ``python -m semantics``), after which
    the process ends, it freezes what the command left (``gc.freeze``) before it returns: the interpreter's
    last collection at exit would otherwise walk every object of the modules and of the command's values
    (0.027 G instructions of the full trace's oracle replay) to free cycles the process's end frees anyway. serq-ref's commands close the files they write (``with`` blocks, the journal's close),
    so nothing waits on that collection. Called with ``argv`` (the tests, in their process), it leaves the
    collector as it is.

    For the process's own command line the collector's youngest generation is also collected less often
    (``collect_less``)."""
    if argv is None:
        collect_less()
    code = _main(argv)
    if argv is None:
        import gc

        gc.freeze()
    return code


#: the collector's first threshold (net allocations of container objects between two collections of the
#: youngest generation) for the process's own command line; CPython's default is 700
COMMAND_LINE_GEN0 = 100_000


def collect_less() -> None:
    """The collector's youngest generation collected after COMMAND_LINE_GEN0 net allocations, not 700: a
    command's start imports its modules and compiles or loads its program, tens of thousands of functions,
    classes and records that are none of them garbage, and each collection at the default threshold walks
    them again (12 ms of the full trace's oracle replay, 0.34 s: benchmarks/README.md). Cycles are still
    collected, at most that many allocations later; no result depends on when."""
    import gc

    gc.set_threshold(COMMAND_LINE_GEN0)


def _main(argv: Sequence[str] | None) -> int:
    args = None
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        if argv[:1] == ["lean"]:
            # lean reads its arguments with its own parsers (lean_bridge/cli.py); handed over as they are, since
            # argparse gives an argument list that starts with an option (--help, --out X FILE) to no REMAINDER
            args = argparse.Namespace(command="lean", rest=argv[1:])
        else:
            # the parser of the command named, alone (and of the oracle's command named): a command line that
            # names none, or a name that is none, gets every one, for --help's list and an invalid choice's
            named = argv[0] if argv[:1] and argv[0] in PARSERS else None
            args = build_parser(named, argv[1] if named == "oracle" and len(argv) > 1 else None).parse_args(argv)
        return COMMANDS[args.command](args)
    except UsageError as e:
        if e.message.startswith("usage:") or "\nusage:" in e.message:
            print(f"serq-ref: {e.message}", file=sys.stderr)
        else:  # the usage of the command that was given, else the main one's
            leaf = getattr(args, "usage_parser", None)
            usage = leaf.format_usage().rstrip() if leaf is not None else \
                "usage: serq-ref {check,ir,run,trace} FILE [options]"
            print(f"serq-ref: {e.message}\n{usage}", file=sys.stderr)
        return EXIT_USAGE
    except ProgramErrors as e:
        from .cli_common import source_of

        for error in e.errors:
            print(render(error, source_of(error.span.file if error.span else None)), file=sys.stderr)
        print(f"{len(e.errors)} errors", file=sys.stderr)
        return e.exit_code
    except SerqError as e:
        from .cli_common import source_of

        print(render(e, source_of(e.span.file if e.span else None)), file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:
        # the reader went away (`serq-ref trace ... | head`): not an error of ours
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_OK
    except KeyboardInterrupt:
        print("serq-ref: interrupted", file=sys.stderr)
        return 130
    except RecursionError:
        print("serq-ref: error: the program nests too deeply to process", file=sys.stderr)
        return EXIT_PROGRAM
    except Exception as e:  # a bug of ours: one line, never a traceback
        if os.environ.get("SERQ_REF_DEBUG"):
            raise
        print(f"serq-ref: internal error (a bug of serq-ref, please report it): {type(e).__name__}: {e}",
              file=sys.stderr)
        return EXIT_BUG


if __name__ == "__main__":
    sys.exit(main())
