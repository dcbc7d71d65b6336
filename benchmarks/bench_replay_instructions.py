"""The replay's cost in instructions, which the machine's load does not move
(bench_replay.py's wall times move by a factor of two with it): cachegrind's
count of the instructions the interpreter executes for

- **start-up**: the imports, and compiling and linking the replay program
  (oracle/replay.py's replay_program: the trace read and checked), no run;
  the program from the compiled-program cache (semantics/programcache.py),
  and again without it (``SERQ_REF_PROGRAM_CACHE=0``: parsed and compiled);
- **serq-ref**: the same, then the run on the fast engine (semantics.fast.run),
  handed the trace's sessions replay_program read, as `serq-ref oracle
  replay` hands them (oracle/replay.py's _cells; before 2026-12-04 22:00
  this script let the run read the trace a second time, 0.07 G
  instructions the command does not spend);
- **pyserq**: bench_replay.py's pyserq process (the same IR, run by pyserq):
  the program is compiled there by serq-ref's front end (replay_program),
  whose part is counted too (the same script stopped before pyserq's run),
  so a shorter start-up of serq-ref shortens this process as well.

    python benchmarks/bench_replay_instructions.py [--sessions N] [--spacing S]

Each script is run once uncounted first, with bytecode written (the
environment's ``PYTHONDONTWRITEBYTECODE`` dropped, as bench_startup.py does):
what is counted is a run with the caches a first run fills, as an installed
serq-ref runs (before 2026-12-04 17:00 the counts included compiling every
module of the checkout to bytecode, about 1.1 G of the start-up's 2.6 G).
It needs valgrind; each count takes about 20 times its run's time (about a
minute for the full trace on an idle machine). The run's own count is
serq-ref's less start-up's; the ratio printed is serq-ref's whole count to
pyserq's, the instructions' counterpart of bench_replay.py's ratio (which
also counts the CSV's writing and the command line's parsing).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_replay import PYSERQ, ROOT, TRACE  # noqa: E402

SERQ_REF = """
import sys
sys.path.insert(0, {root!r})
from oracle.replay import replay_program
from semantics.fast import run
program, sessions = replay_program({trace!r}, {spacing}, 512, 64, 8010, sessions={sessions})
if {run}:
    run(program, trace_sessions=sessions)
"""


def instructions(source: str, **variables: str) -> int:
    """cachegrind's instruction count of the interpreter running ``source`` (with the environment
    ``variables`` besides), after one run of it uncounted that fills the caches a first run fills (Python's
    bytecode, lark's parser tables, the compiled-program cache: benchmarks/README.md)."""
    env = dict(os.environ, **variables)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(source)
    try:
        warm = subprocess.run([sys.executable, f.name], cwd=ROOT, env=env, capture_output=True, text=True)
        if warm.returncode != 0:
            raise SystemExit(f"the script failed: {warm.stderr.strip()[-2000:]}")
        done = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                               os.path.realpath(sys.executable), f.name], cwd=ROOT, env=env, capture_output=True,
                              text=True)
    finally:
        os.unlink(f.name)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"valgrind failed: {done.stderr.strip()[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spacing", type=float, default=24.0)
    parser.add_argument("--sessions", type=int, default=None, help="the trace's first N sessions (default: all)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    if not TRACE.exists():
        raise SystemExit(f"no trace at {TRACE}: the shared material is expected beside the repository")
    common = dict(root=str(ROOT), trace=str(TRACE), spacing=args.spacing, sessions=args.sessions)
    start = instructions(SERQ_REF.format(run=False, **common))
    compiled = instructions(SERQ_REF.format(run=False, **common), SERQ_REF_PROGRAM_CACHE="0")
    whole = instructions(SERQ_REF.format(run=True, **common))
    print(f"replay of {TRACE.name}, spacing {args.spacing:g}, sessions {args.sessions or 'all'}, "
          f"Python {sys.version.split()[0]}")
    print(f"start-up (imports, program): {start / 1e9:6.2f} G instructions "
          f"(the program compiled, without its cache: {compiled / 1e9:.2f} G)")
    print(f"serq-ref (start-up and run): {whole / 1e9:6.2f} G  (the run {(whole - start) / 1e9:.2f} G)")
    if args.sessions is None:
        theirs = instructions(PYSERQ.format(root=str(ROOT), trace=str(TRACE), spacing=args.spacing))
        # the same process up to pyserq's run: serq-ref's front end, which compiles the program pyserq runs
        front = instructions(PYSERQ.split("report = ")[0].format(root=str(ROOT), trace=str(TRACE),
                                                                  spacing=args.spacing))
        print(f"pyserq (its whole process):  {theirs / 1e9:6.2f} G  (serq-ref's front end in it {front / 1e9:.2f} G, "
              f"pyserq's encoding, import and run {(theirs - front) / 1e9:.2f} G)")
        print(f"serq-ref / pyserq: {whole / theirs:.1f}x the instructions")


if __name__ == "__main__":
    main()
