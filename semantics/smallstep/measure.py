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
from ..results import GaugeRecord, ObserveRecord, PoolRecord, RunResult, StageRecord
from .configuration import Configuration, iterate_cons, replace_at
from .machine import Machine
from .stages import busy_level, count_present
from .values import Env


def advance_time(m: Machine, c: Configuration, t: float) -> Configuration:
    """time/advance: time passes from ``c.time`` to ``t``; every level is integrated over the part after the warm-up."""
    start = max(c.time, m.program.warmup)
    dt = t - start
    stats = c.statistics
    if dt > 0:
        pools = tuple(ps._replace(used_area=ps.used_area + pool.allocated * dt,
                                  cached_area=ps.cached_area + pool.cached * dt,
                                  queue_area=ps.queue_area + len(pool.queue) * dt,
                                  holders_area=ps.holders_area + len(pool.holders) * dt)
                      for ps, pool in zip(stats.pools, c.pools))
        stages = tuple(ss._replace(number_area=ss.number_area + count_present(m, c, s) * dt,
                                   busy_area=ss.busy_area + busy_level(m, c, s) * dt)
                       for s, ss in enumerate(stats.stages))
        stats = stats._replace(pools=pools, stages=stages, live_area=stats.live_area + len(c.sessions) * dt)
    return c._replace(time=t, statistics=stats)


def read_gauges(m: Machine, c: Configuration) -> Configuration:
    """The gauges' values at the end of the instant; a change point when a value changed."""
    if not m.program.gauges:
        return c
    stats = c.statistics
    gauges = stats.gauges
    env = Env(c)
    for k, gauge in enumerate(m.program.gauges):
        value = m.compiler.compile(gauge.expr)(env)
        last = gauges[k]
        if last is not None and (last[0][1] == value or (last[0][1] != last[0][1] and value != value)):
            continue
        gauges = replace_at(gauges, k, ((c.time, value), last))
    return c._replace(statistics=stats._replace(gauges=gauges))


def _mean(total: float, count: int) -> float:
    return total / count if count else math.nan


def build_result(m: Machine, c: Configuration, end: float) -> RunResult:
    program = m.program
    span = end - program.warmup
    stats = c.statistics

    def average(area: float) -> float:
        return area / span if span > 0 else math.nan

    observes = tuple(ObserveRecord(name, _is_test(_observed_expr(program, k)), tuple(iterate_cons(stats.observes[k])))
                     for k, name in enumerate(program.observes))
    gauges = tuple(GaugeRecord(g.name, tuple(iterate_cons(stats.gauges[k]))) for k, g in enumerate(program.gauges))
    stages = []
    for s, (stage, ss) in enumerate(zip(program.stages, stats.stages)):
        stages.append(StageRecord(
            name=stage.name, index=stage.index, kind=m.kinds[s], mean_number=average(ss.number_area),
            utilization=average(ss.busy_area), completed=ss.completed,
            throughput=ss.completed / span if span > 0 else math.nan,
            mean_wait=_mean(ss.wait_sum, ss.completed), mean_service=_mean(ss.service_sum, ss.completed)))
    pools = []
    for pool, ps in zip(program.pools, stats.pools):
        pools.append(PoolRecord(
            name=pool.name, index=pool.index, mean_used=average(ps.used_area), mean_cached=average(ps.cached_area),
            mean_queue=average(ps.queue_area), mean_holders=average(ps.holders_area),
            mean_wait=_mean(ps.wait_sum, ps.wait_count), admissions=ps.admissions,
            evicted_entries=ps.evicted_entries, evicted_units=ps.evicted_units, preemptions=ps.preemptions,
            spills=ps.spills, rejected=ps.rejected, stuck=ps.stuck, explanations=ps.explanations))
    return RunResult(horizon=program.horizon, end=end, warmup=program.warmup, seed=program.seed,
                     events=stats.events, arrivals=stats.arrivals, ended=stats.ended, turns=stats.turns,
                     mean_live=average(stats.live_area), observes=observes, gauges=gauges, stages=tuple(stages),
                     pools=tuple(pools))


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
