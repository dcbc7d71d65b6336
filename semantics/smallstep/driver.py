"""The driver: a run is the sequence of configurations the rules produce,
from the initial configuration to the end (seed 002 §3).

Each step takes the pending event with the least (time, sequence number)
("events at one instant: the order they were scheduled"), lets time pass to
it (``time/advance``, after the gauges are read at the end of the instant
being left), applies its rule and settles. The run ends at the horizon, or
with ``run { arrivals N; }`` when the N sessions have drained.

``run`` returns the RunResult; ``trace`` yields every applied rule as a dict
(docs/step-trace.md); ``configurations`` yields the configuration after each
applied rule (the invariant tests walk it).
"""

from __future__ import annotations

import gc
import math
from typing import Callable, Iterator

import immutables

from .. import ir
from ..errors import RunError
from ..results import RunResult
from .estimates import Estimator
from .configuration import (EMPTY_READY, EMPTY_POOL_STATS, PoolState, EMPTY_STAGE, EMPTY_STAGE_STATS, Configuration, FlowState,
                            Statistics, Workload)
from .machine import Machine
from .measure import advance_time, build_result, read_gauges
from .pools import expire_lease
from .settle import settle
from .stages import complete_fifo, complete_flow, complete_ps
from .steptrace import describe_rule
from .workload import arrive, load_trace, start_workload

#: How many events pass between two calls of the progress callback.
PROGRESS_EVERY = 4096


def initial_configuration(m: Machine) -> Configuration:
    program = m.program
    statistics = Statistics(
        pools=(EMPTY_POOL_STATS,) * len(program.pools), stages=(EMPTY_STAGE_STATS,) * len(program.stages),
        ended=0, turns=0,
        gauges=(None,) * len(program.gauges))
    return Configuration(
        time=0.0, sessions=immutables.Map(), ready=EMPTY_READY, pools=tuple(PoolState(p.cap, p.block, 0.0, 0.0, (), (), (), ()) for p in program.pools),
        stages=(EMPTY_STAGE,) * len(program.stages), flows=FlowState((), 0.0, None, -1), events=(), sequence=0,
        workload=Workload(0, 0, 0, 0, 0, (-1.0, 0)), statistics=statistics,
        areas=(0.0,) * (4 * len(program.pools) + 2 * len(program.stages) + 1), samples=None,
        estimates=(Estimator(),) * len(program.stages), taken=0, dirty=frozenset(), ended_attrs=immutables.Map())


def take_event(m: Machine, c: Configuration) -> Configuration:
    """time/advance to the first pending event's time (the levels integrated),
    the event taken off and counted (measure.take_first_event); then its rule applies."""
    _, _, kind, a, b = c.events[0]
    c = m.take_first_event(c)
    if kind == "job":
        return complete_fifo(m, c, a, b)
    if kind == "arrive":
        return arrive(m, c)
    if kind == "ps":
        return complete_ps(m, c._replace(stages=_clear_due(c, a)), a)
    if kind == "flow":
        return complete_flow(m, c._replace(flows=c.flows._replace(due=None)))
    if kind == "lease":
        return expire_lease(m, c, a, b)
    raise AssertionError(f"unknown event {kind}")


def _clear_due(c: Configuration, s: int):
    st = c.stages[s]
    return c.stages[:s] + (st._replace(due=None),) + c.stages[s + 1:]


