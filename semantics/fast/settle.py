"""Fast forms of settle (semantics/smallstep/settle.py)."""

from __future__ import annotations

from ..smallstep.configuration import EMPTY_READY, Configuration, ready_pop
from .records import setter
from ..smallstep.machine import Machine
from .flow import drain, run_session
from .step import settle as full_settle

_set_ready = setter(Configuration, "ready")


def settle_fast(m: Machine, c: Configuration) -> Configuration:
    """Fast form of ``settle`` (fast.py): its first loop, running the ready
    sessions, written out, taking the commonest ready queue (one session,
    just pushed) apart without a call; then ``settle`` itself only when there
    is more to do (a dirty pool, a volatile one, a step stage). ``settle``
    of a configuration with no ready session starts at its pools, so this is
    ``settle`` whenever it returns early, and ``settle`` itself otherwise
    (and at once when the event left follow-up work, which settle drains
    first). The ``settle`` it calls is step.settle: the definition's, forming
    iterations by the step engine's fast forms on the stages they take."""
    if c.work:
        return full_settle(m, c)
    ready = c.ready
    while ready != EMPTY_READY:
        front, back = ready
        if front is None and back[1] is None:  # one session, pushed: the queue after it is empty
            c = run_session(m, _set_ready(c, EMPTY_READY), back[0])
        else:
            serial, rest = ready_pop(ready)
            c = run_session(m, _set_ready(c, rest), serial)
        ready = c.ready
    if c.dirty or m.volatile or m.engines:
        return full_settle(m, c)
    return c


def settle_ready(m: Machine, c: Configuration, serial: int) -> Configuration:
    """Fast form: ``settle_fast`` of ``c`` with session ``serial`` the one
    ready session, for an event's fast form that made it ready and left the
    ready queue empty (fast.EVENT_STEPS): settle would take it off the queue
    first and run it; here it runs at once, and the queue is not built to
    be taken apart. Follow-up work the event left is drained first, as
    settle does before it runs a ready session."""
    if c.work:
        c = drain(m, c)
    return settle_fast(m, run_session(m, c, serial))
