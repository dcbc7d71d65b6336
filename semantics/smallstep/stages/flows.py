"""Flows: a job that holds several stages at once (``run a, b (w)``), and
every job on a stage some such run holds (seed 002 §3, Stages).

"run a, b (w) is one job that holds a and b from its start to its end: a
flow, whose work goes down at one rate at all its stages, set by the
program's share from their capacities. share maxmin is max-min fair: every
flow's rate rises together until a stage fills, the flows through it stop
there, and the others go on. share bottleneck gives each flow its equal
share at the tightest of its stages, min over s of φ_s / n_s".

- ``stage/flow-enter``: the flow joins; every flow's rate is set again.
- ``stage/flow-complete``: the flow with the least time left (then start
  order) finishes.

The flows of every shared stage are one state (``Configuration.flows``),
since a flow's rate depends on every stage it holds; a shared stage's own
entry in ``Configuration.stages`` is unused.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ..configuration import Configuration, insert_event, remove_event
from ..machine import Machine
from ..rules import rule
from .jobs import at_stage, finish_job

KIND = "flows"
EVENT = "flow"  # the next completion of any flow


class Flow(NamedTuple):
    job_id: int  # its sequence number: start order
    owner: int | None  # a session serial, or None for a spill write
    arrived: float
    started: float  # = arrived: a flow never waits
    spill: tuple[int, int, float] | None  # (tier pool, source serial, units) of a spill write
    remaining: float  # its work left at the flow state's last update
    stages: tuple[int, ...]  # the stages it holds
    rate: float  # its current rate


class FlowState(NamedTuple):
    """The flows of every stage shared as flows."""

    flows: tuple[Flow, ...]  # start order
    updated: float
    due: tuple[float, int] | None  # the next completion event
    due_job: int  # the flow that event completes (-1: none)


EMPTY = FlowState((), 0.0, None, -1)


def initial_state(m: Machine, s: int) -> None:
    return None  # the flows are Configuration.flows


# -- the state as expressions read it -------------------------------------------


def present(m: Machine, c: Configuration, s: int) -> int:
    return sum(1 for f in c.flows.flows if s in f.stages)


def busy(m: Machine, c: Configuration, s: int) -> float:
    """``busy(s)``: every flow holding the stage is in service."""
    return float(present(m, c, s))


def level(m: Machine, c: Configuration, s: int) -> float:
    """Utilisation now: the capacity the flows carry, Σ rate / φ."""
    return sum(f.rate for f in c.flows.flows if s in f.stages) / m.flow_capacity[s]


budget_plan = None  # budget_left reads a step stage only (the linker)

def work(m: Machine, c: Configuration, s: int) -> float:
    """``work(s)``: what is left of every flow holding the stage."""
    dt = c.time - c.flows.updated
    return sum(max(0.0, f.remaining - f.rate * dt) for f in c.flows.flows if s in f.stages)


# -- rules ----------------------------------------------------------------------


@rule("stage/flow-enter", "the job holds every stage of the run from its start to its end; every flow's rate is set again under the share",
      "002 §3 Stages: run a, b (w) is one job that holds a and b from its start to its end: a flow, whose work goes down at one rate at all its stages, set by the program's share")
def enter(m: Machine, c: Configuration, stages: tuple[int, ...], owner, past, work: float, spill,
          job_id: int, how=None) -> Configuration:
    """stage/flow-enter: the job holds every stage of ``stages`` from its start to its end."""
    c = c._replace(sequence=job_id + 1, sessions=at_stage(c, owner, past, stages[0], job_id))
    owner = None if owner is None else owner.serial
    fl = _advance(c)
    flow = Flow(job_id, owner, c.time, c.time, spill, work, tuple(stages), 0.0)
    c = reschedule(m, c._replace(flows=fl._replace(flows=fl.flows + (flow,))))
    if m.observer:
        m.notify("stage/flow-enter", c, {"stages": [m.stage_name(s) for s in stages], "job": job_id,
                                         "session": owner, "work": work})
    return c


@rule("stage/flow-complete", "the flow with the least time left, then start order, finishes",
      "002 §3 Stages: share maxmin is max-min fair ...; share bottleneck gives each flow its equal share at the tightest of its stages")
def complete(m: Machine, c: Configuration, _a: int = 0, _b: int = 0) -> Configuration:
    """stage/flow-complete: the flow with the least time left (then start order) finishes."""
    fl = _advance(c)
    k = min(range(len(fl.flows)), key=lambda i: (_time_left(fl.flows[i]), fl.flows[i].job_id))
    flow = fl.flows[k]
    c = reschedule(m, c._replace(flows=fl._replace(flows=fl.flows[:k] + fl.flows[k + 1:], due=None)))
    return finish_job(m, c, flow.stages[0], flow, "stage/flow-complete", c.stages, c.events, c.sequence, flow.stages)


def leave(m: Machine, c: Configuration, s: int, job_id: int) -> Configuration:
    """The kind's part of stage/leave: the flow is taken off its stages; every rate is set again."""
    fl = _advance(c)
    return reschedule(m, c._replace(flows=fl._replace(flows=tuple(f for f in fl.flows if f.job_id != job_id))))


