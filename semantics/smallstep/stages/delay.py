"""delay: "every job on its own at rate 1, no waiting" (seed 002 §3, Stages).

IR version 13 has no delay kind: ``delay`` is written ``ps(present)``, a ps
stage whose capacity is the number of jobs present, so that each job runs at
rate 1. Such a stage is this kind (Machine.kind_names): each job completes at
exactly its arrival plus its work, by an event of its own scheduled when it
arrives, rather than through a ps stage's virtual time, whose sums of rates
times intervals round differently (a send at ``done + think`` must be that
sum to the last bit for the step clock to be vLLM's: docs/semantics.md).

- ``stage/delay-enter``: the job's completion is an event at now plus its work.
- ``stage/delay-complete``: the job completes; jobs due at one instant
  complete in the order their events were scheduled, which is the order they
  started (seed 002 §3, Ties).
"""

from __future__ import annotations

from typing import NamedTuple

from ..configuration import Configuration, build, insert_event, remove_event, replace_at, setter
from ..machine import Machine
from ..rules import rule
from . import ps
from .jobs import at_stage, finish_job

KIND = "delay"
EVENT = "delay"  # a job's completion (a, b = stage, job)


class DelayJob(NamedTuple):
    job_id: int  # its sequence number: start order
    owner: int | None  # a session serial, or None for a spill write
    arrived: float
    started: float  # = arrived: a delay never waits
    spill: tuple[int, int, float] | None  # (tier pool, source serial, units) of a spill write
    work: float
    due: tuple[float, int]  # its completion event's key


class DelayState(NamedTuple):
    jobs: tuple[DelayJob, ...]  # start order


EMPTY = DelayState(())

_set_jobs = setter(DelayState, "jobs")
_set_entered = setter(Configuration, "stages", "sessions", "events", "sequence")


def initial_state(m: Machine, s: int) -> DelayState:
    return EMPTY


# -- the state as expressions read it -------------------------------------------


# present, busy (every job present is in service) and level (1 while any job is present): a ps stage's,
# which a delay stage is (ps(present))
present, busy, level = ps.present, ps.busy, ps.level


budget_plan = None  # budget_left reads a step stage only (the linker)


def work(m: Machine, c: Configuration, s: int) -> float:
    """``work(s)``: what is left of every job's work."""
    return sum(max(0.0, j.due[0] - c.time) for j in c.stages[s].jobs)


# -- rules ----------------------------------------------------------------------


@rule("stage/delay-enter", "the job runs on its own at rate 1: its completion is an event at now plus its work",
      "002 §3 Stages: delay: every job on its own at rate 1.")
def enter(m: Machine, c: Configuration, stages: tuple[int, ...], owner, past, work: float, spill,
          job_id: int, how=None) -> Configuration:
    s = stages[0]
    st = c.stages[s]
    due = (c.time + work, job_id + 1)
    job = build(DelayJob, (job_id, None if owner is None else owner.serial, c.time, c.time, spill, work, due))
    c = _set_entered(c, replace_at(c.stages, s, _set_jobs(st, st.jobs + (job,))), at_stage(c, owner, past, s, job_id),
                     insert_event(c.events, due, EVENT, s, job_id), job_id + 2)
    if m.observer:
        m.notify("stage/delay-enter", c, {"stage": m.stage_name(s), "job": job_id, "session": job.owner, "work": work})
    return c


@rule("stage/delay-complete", "the job's work is done: its session goes on",
      "002 §3 Stages: delay: every job on its own at rate 1; Ties: events at one instant: the order they were scheduled")
def complete(m: Machine, c: Configuration, s: int, job_id: int) -> Configuration:
    st = c.stages[s]
    k = _index(st.jobs, job_id)
    job = st.jobs[k]
    return finish_job(m, c, s, job, "stage/delay-complete", replace_at(c.stages, s, _set_jobs(st, st.jobs[:k] + st.jobs[k + 1:])),
                      c.events, c.sequence)


def leave(m: Machine, c: Configuration, s: int, job_id: int) -> Configuration:
    """The kind's part of stage/leave: the job and its completion event are taken off."""
    st = c.stages[s]
    k = _index(st.jobs, job_id)
    return c._replace(stages=replace_at(c.stages, s, _set_jobs(st, st.jobs[:k] + st.jobs[k + 1:])),
                      events=remove_event(c.events, st.jobs[k].due))


def _index(jobs: tuple, job_id: int) -> int:
    k = 0
    while jobs[k].job_id != job_id:
        k += 1
    return k
