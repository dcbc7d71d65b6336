"""The replay's cost in instructions, which the machine's load does not move
(bench_replay.py's wall times move by a factor of two with it): cachegrind's
count of the instructions the interpreter executes for

- **start-up**: the imports, and compiling and linking the replay program
  (oracle/replay.py's replay_program: the trace read and checked), no run;
- **serq-ref**: the same, then the run on the fast engine (semantics.fast.run);
- **pyserq**: bench_replay.py's pyserq process (the same IR, run by pyserq).

    python benchmarks/bench_replay_instructions.py [--sessions N] [--spacing S]

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
program, _ = replay_program({trace!r}, {spacing}, 512, 64, 8010, sessions={sessions})
if {run}:
    run(program)
"""


def instructions(source: str) -> int:
    """cachegrind's instruction count of the interpreter running ``source``."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(source)
    try:
        done = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                               os.path.realpath(sys.executable), f.name], cwd=ROOT, capture_output=True, text=True)
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
    whole = instructions(SERQ_REF.format(run=True, **common))
    print(f"replay of {TRACE.name}, spacing {args.spacing:g}, sessions {args.sessions or 'all'}, "
          f"Python {sys.version.split()[0]}")
    print(f"start-up (imports, program): {start / 1e9:6.2f} G instructions")
    print(f"serq-ref (start-up and run): {whole / 1e9:6.2f} G  (the run {(whole - start) / 1e9:.2f} G)")
    if args.sessions is None:
        theirs = instructions(PYSERQ.format(root=str(ROOT), trace=str(TRACE), spacing=args.spacing))
        print(f"pyserq (its whole process):  {theirs / 1e9:6.2f} G")
        print(f"serq-ref / pyserq: {whole / theirs:.1f}x the instructions")


if __name__ == "__main__":
    main()
