"""The delay stage's rules for the fast engine (semantics/smallstep/stages/delay.py
has the definition): the same updates, the line of jobs and the pending
events kept in chunks when long (chunks.py), and a job found by a binary
search (the line is in start order, and a job's id is the sequence number
it started with, so the ids ascend along it) where the definition scans."""

from __future__ import annotations

import bisect
import operator

from ..smallstep.configuration import Configuration, remove_event
from ..smallstep.machine import Machine
from ..smallstep.stages.delay import EVENT, DelayJob, DelayState
from ..smallstep.stages.jobs import at_stage, finish_job
from .chunks import Chunks, appended, insert_event
from .records import build, setter

_set_jobs = setter(DelayState, "jobs")
_set_entered = setter(Configuration, "stages", "sessions", "events", "sequence")
_JOB_ID = operator.attrgetter("job_id")


def enter(m: Machine, c: Configuration, stages: tuple[int, ...], owner, past, work: float, spill,
          job_id: int, how=None) -> Configuration:
    """stage/delay-enter."""
    s = stages[0]
    st = c.stages[s]
    due = (c.time + work, job_id + 1)
    job = build(DelayJob, (job_id, None if owner is None else owner.serial, c.time, c.time, spill, work, due))
    all_stages = c.stages
    return _set_entered(c, all_stages[:s] + (_set_jobs(st, appended(st.jobs, job)),) + all_stages[s + 1:],
                        at_stage(c, owner, past, s, job_id), insert_event(c.events, due, EVENT, s, job_id), job_id + 2)


def complete(m: Machine, c: Configuration, s: int, job_id: int) -> Configuration:
    """stage/delay-complete."""
    st = c.stages[s]
    job, jobs = _without(st.jobs, job_id)
    all_stages = c.stages
    return finish_job(m, c, s, job, "stage/delay-complete", all_stages[:s] + (_set_jobs(st, jobs),) + all_stages[s + 1:],
                      c.events, c.sequence)


def leave(m: Machine, c: Configuration, s: int, job_id: int) -> Configuration:
    """The kind's part of stage/leave: the job and its completion event are taken off."""
    st = c.stages[s]
    job, jobs = _without(st.jobs, job_id)
    events = c.events
    events = events.remove_sorted(job.due) if type(events) is Chunks else remove_event(events, job.due)
    all_stages = c.stages
    return c._replace(stages=all_stages[:s] + (_set_jobs(st, jobs),) + all_stages[s + 1:], events=events)


def _without(jobs, job_id: int) -> tuple:
    """(job ``job_id``, the line without it)."""
    if type(jobs) is Chunks:
        return jobs.pop_key(job_id, _JOB_ID)
    k = bisect.bisect_left(jobs, job_id, key=_JOB_ID)
    assert k < len(jobs) and jobs[k].job_id == job_id, "no such job at the stage"
    return jobs[k], jobs[:k] + jobs[k + 1:]
