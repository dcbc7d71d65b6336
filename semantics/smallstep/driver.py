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
from . import stages
from .configuration import (EMPTY_POOL_STATS, EMPTY_READY, EMPTY_STAGE_STATS, Configuration, PoolState, Statistics,
                            Workload)
from .estimates import Estimator
from .machine import Machine
from .measure import advance_time, build_result, read_gauges, take_first_event
from .pools import expire_lease, make_room
from .rules import REGISTRY
from .sessions import compile_ops
from .settle import settle
from .blocks import empty_table
from .steptrace import Tracer
from .workload import arrival_event, load_trace, start_workload

#: How many events pass between two calls of the progress callback.
PROGRESS_EVERY = 4096


def build_machine(program: ir.Program, observer=None, trace_sessions=()) -> Machine:
    """The machine of ``program``, with the parts made of rules installed: the
    compiled statements, each event kind's rule and time/advance, every one
    the definition's (the fast engine, semantics/fast, installs its own
    forms in a machine it builds)."""
    m = Machine(program, stages.KINDS, observer=observer, trace_sessions=trace_sessions)
    m.ops = compile_ops(m)
    m.take_first_event = lambda c: take_first_event(m, c)
    m.make_room = make_room
    m.settle = settle
    m.event_rules = {kind.event: kind.complete for kind in m.stage_kinds}
    m.event_rules.update({"arrive": arrival_event, "lease": expire_lease})
    return m


def initial_configuration(m: Machine) -> Configuration:
    program = m.program
    statistics = Statistics(
        pools=(EMPTY_POOL_STATS,) * len(program.pools), stages=(EMPTY_STAGE_STATS,) * len(program.stages),
        engines=tuple(stages.step.EMPTY_STATS if kind.name == "step" else None for kind in m.stage_kinds),
        ended=0, turns=0,
        gauges=(None,) * len(program.gauges))
    return Configuration(
        time=0.0, sessions=immutables.Map(), ready=EMPTY_READY,
        pools=tuple(PoolState(p.cap, p.block, 0.0, 0.0, (), (), (), (), empty_table() if p.share_prefixes else None,
                               (2 if any(g.kind == "Full" for g in p.groups) else 1) if p.groups else 0)
                    for p in program.pools),
        stages=tuple(kind.initial_state(m, s) for s, kind in enumerate(m.stage_kinds)),
        flows=stages.flows.EMPTY, events=(), sequence=0,
        workload=Workload(0, 0, 0, 0, 0, (-1.0, 0)), statistics=statistics,
        areas=(0.0,) * (4 * len(program.pools) + 2 * len(program.stages) + 1), samples=None,
        estimates=(Estimator(),) * len(program.stages), taken=0, dirty=frozenset(), ended_attrs=immutables.Map())


def take_event(m: Machine, c: Configuration) -> Configuration:
    """time/advance to the first pending event's time (the levels integrated),
    the event taken off and counted; then its rule applies."""
    _, _, kind, a, b = c.events[0]
    return m.event_rules[kind](m, m.take_first_event(c), a, b)


def walk(m: Machine, progress: Callable[[float], None] | None = None, every: bool = True) -> Iterator[Configuration]:
    """The configurations after each event and its settle (with ``every``
    false, only the last: a run needs no other, and handing each one out cost
    1 %); the last one is at the end time."""
    program = m.program
    horizon = program.horizon
    limit = program.arrivals
    if limit is not None and not isinstance(program.arrival, (ir.Poisson, ir.Renewal)):
        raise RunError("run { arrivals N; } needs an open workload (arrive poisson or arrive renewal)")
    settle_ = m.settle
    take_first_event = m.take_first_event
    event_rules = m.event_rules
    event_steps = m.event_steps
    c = settle_(m, start_workload(m, initial_configuration(m)))
    if every:
        yield c
    count = 0
    gauges = bool(program.gauges)
    while c.events and c.events[0][0] <= horizon:
        if gauges and c.events[0][0] > c.time:
            c = read_gauges(m, c)
        _, _, kind, a, b = c.events[0]  # take_event, written out
        step = event_steps.get(kind)
        if step is None:
            c = settle_(m, event_rules[kind](m, take_first_event(c), a, b))
        else:  # the three as one (a fast engine's machine: semantics/fast/forms.event_steps)
            c = step(m, c, a, b)
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
    """Run ``program`` to its end by the definition and return what it
    produced (semantics.fast.run gives the same bytes, faster)."""
    return run_machine(build_machine(program, trace_sessions=load_trace(program, base_dir)), progress)


def run_machine(m: Machine, progress=None) -> RunResult:
    """Run the machine's program to its end (walk) and return what it produced.

    While it runs, the cyclic garbage collector is off (``gc.disable``, and
    on again at its end if it was on): a run's values are trees of tuples,
    maps and numbers, which can hold no reference cycle, so reference
    counting frees everything a run drops, and the collector's passes over
    the many short-lived records it makes would find nothing (they cost a
    run 3 %, and, before the run froze the older objects, up to a tenth when
    they walked the whole process; docs/semantics.md, Speed). Nothing of the
    run's values depends on it."""
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
    many are yielded, counting only rules at time >= ``from_time``. The
    trace's header line is semantics.tracefile.header's (it names the
    program by its IR's digest, which the core does not compute)."""
    buffer: list[dict] = []
    tracer = Tracer()  # sees every rule, from the run's start: jobs are named by their ordinals in the whole run

    def observe(rule: str, c: Configuration, fields: dict) -> None:
        record = tracer.record(rule, c.time, fields)
        if c.time >= from_time:
            buffer.append(record)

    m = build_machine(program, observer=observe, trace_sessions=load_trace(program, base_dir))
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

    m = build_machine(program, observer=observe, trace_sessions=load_trace(program, base_dir))
    last = None
    for last in walk(m):
        yield from buffer
        buffer.clear()
    yield "end", last


def all_rules() -> list:
    """Every rule of the semantics (rules.Rule), by family then name: the
    driver has imported every rule module, so the registry is whole."""
    return sorted(REGISTRY.values(), key=lambda r: tuple(r.name.split("/")))


def machine_for(program: ir.Program, *, base_dir: str | None = None) -> Machine:
    """The machine of ``program`` (for tests that apply rules by hand, e.g. settle twice)."""
    return build_machine(program, trace_sessions=load_trace(program, base_dir))