# -- rates and the completion event ----------------------------------------------


def _time_left(f: Flow) -> float:
    return f.remaining / f.rate if f.rate > 0 else math.inf


def _advance(c: Configuration) -> FlowState:
    fl = c.flows
    dt = c.time - fl.updated
    if dt == 0:
        return fl
    return fl._replace(flows=tuple(f._replace(remaining=max(0.0, f.remaining - f.rate * dt)) for f in fl.flows),
                       updated=c.time)


def compute_rates(m: Machine, flows: tuple[Flow, ...]) -> list[float]:
    """Each flow's rate under the program's share."""
    counts: dict[int, int] = {}
    for f in flows:
        for s in f.stages:
            counts[s] = counts.get(s, 0) + 1
    if m.program.share == "Bottleneck":
        return [min(m.flow_capacity[s] / counts[s] for s in f.stages) for f in flows]
    # max-min fairness by progressive filling: every unfrozen flow's rate
    # rises together until a stage fills; the flows through it stop there
    rates = [0.0] * len(flows)
    left = {s: m.flow_capacity[s] for s in sorted(counts)}
    active = set(range(len(flows)))
    while active:
        through = {s: 0 for s in left}
        for k in active:
            for s in flows[k].stages:
                through[s] += 1
        rise = min(left[s] / n for s, n in sorted(through.items()) if n)
        for k in active:
            rates[k] += rise
        full = set()
        for s in sorted(through):
            left[s] -= rise * through[s]
            if through[s] and left[s] <= 1e-12 * m.flow_capacity[s]:
                full.add(s)
        active = {k for k in active if not full.intersection(flows[k].stages)}
    return rates


def reschedule(m: Machine, c: Configuration) -> Configuration:
    """Every flow's rate under the share, and the next completion: the flow
    with the least time left, then start order. As for ps, a pending
    completion whose flow and rate are unchanged keeps its event."""
    fl = c.flows
    rates = compute_rates(m, fl.flows)
    flows = tuple(f._replace(rate=r) for f, r in zip(fl.flows, rates))
    first = min(((_time_left(f), f.job_id, f.rate) for f in flows), default=None)
    if fl.due is not None and first is not None and first[1] == fl.due_job and first[2] == _rate_of(fl, fl.due_job):
        return c._replace(flows=FlowState(flows, c.time, fl.due, fl.due_job))
    events = c.events
    if fl.due is not None:
        events = remove_event(events, fl.due)
    due, job, seq = None, -1, c.sequence
    if first is not None and math.isfinite(first[0]):
        due, job = (c.time + first[0], seq), first[1]
        seq += 1
        events = insert_event(events, due, EVENT)
    return c._replace(flows=FlowState(flows, c.time, due, job), events=events, sequence=seq)


def _rate_of(fl: FlowState, job_id: int) -> float | None:
    """The rate flow ``job_id`` had in ``fl`` (None if it is gone)."""
    return next((f.rate for f in fl.flows if f.job_id == job_id), None)
