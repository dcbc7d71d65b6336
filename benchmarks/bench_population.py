"""The cost of a session against the population of one stage (issue 22 §4):
N sessions arrive at once (``arrive batch(N)``) and each runs one job of
exponential work of mean 1 at one stage, so the stage holds N jobs at its
start and every step of the run sees them. N doubles from 10,000 to 80,000
at each of four stages: a delay (every job its own completion event), a ps
stage (ps(1): one completion event, the jobs in a heap), fifo(1e9) (every
job in service, each with its completion event) and fifo(1) (one in
service, N in line). Each run is timed whole (building the machine, the
run, its result; not the front end), on one engine, in this process, by
its CPU time (``time.process_time``: on a shared machine the wall clock adds
the wait for a core) and its wall time, R times (default 7); the figure is
the least of the R CPU times (a run of 10,000 takes a tenth of a second,
which one burst of another process's work can move by half: with 3 runs
each, an idle machine gave one doubling of 2.61 where 7 runs give 2.13 for
the same code, 2026-12-04 23:07), as CPU
microseconds per session and as the ratio to the previous N's (linear: 2.0;
the issue's bound: at most 2.3 per doubling).

    python benchmarks/bench_population.py [--engine fast|definition] [--sizes 10000,20000,...]
        [--stages delay,ps,fifo,fifo1] [--repetitions R]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this tree's engine

#: each stage of the benchmark: its declaration
STAGES = {"delay": "delay", "ps": "ps(1)", "fifo": "fifo(1e9)", "fifo1": "fifo(1)"}

PROGRAM = """stage s : {decl};
workload {{ arrive batch({n}); }}
session {{ set t0 = now; run s (~exp(1)); observe sojourn = now - t0; }}
run {{ horizon 1e12; seed 1; }}
"""


def program_of(stage: str, n: int):
    from semantics.compiler import compile_source

    return compile_source(PROGRAM.format(decl=STAGES[stage], n=n), f"<bench_population {stage} {n}>")[0]


def time_run(engine: str, stage: str, n: int) -> tuple[float, float, int]:
    """CPU and wall seconds of one run of ``n`` sessions at ``stage``, and the sessions that ended."""
    from semantics.cli_common import engine_run

    run = engine_run(engine)
    program = program_of(stage, n)
    cpu, wall = time.process_time(), time.perf_counter()
    result = run(program)
    return time.process_time() - cpu, time.perf_counter() - wall, result.ended


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("fast", "definition"), default="fast")
    parser.add_argument("--sizes", default="10000,20000,40000,80000")
    parser.add_argument("--stages", default=",".join(STAGES))
    parser.add_argument("--repetitions", type=int, default=7,
                        help="runs of each stage and N; the figure is the least CPU time (default 7)")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    print(f"engine {args.engine}; {args.repetitions} runs each, the least CPU time; "
          f"load average before: {os.getloadavg()[0]:.2f}")
    print("| stage | N | CPU s | wall s | CPU µs per session | CPU ratio to N/2 |")
    print("|---|---|---|---|---|---|")
    worst = 0.0
    for stage in args.stages.split(","):
        previous = None
        for n in sizes:
            runs = [time_run(args.engine, stage, n) for _ in range(args.repetitions)]
            assert all(ended == n for _, _, ended in runs), (stage, n, runs)
            seconds, wall, _ = min(runs)  # the least CPU time (and that run's wall time)
            ratio = seconds / previous if previous else None
            if ratio is not None:
                worst = max(worst, ratio)
            print(f"| {STAGES[stage]} | {n:,} | {seconds:.2f} | {wall:.2f} | {1e6 * seconds / n:.1f} | "
                  f"{'' if ratio is None else f'{ratio:.2f}'} |", flush=True)
            previous = seconds
    print(f"the largest ratio per doubling: {worst:.2f}; load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
