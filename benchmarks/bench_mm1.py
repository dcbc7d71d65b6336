"""The speed benchmark: one M/M/1 queue at rho 0.8 simulated by serq-ref's
small-step semantics, by SimPy, and (for context) by pyserq, the Rust serQ
reference implementation, in one process.

Every engine runs the same queue for the same horizon and measures the same
things: Poisson arrivals at rate 0.8, exponential service of mean 1, one FIFO
server; each customer's sojourn recorded (with its time and customer), and
the server's time-average number present, utilisation, completions, mean
wait and mean service (what serq-ref's run result holds for the program). Each run is timed whole (``time.perf_counter`` around
building the model, running it and collecting its result) and repeated; the
figure is arrivals simulated per wall-clock second, the best and the median
over the repetitions. The ratio serq-ref / SimPy is the issue's target: at
least 0.5.

    python benchmarks/bench_mm1.py [--horizon T] [--repetitions N] [--profile]

``--profile`` also runs serq-ref once under cProfile and prints the top of
the profile by cumulative and by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import random
import statistics
import sys
import time
from typing import Callable, NamedTuple


#: The queue: arrival rate, mean service (so rho = 0.8), the seed.
ARRIVAL_RATE = 0.8
MEAN_SERVICE = 1.0
SEED = 1


class Timing(NamedTuple):
    """One engine's repetitions: arrivals each run simulated, its wall times."""

    engine: str
    arrivals: int
    seconds: tuple[float, ...]

    def best_rate(self) -> float:
        return self.arrivals / min(self.seconds)

    def median_rate(self) -> float:
        return self.arrivals / statistics.median(self.seconds)


# --------------------------------------------------------------------------
# The three engines: each function builds, runs and summarises one run and
# returns the number of arrivals it simulated.

#: The queue in serQ (seed 002 syntax): the program serq-ref and pyserq run.
PROGRAM = """
stage server : fifo(1);
workload {{ arrive poisson({rate}); }}
session {{
  set arrived = now;
  run server (~exp({mean}));
  observe sojourn = now - arrived;
}}
run {{ horizon {horizon}; seed {seed}; }}
"""


def build_program(horizon: float):
    """The IR of PROGRAM for ``horizon`` (compiled by serq-ref's front end)."""
    from semantics.compiler import compile_source

    text = PROGRAM.format(rate=ARRIVAL_RATE, mean=MEAN_SERVICE, horizon=horizon, seed=SEED)
    program, _ = compile_source(text, "<bench_mm1>")
    return program


def run_serq_ref(horizon: float) -> int:
    """serq-ref: compile the program and run it on the fast engine (semantics.fast)."""
    from semantics import fast as driver

    result = driver.run(build_program(horizon))
    return result.arrivals


def run_pyserq(horizon: float) -> int:
    """pyserq: the same IR as JSON in pyserq's version (oracle.peer)."""
    from oracle.peer import report_of

    return report_of(build_program(horizon))["arrivals"]


class SimpyReport(NamedTuple):
    """What the SimPy model measures: what serq-ref's run result holds for
    PROGRAM (samples of the sojourn with time and customer; the server's
    time-average number present and utilisation, completions, wait and
    service sums; the time-average number of customers in the system)."""

    arrivals: int
    sojourns: list
    mean_number: float
    utilization: float
    completed: int
    mean_wait: float
    mean_service: float


def run_simpy(horizon: float) -> int:
    """SimPy: the same queue written as SimPy processes. As in serQ's
    ``poisson(rate)``, the first arrival is at time 0; every customer draws
    its service, waits for the server, holds it, and records its sojourn."""
    return simulate_simpy(horizon).arrivals


