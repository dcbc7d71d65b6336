"""Invariants every reachable configuration satisfies; the tests check them
after every applied rule.

- allocated + cached <= cap for every pool (seed 000: "The invariant
  allocated + cached <= cap holds in every reachable configuration").
- A pool's allocated total is the sum of its holders' units and equals the
  sum over the live sessions' holds and leases on it; cached is the sum of
  its entries; every entry is positive and, with a block size, whole blocks.
- Holders are in admission order; entries in release order; pending events
  in (time, sequence number) order.
- A session waits in at most one queue, and is QUEUED there; every grower is GROWING.
- A step stage's iteration under serve exclusive prefill is one prefill alone
  or decodes only (seed 002 §3: "serve exclusive prefill selects either one
  prefill alone or a decode-only batch"): while its decodes are tentative it
  has given no prefill a token, and once a prefill is selected that prefill
  is all it gives.
"""

from __future__ import annotations

import math

from .configuration import GROWING, QUEUED, Configuration
from .machine import EPSILON


def check_invariants(c: Configuration) -> None:
    """Raise AssertionError naming the first invariant ``c`` breaks."""
    caps = [pool.cap for pool in c.pools]
    held = [0.0] * len(caps)
    for s in c.sessions.values():
        for h in s.holds:
            for a in h.allocations:
                held[a.pool] += a.units
                assert a.position <= a.units + EPSILON or not a.advanced, f"session {s.serial}: position past allocation"
        for lease in s.leases:
            held[lease.pool] += lease.units
    for p, pool in enumerate(c.pools):
        tol = EPSILON * max(1.0, abs(caps[p]) if math.isfinite(caps[p]) else 1.0) * 10
        assert pool.allocated + pool.cached <= caps[p] + tol, f"pool {p}: allocated {pool.allocated} + cached {pool.cached} > cap {caps[p]}"
        assert abs(pool.allocated - sum(h.units for h in pool.holders)) <= tol, f"pool {p}: allocated is not the holders' sum"
        assert abs(pool.allocated - held[p]) <= tol, f"pool {p}: allocated {pool.allocated} but sessions hold {held[p]}"
        assert abs(pool.cached - sum(e.units for e in pool.entries)) <= tol, f"pool {p}: cached is not the entries' sum"
        assert all(e.units > 0 for e in pool.entries), f"pool {p}: an empty cache entry"
        b = pool.block
        if b:
            assert all(abs(e.units / b - round(e.units / b)) < 1e-6 for e in pool.entries), f"pool {p}: an entry not in blocks"
        admissions = [h.admission for h in pool.holders]
        assert admissions == sorted(admissions), f"pool {p}: holders out of admission order"
        orders = [e.order for e in pool.entries]
        assert orders == sorted(orders), f"pool {p}: entries out of release order"
        owners = [e.owner for e in pool.entries if e.owner is not None]
        assert len(owners) == len(set(owners)), f"pool {p}: a session with two live entries"
        for w in pool.queue:
            s = c.sessions[w.serial]
            assert s.status == QUEUED and s.pending.pools[0] == p, f"pool {p}: queued session {w.serial} is {s.status}"
        for g in pool.growers:
            assert c.sessions[g].status == GROWING, f"pool {p}: grower {g} is not growing"
    keys = [(t, q) for t, q, *_ in c.events]
    assert keys == sorted(keys), "pending events out of order"
    assert all(t >= c.time for t, _ in keys), "a pending event in the past"
    waiting = [w.serial for pool in c.pools for w in pool.queue]
    assert len(waiting) == len(set(waiting)), "a session in two queues"
    for s, stage in enumerate(c.stages):
        it = getattr(stage, "iteration", None)  # a step stage's iteration, forming or in flight (stages/step.py)
        if it is None:
            continue
        if it.tentative:
            assert all(a.mode == "Decode" for a in it.assigned), f"stage {s}: a prefill given tokens beside tentative decodes"
        if it.selected is not None:
            assert all(a.job_id == it.selected for a in it.assigned), f"stage {s}: the selected prefill does not run alone"
