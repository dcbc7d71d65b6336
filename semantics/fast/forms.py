"""The fast forms, installed beside the definitions from one table by the
fast engine's build_machine (semantics/fast/engine.py).

Where one event applies several rules in a row with nothing observable
between them, the fast engine builds one configuration for them, and
time/advance is written out per program; the definition (semantics/smallstep,
which `trace` runs) applies every rule by itself, so that the trace shows
each. Every form here is checked to leave the same configuration as its
definitions (tests/test_smallstep_properties.py: every event of a set of
programs on both engines; the event taker against the definition's
measure.take_first_event on reachable configurations).

| fast form | the definitions it folds |
|---|---|
| ``fifo.enter_fast`` | stage/fifo-enter, then stage/fifo-start when a server is free and no job waits |
| ``fifo.complete_fast`` | stage/fifo-complete, then stage/fifo-start of the one job the freed server takes |
| ``delay.enter``, ``delay.complete``, ``delay.leave`` | stage/delay-enter, stage/delay-complete and the delay's part of stage/leave, on long lines in chunks (chunks.py), a job found by binary search |
| ``sessions.execute_observe_then_end`` | session/observe, then session/end when the session ends right after it holding nothing |
| ``measure.make_event_taker(m)`` | time/advance and taking the event off, written out for the program |
| ``pools.make_room_lru`` | the pool/evict-block and pool/evict-entry rules one room needs, at a pool evicting lru without spill |
| ``pools.make_room_by`` | the same, at a pool evicting by keys that read only their entry and draw nothing, without spill |
| ``workload.poisson_arrival`` | the arrival event under ``arrive poisson`` without init or trace: the gap, the next arrival scheduled, then workload/arrive |
| ``settle.settle_fast`` | settle's loop over the ready sessions written out; settle itself when a pool or a step stage is left to try |
| ``workload.poisson_arrival_step`` | the driver's step at a Poisson arrival: time/advance and the event taken off, ``poisson_arrival``, settle (the new session run first, never put on the ready queue: ``settle.settle_ready``) |
| ``fifo.complete_step`` | the driver's step at a fifo completion: time/advance and the event taken off, ``complete_fast``, settle (the job's session run first, likewise) |
| ``measure.make_areas_at(m)`` | the areas time/advance leaves, written out as the event taker's are, for the two steps above |
| ``step.settle``, ``step.form_iteration``, ``step.end_iteration`` (its own table) | settle, the forming of a step stage's iteration and step/iteration-end, on a stage ``step.applies`` takes (engine.py installs them) |
| ``flow.run_session``, ``flow.drain``, ``flow.admit``, ``flow.release_next`` (its own table) | settle's loops of rules, pool/admit and pool/release on pools that share no prefix |

Some fast forms also write out, inside them, helpers the definitions call
(``fifo.complete_fast``: jobs.finish_job for a session's job;
``fifo.enter_fast``: jobs.at_stage): the same updates without the calls.
tests/test_smallstep_fast.py runs programs that reach the forms the
property tests' programs do not (an arrival limit, an init block, a closed
workload) on both engines, and checks the written-out areas.
A step's fast form (``event_steps``) replaces three things the driver
does in a row, so what it must equal is the configuration after the
event's settle, the one ``walk`` yields; the definition's machine has no
fast form. Besides the forms, the fast engine keeps long lines and event
lists in chunks (chunks.py), compiles expressions to Python source
(values.WrittenCompiler) and sets record fields by generated functions
(records.py).
"""

from __future__ import annotations

from .. import ir
from ..smallstep import sessions as definition_sessions
from ..smallstep.stages import KINDS
from ..smallstep.stages import fifo as definition_fifo
from . import delay, fifo, measure, pools, sessions, settle, workload

#: stage kinds whose entries have fast forms: kind name -> {entry: fast form}
STAGE_ENTRIES = {"fifo": {"enter": fifo.enter_fast, "complete": fifo.complete_fast},
                 "delay": {"enter": delay.enter, "complete": delay.complete, "leave": delay.leave}}

#: statement kinds whose rules have fast forms
STATEMENTS = {ir.Observe: sessions.execute_observe_then_end}

#: time/advance and the event taken off, written out for a machine's program
EVENT_TAKER = measure.make_event_taker

#: the evictions that make room
MAKE_ROOM = pools.make_room_fast

#: the arrival event's rule for a machine's program
ARRIVAL = workload.arrival_rule

#: the clean-up after every event
SETTLE = settle.settle_fast

#: settle of a configuration whose one ready session is given apart from its (empty) ready queue
SETTLE_READY = settle.settle_ready


def event_steps(m) -> dict:
    """The driver's step at an event (take_first_event, the event's rule,
    settle) as one fast form, by event kind, where the machine's program
    has one: a Poisson arrival without init or trace, a fifo completion."""
    steps = {}
    if workload.arrival_rule(m) is workload.poisson_arrival:
        steps["arrive"] = workload.poisson_arrival_step
    if any(kind.name == definition_fifo.KIND for kind in m.stage_kinds):
        steps[definition_fifo.EVENT] = fifo.complete_step
    return steps


def stage_kinds() -> dict:
    """stages.KINDS with the fast forms in place."""
    return {name: kind._replace(**STAGE_ENTRIES.get(name, {})) for name, kind in KINDS.items()}


def statement_rules() -> dict:
    """sessions.EXECUTE with the fast forms in place."""
    return {**definition_sessions.EXECUTE, **STATEMENTS}
