"""Fast forms of the fifo stage's rules (semantics/smallstep/stages/fifo.py):
stage/fifo-enter with stage/fifo-start, stage/fifo-complete with
stage/fifo-start, and the driver's whole step at a fifo completion."""

from __future__ import annotations

import math
import operator

from ..smallstep.configuration import AT_STAGE, READY, Configuration, Session, StageStats, Statistics
from .chunks import Chunks, appended, insert_event
from .records import build, setter
from ..smallstep.machine import MAX_READIES_PER_INSTANT, Machine, ready_session
from ..smallstep.stages.fifo import EVENT, FifoJob, FifoState, _in_service, enter
from ..smallstep.stages.jobs import at_stage, finish_job

_set_jobs_busy = setter(FifoState, "jobs", "busy")
_set_jobs = setter(FifoState, "jobs")
_set_started = setter(FifoJob, "started", "due")
_set_entered = setter(Configuration, "stages", "sessions", "events", "sequence")
_set_joined = setter(Configuration, "stages", "sessions", "sequence")
_NAN = math.nan
_JOB_ID = operator.attrgetter("job_id")
# (complete_fast's: jobs.finish_job's and machine.ready_session's updates)
_set_stage_stats = setter(Statistics, "stages")
_set_at_stage = setter(Session, "status", "job", "pc", "draws")
_set_ready = setter(Session, "status", "readies", "job", "growth", "pending")
_set_finished_ready = setter(Configuration, "sessions", "ready", "statistics", "stages", "events", "sequence")


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
        return _set_entered(c, all_stages[:s] + (_set_jobs_busy(st, appended(jobs, job), n + 1),) + all_stages[s + 1:],
                            sessions, insert_event(c.events, due, EVENT, s, job_id), job_id + 2)
    job = build(FifoJob, (job_id, owner, now, _NAN, spill, work, None))
    return _set_joined(c, all_stages[:s] + (_set_jobs(st, appended(jobs, job)),) + all_stages[s + 1:], sessions, job_id + 1)


def complete_fast(m: Machine, c: Configuration, s: int, job_id: int) -> Configuration:
    """stage/fifo-complete then stage/fifo-start as one update (a completion
    frees one server, so it starts at most one job); for a session's job
    when the program reads no estimates, jobs.finish_job written out (the
    completion counted at or after the warm-up, the session made ready)."""
    st = c.stages[s]
    k, job = _find(st.jobs, job_id)
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
    long = type(jobs) is Chunks
    jobs = jobs.delete(k) if long else jobs[:k] + jobs[k + 1:]
    if n < len(jobs):
        waiting = jobs[n]
        due = (now + waiting.work, seq)
        started = _set_started(waiting, now, due)
        jobs = jobs.replace(n, started) if long else jobs[:n] + (started,) + jobs[n + 1:]
        events = insert_event(events, due, EVENT, s, waiting.job_id)
        n += 1
        seq += 1
    return stages[:s] + (_set_jobs_busy(st, jobs, n),) + stages[s + 1:], events, seq


def _find(jobs, job_id: int) -> tuple:
    """(the index of job ``job_id``, in service, and the job): the first, with one server; else a binary
    search on the ids, which ascend along the line (a long line in chunks searches its chunks)."""
    if type(jobs) is Chunks:
        return jobs.find_key(job_id, _JOB_ID)
    k = 0 if jobs[0].job_id == job_id else _in_service(jobs, job_id)
    return k, jobs[k]


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
    k, job = _find(st.jobs, job_id)
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
