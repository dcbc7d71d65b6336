"""settle: the clean-up after every event (seed 002 §3, Configuration).

"After every event the interpreter settles: it runs every ready session,
then retries growers and admissions at every pool not served by a stage,
until nothing changes; then it starts an iteration on every idle step stage
that has residents or a waiting queue it serves, provided no other event is
pending at the same instant (a scheduler step sees every arrival up to it)."

Step stages are tried in declaration order, each at most once per settle
(so settle ends); forming an iteration can make sessions ready or pools
dirty (an admitted session's body), and then settle runs its loop again.
Sessions run in the order they became ready. Pools are tried in declaration
order ("the pool declared first is served first"). A pool is tried when it is
dirty (its state, or that of a pool its waiting holds need, changed since it
was last tried) or volatile (its queue keys or a waiting hold's header read
the time, a draw, or state outside its own pools); every other pool's attempt
would change nothing, so skipping it is the same settle, faster. settle is
idempotent: settle(settle(c)) == settle(c) (tests/test_smallstep_settle.py),
except for a program whose admission headers draw, where every attempt draws.
"""

from __future__ import annotations

from .configuration import EMPTY_READY, Configuration, ready_pop, setter
from .machine import Machine
from .pools import retry_growers, try_admit
from .sessions import run_session
from .stages.step import form_iteration, idle_with_work


_set_ready = setter(Configuration, "ready")


def settle(m: Machine, c: Configuration) -> Configuration:
    """Run ready sessions and retry pools until nothing changes; then start
    an iteration on each idle step stage with work, once per settle, provided
    no other event is pending at the same instant."""
    volatile = m.volatile
    engines = m.engines
    tried = ()
    while True:
        while c.ready != EMPTY_READY:
            serial, rest = ready_pop(c.ready)
            c = run_session(m, _set_ready(c, rest), serial)
        if c.dirty or volatile:
            admit_via = m.admitted_via_stage
            pools = sorted(c.dirty | volatile)
            c = c._replace(dirty=frozenset())
            for p in pools:
                c = retry_growers(m, c, p)
                if not admit_via[p]:
                    c = try_admit(m, c, p)
            if c.ready != EMPTY_READY or c.dirty:
                continue
        if not engines or (c.events and c.events[0][0] == c.time):
            return c
        s = next((s for s in engines if s not in tried and idle_with_work(m, c, s)), None)
        if s is None:
            return c
        tried += (s,)
        c = form_iteration(m, c, s)
