"""fifo(c): c servers, one job each at rate 1, jobs in arrival order (seed
002 §3, Stages).

- ``stage/fifo-enter``: the job joins the end of the stage's line.
- ``stage/fifo-start``: while a server is free, the first waiting job
  starts; its completion is an event at now plus its work.
- ``stage/fifo-complete``: the job's service ends; the server it frees
  takes the next waiting job (stage/fifo-start).

The first ``busy`` jobs of the line are the ones in service (jobs start in
arrival order), so a free server and a waiting job are two comparisons.
"""

from __future__ import annotations

import bisect
import math
import operator
from typing import NamedTuple

from ..configuration import Configuration, build, insert_event, remove_event, replace_at, setter
from ..machine import Machine
from ..rules import rule
from .jobs import at_stage, finish_job

KIND = "fifo"
EVENT = "job"  # the completion event (a, b = stage, job)


class FifoJob(NamedTuple):
    job_id: int  # its sequence number: start order
    owner: int | None  # a session serial, or None for a spill write
    arrived: float
    started: float  # NaN while it waits for a server
    spill: tuple[int, int, float] | None  # (tier pool, source serial, units) of a spill write
    work: float  # its service time
    due: tuple[float, int] | None  # its completion event's key, once started


class FifoState(NamedTuple):
    jobs: tuple[FifoJob, ...]  # arrival order
    busy: int  # the jobs in service: always the first ``busy`` of ``jobs``


EMPTY = FifoState((), 0)

_set_jobs_busy = setter(FifoState, "jobs", "busy")
_set_jobs = setter(FifoState, "jobs")
_set_started = setter(FifoJob, "started", "due")
_set_joined = setter(Configuration, "stages", "sessions", "sequence")
_NAN = math.nan


def initial_state(m: Machine, s: int) -> FifoState:
    return EMPTY


# -- the state as expressions read it -------------------------------------------


def present(m: Machine, c: Configuration, s: int) -> int:
    return len(c.stages[s].jobs)


def busy(m: Machine, c: Configuration, s: int) -> float:
    """``busy(s)``: the servers in service."""
    return float(c.stages[s].busy)


def level(m: Machine, c: Configuration, s: int) -> float:
    """Utilisation now: busy servers / c."""
    return c.stages[s].busy / m.servers[s]


budget_plan = None  # budget_left reads a step stage only (the linker)


def work(m: Machine, c: Configuration, s: int) -> float:
    """``work(s)``: what is left of every job's service."""
    now = c.time
    return sum(j.work - (now - j.started) if j.started == j.started else j.work for j in c.stages[s].jobs)


# -- rules ----------------------------------------------------------------------


@rule("stage/fifo-enter", "the job joins the end of the stage's line",
      "002 §3 Stages: fifo(c): c servers, jobs in arrival order at rate 1")
def enter(m: Machine, c: Configuration, stages: tuple[int, ...], owner, past, work: float, spill,
          job_id: int, how=None) -> Configuration:
    """stage/fifo-enter: the job joins the end of the stage's line; it starts
    at once when a server is free (stage/fifo-start)."""
    s = stages[0]
    st = c.stages[s]
    sessions = at_stage(c, owner, past, s, job_id)
    owner = None if owner is None else owner.serial
    job = build(FifoJob, (job_id, owner, c.time, _NAN, spill, work, None))
    c = _set_joined(c, replace_at(c.stages, s, _set_jobs(st, st.jobs + (job,))), sessions, job_id + 1)
    if m.observer:
        m.notify("stage/fifo-enter", c, {"stage": m.stage_name(s), "job": job_id, "session": owner, "work": work})
    return start(m, c, s) if st.busy < m.servers[s] else c  # stage/fifo-start's premise: a server is free


@rule("stage/fifo-start", "while a server is free, the first waiting job starts; its completion is an event at now plus its work",
      "002 §3 Stages: fifo(c): c servers, jobs in arrival order at rate 1")
def start(m: Machine, c: Configuration, s: int) -> Configuration:
    """stage/fifo-start: while a server is free, the first waiting job starts."""
    st = c.stages[s]
    jobs, n, events, seq, started = st.jobs, st.busy, c.events, c.sequence, []
    while n < m.servers[s] and n < len(jobs):
        started.append(jobs[n].job_id)
        jobs, n, events, seq = start_next(s, jobs, n, events, seq, c.time)
    if not started:
        return c
    c = c._replace(stages=replace_at(c.stages, s, _set_jobs_busy(st, jobs, n)), events=events, sequence=seq)
    if m.observer:
        m.notify("stage/fifo-start", c, {"stage": m.stage_name(s), "jobs": started})
    return c


def start_next(s: int, jobs: tuple, busy: int, events: tuple, seq: int, now: float):
    """The conclusion of stage/fifo-start for one free server: with ``busy``
    of fifo stage ``s``'s ``jobs`` in service (the first ``busy``), the first
    waiting one starts, its completion event at ``now`` plus its work, taking
    sequence number ``seq``. Returns (jobs, busy, events, seq) after it."""
    job = jobs[busy]
    due = (now + job.work, seq)
    return (jobs[:busy] + (_set_started(job, now, due),) + jobs[busy + 1:], busy + 1,
            insert_event(events, due, EVENT, s, job.job_id), seq + 1)


@rule("stage/fifo-complete", "the job's service ends; its session goes on",
      "002 §3 Stages: fifo(c): c servers, jobs in arrival order at rate 1")
def complete(m: Machine, c: Configuration, s: int, job_id: int) -> Configuration:
    """stage/fifo-complete: the job's service ends; the server it frees
    starts the next waiting job (stage/fifo-start)."""
    st = c.stages[s]
    jobs = st.jobs
    k = _in_service(jobs, job_id)
    job = jobs[k]
    c = finish_job(m, c, s, job, "stage/fifo-complete",
                   replace_at(c.stages, s, _set_jobs_busy(st, jobs[:k] + jobs[k + 1:], st.busy - 1)),
                   c.events, c.sequence)
    return start(m, c, s)


def leave(m: Machine, c: Configuration, s: int, job_id: int) -> Configuration:
    """The kind's part of stage/leave: the job is taken off the line; a
    server it held takes the next waiting job (stage/fifo-start, inside the rule)."""
    st = c.stages[s]
    k = _index(st.jobs, job_id, len(st.jobs))
    job = st.jobs[k]
    events = remove_event(c.events, job.due) if job.due is not None else c.events
    st = st._replace(jobs=st.jobs[:k] + st.jobs[k + 1:], busy=st.busy - 1 if k < st.busy else st.busy)
    c = c._replace(stages=replace_at(c.stages, s, st), events=events)
    return start(m, c, s) if st.busy < m.servers[s] else c  # stage/fifo-start's premise: a server is free


_JOB_ID = operator.attrgetter("job_id")


def _in_service(jobs: tuple, job_id: int) -> int:
    """The index of job ``job_id``, in service: among the first ``busy`` (a
    search among those, not a scan: the first busy jobs are in start order)."""
    return _index(jobs, job_id, len(jobs))


def _index(jobs: tuple, job_id: int, end: int) -> int:
    """The index of job ``job_id`` in ``jobs[:end]``. The line is in arrival
    order and a job's id is the sequence number it arrived with, so the ids
    ascend along it and a binary search finds it (a scan in Python was the
    quadratic part of a stage with tens of thousands of jobs in service)."""
    k = bisect.bisect_left(jobs, job_id, 0, end, key=_JOB_ID)
    assert k < end and jobs[k].job_id == job_id, "no such job at the stage"
    return k
