"""Stage rules: fifo(c), ps(φ) (delay is ps with capacity ``present``) and
flows (seed 002 §3, Stages).

- ``stage/fifo-enter``, ``stage/fifo-start``, ``stage/fifo-complete``: c
  servers, jobs in arrival order at rate 1.
- ``stage/ps-enter``, ``stage/ps-complete``: every job at once, each at
  φ(present)/present. Kept as virtual time: V grows at the per-job rate, a
  job's finish tag is V at its arrival plus its work; the smallest tag
  finishes first, equal tags in start order ("jobs of a ps stage with equal
  finish tags finish in the order they started").
- ``stage/flow-enter``, ``stage/flow-complete``: a job holding several stages
  (``run a, b (w)``), and every job on a stage some such run holds, is a
  flow; its rate is set by the program's share: maxmin (progressive filling)
  or bottleneck (min over its stages of φ_s / n_s).
- ``stage/leave``: a preempted or ended session's job leaves its stage.

A job's owner is a session (made ready at completion) or a spill write
(which becomes a cache entry of the tier at completion: pools.land_spill).
"""

from __future__ import annotations

import bisect
import math

from .configuration import (AT_STAGE, Configuration, FlowState, Job, Session, StageState, StageStats, Statistics, build,
                            insert_event, own_entry_index, ready_push, remove_event, replace_at, setter)
from .estimates import note_completion
from .machine import Machine, ready_session
from .values import Env

FLOW = -1  # the stage field of a session's job while it is a flow

_set_at_stage = setter(Session, "status", "job", "pc", "draws")
_set_jobs_busy = setter(StageState, "jobs", "busy")
_set_entered = setter(Configuration, "stages", "sessions", "events", "sequence")
_set_joined = setter(Configuration, "stages", "sessions", "sequence")
_set_jobs = setter(StageState, "jobs")
_set_started = setter(Job, "started", "due")
_set_stage_stats = setter(Statistics, "stages")
_set_estimates = setter(Configuration, "estimates")
_set_finished = setter(Configuration, "statistics", "stages", "events", "sequence")
_set_finished_ready = setter(Configuration, "sessions", "ready", "statistics", "stages", "events", "sequence")

_NAN = math.nan


# -- observables (queue, busy, work of a stage) --------------------------------


def make_observables(m: Machine) -> dict:
    """The pool and stage queries expressions read: name -> f(env, index)."""

    def used(env: Env, p: int) -> float:
        return env.config.pools[p].allocated

    def free(env: Env, p: int) -> float:
        return m.caps[p] - env.config.pools[p].allocated

    def cachedin(env: Env, p: int) -> float:
        entries = env.config.pools[p].entries
        k = own_entry_index(entries, env.serial)
        return entries[k].units if k >= 0 else 0.0

    def holders(env: Env, p: int) -> float:
        return float(len(env.config.pools[p].holders))

    def queued(env: Env, p: int) -> float:
        return float(len(env.config.pools[p].queue))

    def queue(env: Env, s: int) -> float:
        return float(count_present(m, env.config, s))

    def busy(env: Env, s: int) -> float:
        c = env.config
        if s in m.flow_stages:
            return float(count_present(m, c, s))
        if m.kinds[s] == "fifo":
            return float(c.stages[s].busy)
        return float(len(c.stages[s].jobs))

    def work(env: Env, s: int) -> float:
        return remaining_work(m, env.config, s)

    return {"Used": used, "Free": free, "CachedIn": cachedin, "Holders": holders, "Queued": queued,
            "Queue": queue, "Busy": busy, "Work": work}


def count_present(m: Machine, c: Configuration, s: int) -> int:
    if s in m.flow_stages:
        return sum(1 for f in c.flows.flows if s in f.stages)
    return len(c.stages[s].jobs)


def busy_level(m: Machine, c: Configuration, s: int) -> float:
    """Utilisation now: busy servers / c (fifo); 1 if any job (ps); Σ rate/φ (flow stages)."""
    if s in m.flow_stages:
        phi = m.flow_capacity[s]
        return sum(f.rate for f in c.flows.flows if s in f.stages) / phi
    st = c.stages[s]
    if m.kinds[s] == "fifo":
        return st.busy / m.servers[s]
    return 1.0 if st.jobs else 0.0


def remaining_work(m: Machine, c: Configuration, s: int) -> float:
    now = c.time
    if s in m.flow_stages:
        dt = now - c.flows.updated
        return sum(max(0.0, f.work - f.rate * dt) for f in c.flows.flows if s in f.stages)
    st = c.stages[s]
    if m.kinds[s] == "fifo":
        return sum(j.work - (now - j.started) if j.started == j.started else j.work for j in st.jobs)
    v = st.virtual + st.rate * (now - st.updated)
    return sum(max(0.0, j.work - v) for j in st.jobs)


