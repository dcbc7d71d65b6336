"""ps(φ): every job at once, each at φ(present)/present (seed 002 §3,
Stages); ``delay`` is ps with capacity ``present`` (every job at rate 1).

- ``stage/ps-enter``: the job's finish tag is the virtual time now plus its work.
- ``stage/ps-complete``: the job with the smallest finish tag finishes, equal
  tags in start order ("jobs of a ps stage with equal finish tags finish in
  the order they started").

Kept as virtual time V: V grows at the per-job rate, a job's finish tag is V
at its arrival plus its work; the stage has one pending completion event.

The jobs are a persistent leftist heap ordered by (finish tag, start order)
(``PsJobs``): a job joins and the first leaves in time logarithmic in the
jobs present, where the sorted tuple they were before was copied whole at
every step (issue 13: `batch(1e6)` on a delay stage ran for minutes in
770 MB). The order, and so every completion, is the tuple's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from ..configuration import Configuration, insert_event, remove_event, replace_at
from ..machine import Machine
from ..rules import rule
from ..values import Env
from .jobs import at_stage, finish_job

KIND = "ps"
EVENT = "ps"  # the completion event (a = stage)


class PsJob(NamedTuple):
    job_id: int  # its sequence number: start order
    owner: int | None  # a session serial, or None for a spill write
    arrived: float
    started: float  # = arrived: a ps job never waits
    spill: tuple[int, int, float] | None  # (tier pool, source serial, units) of a spill write
    tag: float  # its virtual finish tag


@dataclass(frozen=True, slots=True)
class PsJobs:
    """The jobs present, by (finish tag, start order): a leftist heap of nodes
    (rank, key, job, left, right), key = (tag, job_id); ``removed`` the ids
    of jobs taken off early (stage/leave) still in the heap; ``size`` the jobs
    present. ``len`` and truth are the jobs present; iteration is in order."""

    heap: tuple | None
    size: int
    removed: frozenset

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def __iter__(self):
        jobs = self
        while jobs.size:
            first = jobs.first()
            yield first
            jobs = jobs.without_first()

    def first(self) -> PsJob:
        """The job with the smallest (finish tag, start order)."""
        node = self.heap
        while node[2].job_id in self.removed:  # a job taken off early is skipped where it would come first
            node = _merge(node[3], node[4])
        return node[2]

    def with_job(self, job: PsJob) -> PsJobs:
        return PsJobs(_merge(self.heap, (1, (job.tag, job.job_id), job, None, None)), self.size + 1, self.removed)

    def without_first(self) -> PsJobs:
        node, removed = self.heap, self.removed
        while node[2].job_id in removed:
            removed = removed - {node[2].job_id}
            node = _merge(node[3], node[4])
        return PsJobs(_merge(node[3], node[4]), self.size - 1, removed)

    def without(self, job_id: int) -> PsJobs:
        """Job ``job_id`` taken off (if present): marked, and skipped when it would come first."""
        if job_id in self.removed or not _holds(self.heap, job_id):
            return self
        return PsJobs(self.heap, self.size - 1, self.removed | {job_id})


def _holds(heap: tuple | None, job_id: int) -> bool:
    """Whether a node of ``heap`` is job ``job_id`` (a walk of every node)."""
    pending = [heap]
    while pending:
        node = pending.pop()
        if node is None:
            continue
        if node[2].job_id == job_id:
            return True
        pending += (node[3], node[4])
    return False


def _merge(a: tuple | None, b: tuple | None) -> tuple | None:
    """The leftist heap of both heaps' nodes (a new path down the right
    spines, the rest shared): logarithmic in their sizes."""
    if a is None:
        return b
    if b is None:
        return a
    if b[1] < a[1]:
        a, b = b, a
    right = _merge(a[4], b)
    left = a[3]
    if left is None or left[0] < right[0]:
        left, right = right, left
    return (1 + (right[0] if right is not None else 0), a[1], a[2], left, right)


NO_JOBS = PsJobs(None, 0, frozenset())


class PsState(NamedTuple):
    jobs: PsJobs  # by (finish tag, start order)
    virtual: float  # virtual time at ``updated``
    updated: float
    rate: float  # each job's rate since ``updated``
    due: tuple[float, int] | None  # the next completion event
    due_job: int  # the job that event completes (-1: none)


EMPTY = PsState(NO_JOBS, 0.0, 0.0, 0.0, None, -1)


def initial_state(m: Machine, s: int) -> PsState:
    return EMPTY


# -- the state as expressions read it -------------------------------------------


def present(m: Machine, c: Configuration, s: int) -> int:
    return len(c.stages[s].jobs)


def busy(m: Machine, c: Configuration, s: int) -> float:
    """``busy(s)``: every job present is in service."""
    return float(len(c.stages[s].jobs))


def level(m: Machine, c: Configuration, s: int) -> float:
    """Utilisation now: 1 while any job is present."""
    return 1.0 if c.stages[s].jobs else 0.0


budget_plan = None  # budget_left reads a step stage only (the linker)


def work(m: Machine, c: Configuration, s: int) -> float:
    """``work(s)``: what is left of every job's work."""
    st = c.stages[s]
    v = st.virtual + st.rate * (c.time - st.updated)
    return sum(max(0.0, j.tag - v) for j in st.jobs)


