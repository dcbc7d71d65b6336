"""What an M/M/1 customer costs serq-ref, part by part.

The benchmark's queue (bench_mm1.py) with parts of the session taken away,
each run for the same horizon, timed whole (best of seven runs): the
difference between two rows is what the removed part costs per arrival.

    python benchmarks/ledger_mm1.py [--horizon T]
"""

from __future__ import annotations

import argparse
import time

from semantics.compiler import compile_source
from semantics import fast as driver

#: (label, session body) from the least to the whole benchmark session
SESSIONS = (
    ("end; (an arrival, a session that ends)", "end;"),
    ("set a = now; end;", "set a = now; end;"),
    ("set a = now; observe x = now - a; end;", "set a = now; observe x = now - a; end;"),
    ("run server (~exp(1));", "run server (~exp(1));"),
    ("the benchmark's session", "set arrived = now; run server (~exp(1)); observe sojourn = now - arrived;"),
)


def microseconds_per_arrival(session: str, horizon: float, repetitions: int = 7) -> float:
    text = (f"stage server : fifo(1);\nworkload {{ arrive poisson(0.8); }}\nsession {{ {session} }}\n"
            f"run {{ horizon {horizon}; seed 1; }}")
    program, _ = compile_source(text, "<ledger>")
    best, arrivals = float("inf"), 0
    for _ in range(repetitions):
        start = time.perf_counter()
        arrivals = driver.run(program).arrivals
        best = min(best, time.perf_counter() - start)
    return best / arrivals * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--horizon", type=float, default=20000.0, help="simulated time per run (default 20000)")
    options = parser.parse_args()
    for label, session in SESSIONS:
        print(f"{label:<45}{microseconds_per_arrival(session, options.horizon):8.2f} us per arrival")


if __name__ == "__main__":
    main()
