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

from ..configuration import (AT_STAGE, READY, Configuration, Session, StageStats, Statistics, build, insert_event,
                             install_fast_replace, remove_event, replace_at, setter)
from ..machine import MAX_READIES_PER_INSTANT, Machine, ready_session
from ..rules import rule
from . import jobs as stage_jobs
from .jobs import at_stage, check_room_at_stage, finish_job

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


for _record_type in (FifoJob, FifoState):
    install_fast_replace(_record_type)

EMPTY = FifoState((), 0)

_set_jobs_busy = setter(FifoState, "jobs", "busy")
_set_jobs = setter(FifoState, "jobs")
_set_started = setter(FifoJob, "started", "due")
_set_entered = setter(Configuration, "stages", "sessions", "events", "sequence")
_set_joined = setter(Configuration, "stages", "sessions", "sequence")
_NAN = math.nan
# (complete_fast's: jobs.finish_job's and machine.ready_session's updates)
_set_stage_stats = setter(Statistics, "stages")
_set_at_stage = setter(Session, "status", "job", "pc", "draws")
_set_ready = setter(Session, "status", "readies", "job", "growth", "pending")
_set_finished_ready = setter(Configuration, "sessions", "ready", "statistics", "stages", "events", "sequence")


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


def level_source(m: Machine, s: int, state: str) -> str:
    """``level`` as a Python expression of the stage's state record named ``state`` (measure.make_event_taker)."""
    return f"({state}.busy / {m.servers[s]!r})"


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
    check_room_at_stage(m, c, s, len(st.jobs), owner)
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


# -- fast forms (installed when no step trace observes the run: fast.py) ---------


def enter_fast(m: Machine, c: Configuration, stages: tuple[int, ...], owner, past, work: float, spill,
               job_id: int, how=None) -> Configuration:
    """stage/fifo-enter, then stage/fifo-start when a server is free and no
    job waits (a completion starts the next job at once, so a free server
    never leaves one waiting), as one update."""
    s = stages[0]
    all_stages = c.stages
    st = all_stages[s]
    n = st.busy
    jobs = st.jobs
    present = len(jobs)
    if present >= stage_jobs.MAX_JOBS_AT_STAGE:
        return enter(m, c, stages, owner, past, work, spill, job_id)  # the definition refuses it
    if n < m.servers[s] and n != present:  # a free server and a waiting job: not a reachable configuration, but the definition decides
        return enter(m, c, stages, owner, past, work, spill, job_id)
    if owner is None or past is None:
        sessions = at_stage(c, owner, past, s, job_id)
        owner = None if owner is None else owner.serial
    else:  # jobs.at_stage, written out
        serial = owner.serial
        sessions = c.sessions.set(serial, _set_at_stage(owner, AT_STAGE, (s, job_id), past[0], past[1]))
        owner = serial
    now = c.time
    if n < m.servers[s]:  # a server is free (and no job waits): the job starts
        due = (now + work, job_id + 1)
        job = build(FifoJob, (job_id, owner, now, now, spill, work, due))
        return _set_entered(c, all_stages[:s] + (_set_jobs_busy(st, jobs + (job,), n + 1),) + all_stages[s + 1:],
                            sessions, insert_event(c.events, due, EVENT, s, job_id), job_id + 2)
    job = build(FifoJob, (job_id, owner, now, _NAN, spill, work, None))
    return _set_joined(c, all_stages[:s] + (_set_jobs(st, jobs + (job,)),) + all_stages[s + 1:], sessions, job_id + 1)


