"""`serq-ref oracle check` of the 5 000-case corpus (and optionally section 8's
sweep) in one process, on N worker processes and on a Ray cluster: the wall
and CPU time of each, the speedup against one process, and whether every
output is the same bytes (docs/sweep.md, "Workers and Ray").

    python benchmarks/bench_workers.py [--workers 1,2] [--ray auto|127.0.0.1:PORT] [--sweep] [--cases FILE]

The Ray cluster is a local head pinned to loopback (docs/sweep.md, "Loopback"):
`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 ray start --head --node-ip-address
127.0.0.1 --port PORT --num-cpus 2 --include-dashboard=false`. Results:
benchmarks/README.md.

Each run is `python -m semantics ...` as a fresh process from the repository
root; its CPU is the process's and its children's (the worker processes;
not a Ray cluster's, whose workers are not children: for --ray the CPU
column is the driver's alone). The load average before each run is printed,
since the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = "oracle/data/campaign/scenarios.jsonl"
SWEEP = ["sweep", "examples/replay/vllm_replay.sq", "--set", "sessions=333", "--set", "spacing=2.5:5:0.5",
         "--set", "async_scheduling=0", "--json"]


def timed(argv: list[str]) -> tuple[float, float, bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "semantics", *argv], cwd=ROOT, env=env, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}\n{done.stderr.decode()[-2000:]}")
    return wall, cpu, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated (default 1,2)")
    parser.add_argument("--ray", metavar="ADDRESS", help="also on this Ray cluster (auto: the local one; a loopback "
                        "head's 127.0.0.1:PORT)")
    parser.add_argument("--sweep", action="store_true", help="section 8's sweep instead of the corpus check")
    parser.add_argument("--cases", default=CORPUS, help=f"the corpus (default {CORPUS})")
    args = parser.parse_args()
    base = SWEEP if args.sweep else ["oracle", "check", args.cases]
    modes = [["--workers", n] for n in args.workers.split(",")] + ([["--ray", args.ray]] if args.ray else [])
    first = None
    print(f"{' '.join(base)}  ({os.cpu_count()} CPUs)")
    for mode in modes:
        load = os.getloadavg()
        wall, cpu, out = timed(base + mode)
        if first is None:
            first = (wall, out)
        same = "same bytes" if out == first[1] else "OUTPUT DIFFERS"
        print(f"{' '.join(mode):>18}: {wall:7.1f} s wall, {cpu:7.1f} s CPU, speedup {first[0] / wall:4.2f}, "
              f"load before {load[0]:.1f}, after {os.getloadavg()[0]:.1f}; {same}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