def walk(m: Machine, progress: Callable[[float], None] | None = None, every: bool = True) -> Iterator[Configuration]:
    """The configurations after each event and its settle (with ``every``
    false, only the last: a run needs no other, and handing each one out cost
    1 %); the last one is at the end time."""
    program = m.program
    horizon = program.horizon
    limit = program.arrivals
    if limit is not None and not isinstance(program.arrival, (ir.Poisson, ir.Renewal)):
        raise RunError("run { arrivals N; } needs an open workload (arrive poisson or arrive renewal)")
    c = settle(m, start_workload(m, initial_configuration(m)))
    if every:
        yield c
    count = 0
    gauges = bool(program.gauges)
    while c.events and c.events[0][0] <= horizon:
        if gauges and c.events[0][0] > c.time:
            c = read_gauges(m, c)
        c = settle(m, take_event(m, c))
        if every:
            yield c
        if limit is not None and c.workload.generated >= limit and not c.sessions:
            if c.time <= program.warmup:
                raise RunError(f"the {limit} arrivals drained at time {c.time:g}, at or before the warmup "
                               f"{program.warmup:g}: the measurement interval is empty", time=c.time)
            yield read_gauges(m, c)
            return
        if progress is not None:
            count += 1
            if count % PROGRESS_EVERY == 0:
                progress(min(1.0, c.time / horizon) if horizon > 0 else 1.0)
    if limit is not None:
        if c.workload.generated < limit:
            raise RunError(f"only {c.workload.generated} of the {limit} arrivals came by the horizon {horizon:g}",
                           time=horizon)
        raise RunError(f"the {limit} arrivals did not drain by the horizon {horizon:g}: "
                       f"{len(c.sessions)} session(s) still live", time=horizon)
    if not math.isfinite(horizon):
        raise RunError("the run has no horizon and events never stop" if c.events else
                       "the run has no horizon: give `run { horizon ...; }`")
    c = read_gauges(m, c)
    yield advance_time(m, c, horizon) if horizon > c.time else c


def run(program: ir.Program, *, base_dir: str | None = None, progress=None) -> RunResult:
    """Run ``program`` to its end and return what it produced.

    While it runs, the cyclic garbage collector is off (``gc.disable``, and
    on again at its end if it was on): a run's values are trees of tuples,
    maps and numbers, which can hold no reference cycle, so reference
    counting frees everything a run drops, and the collector's passes over
    the many short-lived records it makes would find nothing (they cost a
    run 3 %, and, before the run froze the older objects, up to a tenth when
    they walked the whole process; docs/semantics.md, Speed). Nothing of the
    run's values depends on it."""
    m = Machine(program, trace_sessions=load_trace(program, base_dir))
    collecting = gc.isenabled()
    gc.disable()
    try:
        last = None
        for last in walk(m, progress, every=False):
            pass
        result = build_result(m, last, last.time)
    finally:
        if collecting:
            gc.enable()
    if progress is not None:
        progress(1.0)
    return result


def trace(program: ir.Program, *, base_dir: str | None = None, steps: int | None = None,
          from_time: float = 0.0) -> Iterator[dict]:
    """One dict per applied rule (docs/step-trace.md); ``steps`` bounds how
    many are yielded, counting only rules at time >= ``from_time``."""
    buffer: list[dict] = []

    def observe(rule: str, c: Configuration, fields: dict) -> None:
        if c.time >= from_time:
            buffer.append(describe_rule(rule, c.time, fields))

    m = Machine(program, observer=observe, trace_sessions=load_trace(program, base_dir))
    yielded = 0
    for _ in walk(m):
        for record in buffer:
            if steps is not None and yielded >= steps:
                return
            yield record
            yielded += 1
        buffer.clear()
        if steps is not None and yielded >= steps:
            return


def configurations(program: ir.Program, *, base_dir: str | None = None) -> Iterator[tuple[str, Configuration]]:
    """(rule, configuration after it) for every applied rule, then ("end", the final configuration)."""
    buffer: list[tuple[str, Configuration]] = []

    def observe(rule: str, c: Configuration, fields: dict) -> None:
        buffer.append((rule, c))

    m = Machine(program, observer=observe, trace_sessions=load_trace(program, base_dir))
    last = None
    for last in walk(m):
        yield from buffer
        buffer.clear()
    yield "end", last


def machine_for(program: ir.Program, *, base_dir: str | None = None) -> Machine:
    """The machine of ``program`` (for tests that apply rules by hand, e.g. settle twice)."""
    return Machine(program, trace_sessions=load_trace(program, base_dir))
