"""The step engine's benchmark: the full 333-session trace
(../shared/traces/short_base.csv, 3 321 requests) replayed on vLLM's engine
(lib/vllm.sq) on the step clock at spacing 24 (budget 512, max_seqs 64, 8 010
blocks of 16: about 8 000 iterations with up to 64 residents each), timed as
a whole process, beside pyserq on the same IR in the same run.

    python benchmarks/bench_replay.py [--spacing S] [--repetitions N] [--profile]

- **serq-ref**: `serq-ref oracle replay ../shared/traces/short_base.csv
  --spacing 24 --budget 512 --max-seqs 64 --blocks 8010`, a whole process
  (start-up, compiling and linking the program, the run, the CSV), timed
  with `time.perf_counter` around `subprocess.run`;
- **pyserq** 0.1.6, for context: the same IR (oracle/replay.py's program,
  in pyserq's version 14), run by `pyserq.run` in a whole process too.

The real vLLM 0.33.0 scheduler replays the same trace in 10 to 20 s of CPU
(oracle/data/replay/summary.json: 32 to 41 s wall on this kind of machine
when it was first measured); the issue's goal for serq-ref is under 5 s.
The engines take turns, after one untimed run of each that fills the caches
a first run fills (Python's bytecode, lark's parser tables, the compiled-
program cache: benchmarks/README.md); the figure is each one's best and
median wall time.
`--profile` runs serq-ref's replay once in this process under cProfile and
prints the top of the profile by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT.parent / "shared" / "traces" / "short_base.csv"
ENGINE = ["--budget", "512", "--max-seqs", "64", "--blocks", "8010"]

PYSERQ = """
import sys
sys.path.insert(0, {root!r})
from oracle.peer import run_on_pyserq
from oracle.replay import replay_program
program, _ = replay_program({trace!r}, {spacing}, 512, 64, 8010, older_rule=True)  # pyserq's only rule; FCFS: the same
report = run_on_pyserq(program)
assert len(report.observe("ttft").times) == 3321
"""


#: The processes' environment: an installed package has its bytecode (this environment may set
#: PYTHONDONTWRITEBYTECODE, under which every process would compile every module of the checkout afresh).
ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def time_serq_ref(spacing: float) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "semantics", "oracle", "replay", str(TRACE), "--spacing", str(spacing),
                           *ENGINE], cwd=ROOT, env=ENV, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0 or done.stdout.count("\n") != 3322:
        raise SystemExit(f"serq-ref's replay failed: {done.stderr.strip()}")
    return elapsed


def time_pyserq(spacing: float) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PYSERQ.format(root=str(ROOT), trace=str(TRACE), spacing=spacing)],
                          cwd=ROOT, env=ENV, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"pyserq's replay failed: {done.stderr.strip()}")
    return elapsed


def profile(spacing: float) -> None:
    sys.path.insert(0, str(ROOT))
    from oracle.replay import replay

    profiler = cProfile.Profile()
    profiler.enable()
    replay(str(TRACE), spacing, 512, 64, 8010)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
    print(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spacing", type=float, default=24.0)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if not TRACE.exists():
        raise SystemExit(f"no trace at {TRACE}: the shared material is expected beside the repository")
    ours, theirs = [], []
    time_serq_ref(args.spacing), time_pyserq(args.spacing)  # untimed: fill the caches a first run fills
    for _ in range(args.repetitions):
        ours.append(time_serq_ref(args.spacing))
        theirs.append(time_pyserq(args.spacing))
    load = os.getloadavg()[0]
    print(f"full trace (3 321 requests), spacing {args.spacing:g}, {args.repetitions} repetitions, "
          f"Python {sys.version.split()[0]}, load average {load:.1f}")
    print(f"{'engine':10}  {'best s':>7}  {'median s':>8}")
    print(f"{'serq-ref':10}  {min(ours):7.3f}  {statistics.median(ours):8.3f}")
    print(f"{'pyserq':10}  {min(theirs):7.3f}  {statistics.median(theirs):8.3f}")
    print(f"serq-ref / pyserq: {min(ours) / min(theirs):.2f}x the time (best), {statistics.median(ours) / statistics.median(theirs):.2f}x "
          f"(median); issue 22's target: at most 2x")
    if args.profile:
        profile(args.spacing)


if __name__ == "__main__":
    main()
