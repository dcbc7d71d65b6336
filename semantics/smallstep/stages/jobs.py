"""What every stage kind shares: a session taken to a stage, and a job's
completion (statistics, estimates, its session made ready or its spill
write landed).

Every kind's job record starts with the same five fields (``job_id``,
``owner``, ``arrived``, ``started``, ``spill``) and adds its own; this module
reads only those five.
"""

from __future__ import annotations

from ...errors import LimitError
from ..configuration import AT_STAGE, Configuration, Session, StageStats, Statistics, build, ready_push, replace_at, setter
from ..estimates import note_completion
from ..machine import Machine, follow_up, ready_session

_set_at_stage = setter(Session, "status", "job", "pc", "draws")
_set_stage_stats = setter(Statistics, "stages")
_set_estimates = setter(Configuration, "estimates")
_set_finished = setter(Configuration, "statistics", "stages", "events", "sequence")
_set_finished_ready = setter(Configuration, "sessions", "ready", "statistics", "stages", "events", "sequence")


#: The most jobs a fifo stage holds at once (issue 13, "No silent hang"). Its line is a tuple, and
#: every job in service has its completion among the configuration's pending events, a tuple too; each
#: step copies both (the literal semantics: configurations are values), so n jobs cost time
#: proportional to n at every step: `fifo(1e9)` with 40 000 jobs in service took 81 s. A run stops
#: with a LimitError (a limit of serq-ref's implementation, not a trap of the program: errors.py) at the
#: run statement that would go past it (reaching it takes about 6 s of CPU on the reference machine). A
#: ps or delay stage keeps its jobs in a persistent heap (ps.PsJobs) and has no such limit.
MAX_JOBS_AT_STAGE = 20_000


def check_room_at_stage(m: Machine, c: Configuration, s: int, present: int, owner: Session | None) -> None:
    """The premise every kind's enter rule shares: the stage holds fewer than
    MAX_JOBS_AT_STAGE jobs; otherwise a LimitError naming the stage, the limit
    and the run statement (the owner's next statement; None for a spill write)."""
    if present < MAX_JOBS_AT_STAGE:  # read here, at the call: a test may lower it
        return
    stmt = (owner.frames[-1].block, owner.pc) if owner is not None and owner.frames else None
    raise LimitError(f"fifo stage {m.stage_name(s)} would hold more than {MAX_JOBS_AT_STAGE:,} jobs at once, the "
                   "most serq-ref's literal semantics holds at a fifo stage (it copies the stage's line and its "
                   "pending completions at every step, so a run past it takes hours): a line this long is a "
                   "model of its own (a delay or ps stage, which has no such limit; fewer sessions at once)",
                   stmt=stmt, time=c.time)


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