# -- entering a stage ----------------------------------------------------------


def enter_stage(m: Machine, c: Configuration, stages: tuple[int, ...], owner, work: float,
                spill=None, past=None) -> Configuration:
    """A job of ``work`` arrives at ``stages`` (one stage, or a flow's stages);
    its id is the next sequence number. ``owner``: the session, or None for a
    spill write; ``past``: the (pc, stream position) the run statement
    left the session with, set in the same update."""
    job_id = c.sequence
    if len(stages) > 1 or stages[0] in m.flow_stages:
        return enter_flow(m, c, stages, owner, past, work, spill, job_id)
    s = stages[0]
    if m.kinds[s] == "fifo":
        return enter_fifo(m, c, s, owner, past, work, spill, job_id)
    return enter_ps(m, c, s, owner, past, work, spill, job_id)


def _at_stage(c: Configuration, owner, past, stage: int, job_id: int):
    """The sessions with ``owner`` (None for a spill write) at the stage."""
    if owner is None:
        return c.sessions
    if past is None:
        return c.sessions.set(owner.serial, owner._replace(status=AT_STAGE, job=(stage, job_id)))
    pc, draws = past
    return c.sessions.set(owner.serial, _set_at_stage(owner, AT_STAGE, (stage, job_id), pc, draws))


def enter_fifo(m, c, s, owner, past, work, spill, job_id) -> Configuration:
    """stage/fifo-enter: the job joins the end of the stage's line; it starts
    at once when a server is free (stage/fifo-start)."""
    st = c.stages[s]
    sessions = _at_stage(c, owner, past, s, job_id)
    owner = None if owner is None else owner.serial
    busy = st.busy
    if busy < m.servers[s] and busy == len(st.jobs):  # a server is free and no job waits
        due = (c.time + work, job_id + 1)
        job = build(Job, (job_id, owner, work, c.time, c.time, due, spill, (s,), 0.0))
        c = _set_entered(c, replace_at(c.stages, s, _set_jobs_busy(st, st.jobs + (job,), busy + 1)), sessions,
                         insert_event(c.events, due, "job", s, job_id), job_id + 2)
        if m.observer:
            m.notify("stage/fifo-enter", c, {"stage": m.stage_name(s), "job": job_id, "session": owner, "work": work})
            m.notify("stage/fifo-start", c, {"stage": m.stage_name(s), "jobs": [job_id]})
        return c
    job = build(Job, (job_id, owner, work, c.time, _NAN, None, spill, (s,), 0.0))
    c = _set_joined(c, replace_at(c.stages, s, _set_jobs(st, st.jobs + (job,))), sessions, job_id + 1)
    if m.observer:
        m.notify("stage/fifo-enter", c, {"stage": m.stage_name(s), "job": job_id, "session": owner, "work": work})
    return start_fifo(m, c, s) if busy < m.servers[s] else c  # every server busy: the job waits


def start_fifo(m: Machine, c: Configuration, s: int) -> Configuration:
    """stage/fifo-start: while a server is free, the first waiting job starts."""
    st = c.stages[s]
    jobs, busy, events, seq, started = st.jobs, st.busy, c.events, c.sequence, []
    while busy < m.servers[s] and busy < len(jobs):
        started.append(jobs[busy].job_id)
        jobs, busy, events, seq = start_next(s, jobs, busy, events, seq, c.time)
    if not started:
        return c
    c = c._replace(stages=replace_at(c.stages, s, _set_jobs_busy(st, jobs, busy)), events=events, sequence=seq)
    if m.observer:
        m.notify("stage/fifo-start", c, {"stage": m.stage_name(s), "jobs": started})
    return c


def start_next(s: int, jobs: tuple, busy: int, events: tuple, seq: int, now: float):
    """The premise of stage/fifo-start for one free server: with ``busy`` of
    fifo stage ``s``'s ``jobs`` in service (the first ``busy``), the first
    waiting one starts, its completion event at ``now`` plus its work, taking
    sequence number ``seq``. Returns (jobs, busy, events, seq) after it."""
    job = jobs[busy]
    due = (now + job.work, seq)
    return (jobs[:busy] + (_set_started(job, now, due),) + jobs[busy + 1:], busy + 1,
            insert_event(events, due, "job", s, job.job_id), seq + 1)


def enter_ps(m, c, s, owner, past, work, spill, job_id) -> Configuration:
    """stage/ps-enter: the job's finish tag is the virtual time now plus its work."""
    c = c._replace(sequence=job_id + 1, sessions=_at_stage(c, owner, past, s, job_id))
    owner = None if owner is None else owner.serial
    st = _advance_virtual(c, c.stages[s])
    tag = st.virtual + work
    job = Job(job_id, owner, tag, c.time, c.time, None, spill, (s,), 0.0)
    i = bisect.bisect_right(st.jobs, (tag, job_id), key=_tag_order)
    st = st._replace(jobs=st.jobs[:i] + (job,) + st.jobs[i:])
    c = c._replace(stages=replace_at(c.stages, s, st))
    c = reschedule_ps(m, c, s)
    if m.observer:
        m.notify("stage/ps-enter", c, {"stage": m.stage_name(s), "job": job_id, "session": owner, "work": work,
                                       "present": len(c.stages[s].jobs)})
    return c


