"""The fast engine's machine: the definition's (semantics.smallstep.driver)
with the fast forms of forms.py installed in place of the definitions they
fold, and its run.

A run that one of the engine's own loops takes (loop.py, steploop.py) reads
none of the forms: the machine it runs on is built without them
(``_loop_machine``), and forms.py and the modules of its forms are imported
and installed (``install_forms``) only when a run needs them, that is when
neither loop applies or the step loop gives its run back. (Importing and
building them was 0.02 G instructions of every oracle replay's process.)"""

from __future__ import annotations

from .. import ir
from ..results import RunResult
from ..smallstep import driver as definition
from ..smallstep.driver import run_machine
from ..smallstep.machine import Machine
from ..smallstep.sessions import compile_ops
from ..smallstep.pools import expire_lease
from ..smallstep.stages import KINDS
from ..smallstep.stages.step import EVENT as STEP_EVENT
from . import loop, step, steploop
from .trace import load_trace
from .values import WrittenCompiler


def build_machine(program: ir.Program, trace_sessions=()) -> Machine:
    """The machine of ``program`` for an unobserved run, the fast forms
    standing in for their definitions (forms.py)."""
    m = _loop_machine(program, trace_sessions)
    install_forms(m)
    return m


def _loop_machine(program: ir.Program, trace_sessions) -> Machine:
    """The machine of ``program`` as the engine's own loops read it: the definition's facts with the fast
    expression compiler, ``fast_pools`` and ``fast_steps``; no fast form installed (install_forms). Its
    stage kinds and statements' rules are the definition's until then: the loops apply their own rules to
    every statement but the local ones (branch, loop, choose, a block's end), whose rules the two share."""
    m = Machine(program, KINDS, trace_sessions=trace_sessions, compiler=WrittenCompiler)
    m.ops = compile_ops(m)
    #: whether flow.py's forms of pool/admit and pool/release apply (the program has no pool or hold setting
    #: they do not know: step.pools_known), and per stage, whether the step engine's fast forms form and end
    #: its iterations (step.applies)
    m.fast_pools = step.pools_known(program)
    m.fast_steps = step.applies(m)
    return m


def install_forms(m: Machine) -> None:
    """Install forms.py's fast forms in ``m`` (a ``_loop_machine``): the stage kinds' and statements' rules
    with the forms in place, time/advance written out for the program, make_room, settle, the event rules
    and the driver's steps at an event; and, on a step stage step.applies takes, step.py's settle and
    iteration end."""
    from . import forms, measure

    m.stage_kinds = tuple(forms.stage_kinds().get(name) for name in m.kind_names)  # as Machine() sets them
    m.ops = compile_ops(m, forms.statement_rules())  # the expressions compiled again from the compiler's cache
    m.take_first_event = forms.EVENT_TAKER(m)
    m.make_room = forms.MAKE_ROOM
    m.settle = forms.SETTLE
    m.settle_ready = forms.SETTLE_READY
    m.areas_at = measure.make_areas_at(m)
    m.event_steps = forms.event_steps(m)
    m.event_rules = {kind.event: kind.complete for kind in m.stage_kinds}
    if any(m.fast_steps):
        m.settle = step.settle
        m.event_rules[STEP_EVENT] = step.end_iteration
    m.event_rules.update({"arrive": forms.ARRIVAL(m), "lease": expire_lease})


def run(program: ir.Program, *, base_dir: str | None = None, progress=None, trace_sessions=None) -> RunResult:
    """Run ``program`` to its end on the fast engine: the same RunResult as
    semantics.smallstep.driver.run, byte for byte: on its own loop (loop.py)
    when the program is of its shape, else on the fast forms. ``trace_sessions``: the sessions of the
    program's trace (load_trace's), when the caller has read them already (the oracle's replay)."""
    if uses_groups(program):  # KV cache groups (docs/design/sliding-window.md): the definition's rules, unfolded
        return definition.run(program, base_dir=base_dir, progress=progress)
    if trace_sessions is None:
        trace_sessions = load_trace(program, base_dir)
    m = _loop_machine(program, trace_sessions)
    if loop.applies(m):
        return loop.run(m, progress)
    if steploop.applies(m):
        result = steploop.run(m, progress)
        if result is not None:
            return result
        # it met what it does not write out (a preemption, say): the run from its start on the fast forms
    install_forms(m)
    return run_machine(m, progress)


def uses_groups(program: ir.Program) -> bool:
    """Whether a pool of ``program`` has KV cache groups (``groups (full, window (W))``): its runs are the
    definition's, since the fast forms fold the single-table pool's growth and release."""
    return any(p.groups for p in program.pools)


def machine_for(program: ir.Program, *, base_dir: str | None = None) -> Machine:
    """The fast engine's machine of ``program`` (for tests that apply its forms by hand)."""
    return build_machine(program, trace_sessions=load_trace(program, base_dir))