def complete_fast(m: Machine, c: Configuration, s: int, job_id: int) -> Configuration:
    """stage/fifo-complete then stage/fifo-start as one update (a completion
    frees one server, so it starts at most one job); for a session's job
    when the program reads no estimates, jobs.finish_job written out (the
    completion counted at or after the warm-up, the session made ready)."""
    st = c.stages[s]
    jobs = st.jobs
    k = 0 if jobs[0].job_id == job_id else _in_service(jobs, job_id)  # the first job, with one server
    job = jobs[k]
    now = c.time
    stages, events, seq = _leave_and_start_next(c.stages, st, s, k, now, c.events, c.sequence)
    owner = job.owner
    if owner is None or m.reads_estimates:
        return finish_job(m, c, s, job, "stage/fifo-complete", stages, events, seq)
    stats, session = _counted_and_ready(m, c, s, job, now)
    ready = c.ready
    return _set_finished_ready(c, c.sessions.set(owner, session), (ready[0], (owner, ready[1])), stats, stages,
                               events, seq)


def _leave_and_start_next(stages: tuple, st, s: int, k: int, now: float, events: tuple, seq: int) -> tuple:
    """The completing job ``k`` leaves and, stage/fifo-start written out
    (start_next), the first waiting job starts on the server it frees: the
    stages, the events and the sequence number after."""
    jobs, n = st.jobs, st.busy - 1
    jobs = jobs[:k] + jobs[k + 1:]
    if n < len(jobs):
        waiting = jobs[n]
        due = (now + waiting.work, seq)
        jobs = jobs[:n] + (_set_started(waiting, now, due),) + jobs[n + 1:]
        events = insert_event(events, due, EVENT, s, waiting.job_id)
        n += 1
        seq += 1
    return stages[:s] + (_set_jobs_busy(st, jobs, n),) + stages[s + 1:], events, seq


def _counted_and_ready(m: Machine, c: Configuration, s: int, job, now: float) -> tuple:
    """jobs.finish_job for a session's job, written out: the statistics with
    the completion counted at or after the warm-up, and the session made
    ready at ``now`` (machine.ready_session, written out)."""
    stats = c.statistics
    if now >= m.warmup:
        counted = stats.stages
        old = counted[s]
        started = job.started
        stats = _set_stage_stats(stats, counted[:s] + (build(StageStats, (
            old.completed + 1, old.wait_sum + started - job.arrived, old.service_sum + now - started)),) + counted[s + 1:])
    session = c.sessions[job.owner]
    instant, count = session.readies
    if instant != now:
        return stats, _set_ready(session, READY, (now, 1), None, None, None)
    if count < MAX_READIES_PER_INSTANT:
        return stats, _set_ready(session, READY, (now, count + 1), None, None, None)
    return stats, ready_session(c._replace(time=now), session)  # the backstop's error


def complete_step(m: Machine, c: Configuration, s: int, job_id: int) -> Configuration:
    """Fast form (fast.EVENT_STEPS) of the driver's step at a fifo
    completion event: time/advance to it, the event taken off
    (take_first_event), ``complete_fast``, and settle, as one update of the
    configuration and a run of the job's session (which settle, finding it
    the only ready one, runs first: settle.settle_ready). A spill write's
    job, a program that reads estimates, or a ready queue that is not empty
    (no walk leaves one) take the forms one by one."""
    st = c.stages[s]
    jobs = st.jobs
    k = 0 if jobs[0].job_id == job_id else _in_service(jobs, job_id)  # the first job, with one server
    job = jobs[k]
    owner = job.owner
    ready = c.ready
    if owner is None or m.reads_estimates or ready[0] is not None or ready[1] is not None:
        return m.settle(m, complete_fast(m, m.take_first_event(c), s, job_id))
    events = c.events
    now = events[0][0]
    stages, events, seq = _leave_and_start_next(c.stages, st, s, k, now, events[1:], c.sequence)
    stats, session = _counted_and_ready(m, c, s, job, now)
    c = _set_advanced_finished(c, now, m.areas_at(c, now), c.taken + 1, c.sessions.set(owner, session), stats, stages,
                               events, seq)
    return m.settle_ready(m, c, owner)


_set_advanced_finished = setter(Configuration, "time", "areas", "taken", "sessions", "statistics", "stages", "events",
                                "sequence")