def simulate_simpy(horizon: float) -> SimpyReport:
    """The SimPy model, measuring what serq-ref measures: the levels (number
    present, busy) integrated at each change, and per customer the sojourn
    with its time and serial, the wait and the service. Written the fast way
    (closure variables, not dictionaries: 7 % faster), so that the ratio does
    not flatter serq-ref."""
    try:
        import simpy
    except ImportError:
        sys.exit("bench_mm1.py: SimPy is missing; install the bench extra: python3 -m pip install -e '.[test,bench]'")

    environment = simpy.Environment()
    server = simpy.Resource(environment, capacity=1)
    arrivals_stream = random.Random(SEED)
    service_stream = random.Random(SEED + 1)
    sojourns: list[tuple[float, int, float]] = []
    arrivals = completed = present = busy = 0
    since = present_area = busy_area = wait_sum = service_sum = 0.0

    def change_levels(more_present: int, more_busy: int) -> None:
        nonlocal present, busy, since, present_area, busy_area
        elapsed = environment.now - since
        present_area += present * elapsed
        busy_area += busy * elapsed
        present += more_present
        busy += more_busy
        since = environment.now

    def serve_customer(serial: int):
        nonlocal completed, wait_sum, service_sum
        service = service_stream.expovariate(1.0 / MEAN_SERVICE)
        arrived = environment.now
        change_levels(1, 0)
        with server.request() as request:
            yield request
            started = environment.now
            change_levels(0, 1)
            yield environment.timeout(service)
        change_levels(-1, -1)
        completed += 1
        wait_sum += started - arrived
        service_sum += environment.now - started
        sojourns.append((environment.now, serial, environment.now - arrived))

    def generate_arrivals():
        nonlocal arrivals
        while True:
            environment.process(serve_customer(arrivals))
            arrivals += 1
            yield environment.timeout(arrivals_stream.expovariate(ARRIVAL_RATE))

    environment.process(generate_arrivals())
    environment.run(until=horizon)
    change_levels(0, 0)
    return SimpyReport(arrivals, sojourns, present_area / horizon, busy_area / horizon, completed,
                       wait_sum / completed, service_sum / completed)


ENGINES: dict[str, Callable[[float], int]] = {
    "serq-ref": run_serq_ref,
    "simpy": run_simpy,
    "pyserq": run_pyserq,
}


# --------------------------------------------------------------------------


def time_engines(horizon: float, repetitions: int) -> dict[str, Timing]:
    """Run every engine ``repetitions`` times, timing each whole run. The
    engines take turns (serq-ref, SimPy, pyserq, serq-ref, ...), so that a
    machine that slows down or speeds up during the benchmark affects them
    alike; the front end's one-time set-up (building its parser) happens
    before the first timed run, as a long-lived process has it."""
    build_program(1.0)
    seconds: dict[str, list[float]] = {engine: [] for engine in ENGINES}
    arrivals: dict[str, int] = {}
    for _ in range(repetitions):
        for engine, run in ENGINES.items():
            start = time.perf_counter()
            arrivals[engine] = run(horizon)
            seconds[engine].append(time.perf_counter() - start)
    return {engine: Timing(engine, arrivals[engine], tuple(seconds[engine])) for engine in ENGINES}


def profile_serq_ref(horizon: float, lines: int = 25) -> str:
    """The top of serq-ref's profile, by cumulative and by own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    run_serq_ref(horizon)
    profiler.disable()
    text = io.StringIO()
    for order in ("cumulative", "tottime"):
        pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(lines)
    return text.getvalue()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--horizon", type=float, default=50000.0, help="simulated time per run (default 50000)")
    parser.add_argument("--repetitions", type=int, default=5, help="timed runs per engine (default 5)")
    parser.add_argument("--profile", action="store_true", help="also print serq-ref's cProfile")
    options = parser.parse_args(argv)

    print(
        f"M/M/1, rho {ARRIVAL_RATE * MEAN_SERVICE:g}, horizon {options.horizon:g}, "
        f"{options.repetitions} repetitions, Python {sys.version.split()[0]}"
    )
    timings = time_engines(options.horizon, options.repetitions)
    print(f"{'engine':<10}{'arrivals':>10}{'best s':>10}{'median s':>10}{'arrivals/s (best)':>20}{'(median)':>12}")
    for timing in timings.values():
        print(
            f"{timing.engine:<10}{timing.arrivals:>10}{min(timing.seconds):>10.3f}"
            f"{statistics.median(timing.seconds):>10.3f}{timing.best_rate():>20,.0f}{timing.median_rate():>12,.0f}"
        )
    serq_ref, simpy = timings["serq-ref"], timings["simpy"]
    print(
        f"ratio serq-ref / SimPy (arrivals per second): best {serq_ref.best_rate() / simpy.best_rate():.2f}, "
        f"median {serq_ref.median_rate() / simpy.median_rate():.2f} (issue 22's target: at least 1.0)"
    )
    if options.profile:
        print(profile_serq_ref(options.horizon))


if __name__ == "__main__":
    main()
