"""Eviction by keys against eviction lru, on one block pool, in one process.

A KV-like pool of 16 000 units in blocks of 16 under Poisson arrivals (rate
40) of requests whose prefixes of 200 to 800 units are held, reused and
cached: some 20 000 rooms are made in 500 s of simulated time, with about
600 cached entries to choose from. The same program runs with `evict lru`
and with `evict by (KEYS)` for each KEYS given; the figure is the CPU time
of each whole run (compile, link, simulate, report) and its ratio to lru's,
best of the repetitions. lru's order is kept in the configuration (release
order); an order by keys is read per room (docs/semantics.md, Fast forms),
which is the gap this measures.

    python benchmarks/bench_evict.py [--horizon T] [--repetitions N] [KEYS ...]
"""

from __future__ import annotations

import argparse
import time

from semantics.compiler import compile_source
from semantics.fast import run

PROGRAM = """pool kv {{ cap 16000; block 16; {evict}; }}
stage gpu : fifo(8);
workload {{ arrive poisson(40); }}
session {{
  set p = 200 + floor(~uniform(0, 600));
  hold kv (p) reuse (p) {{ run gpu (0.15); }} cache (p);
}}
run {{ horizon {horizon}; seed 1; }}
"""


def cpu_seconds(evict: str, horizon: float) -> tuple[float, int]:
    """CPU time of one whole run, and its evicted blocks."""
    start = time.process_time()
    program = compile_source(PROGRAM.format(evict=evict, horizon=horizon), "<bench_evict>")[0]
    result = run(program)
    seconds = time.process_time() - start
    return seconds, round(result.pools[0].evicted_units / 16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("keys", nargs="*", default=["last", "-size", "age"])
    parser.add_argument("--horizon", type=float, default=500.0)
    parser.add_argument("--repetitions", type=int, default=2)
    args = parser.parse_args()
    variants = ["evict lru"] + [f"evict by ({k})" for k in args.keys]
    best = {}
    for _ in range(args.repetitions):
        for v in variants:
            seconds, blocks = cpu_seconds(v, args.horizon)
            best[v] = min(seconds, best[v][0] if v in best else seconds), blocks
    base = best["evict lru"][0]
    print(f"{'pool':<22} {'CPU s':>7} {'ratio to lru':>13} {'blocks evicted':>15}")
    for v in variants:
        seconds, blocks = best[v]
        print(f"{v:<22} {seconds:7.2f} {seconds / base:13.2f} {blocks:15,}")


if __name__ == "__main__":
    main()
