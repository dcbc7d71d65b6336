"""Statistics (seed 002 §3, Statistics and Gauges): the accumulators the
configuration carries, the time passing (``time/advance``), the gauges read at
the end of every instant, and the RunResult a finished run produces.

Time averages integrate each level over [warmup, end]: stage jobs present
and utilisation (busy servers / c for fifo; 1 while any job is present for
ps; Σ rate/φ for a stage shared by flows), pool used, cached, queue length
and holders, live sessions. Counts (completions, admissions, evictions,
preemptions, spills, rejections, stuck, arrivals ended, turns) and the means
of waits and services count what happens at or after the warm-up.
"""

from __future__ import annotations

import math

from .. import ir
from ..results import GaugeRecord, ObserveRecord, PoolRecord, RunResult, StageRecord, StepStageRecord
from .configuration import Configuration, Statistics, iterate_cons, replace_at, setter
from .machine import Machine
from .observables import levels
from .rules import rule
from .values import Env


def integrate(m: Machine, c: Configuration, t: float) -> tuple[float, ...]:
    """The areas after time passes from ``c.time`` to ``t``: every area plus
    its level (``levels``) times the part of the interval after the warm-up."""
    warmup = m.warmup
    dt = t - (c.time if c.time > warmup else warmup)
    if dt <= 0:
        return c.areas
    return tuple([a + level * dt for a, level in zip(c.areas, levels(m, c))])


@rule("time/advance", "time passes to the next event (or the horizon); every level is integrated over the part after the warm-up",
      "002 §3: Flow lets time pass at the stages; Statistics: time averages over [warmup, end]")
def advance_time(m: Machine, c: Configuration, t: float) -> Configuration:
    c = _set_time_areas(c, t, integrate(m, c, t))
    if m.observer:
        m.notify("time/advance", c, {"to": t})
    return c


def take_first_event(m: Machine, c: Configuration) -> Configuration:
    """time/advance to the first pending event's time, that event taken off
    the pending events and counted (its rule applies next: driver.take_event).
    The definition; the fast engine uses semantics/fast/measure.make_event_taker's,
    the same written out for its program."""
    t = c.events[0][0]
    if t > c.time:  # time/advance's premise: the event is later
        c = advance_time(m, c, t)
    return _set_events_taken(c, c.events[1:], c.taken + 1)


def read_gauges(m: Machine, c: Configuration) -> Configuration:
    """The gauges' values at the end of the instant; a change point when a
    value changed (``c`` itself when none did: the common case, read at
    every instant)."""
    if not m.gauge_reads:
        return c
    gauges = changed = c.statistics.gauges
    env = Env(c)
    for k, read in enumerate(m.gauge_reads):
        value = read(env)
        last = changed[k]
        if last is not None and (last[0][1] == value or (last[0][1] != last[0][1] and value != value)):
            continue
        changed = replace_at(changed, k, ((c.time, value), last))
    if changed is gauges:
        return c
    return _set_statistics(c, _set_gauges(c.statistics, changed))


_set_statistics = setter(Configuration, "statistics")
_set_time_areas = setter(Configuration, "time", "areas")
_set_events_taken = setter(Configuration, "events", "taken")
_set_gauges = setter(Statistics, "gauges")


def _mean(total: float, count: int) -> float:
    return total / count if count else math.nan


def build_result(m: Machine, c: Configuration, end: float) -> RunResult:
    program = m.program
    span = end - program.warmup
    stats = c.statistics

    def average(area: float) -> float:
        return area / span if span > 0 else math.nan

    samples = [[] for _ in program.observes]
    for sample in iterate_cons(c.samples):
        samples[sample[0]].append(sample[1:])
    observes = tuple(ObserveRecord(name, _is_test(_observed_expr(program, k)), tuple(samples[k]))
                     for k, name in enumerate(program.observes))
    gauges = tuple(GaugeRecord(g.name, tuple(iterate_cons(stats.gauges[k]))) for k, g in enumerate(program.gauges))
    areas = c.areas
    base = 4 * len(program.pools)
    stages = []
    for s, (stage, ss) in enumerate(zip(program.stages, stats.stages)):
        steps = stats.engines[s]
        extra = {} if steps is None else dict(
            iterations=steps.iterations, prefill_only=steps.prefill_only, decode_only=steps.decode_only,
            mixed=steps.mixed, mean_decodes=steps.decodes / steps.iterations if steps.iterations else math.nan,
            empty=steps.empty, tokens=steps.tokens, decodes=steps.decodes,
            itl_gaps=tuple(iterate_cons(steps.gaps)), scheduled=steps.scheduled, offered=steps.offered,
            preemptions=steps.preemptions, served=tuple(_pool_label(program, p) for p in m.steps[s].served),
            memory=None if m.steps[s].memory is None else _pool_label(program, m.steps[s].memory))
        stages.append((StageRecord if steps is None else StepStageRecord)(
            name=stage.name, index=stage.index, kind=_REPORTED_KIND.get(m.kind_names[s], m.kind_names[s]),
            mean_number=average(areas[base + 2 * s]),
            utilization=average(areas[base + 2 * s + 1]), completed=ss.completed,
            throughput=ss.completed / span if span > 0 else math.nan,
            mean_wait=_mean(ss.wait_sum, ss.completed), mean_service=_mean(ss.service_sum, ss.completed), **extra))
    pools = []
    unfinished = [0] * len(program.pools)  # per pool, its stuck sessions still live at the end
    for s in c.sessions.values():
        if s.stuck >= 0:
            unfinished[s.stuck] += 1
    for p, (pool, ps) in enumerate(zip(program.pools, stats.pools)):
        used, cached, queue, holders = areas[4 * p:4 * p + 4]
        pools.append(PoolRecord(
            name=pool.name, index=pool.index, mean_used=average(used), mean_cached=average(cached),
            mean_queue=average(queue), mean_holders=average(holders),
            mean_wait=_mean(ps.wait_sum, ps.wait_count), admissions=ps.admissions,
            evicted_entries=ps.evicted_entries, evicted_units=ps.evicted_units, preemptions=ps.preemptions,
            spills=ps.spills, rejected=ps.rejected, stuck=ps.stuck, stuck_unfinished=unfinished[p],
            explanations=ps.explanations))
    return RunResult(horizon=program.horizon, end=end, warmup=program.warmup, seed=program.seed,
                     events=c.taken, arrivals=c.workload.next_serial, ended=stats.ended, turns=stats.turns,
                     mean_live=average(areas[-1]), observes=observes, gauges=gauges, stages=tuple(stages),
                     pools=tuple(pools))


def _pool_label(program: ir.Program, p: int) -> str:
    pool = program.pools[p]
    return pool.name if pool.index is None else f"{pool.name}[{pool.index}]"


#: the kind a stage is reported as (results.StageRecord: "fifo", "ps", "step"): delay and flows are ps stages
_REPORTED_KIND = {"flows": "ps", "delay": "ps"}


def _observed_expr(program: ir.Program, k: int):
    """The expression of the first Observe statement of observation ``k``."""
    for block in program.blocks:
        for stmt in block:
            if isinstance(stmt, ir.Observe) and stmt.index == k:
                return stmt.expr
    return None


def _is_test(e) -> bool:
    """A test: the outermost operator a comparison, &&, || or ! (seed 002 §3 Statistics)."""
    while isinstance(e, ir.Cost):
        e = e.expr
    if isinstance(e, ir.Binary):
        return e.op in ir.TEST_OPS
    return isinstance(e, ir.Unary) and e.op == "Not"
