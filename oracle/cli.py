"""``serq-ref oracle …``: the vLLM oracle harness on the command line.

    serq-ref oracle run SCENARIO.json [--json] [--[no-]older-rule]
    serq-ref oracle run SCENARIO.json [--log FILE] [--real [--vllm-python PY]]
    serq-ref oracle check PATH [PATH ...] [--engine COMMAND [--jobs N] [--timeout S]] [--[no-]older-rule]
    serq-ref oracle diverge A.log B.log
    serq-ref oracle replay TRACE.csv --spacing S --budget B --max-seqs M --blocks N
                          [--block-size 16] [--sessions K] [--chunk C] [--real [--vllm-python PY]]
    serq-ref oracle regenerate DIR [--older-rule] [--out D | --no-write] [--vllm-python PY]
    serq-ref oracle campaign N --seed S [--kind scenario|serve|replay|space|priority|limits|space-all|pressure]
                            [--start I] [--older-rule] [--recorded FILE] [--vllm-python PY] [--explain-known] [--report FILE]

The commands that run the real vLLM scheduler (replay --real, regenerate,
campaign without --recorded) need its environment (oracle/real/setup-vllm.sh;
--vllm-python or $SERQ_VLLM_PYTHON): without it they exit 2 saying so.

semantics/cli.py registers the subcommand (``add_parser``) and runs it
(``command``). docs/oracle.md says what each prints.
"""

from __future__ import annotations

import argparse
import sys

from semantics.arguments import number, positive, whole
from semantics.errors import UsageError


def add_parser(commands, parser_class, command: str | None = None) -> None:
    """Register ``oracle`` and its commands on the main parser's subcommands; given ``command`` (one of
    PARSERS), that command's parser alone (semantics/cli.py's build_parser, for a command line that names it)."""
    p = commands.add_parser("oracle", help="the vLLM oracle: scenarios and replays against the recorded answers")
    sub = p.add_subparsers(dest="oracle_command", metavar="COMMAND", parser_class=parser_class)
    sub.required = True
    for name, add in PARSERS.items():
        if command is None or name == command:
            add(sub)


def _add_run(sub) -> None:
    r = sub.add_parser("run", help="a scenario's answer on serq-ref (the .out.json format)")
    r.add_argument("scenario", metavar="SCENARIO.json",
                   help="a scenario file, or a campaign case by its label FILE.jsonl#INDEX")
    r.add_argument("--json", action="store_true", help="the answer as one JSON object (default: a line per request)")
    r.add_argument("--log", metavar="FILE",
                   help="also write the per-step schedule log (docs/conformance.md) to FILE ('-': standard output)")
    r.add_argument("--real", action="store_true",
                   help="the real vLLM scheduler's answer (and, with --log, its log) instead of serq-ref's")
    _vllm_python(r)
    _older_rule(r)


def _add_check(sub) -> None:
    from semantics.workers import add_arguments as add_worker_arguments

    c = sub.add_parser("check", help="every scenario (and IR file) of each directory or campaign file with a "
                                     "recorded answer, against serq-ref's answer or an engine's")
    c.add_argument("dirs", nargs="+", metavar="PATH",
                   help="a directory of NAME.json + NAME.out.json, or a campaign file (oracle/data/campaign/*.jsonl)")
    c.add_argument("--engine", metavar="COMMAND",
                   help="run COMMAND SCENARIO.json once per scenario; it prints its answer in the .out.json shape "
                        "(docs/conformance.md)")
    c.add_argument("--jobs", type=positive, default=1, metavar="N", help="run the engine on N scenarios at once")
    c.add_argument("--timeout", type=number, default=60.0, metavar="S",
                   help="seconds the engine may take on one scenario (default 60)")
    c.add_argument("--cases", metavar="I,J,...",
                   help="only these cases: a campaign line's index, a range I-J, a directory's scenario NAME "
                        "(with --every: these besides)")
    c.add_argument("--every", type=positive, metavar="K", help="every K-th case, by position (0, K, 2K, ...)")
    c.add_argument("--limit", type=whole, metavar="N", help="the first N cases chosen")
    c.add_argument("--logs", metavar="DIR",
                   help="write each failed case's schedule logs to DIR: the engine's (asked for in "
                        "$SERQ_SCHEDULE_LOG) and serq-ref's")
    c.add_argument("--diverge", type=whole, nargs="?", const=3, metavar="N",
                   help="run `oracle diverge` of serq-ref's log against the engine's on the first N failed cases "
                        "(default 3)")
    _older_rule(c)
    add_worker_arguments(c)  # --workers N, --ray ADDRESS|auto, --resume FILE (semantics/workers.py)