def _tag_order(j: Job):
    return (j.work, j.job_id)


def _advance_virtual(c: Configuration, st: StageState) -> StageState:
    if st.updated == c.time:
        return st
    return st._replace(virtual=st.virtual + st.rate * (c.time - st.updated), updated=c.time)


def reschedule_ps(m: Machine, c: Configuration, s: int) -> Configuration:
    """The ps stage's rate for the jobs present now, and its next completion.
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
        if st.due is not None and rate == st.rate and st.jobs[0].job_id == st.due_job:
            return c
    events = c.events
    if st.due is not None:
        events = remove_event(events, st.due)
    due, seq = None, c.sequence
    if rate > 0 and math.isfinite(rate):
        due = (c.time + max(0.0, (st.jobs[0].work - st.virtual) / rate), seq)
        seq += 1
        events = insert_event(events, due, "ps", s)
    elif not rate >= 0:
        rate = 0.0
    st = st._replace(rate=rate, due=due, due_job=st.jobs[0].job_id if due is not None else -1)
    return c._replace(stages=replace_at(c.stages, s, st), events=events, sequence=seq)


# -- flows ---------------------------------------------------------------------


def enter_flow(m, c, stages, owner, past, work, spill, job_id) -> Configuration:
    """stage/flow-enter: the job holds every stage of ``stages`` from its start to its end."""
    c = c._replace(sequence=job_id + 1, sessions=_at_stage(c, owner, past, FLOW, job_id))
    owner = None if owner is None else owner.serial
    fl = _advance_flows(c)
    job = Job(job_id, owner, work, c.time, c.time, None, spill, tuple(stages), 0.0)
    c = c._replace(flows=fl._replace(flows=fl.flows + (job,)))
    c = reschedule_flows(m, c)
    if m.observer:
        m.notify("stage/flow-enter", c, {"stages": [m.stage_name(s) for s in stages], "job": job_id,
                                         "session": owner, "work": work})
    return c


def _advance_flows(c: Configuration) -> FlowState:
    fl = c.flows
    dt = c.time - fl.updated
    if dt == 0:
        return fl
    return fl._replace(flows=tuple(f._replace(work=max(0.0, f.work - f.rate * dt)) for f in fl.flows), updated=c.time)


def compute_rates(m: Machine, flows: tuple[Job, ...]) -> list[float]:
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


def reschedule_flows(m: Machine, c: Configuration) -> Configuration:
    """Every flow's rate under the share, and the next completion: the flow
    with the least time left, then start order. As for ps, a pending
    completion whose flow and rate are unchanged keeps its event."""
    fl = c.flows
    rates = compute_rates(m, fl.flows)
    flows = tuple(f._replace(rate=r) for f, r in zip(fl.flows, rates))
    first = min(((f.work / f.rate if f.rate > 0 else math.inf, f.job_id, f.rate) for f in flows), default=None)
    if fl.due is not None and first is not None and first[1] == fl.due_job and first[2] == _rate_of(fl, fl.due_job):
        return c._replace(flows=FlowState(flows, c.time, fl.due, fl.due_job))
    events = c.events
    if fl.due is not None:
        events = remove_event(events, fl.due)
    due, job, seq = None, -1, c.sequence
    if first is not None and math.isfinite(first[0]):
        due, job = (c.time + first[0], seq), first[1]
        seq += 1
        events = insert_event(events, due, "flow")
    return c._replace(flows=FlowState(flows, c.time, due, job), events=events, sequence=seq)


def _rate_of(fl: FlowState, job_id: int) -> float | None:
    """The rate flow ``job_id`` had in ``fl`` (None if it is gone)."""
    return next((f.rate for f in fl.flows if f.job_id == job_id), None)


# -- completions ---------------------------------------------------------------


def complete_fifo(m: Machine, c: Configuration, s: int, job_id: int) -> Configuration:
    """stage/fifo-complete: the job's service ends; in the same step the next
    waiting job starts (stage/fifo-start), so the event builds one configuration."""
    st = c.stages[s]
    jobs = st.jobs
    k = 0
    while jobs[k].job_id != job_id:  # a job in service: among the first ``busy``
        k += 1
    job = jobs[k]
    jobs, busy, events, seq, started = jobs[:k] + jobs[k + 1:], st.busy - 1, c.events, c.sequence, None
    if busy < len(jobs):  # a job waits, and the one server just freed takes it
        started = jobs[busy].job_id
        jobs, busy, events, seq = start_next(s, jobs, busy, events, seq, c.time)
    c = _finish_job(m, c, s, job, "stage/fifo-complete", replace_at(c.stages, s, _set_jobs_busy(st, jobs, busy)),
                    events, seq)
    if started is not None and m.observer:
        m.notify("stage/fifo-start", c, {"stage": m.stage_name(s), "jobs": [started]})
    return c


def complete_ps(m: Machine, c: Configuration, s: int) -> Configuration:
    """stage/ps-complete: the job with the smallest finish tag (then start order) finishes."""
    st = _advance_virtual(c, c.stages[s])
    job = st.jobs[0]
    st = st._replace(jobs=st.jobs[1:], virtual=max(st.virtual, job.work), due=None)
    c = c._replace(stages=replace_at(c.stages, s, st))
    c = reschedule_ps(m, c, s)
    return _finish_job(m, c, s, job, "stage/ps-complete", c.stages, c.events, c.sequence)


def complete_flow(m: Machine, c: Configuration) -> Configuration:
    """stage/flow-complete: the flow with the least time left (then start order) finishes."""
    fl = _advance_flows(c)
    k = min(range(len(fl.flows)), key=lambda i: (fl.flows[i].work / fl.flows[i].rate if fl.flows[i].rate > 0
                                                  else math.inf, fl.flows[i].job_id))
    job = fl.flows[k]
    c = c._replace(flows=fl._replace(flows=fl.flows[:k] + fl.flows[k + 1:], due=None))
    c = reschedule_flows(m, c)
    return _finish_job(m, c, job.stages[0], job, "stage/flow-complete", c.stages, c.events, c.sequence, job.stages)


def _finish_job(m: Machine, c: Configuration, s: int, job: Job, rule: str, stages: tuple, events: tuple,
                sequence: int, every=None) -> Configuration:
    """The job's completion is counted (at or after the warm-up); its session
    becomes ready; in the same update as ``stages`` (without the job),
    ``events`` and ``sequence`` (with the next job's start, say)."""
    stats = c.statistics
    if c.time >= m.warmup:
        counted = stats.stages
        for t in every or (s,):
            old = counted[t]
            counted = replace_at(counted, t, build(StageStats, (old.completed + 1, old.wait_sum + job.started - job.arrived,
                                                               old.service_sum + c.time - job.started)))
        stats = _set_stage_stats(stats, counted)
    if m.reads_estimates:  # estimates.note_completion at every stage the job held, warm or not
        estimates = c.estimates
        for t in every or (s,):
            estimates = replace_at(estimates, t, note_completion(estimates[t], job.started, job.started - job.arrived,
                                                                 c.time - job.started))
        c = _set_estimates(c, estimates)
    if m.observer:
        c = _set_finished(c, stats, stages, events, sequence)
        m.notify(rule, c, {"stage": m.stage_name(s), "job": job.job_id, "session": job.owner})
    if job.owner is not None:
        owner = ready_session(c, c.sessions[job.owner])
        return _set_finished_ready(c, c.sessions.set(job.owner, owner), ready_push(c.ready, job.owner), stats, stages, events,
                                   sequence)
    c = _set_finished(c, stats, stages, events, sequence)
    if job.spill is not None:
        from .pools import land_spill

        return land_spill(m, c, *job.spill)
    return c


# -- leaving early -------------------------------------------------------------


def leave_stage(m: Machine, c: Configuration, stage: int, job_id: int) -> Configuration:
    """stage/leave: the job is taken off its stage (its session was preempted or ended)."""
    if stage == FLOW:
        fl = _advance_flows(c)
        c = c._replace(flows=fl._replace(flows=tuple(f for f in fl.flows if f.job_id != job_id)))
        c = reschedule_flows(m, c)
    elif m.kinds[stage] == "fifo":
        st = c.stages[stage]
        k = next(k for k, j in enumerate(st.jobs) if j.job_id == job_id)
        job = st.jobs[k]
        events = remove_event(c.events, job.due) if job.due is not None else c.events
        st = st._replace(jobs=st.jobs[:k] + st.jobs[k + 1:], busy=st.busy - 1 if k < st.busy else st.busy)
        c = start_fifo(m, c._replace(stages=replace_at(c.stages, stage, st), events=events), stage)
    else:
        st = _advance_virtual(c, c.stages[stage])
        st = st._replace(jobs=tuple(j for j in st.jobs if j.job_id != job_id))
        c = reschedule_ps(m, c._replace(stages=replace_at(c.stages, stage, st)), stage)
    if m.observer:
        m.notify("stage/leave", c, {"stage": "flow" if stage == FLOW else m.stage_name(stage), "job": job_id})
    return c
