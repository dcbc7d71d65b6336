"""``serq-ref lean …``: the Lean bridge's command line.

    serq-ref lean FILE [--out LEANFILE] [--answer recorded|mirror]    (FILE: also a campaign case FILE.jsonl#INDEX)
    serq-ref lean DIR --out LEANDIR [--module PREFIX]
    serq-ref lean FILE.jsonl --out LEANDIR [--module PREFIX] [--every K] [--limit N]
    serq-ref lean check PATH [PATH …] [--require-interpreter] [--[no-]older-rule]
                        [--every K] [--cases I,J,…] [--variants] [--limit N] [--workers N] [--resume FILE]

PATH: a directory of scenarios or a campaign file (FILE.jsonl).
    serq-ref lean prove [--bound N]

FILE is a scenario (oracle/vllm/NAME.json, oracle/serve/NAME.json) or an IR
file with explicit sessions inside the fragment. semantics/cli.py registers
the subcommand with ``add_parser`` and runs it with ``command``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from semantics.arguments import positive
from semantics.errors import ProgramError, UsageError

USAGE = ("usage: serq-ref lean FILE [--out LEANFILE] [--answer recorded|mirror]\n"
         "       serq-ref lean DIR --out LEANDIR [--module PREFIX]\n"
         "       serq-ref lean FILE.jsonl --out LEANDIR [--module PREFIX] [--every K] [--cases I,J,...] [--limit N]\n"
         "       serq-ref lean check PATH [PATH ...] [--require-interpreter] [--[no-]older-rule]\n"
         "                       [--every K] [--cases I,J,...] [--variants] [--limit N] [--workers N] [--resume FILE]\n"
         "       serq-ref lean prove [--bound N]")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D102 - argparse's hook
        raise UsageError(f"lean: {message}\n{USAGE}")


def add_parser(commands) -> None:
    """Register ``lean`` on the main parser's subcommands."""
    p = commands.add_parser("lean", help="the Lean fragment: theorems of recorded scenarios, the mirror's check, "
                                         "the Z3 proofs", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)


def command(args: argparse.Namespace) -> int:
    rest = list(args.rest)
    if not rest or rest[0] in ("-h", "--help"):
        if not rest:
            raise UsageError(f"lean: what to do?\n{USAGE}")
        print(USAGE)
        return 0
    if rest[0] == "check":
        return command_check(rest[1:])
    if rest[0] == "prove":
        return command_prove(rest[1:])
    return command_emit(rest)


def command_check(argv: list[str]) -> int:
    from .check import Selection, check, report

    p = _Parser(prog="serq-ref lean check", add_help=False)
    p.add_argument("dirs", nargs="+", metavar="PATH")
    p.add_argument("--require-interpreter", action="store_true",
                   help="an interpreter that cannot run a scenario fails the check")
    rule = p.add_mutually_exclusive_group()
    rule.add_argument("--older-rule", dest="older_rule", action="store_true", default=None,
                      help="vLLM 0c87a197's self-preemption rule (a campaign case's answer_older_rule)")
    rule.add_argument("--no-older-rule", dest="older_rule", action="store_false",
                      help="vLLM 0.33.0's rule (default: the rule of the vLLM the corpus was recorded on)")
    p.add_argument("--every", type=int, default=1, metavar="K",
                   help="of a campaign file, every K-th case (by position; default every case)")
    p.add_argument("--cases", default="", metavar="I,J,…", help="of a campaign file, these indices too")
    p.add_argument("--variants", action="store_true",
                   help="of a campaign file, every case whose two self-preemption rules' answers differ too")
    p.add_argument("--limit", type=int, metavar="N", help="of a campaign file, the first N cases chosen")
    p.add_argument("--workers", type=positive, default=1, metavar="N",
                   help="check on N processes of this machine (the output is the same bytes whatever N). "
                        "Default: 1, in this process")
    p.add_argument("--resume", metavar="FILE",
                   help="record each check in FILE as it is done; checks FILE already records (a run stopped "
                        "early, of the same paths and choice) are not run again")
    args = p.parse_args(argv)
    for d in args.dirs:
        if not os.path.isdir(d) and not (d.endswith(".jsonl") and os.path.isfile(d)):
            raise UsageError(f"lean check: {d} is not a directory or a campaign file (FILE.jsonl)")
    if args.every < 1 or (args.limit is not None and args.limit < 0):
        raise UsageError("lean check: --every is at least 1 and --limit at least 0")
    selection = Selection(args.every, _indices(args.cases, "lean check"), args.variants, args.limit)
    from semantics.progress import CaseProgress

    with contextlib.ExitStack() as stack:
        rows = check(args.dirs, args.older_rule, selection,
                     progress=lambda total: stack.enter_context(CaseProgress(total, "lean check", unit="scenario")),
                     workers=args.workers, resume=args.resume)
    lines, failing = report(rows, args.require_interpreter)
    print("\n".join(lines))
    return 1 if failing else 0