def _add_diverge(sub) -> None:
    d = sub.add_parser("diverge", help="the first step at which two schedule logs differ, what each did there, "
                                       "and the named rules of serq-ref's side")
    d.add_argument("logs", nargs=2, metavar="LOG")


def _add_replay(sub) -> None:
    p = sub.add_parser("replay", help="a trace replayed under the replay protocol: one CSV row per request")
    p.add_argument("trace", metavar="TRACE.csv")
    p.add_argument("--spacing", type=number, required=True, metavar="S", help="steps between session starts")
    p.add_argument("--budget", type=number, required=True, metavar="B", help="max_num_batched_tokens")
    p.add_argument("--max-seqs", type=number, required=True, metavar="M", help="max_num_seqs")
    p.add_argument("--blocks", type=number, required=True, metavar="N",
                   help="usable KV blocks (vLLM's num_gpu_blocks less its null block)")
    p.add_argument("--block-size", type=number, default=16.0, metavar="BS", help="block_size (default 16)")
    p.add_argument("--sessions", type=positive, metavar="K", help="replay the trace's first K sessions (default: all)")
    p.add_argument("--chunk", type=number, default=0.0, metavar="C",
                   help="long_prefill_token_threshold (default 0: none)")
    p.add_argument("--shared-head", type=int, default=0, metavar="N",
                   help="every session's prompts begin with one system prompt of N tokens, shared across sessions "
                        "(default 0: none; docs/design/shared-prefixes.md)")
    p.add_argument("--real", action="store_true",
                   help="replay with the real vLLM scheduler instead (the same protocol, the same CSV)")
    _vllm_python(p)


def _add_regenerate(sub) -> None:
    g = sub.add_parser("regenerate", help="answer every scenario NAME.json of DIR with the real vLLM scheduler, "
                                          "write NAME.out.json, and say which differ from the answers there")
    g.add_argument("dir", metavar="DIR")
    g.add_argument("--older-rule", action="store_true",
                   help="serve-by scenarios: a request that preempts itself ends the pass (vLLM before 0.33.0, "
                        "the rule of ../shared/oracle/serve's answers)")
    where = g.add_mutually_exclusive_group()
    where.add_argument("--out", metavar="D",
                       help="write NAME.out.json in D (default: DIR, replacing the answers there)")
    where.add_argument("--no-write", action="store_true", help="write nothing: only compare")
    _vllm_python(g)


