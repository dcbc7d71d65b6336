"""``serq-ref oracle …``: the vLLM oracle harness on the command line.

    serq-ref oracle run SCENARIO.json [--json]
    serq-ref oracle check DIR [DIR ...]
    serq-ref oracle replay TRACE.csv --spacing S --budget B --max-seqs M --blocks N
                          [--block-size 16] [--sessions K] [--chunk C]

semantics/cli.py registers the subcommand (``add_parser``) and runs it
(``command``). docs/oracle.md says what each prints.
"""

from __future__ import annotations

import argparse
import json
import sys



def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value != value:
        raise argparse.ArgumentTypeError("NaN is not a value here")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text}")
    return value


def add_parser(commands, parser_class) -> None:
    """Register ``oracle`` and its commands on the main parser's subcommands."""
    p = commands.add_parser("oracle", help="the vLLM oracle: scenarios and replays against the recorded answers")
    sub = p.add_subparsers(dest="oracle_command", metavar="COMMAND", parser_class=parser_class)
    sub.required = True
    r = sub.add_parser("run", help="a scenario's answer on serq-ref (the .out.json format)")
    r.add_argument("scenario", metavar="SCENARIO.json")
    r.add_argument("--json", action="store_true", help="the answer as one JSON object (default: a line per request)")
    c = sub.add_parser("check", help="every scenario and IR file with a recorded answer, against it")
    c.add_argument("dirs", nargs="+", metavar="DIR")
    p = sub.add_parser("replay", help="a trace replayed under the replay protocol: one CSV row per request")
    p.add_argument("trace", metavar="TRACE.csv")
    p.add_argument("--spacing", type=_number, required=True, metavar="S", help="steps between session starts")
    p.add_argument("--budget", type=_number, required=True, metavar="B", help="max_num_batched_tokens")
    p.add_argument("--max-seqs", type=_number, required=True, metavar="M", help="max_num_seqs")
    p.add_argument("--blocks", type=_number, required=True, metavar="N",
                   help="usable KV blocks (vLLM's num_gpu_blocks less its null block)")
    p.add_argument("--block-size", type=_number, default=16.0, metavar="BS", help="block_size (default 16)")
    p.add_argument("--sessions", type=_count, metavar="K", help="replay the trace's first K sessions (default: all)")
    p.add_argument("--chunk", type=_number, default=0.0, metavar="C",
                   help="long_prefill_token_threshold (default 0: none)")


def command(args: argparse.Namespace) -> int:
    return {"run": command_run, "check": command_check, "replay": command_replay}[args.oracle_command](args)


def command_run(args: argparse.Namespace) -> int:
    from .scenario import read_json, run_scenario, run_ir

    if args.scenario.endswith(".ir.json"):
        answer = run_ir(args.scenario)
    else:
        answer = run_scenario(read_json(args.scenario), args.scenario)
    if args.json:
        print(json.dumps(answer))
        return 0
    for request in sorted(answer["first"].keys() | answer["done"].keys(), key=int):
        print(f"request {request}: first {answer['first'].get(request, '-')} done {answer['done'].get(request, '-')}")
    print(f"preemptions {answer['preemptions']} steps {answer['steps']}")
    return 0


def command_check(args: argparse.Namespace) -> int:
    from .check import check_dirs

    lines, passed, failed = check_dirs(args.dirs)
    for line in lines:
        print(line)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def command_replay(args: argparse.Namespace) -> int:
    from .replay import COLUMNS, replay

    rows = replay(args.trace, args.spacing, args.budget, args.max_seqs, args.blocks, args.block_size, args.sessions,
                  args.chunk)
    out = sys.stdout
    out.write(",".join(COLUMNS) + "\n")
    for row in rows:
        out.write(row.csv() + "\n")
    return 0