def _indices(text: str, command: str) -> frozenset[int]:
    """``--cases I,J,…``: campaign indices."""
    try:
        return frozenset(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"{command}: --cases is a comma-separated list of indices, not {text!r}") from None


def command_prove(argv: list[str]) -> int:
    from . import prove

    p = _Parser(prog="serq-ref lean prove", add_help=False)
    p.add_argument("--bound", type=int, default=4, metavar="N",
                   help="the most sessions, holders and cache entries of a configuration (default 4)")
    args = p.parse_args(argv)
    if args.bound < 1:
        raise UsageError("lean prove: --bound is at least 1")
    results = prove.prove_all(args.bound, echo=lambda line: print(line, flush=True), rules=prove.RULES)
    failed = sum(1 for r in results if not r.proved)
    print(f"{len(results) - failed} proved, {failed} not proved")
    return 1 if failed else 0


def command_emit(argv: list[str]) -> int:
    from . import emit
    from .scenario import load, scenarios_in
    from .check import mirror_answer
    from .mirror.exec import ticks_to_halt

    p = _Parser(prog="serq-ref lean", add_help=False)
    p.add_argument("source", metavar="FILE|DIR")
    p.add_argument("--out", metavar="LEANFILE|LEANDIR")
    p.add_argument("--module", metavar="PREFIX", help="the module prefix of the files written to LEANDIR")
    p.add_argument("--answer", choices=("recorded", "mirror"), default="recorded",
                   help="the theorem's right-hand side: the recorded answer (default) or the mirror's outcome")
    p.add_argument("--every", type=int, default=1, metavar="K",
                   help="of a campaign file, every K-th case (by position; default every case)")
    p.add_argument("--cases", default="", metavar="I,J,…", help="of a campaign file, these indices too")
    p.add_argument("--limit", type=int, metavar="N", help="of a campaign file, the first N cases chosen")
    args = p.parse_args(argv)

    def one(path: str, namespace: str, sc=None) -> str:
        sc = load(path) if sc is None else sc
        program = sc.translation.program
        ticks = ticks_to_halt(program)
        if ticks is None:
            raise ProgramError("the fragment's run of this program does not halt (within a million ticks)", file=path)
        mirror = mirror_answer(program)
        if args.answer == "mirror":
            answer, note = mirror, "The mirror's outcome (lean_bridge.mirror), not a recorded answer"
        elif sc.answer is None:
            raise ProgramError(f"no recorded answer {sc.name}.out.json beside it (write the "
                               f"mirror's outcome with --answer mirror)", file=path)
        else:
            answer = sc.answer
            note = f"The recorded answer ({os.path.basename(sc.answer_path)}, the vLLM scheduler's)"
            if mirror != answer:
                print(f"serq-ref: warning: {path}: the mirror's outcome differs from the recorded answer; the "
                      f"theorem will not be proved", file=sys.stderr)
        source = os.path.join(os.path.basename(os.path.dirname(os.path.abspath(path))), os.path.basename(path))
        if sc.answer_path == sc.path:  # a campaign case: its label names the file and the case
            source = sc.name
            note = "The recorded answer (the campaign file's line, the vLLM scheduler's)"
        return emit.lean_file(sc, namespace, 2 * ticks + 8, source, answer, note)

    if args.source.endswith(".jsonl") and os.path.isfile(args.source):
        return emit_campaign(args, one)

    from oracle.scenario import split_label

    if split_label(args.source) is not None:  # a campaign case by its label, FILE.jsonl#INDEX
        from oracle.check import campaign_case

        from .scenario import continues_for, load_case

        data, recorded = campaign_case(args.source)
        file = split_label(args.source)[0]
        label = f"{os.path.basename(os.path.dirname(os.path.abspath(file)))}/{os.path.basename(args.source)}"
        sc = load_case(label, data, recorded, continues_for(file))
        text = one(label, f"SerqRefOracle.Case{split_label(args.source)[1]}", sc)
        if args.out:
            _write(args.out, text)
        else:
            sys.stdout.write(text)
        return 0

    if os.path.isdir(args.source):
        if not args.out:
            raise UsageError(f"lean: a directory needs --out LEANDIR\n{USAGE}")
        prefix = args.module or emit.module_prefix(args.out)
        os.makedirs(args.out, exist_ok=True)
        modules = []
        for path in scenarios_in(args.source):
            name = emit.camel(os.path.basename(path)[:-5])
            text = one(path, f"{prefix}.{name}")
            _write(os.path.join(args.out, f"{name}.lean"), text)
            modules.append(name)
        if not modules:
            raise UsageError(f"lean: no scenario with a recorded answer (NAME.json beside NAME.out.json) in {args.source}")
        _write(os.path.join(args.out, "All.lean"), emit.all_module(prefix, modules))
        print(f"wrote {len(modules)} theorem file(s) and {prefix}.All to {args.out}")
        return 0
    if not os.path.exists(args.source):
        raise UsageError(f"no such file: {args.source}")
    from .scenario import base_name

    text = one(args.source, f"SerqRefOracle.{emit.camel(base_name(args.source))}")
    if args.out:
        _write(args.out, text)
    else:
        sys.stdout.write(text)
    return 0