def _add_campaign(sub) -> None:
    from semantics.workers import add_arguments as add_worker_arguments

    k = sub.add_parser("campaign", help="N random cases answered by serq-ref and the real vLLM scheduler (or its "
                                        "recorded answers): every divergence, its first differing step and a "
                                        "minimal reproduction")
    k.add_argument("count", type=positive, metavar="N")
    k.add_argument("--seed", type=whole, required=True, metavar="S", help="the cases' seed (the recorded: 1)")
    k.add_argument("--kind", choices=("scenario", "serve", "replay", "space", "priority", "limits", "space-all",
                                    "pressure", "spec", "spec-edges"),
                   default="scenario",
                   help="scenarios (default), serve-by scenarios, multi-turn replays, scenarios over the whole space "
                        "of every knob (oracle/campaign_space.py), scenarios with user priorities, or with limits "
                        "(max_model_len, watermark, refusals), or over the whole space with both modes, priorities "
                        "and limits drawn too (space-all), or asynchronous priority cases under memory pressure "
                        "(pressure)")
    k.add_argument("--start", type=whole, default=0, metavar="I", help="the first case's index (default 0)")
    k.add_argument("--recorded", metavar="FILE",
                   help="compare with the answers recorded in FILE (oracle/data/campaign/*.jsonl) instead of "
                        "running the real scheduler")
    k.add_argument("--explain-known", action="store_true",
                   help="also give the documented divergences (D11) a first step and a minimal reproduction")
    k.add_argument("--max-tries", type=positive, default=1000, metavar="T",
                   help="cases the shrinking may try per divergence (default 1000)")
    k.add_argument("--report", metavar="FILE", help="write one JSON line per case (its verdict and what differs)")
    k.add_argument("--older-rule", action="store_true",
                   help="serq-ref with lib/vllm.sq's older_rule = 1 against vLLM's older rule (a request that preempts "
                        "itself ends the pass; the records' answer_older_rule) instead of 0.33.0's")
    k.add_argument("--async", dest="asynchronous", action="store_true",
                   help="cases with \"async\": true: vLLM 0.33.0's default, asynchronous scheduling, on both sides "
                        "(the records of oracle/data/campaign/async-*.jsonl); without it the synchronous engine")
    _vllm_python(k)
    add_worker_arguments(k)  # serq-ref's answers on processes or a Ray cluster, a journal to resume from


#: Each command's parser, in the order `serq-ref oracle --help` lists them.
PARSERS = {"run": _add_run, "check": _add_check, "diverge": _add_diverge, "replay": _add_replay,
           "regenerate": _add_regenerate, "campaign": _add_campaign}


def _older_rule(parser) -> None:
    parser.add_argument("--older-rule", action=argparse.BooleanOptionalAction, default=None,
                        help="lib/vllm.sq with older_rule = 1 (a request that preempts itself ends the pass: vLLM "
                             "0c87a197) for every scenario; --no-older-rule: vLLM 0.33.0's rule (default: the rule "
                             "of the vLLM the scenario's corpus was recorded on, as its manifest.json or README.md "
                             "says; else 0.33.0's)")


def _vllm_python(parser) -> None:
    parser.add_argument("--vllm-python", metavar="PY",
                        help="the vLLM environment's python (default: $SERQ_VLLM_PYTHON, else ../vllm-env/bin/python "
                             "beside the repository)")


def command(args: argparse.Namespace) -> int:
    commands = {"run": command_run, "check": command_check, "diverge": command_diverge, "replay": command_replay,
                "regenerate": command_regenerate, "campaign": command_campaign}
    try:
        return commands[args.oracle_command](args)
    except RuntimeError as e:
        from .real import RealVllmMissing  # imported only here: a command that never drives vLLM needs none of it

        if not isinstance(e, RealVllmMissing):
            raise
        raise UsageError(f"{e}\nusage: serq-ref oracle {args.oracle_command} ... --vllm-python PY "
                         f"(or set $SERQ_VLLM_PYTHON)") from None
    except UsageError as e:
        if args.oracle_command in USAGE and "usage:" not in e.message:
            e.message = f"{e.message}\nusage: {USAGE[args.oracle_command]}"
        raise


#: The usage line of a command, after its errors.
USAGE = {
    "run": "serq-ref oracle run SCENARIO.json|FILE.jsonl#INDEX [--json] [--log FILE] [--real] [--[no-]older-rule]",
    "check": "serq-ref oracle check PATH [PATH ...] [--cases I,J,...] [--every K] [--limit N] "
             "[--engine COMMAND [--jobs N] [--timeout S] [--logs DIR] [--diverge [N]]]",
    "regenerate": "serq-ref oracle regenerate DIR [--older-rule] [--out D | --no-write] [--vllm-python PY]",
    "campaign": "serq-ref oracle campaign N --seed S [--kind scenario|serve|replay|space|priority|limits|space-all|"
                "pressure] "
                "[--start I] "
                "[--older-rule] "
                "[--recorded FILE] "
                "[--vllm-python PY]",
}


