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
from .observables import holding_sessions, levels
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
    c = c._replace(time=t, areas=integrate(m, c, t))
    if m.observer:
        m.notify("time/advance", c, {"to": t})
    return c


def take_first_event(m: Machine, c: Configuration) -> Configuration:
    """time/advance to the first pending event's time, that event taken off
    the pending events and counted (its rule applies next: driver.take_event).
    The definition; an unobserved run uses ``make_event_taker``'s, the same
    written out for its program (fast.py)."""
    t = c.events[0][0]
    if t > c.time:  # time/advance's premise: the event is later
        c = advance_time(m, c, t)
    return c._replace(events=c.events[1:], taken=c.taken + 1)


def make_event_taker(m: Machine):
    """``take_first_event`` written out as one function of ``m``'s program:
    the configuration unpacked once, each level one expression of its pools
    and stages, the new configuration built once (it runs at every event;
    the loop over the levels and its calls were 4 % of a run, and the
    separate update of the configuration another 2 %).
    tests/test_smallstep_properties.py checks it equals ``take_first_event``
    bit for bit. A program with flows reads its levels by ``levels`` itself."""
    fields = Configuration._fields
    lines = ["def take_first_event(c):",
             f"    {', '.join(fields)}, = c",
             "    t = events[0][0]"] + _integration_lines(m)
    changed = {"time": "t", "events": "events[1:]", "taken": "taken + 1"}
    lines.append(f"    return new(Configuration, ({', '.join(changed.get(f, f) for f in fields)},))")
    return _define(m, lines, "take_first_event")


def make_areas_at(m: Machine):
    """``areas_at(c, t)``: the areas ``take_first_event`` leaves when the
    first pending event is at ``t`` (``integrate(m, c, t)``), written out as
    make_event_taker's are, for the fast forms that take an event and apply
    its rule in one update (fast.EVENT_STEPS). tests/test_smallstep_fast.py
    checks it against take_first_event."""
    lines = ["def areas_at(c, t):",
             f"    {', '.join(Configuration._fields)}, = c"] + _integration_lines(m) + ["    return areas"]
    return _define(m, lines, "areas_at")


def _integration_lines(m: Machine) -> list[str]:
    """Python lines that set ``areas`` to the areas after time passes from
    ``time`` to ``t`` (integrate), with the configuration's fields unpacked
    into locals of their names."""
    fields = Configuration._fields
    assert {"time", "events", "areas", "taken", "pools", "stages", "sessions"} <= set(fields)
    if m.warmup > 0:
        interval = f"t - (time if time > {m.warmup!r} else {m.warmup!r})"
    else:
        interval = "t - time"  # time is never below 0, so all of it counts
    lines = [f"    dt = {interval}",
             "    if dt > 0:"]
    if any(kind.level_source is None for kind in m.stage_kinds):
        lines.append("        areas = tuple([x + level * dt for x, level in zip(areas, levels(m, c))])")
    else:
        terms, k = [], 0
        for p in range(len(m.program.pools)):
            lines.append(f"        p{p} = pools[{p}]")
            terms += [f"areas[{k}] + p{p}.allocated * dt", f"areas[{k + 1}] + p{p}.cached * dt",
                      f"areas[{k + 2}] + len(p{p}.queue) * dt",
                      f"areas[{k + 3}] + {'len(p%d.holders)' % p if m.holds_once else 'holding_sessions(p%d)' % p} * dt"]
            k += 4
        for s, kind in enumerate(m.stage_kinds):
            lines.append(f"        s{s} = stages[{s}]")
            lines.append(f"        n{s} = len(s{s}.jobs)")
            terms += [f"areas[{k}] + n{s} * dt", f"areas[{k + 1}] + {kind.level_source(m, s, f's{s}')} * dt"]
            k += 2
        terms.append(f"areas[{k}] + len(sessions) * dt")
        lines.append("        areas = (" + ", ".join(terms) + ",)")
    return lines


def _define(m: Machine, lines: list[str], name: str):
    namespace: dict = {"m": m, "levels": levels, "holding_sessions": holding_sessions, "new": tuple.__new__,
                       "Configuration": Configuration}
    exec("\n".join(lines) + "\n", namespace)
    return namespace[name]


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