def emit_campaign(args: argparse.Namespace, one) -> int:
    """``serq-ref lean FILE.jsonl --out LEANDIR``: one theorem file per chosen
    case inside the fragment (``Case{INDEX}.lean``) and the module importing
    them; the cases the translation refuses are counted on stderr, with the first refusal."""
    from . import emit
    from .check import Selection, _index
    from .scenario import continues_for, load_case
    from .translate import REFUSED
    from oracle.check import jsonl_cases

    if not args.out:
        raise UsageError(f"lean: a campaign file needs --out LEANDIR\n{USAGE}")
    if args.every < 1 or (args.limit is not None and args.limit < 0):
        raise UsageError("lean: --every is at least 1 and --limit at least 0")
    continues = continues_for(args.source)
    prefix = args.module or emit.module_prefix(args.out)
    os.makedirs(args.out, exist_ok=True)
    modules, outside = [], []
    selection = Selection(args.every, _indices(args.cases, "lean"), limit=args.limit)
    for case in selection.choose(jsonl_cases(args.source), set()):
        try:
            sc = load_case(case.label, case.scenario, case.recorded, continues)
        except ProgramError as e:
            if e.message.startswith(REFUSED):
                outside.append((case.label, e.message))
                continue
            raise
        name = f"Case{_index(case)}"
        _write(os.path.join(args.out, f"{name}.lean"), one(case.label, f"{prefix}.{name}", sc))
        modules.append(name)
    if outside:
        names = ", ".join(label for label, _ in outside[:3])
        print(f"serq-ref: {len(outside)} case(s) outside the fragment, no theorem: {names}"
              f"{', …' if len(outside) > 3 else ''} (the first: {outside[0][1]})", file=sys.stderr)
    if not modules:
        raise UsageError(f"lean: no case of {args.source} inside the fragment")
    _write(os.path.join(args.out, "All.lean"), emit.all_module(prefix, modules))
    print(f"wrote {len(modules)} theorem file(s) and {prefix}.All to {args.out}")
    return 0


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror}") from None