def command_run(args: argparse.Namespace) -> int:
    import json

    from .check import read_scenario
    from .scenario import run_scenario, run_ir

    if args.vllm_python is not None and not args.real:
        raise UsageError("--vllm-python goes with --real (serq-ref runs the scenario without it)")
    if args.real:
        from . import real
        from .schedule_log import vllm_log, write_log

        real.find_python(args.vllm_python)
        if args.scenario.endswith(".ir.json"):
            raise UsageError("--real takes a scenario NAME.json (the real scheduler does not run IR)")
        data, text, _ = read_scenario(args.scenario, args.older_rule)
        answer, log = vllm_log(data, args.scenario, args.vllm_python, bool(args.older_rule), text=text)
        answer = {key: answer[key] for key in ("first", "done", "preemptions", "steps", "refused") if key in answer}
        if args.log is not None:
            write_log(log, args.log)
            if args.log == "-":
                return 0
    elif args.log is not None:
        if args.scenario.endswith(".ir.json"):
            raise UsageError("--log takes a scenario NAME.json (the schedule log is the scenario program's)")
        from .schedule_log import serq_log, write_log

        data, text, older_rule = read_scenario(args.scenario, args.older_rule)
        answer, log = serq_log(data, args.scenario, older_rule, text=text)
        write_log(log, args.log)
        if args.log == "-":
            return 0
    elif args.scenario.endswith(".ir.json"):
        answer = run_ir(args.scenario)
    else:
        data, text, older_rule = read_scenario(args.scenario, args.older_rule)
        answer = run_scenario(data, args.scenario, older_rule, text=text)
    if args.json:
        print(json.dumps(answer))
        return 0
    refused = answer.get("refused", {})
    for request in sorted(answer["first"].keys() | answer["done"].keys() | refused.keys(), key=int):
        if request in refused:
            print(f"request {request}: refused: {refused[request]}")
        else:
            cached = f" cached {answer['cached'].get(request, '-')}" if "cached" in answer else ""
            print(f"request {request}: first {answer['first'].get(request, '-')} done "
                  f"{answer['done'].get(request, '-')}{cached}")
    print(f"preemptions {answer['preemptions']} steps {answer['steps']}")
    return 0


