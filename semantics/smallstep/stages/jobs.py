"""What every stage kind shares: a session taken to a stage, and a job's
completion (statistics, estimates, its session made ready or its spill
write landed).

Every kind's job record starts with the same five fields (``job_id``,
``owner``, ``arrived``, ``started``, ``spill``) and adds its own; this module
reads only those five.
"""

from __future__ import annotations

from ..configuration import AT_STAGE, Configuration, Session, StageStats, Statistics, build, ready_push, replace_at, setter
from ..estimates import note_completion
from ..machine import Machine, follow_up, ready_session

_set_at_stage = setter(Session, "status", "job", "pc", "draws")
_set_stage_stats = setter(Statistics, "stages")
_set_estimates = setter(Configuration, "estimates")
_set_finished = setter(Configuration, "statistics", "stages", "events", "sequence")
_set_finished_ready = setter(Configuration, "sessions", "ready", "statistics", "stages", "events", "sequence")


def at_stage(c: Configuration, owner: Session | None, past, stage: int, job_id: int):
    """The sessions with ``owner`` (None for a spill write) at the stage as
    job ``job_id``; ``past``, the (pc, stream position) its run statement
    left it with, set in the same update."""
    if owner is None:
        return c.sessions
    if past is None:
        return c.sessions.set(owner.serial, owner._replace(status=AT_STAGE, job=(stage, job_id)))
    pc, draws = past
    return c.sessions.set(owner.serial, _set_at_stage(owner, AT_STAGE, (stage, job_id), pc, draws))


def finish_job(m: Machine, c: Configuration, s: int, job, rule: str, stages: tuple, events: tuple,
               sequence: int, every=None) -> Configuration:
    """The conclusion of a completion rule (``rule``: stage/fifo-complete,
    stage/ps-complete, stage/flow-complete): the job's completion is counted
    (at or after the warm-up) at ``s`` (or at ``every`` stage a flow held); its
    session becomes ready; in the same update as ``stages`` (without the job),
    ``events`` and ``sequence`` (with the next job's start, say). The rule's
    record is emitted here, once; a spill write's landing in its tier is its follow-up (pool/spill-land)."""
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
    if job.owner is not None:
        owner = ready_session(c, c.sessions[job.owner])
        c = _set_finished_ready(c, c.sessions.set(job.owner, owner), ready_push(c.ready, job.owner), stats, stages,
                                events, sequence)
    else:
        c = _set_finished(c, stats, stages, events, sequence)
    if m.observer:
        m.notify(rule, c, {"stage": m.stage_name(s), "job": job.job_id, "session": job.owner})
    if job.spill is not None:
        return follow_up(c, ("pool/spill-land",) + tuple(job.spill))
    return c
