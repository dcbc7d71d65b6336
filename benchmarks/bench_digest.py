"""The digest corpus's CPU time, engine against engine and tree against tree,
in one run (issue 22 §1: the definition within the speed it had before the split).

    python benchmarks/bench_digest.py [--every K] [--parts P] [--profile FILE]
        [RUN ...]          # RUN: ENGINE or ENGINE@TREE (default: definition fast)

Each RUN is one engine of one source tree (``definition`` or ``fast`` of this
tree; ``old@../some/tree``, the engine a tree before the split runs by default,
``semantics.smallstep.driver.run``). The corpus (tests/digest/corpus.jsonl, every
K-th program) is cut into P parts and the runs take turns part by part, each
part in a fresh process with ``PYTHONPATH`` its tree, so that a machine whose
load changes during the benchmark slows them alike. The figure is each run's
CPU time (``time.process_time`` around the programs' load and run, what the
digest times; not the interpreter's start) summed over the parts, and its ratio
to the first run's. Each part also checks its outcomes against the tree's
expected.txt, so a run that is fast because it is wrong says so.

``--profile FILE`` instead runs the first RUN once, in this process, under
cProfile, and writes the statistics to FILE (read them with ``python -m pstats``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def load_digest(tree: Path):
    """The digest module of ``tree`` (which puts ``tree`` first on sys.path)."""
    spec = importlib.util.spec_from_file_location("digest_of_tree", tree / "tests" / "digest" / "digest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_part(tree: Path, engine: str, every: int, part: int, parts: int) -> dict:
    digest = load_digest(tree)
    entries = digest.read_corpus()[::every]
    entries = entries[part::parts]
    expected, _ = digest.read_expected()
    takes_engine = "engine" in digest.run_entry.__code__.co_varnames[: digest.run_entry.__code__.co_argcount]
    cpu = 0.0
    wrong = []
    for entry in entries:
        started = time.process_time()
        outcome = digest.run_entry(entry, engine) if takes_engine else digest.run_entry(entry)
        cpu += time.process_time() - started
        if expected.get(outcome.name) != f"{outcome.digest} {outcome.kind}":
            wrong.append(outcome.name)
    return {"programs": len(entries), "cpu": cpu, "wrong": wrong}


def parse_run(text: str) -> tuple[str, Path]:
    engine, _, tree = text.partition("@")
    return engine, (Path(tree).resolve() if tree else ROOT)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", default=["definition", "fast"], metavar="RUN")
    parser.add_argument("--every", type=int, default=1, help="every K-th program of the corpus (default: all)")
    parser.add_argument("--parts", type=int, default=4, help="parts the runs take turns on (default 4)")
    parser.add_argument("--profile", metavar="FILE")
    parser.add_argument("--worker", nargs=3, type=int, metavar=("EVERY", "PART", "PARTS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    runs = [parse_run(r) for r in args.runs]

    if args.worker:
        (engine, tree), = runs
        print(json.dumps(run_part(tree, engine, *args.worker)))
        return 0
    if args.profile:
        import cProfile

        engine, tree = runs[0]
        profiler = cProfile.Profile()
        profiler.enable()
        outcome = run_part(tree, engine, args.every, 0, 1)
        profiler.disable()
        profiler.dump_stats(args.profile)
        print(f"{args.runs[0]}: {outcome['programs']} programs, {outcome['cpu']:.2f} s CPU under cProfile, "
              f"{len(outcome['wrong'])} not as recorded; statistics in {args.profile}")
        return 0

    print(f"load average at the start: {os.getloadavg()[0]:.1f}", flush=True)
    totals = {r: {"cpu": 0.0, "programs": 0, "wrong": []} for r in args.runs}
    wall = time.perf_counter()
    for part in range(args.parts):
        for text, (engine, tree) in zip(args.runs, runs):
            env = dict(os.environ, PYTHONPATH=str(tree))
            out = subprocess.run([sys.executable, __file__, "--worker", str(args.every), str(part), str(args.parts),
                                  text], env=env, capture_output=True, text=True, cwd=tree)
            if out.returncode:
                print(out.stderr, file=sys.stderr)
                return 1
            got = json.loads(out.stdout.splitlines()[-1])
            totals[text]["cpu"] += got["cpu"]
            totals[text]["programs"] += got["programs"]
            totals[text]["wrong"] += got["wrong"]
            print(f"  part {part + 1}/{args.parts} {text}: {got['cpu']:.2f} s CPU", flush=True)
    first = totals[args.runs[0]]["cpu"]
    for text in args.runs:
        t = totals[text]
        print(f"{text}: {t['programs']} programs, {t['cpu']:.2f} s CPU, {t['cpu'] / first:.3f} of {args.runs[0]}'s"
              + (f", NOT AS RECORDED: {', '.join(t['wrong'])}" if t["wrong"] else ""))
    print(f"wall {time.perf_counter() - wall:.0f} s; load average at the end: {os.getloadavg()[0]:.1f}")
    return 1 if any(totals[t]["wrong"] for t in args.runs) else 0


if __name__ == "__main__":
    sys.exit(main())