def command_check(args: argparse.Namespace) -> int:
    import tempfile

    from .check import Selection, check, diverge_lines, logs_in, parse_cases, summary, variant_line

    if args.engine is None and (args.jobs != 1 or args.timeout != 60.0):
        raise UsageError("--jobs and --timeout go with --engine (serq-ref answers in process)")
    if not 0 < args.timeout < float("inf"):
        raise UsageError(f"--timeout {args.timeout:g}: a finite number of seconds above 0")
    if args.jobs > 1 and (args.workers > 1 or args.ray is not None):
        raise UsageError("--jobs runs the engine on threads; --workers and --ray on processes or a cluster: give one")
    if args.diverge is not None and args.engine is None:
        raise UsageError("--diverge goes with --engine (it compares the engine's schedule log with serq-ref's)")
    selection = Selection(parse_cases(args.cases) if args.cases is not None else (), args.every, args.limit)

    def report(outcome) -> None:
        for line in outcome.lines:
            print(line, flush=True)
        if outcome.variant is not None:
            print(variant_line(outcome), flush=True)

    with tempfile.TemporaryDirectory(prefix="serq-ref-logs-") as scratch:
        logs = args.logs if args.logs is not None else (scratch if args.diverge else None)
        kept = logs_in(logs) if logs is not None else None
        outcomes = check(args.dirs, args.engine, args.jobs, args.timeout, report, args.older_rule, selection=selection,
                         logs=kept, workers=args.workers, ray=args.ray, resume=args.resume, progress=True)
        passed = sum(o.passed for o in outcomes)
        unsupported = sum(o.unsupported is not None for o in outcomes)
        failed = len(outcomes) - passed - unsupported
        variants: dict[str, int] = {}
        for o in outcomes:
            if o.variant is not None:
                variants[o.variant] = variants.get(o.variant, 0) + 1
        for line in summary(outcomes, args.engine):
            print(line)
        if kept is not None and args.logs is not None and kept.written:
            print(f"schedule logs of {len(kept.written):,} failed case(s) in {args.logs}"
                  + (f"; the engine wrote none for {len(kept.missing):,} (it writes one to the path "
                     f"$SERQ_SCHEDULE_LOG names)" if kept.missing else ""))
        if args.diverge and kept is not None and failed:
            for line in diverge_lines(kept, args.diverge, show_paths=args.logs is not None):
                print(line)
    if variants:
        print(f"{sum(variants.values())} of the passes by a documented variant: "
              + ", ".join(f"{name} {n}" for name, n in sorted(variants.items())))
    # an unsupported case (the engine cannot express its scenario) is neither: counted apart, and
    # only when there is one, so an engine that never says it reads the line it always did
    print(f"{passed} passed, {failed} failed" + (f", {unsupported} unsupported" if unsupported else ""))
    return 0 if failed == 0 else 1


def command_diverge(args: argparse.Namespace) -> int:
    from .schedule_log import diverge, read_log

    a, b = (read_log(path) for path in args.logs)
    lines, differ = diverge(a, b)
    for line in lines:
        print(line)
    return 1 if differ else 0


def command_replay(args: argparse.Namespace) -> int:
    from .replay import replay_csv

    if args.real:
        return command_replay_real(args)
    if args.vllm_python is not None:
        raise UsageError("--vllm-python goes with --real (serq-ref replays without it)")
    if args.shared_head < 0:
        raise UsageError(f"--shared-head {args.shared_head}: a number of tokens, 0 or more")
    sys.stdout.write(replay_csv(args.trace, args.spacing, args.budget, args.max_seqs, args.blocks, args.block_size,
                                args.sessions, args.chunk, shared_head=args.shared_head))
    return 0



