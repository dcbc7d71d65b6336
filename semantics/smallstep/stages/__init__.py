"""Stage rules, one module per kind (seed 002 §3, Stages): ``fifo`` (c
servers), ``ps`` (φ(present)/present each), ``delay`` (every job on its own
at rate 1: ps(present) in the IR),
``flows`` (runs over several stages, and every job on a stage such a run
holds, under the program's share), ``step`` (the step engine's iterations).

Each kind is one ``StageKind`` behind one small dispatch: its job record and
state are its own, and the rest of the semantics reaches a stage only
through these entries:

- ``enter(m, c, stages, owner, past, work, spill, job_id)``: a job arrives (a rule);
- ``leave(m, c, s, job_id)``: ``stage/leave``, a job taken off early (a rule);
- ``complete``: its completion event's rule (``EVENTS``: event kind -> rule);
- ``present``, ``busy``, ``level``, ``work``: the state as expressions and
  the time averages read it (observables.py);
- ``initial_state``: its state at time 0;
- ``budget_plan``: what ``budget_left(s)`` reads outside the stage's own
  admissions (step stages only).

A job's owner is a session (made ready at completion) or a spill write (which
becomes a cache entry of the tier at completion: the follow-up
pool/spill-land, settle.drain). No stage rule calls a pool's or a session's
rule: what it leaves to them is follow-up work (Configuration.work).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from ..configuration import Configuration, records
from ..machine import Machine
from ..rules import rule
from . import delay, fifo, flows, ps, step


class StageKind(NamedTuple):
    name: str
    initial_state: Callable
    enter: Callable
    leave: Callable
    complete: Callable
    event: str
    present: Callable
    busy: Callable
    level: Callable
    work: Callable
    budget_plan: Callable | None


def _kind(module) -> StageKind:
    return StageKind(module.KIND, module.initial_state, module.enter, module.leave, module.complete, module.EVENT,
                     module.present, module.busy, module.level, module.work, module.budget_plan)


# the kinds' records updated as the configuration's are (configuration.records)
records(delay.DelayJob, delay.DelayState, fifo.FifoJob, fifo.FifoState, flows.Flow, flows.FlowState, ps.PsJob,
        ps.PsState, step.Resident, step.Assignment, step.Iteration, step.StepState, step.StepStats)

FIFO = _kind(fifo)
PS = _kind(ps)
DELAY = _kind(delay)
FLOWS = _kind(flows)
STEP = _kind(step)

#: every kind by the name Machine gives it (Machine.kind_names)
KINDS = {kind.name: kind for kind in (FIFO, PS, DELAY, FLOWS, STEP)}

#: each event kind a stage schedules -> the rule it applies: (m, c, a, b) -> c
EVENTS = {kind.event: kind.complete for kind in KINDS.values()}


def enter_stage(m: Machine, c: Configuration, stages: tuple[int, ...], owner, work: float,
                spill=None, past=None, how=None) -> Configuration:
    """A job of ``work`` arrives at ``stages`` (one stage, or a flow's stages:
    all of one kind, flows); its id is the next sequence number. ``owner``:
    the session, or None for a spill write; ``past``: the (pc, stream
    position) the run statement left the session with, set in the same
    update; ``how``: a step stage's (mode, the pool the run grows or None)."""
    return m.stage_kinds[stages[0]].enter(m, c, stages, owner, past, work, spill, c.sequence, how)


@rule("stage/leave", "a preempted or ended session's job is taken off its stage (a fifo server it held takes the next job)",
      "002 §3 Pools: its job leaves its stage (a preemption); end releases every hold (an end)")
def leave_stage(m: Machine, c: Configuration, stage: int, job_id: int) -> Configuration:
    kind = m.stage_kinds[stage]
    c = kind.leave(m, c, stage, job_id)
    if m.observer:
        m.notify("stage/leave", c, {"stage": "flow" if kind.name == "flows" else m.stage_name(stage), "job": job_id})
    return c
