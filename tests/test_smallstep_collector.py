"""A run switches the cyclic garbage collector off (driver.run): that is
only sound if a run creates no reference cycle, since reference counting
alone frees an object only when nothing refers to it. These runs cover every
family of rules (pools with eviction, spill, leases and preemption; fifo, ps,
delay and shared stages; closed and replayed workloads) and check
that a longer run leaves no more for the collector than a shorter one.
"""

from __future__ import annotations

import dataclasses
import gc
from pathlib import Path

import pytest

from semantics.compiler import compile_file, compile_source
from semantics.errors import RunError
from semantics.smallstep.driver import run

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

PROGRAMS = ("single-turn/mm1.sq", "single-turn/ps.sq", "single-turn/mmc.sq", "single-turn/mg1_h2.sq",
            "multi-turn/closed.sq")

#: Open-workload programs exercising the pool rules (the pool examples are
#: short deterministic scenarios, over before any horizon).
POOL_PROGRAMS = {
    "cache, eviction by keys, spill, lease": """
pool hbm { cap 64; block 4; evict by (-last); spill host via pcie (size / 100) when (size >= 2); }
pool host { cap 4096; }
stage gpu : fifo(2);
stage pcie : fifo;
workload { arrive poisson(1.5); }
session {
  hold hbm (6 + 10 * (serial - 3 * floor(serial / 3))) reuse (8) { run gpu (~exp(1)); } cache (12) lease hbm (0.5);
  hold host (cachedin(host)) { run pcie (0.1); }
}
run { horizon 100; seed 3; }
""",
    "preemption, growth, queue by": """
pool mem { cap 100; preempt lifo; queue by (-waited); }
stage gpu : ps(2);
stage gate : delay;
workload { arrive poisson(2); }
session {
  hold mem (30) { run gpu (~exp(1)); grow mem (20); run gate (~exp(0.5)); }
  observe held = now;
}
run { horizon 100; seed 5; }
""",
    "flows under maxmin": """
stage a : ps(1);
stage b : ps(2);
workload { arrive poisson(1); }
share maxmin;
session { run a, b (~exp(0.8)); run a (0.2); }
run { horizon 100; seed 2; }
""",
}


def cyclic_objects_after(program, base_dir: str | None) -> int:
    """How many objects in reference cycles a run of ``program`` leaves (the collector off throughout)."""
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        try:
            run(program, base_dir=base_dir)
        except RunError:
            pass  # a run that stops with an error must not leave cycles behind either
        assert not gc.isenabled(), "run() switched on a collector that was off"
        return gc.collect()
    finally:
        if collecting:
            gc.enable()


def assert_no_cycle_per_event(program, base_dir: str | None = None) -> None:
    """The machine of a run (its compiled expressions refer back to it) is
    one fixed cycle per run; the configurations make none, so a run three
    times longer leaves exactly as many cyclic objects behind."""
    short = dataclasses.replace(program, horizon=60.0, warmup=0.0, arrivals=None)
    long = dataclasses.replace(short, horizon=180.0)
    assert run(long, base_dir=base_dir).events > 2 * run(short, base_dir=base_dir).events + 10
    assert cyclic_objects_after(short, base_dir) == cyclic_objects_after(long, base_dir)


@pytest.mark.parametrize("name", PROGRAMS)
def test_an_example_run_makes_no_cycle_per_event(name):
    path = EXAMPLES / name
    program, _ = compile_file(str(path))
    assert_no_cycle_per_event(program, str(path.parent))


@pytest.mark.parametrize("name", sorted(POOL_PROGRAMS))
def test_a_pool_run_makes_no_cycle_per_event(name):
    program, _ = compile_source(POOL_PROGRAMS[name], f"<{name}>")
    assert_no_cycle_per_event(program)


def test_run_restores_the_collector():
    program, _ = compile_file(str(EXAMPLES / "single-turn/mm1.sq"))
    program = dataclasses.replace(program, horizon=50.0, warmup=0.0, arrivals=None)
    assert gc.isenabled()
    run(program)
    assert gc.isenabled()