def command_replay_real(args: argparse.Namespace) -> int:
    """The same replay by the real vLLM scheduler (oracle/real/driver.py): the
    trace's first K sessions, the engine's numbers as whole numbers."""
    from . import real
    from .replay import read_checked_trace, trace_session_numbers

    real.find_python(args.vllm_python)
    read_checked_trace(args.trace)  # every cell checked here, as serq-ref's replay checks it
    numbers = {}
    for name in ("spacing", "budget", "max_seqs", "blocks", "block_size", "chunk"):
        value = getattr(args, name)
        if not (value >= 0 and value != float("inf")):
            raise UsageError(f"--{name.replace('_', '-')} {value:g}: a finite number, at least 0")
        if name != "spacing":
            if not float(value).is_integer():
                raise UsageError(f"--{name.replace('_', '-')} {value:g}: the real scheduler takes a whole number")
            value = int(value)
        numbers[name] = value
    try:
        with open(args.trace, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise UsageError(f"no such file: {args.trace}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {args.trace}: {e}") from None
    if args.sessions is not None:
        kept = set(trace_session_numbers(args.trace)[:args.sessions])
        lines = text.splitlines()
        header = lines[0].split(",")
        column = header.index("session")
        text = "\n".join([lines[0]] + [line for line in lines[1:]
                                        if line.strip() and int(float(line.split(",")[column])) in kept]) + "\n"
    if args.shared_head < 0:
        raise UsageError(f"--shared-head {args.shared_head}: a number of tokens, 0 or more")
    job = real.replay_job(text, spacing=numbers["spacing"], budget=numbers["budget"], max_seqs=numbers["max_seqs"],
                          blocks=numbers["blocks"], block_size=numbers["block_size"], chunk=numbers["chunk"],
                          **({"shared_head": args.shared_head} if args.shared_head else {}))
    (answer,) = real.answer_all([job], args.vllm_python)
    if "error" in answer:
        print(f"serq-ref: the real scheduler could not replay it: {answer['error']}", file=sys.stderr)
        return 1
    sys.stdout.write(answer["csv"])
    if answer["status"] != "finished":
        print(f"serq-ref: the real scheduler's replay ended: {answer['status']}", file=sys.stderr)
        return 1
    return 0


def command_regenerate(args: argparse.Namespace) -> int:
    """Every scenario of DIR answered by the real scheduler; a line per
    scenario (equal, differs and how, new), then the counts. Exit 1 when one
    differs."""
    import os
    from pathlib import Path

    from . import real

    real.find_python(args.vllm_python)
    directory = Path(args.dir)
    if not directory.is_dir():
        raise UsageError(f"no such directory: {args.dir}")
    if not real.scenario_files(directory):
        raise UsageError(f"{args.dir} has no scenario NAME.json (a JSON object with requests)")
    out = None if args.no_write else Path(args.out) if args.out is not None else directory
    from semantics.progress import CaseProgress

    lines: list[str] = []
    bar = CaseProgress(len(real.scenario_files(directory)), "oracle regenerate", unit="scenario")

    def report(line: str) -> None:  # a line per scenario answered
        lines.append(line)
        bar.print(line)
        bar.advance()

    with bar:
        differ = real.regenerate(directory, out, args.vllm_python, args.older_rule, report=report)
    equal = sum(line.endswith(": equal") or ": equal (" in line for line in lines)
    new = sum(": new" in line for line in lines)
    written = "" if out is None else f"; NAME.out.json written in {os.path.normpath(out)}"
    print(f"{len(lines)} scenarios: {equal} equal, {differ} differ, {new} new{written}")
    return 1 if differ else 0


def command_campaign(args: argparse.Namespace) -> int:
    """The campaign: a line block per case that does not agree, then the counts.
    Exit 1 when a case differs for no documented reason."""
    import json

    from . import campaign

    if args.older_rule and args.kind in ("priority", "space-all", "pressure"):
        # the driver's older-rule switch is the serve-by scheduler's; vLLM's stock priority path has 0.33.0's rule only
        raise UsageError("--older-rule goes with --kind serve or an FCFS kind: the priority (and space-all's and "
                         "pressure's) cases "
                         "are vLLM 0.33.0's stock priority policy, whose self-preemption rule is 0.33.0's")
    if args.asynchronous and args.kind in ("space-all", "pressure"):
        raise UsageError(f"--async goes with a kind drawn synchronous: {args.kind} draws each case's mode (its cases "
                         "say \"async\": true or not)")
    outcomes, seconds = campaign.timed_run(args.kind, args.count, args.seed, args.start, args.recorded,
                                           args.vllm_python, args.explain_known, args.max_tries,
                                           report=lambda line: print(line, flush=True), older_rule=args.older_rule,
                                           workers=args.workers, ray=args.ray, resume=args.resume, progress=True,
                                           asynchronous=args.asynchronous)
    if args.report is not None:
        try:
            with open(args.report, "w", encoding="utf-8") as f:
                for outcome in outcomes:
                    f.write(json.dumps(outcome) + "\n")
        except OSError as e:
            raise UsageError(f"cannot write {args.report}: {e.strerror}") from None
    against = f"the answers recorded in {args.recorded}" if args.recorded else "vLLM 0.33.0's scheduler"
    against += " (the older rule)" if args.older_rule else ""
    against += " (asynchronous scheduling)" if args.asynchronous else ""
    print(f"{campaign.summary(args.kind, outcomes, seconds)}, against {against}")
    return 1 if any(o["verdict"] == campaign.DIFFERS for o in outcomes) else 0