# -- rules ----------------------------------------------------------------------


@rule("stage/ps-enter", "the job's finish tag is the virtual time now plus its work; every job's rate is φ(present)/present",
      "002 §3 Stages: ps(φ): every job at once, each at φ(present)/present. delay: every job on its own at rate 1.")
def enter(m: Machine, c: Configuration, stages: tuple[int, ...], owner, past, work: float, spill,
          job_id: int, how=None) -> Configuration:
    """stage/ps-enter: the job's finish tag is the virtual time now plus its work."""
    s = stages[0]
    c = c._replace(sequence=job_id + 1, sessions=at_stage(c, owner, past, s, job_id))
    owner = None if owner is None else owner.serial
    st = _advance_virtual(c, c.stages[s])
    tag = st.virtual + work
    job = PsJob(job_id, owner, c.time, c.time, spill, tag)
    st = st._replace(jobs=st.jobs.with_job(job))
    c = reschedule(m, c._replace(stages=replace_at(c.stages, s, st)), s)
    if m.observer:
        m.notify("stage/ps-enter", c, {"stage": m.stage_name(s), "job": job_id, "session": owner, "work": work,
                                       "present": len(c.stages[s].jobs)})
    return c


@rule("stage/ps-complete", "the job with the smallest finish tag, then start order, finishes",
      "002 §3 Ties: jobs of a ps stage with equal finish tags finish in the order they started")
def complete(m: Machine, c: Configuration, s: int, _unused: int = 0) -> Configuration:
    """stage/ps-complete: the job with the smallest finish tag (then start order) finishes."""
    st = _advance_virtual(c, c.stages[s]._replace(due=None))
    job = st.jobs.first()
    st = st._replace(jobs=st.jobs.without_first(), virtual=max(st.virtual, job.tag))
    c = reschedule(m, c._replace(stages=replace_at(c.stages, s, st)), s)
    return finish_job(m, c, s, job, "stage/ps-complete", c.stages, c.events, c.sequence)


def leave(m: Machine, c: Configuration, s: int, job_id: int) -> Configuration:
    """The kind's part of stage/leave: the job is taken off; the others' rate is set again."""
    st = _advance_virtual(c, c.stages[s])
    st = st._replace(jobs=st.jobs.without(job_id))
    return reschedule(m, c._replace(stages=replace_at(c.stages, s, st)), s)


# -- the completion event -------------------------------------------------------


def _advance_virtual(c: Configuration, st: PsState) -> PsState:
    if st.updated == c.time:
        return st
    return st._replace(virtual=st.virtual + st.rate * (c.time - st.updated), updated=c.time)


def reschedule(m: Machine, c: Configuration, s: int) -> Configuration:
    """The stage's rate for the jobs present now, and its next completion.
    A pending completion whose job and rate are unchanged keeps its event:
    its time has not changed, so it was not scheduled again, and "events at
    one instant" keep "the order they were scheduled" (seed 002 §3, Ties; a
    job joining a delay stage leaves the others' completions where they were)."""
    st = c.stages[s]
    n = len(st.jobs)
    rate = 0.0
    if n:
        env = Env(c)
        env.present = float(n)
        rate = m.capacities[s](env) / n
        first = st.jobs.first()
        if st.due is not None and rate == st.rate and first.job_id == st.due_job:
            return c
    events = c.events
    if st.due is not None:
        events = remove_event(events, st.due)
    due, seq = None, c.sequence
    if rate > 0 and math.isfinite(rate):
        due = (c.time + max(0.0, (first.tag - st.virtual) / rate), seq)
        seq += 1
        events = insert_event(events, due, EVENT, s)
    elif not rate >= 0:
        rate = 0.0
    st = st._replace(rate=rate, due=due, due_job=first.job_id if due is not None else -1)
    return c._replace(stages=replace_at(c.stages, s, st), events=events, sequence=seq)
