"""How long `serq-ref check` takes on a small program, start to finish.

    python benchmarks/bench_startup.py [--repetitions N] [FILE]

Runs ``python -m semantics check FILE`` (the interpreter this script runs
under, so no launcher such as a pyenv shim is counted) N times as a fresh
process, after one run that warms the caches a first run fills (Python's
bytecode, lark's parser tables; docs in benchmarks/README.md), and prints the
least and the median wall-clock time, and the least CPU time (user + system
of the child), which moves much less than the wall clock on a shared machine.
The default FILE is a four-line M/M/1 program; the issue's target is under
0.3 s. Each figure is printed twice: with the compiled-program cache
(semantics/programcache.py: a program checked again, unchanged) and without
it (``SERQ_REF_PROGRAM_CACHE=0``: parsed and compiled every time, as a
program being edited is).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = """\
stage srv : fifo;
workload { arrive poisson(0.5); }
session { run srv (~exp(1)); }
run { horizon 100; }
"""


def time_one(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"the check failed: {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", help="the program to check (default: a four-line M/M/1 program)")
    parser.add_argument("--repetitions", type=int, default=10, help="timed runs (default 10)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        path = args.file
        if path is None:
            path = os.path.join(directory, "small.sq")
            with open(path, "w", encoding="utf-8") as f:
                f.write(PROGRAM)
        env = dict(os.environ, PYTHONPATH=ROOT)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode
        command = [sys.executable, "-m", "semantics", "check", path]
        for cache in ("1", "0"):
            env["SERQ_REF_PROGRAM_CACHE"] = cache
            time_one(command, env)  # fills the bytecode, parser-table and program caches
            runs = [time_one(command, env) for _ in range(args.repetitions)]
            walls = [w for w, _ in runs]
            cpus = [c for _, c in runs]
            print(f"serq-ref check {'(four-line program)' if args.file is None else args.file}, "
                  f"{'program from the cache' if cache == '1' else 'compiled (no program cache)'}: "
                  f"wall min {min(walls):.3f} s, median {statistics.median(walls):.3f} s; "
                  f"cpu min {min(cpus):.3f} s; load average {os.getloadavg()[0]:.1f}; {args.repetitions} runs")


if __name__ == "__main__":
    main()
