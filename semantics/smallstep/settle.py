"""settle: the clean-up after every event (seed 002 §3, Configuration).

"After every event the interpreter settles: it runs every ready session,
then retries growers and admissions at every pool not served by a stage,
until nothing changes."

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


_set_ready = setter(Configuration, "ready")


def settle(m: Machine, c: Configuration) -> Configuration:
    """Run ready sessions and retry pools until nothing changes."""
    volatile = m.volatile
    while True:
        while c.ready != EMPTY_READY:
            serial, rest = ready_pop(c.ready)
            c = run_session(m, _set_ready(c, rest), serial)
        if not c.dirty and not volatile:
            return c
        admit_via = m.admitted_via_stage
        tried = sorted(c.dirty | volatile)
        c = c._replace(dirty=frozenset())
        for p in tried:
            c = retry_growers(m, c, p)
            if not admit_via[p]:
                c = try_admit(m, c, p)
        if c.ready == EMPTY_READY and not c.dirty:
            return c
