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
- An iteration never gives more tokens than its budget (seed 002 §3 Stages:
  "One token to a decoding job, up to chunk to a prefilling one, until the
  budget is spent"): what it has assigned sums to at most the budget B read
  at its start, each assignment is at least 0, and while it forms the budget
  left is B less what it has assigned (a withdrawn victim gives its tokens
  back: 001, "give its tokens back to token_budget").
- Every live session has arrived: its serial is below the arrival count.

``RunInvariants`` adds the invariants between one configuration and the next
of a run (the tests feed it every configuration, after every applied rule):

- time never goes back, and never passes the horizon (seed 002 §3: the run
  ends at the horizon; events after it are not taken);
- no session is lost: every arrival is live or has ended (a rejected hold
  ends its session, seed 002 §3 Pools, so the rejected are among the ended),
  a session that left never comes back, and once the warm-up has passed the
  count of ended sessions grows by exactly the sessions that left.

A step stage's CPU tier (``offload to``) holds ``check_tier``'s invariants.
"""

from __future__ import annotations

import math

from .configuration import GROWING, QUEUED, Configuration
from .machine import EPSILON
from .blocks import check_table


def check_tier(tier) -> None:
    """A step stage's CPU tier (``offload to``, stages/offload.py): at most its size in chunks; the chunks not
    yet written are exactly those of the store jobs in flight; a chunk's pins are the load jobs in flight that
    read it, and a pinned chunk is written; jobs in sequence; every chunk's rank unique (the eviction's key
    never ties)."""
    assert len(tier.chunks) <= tier.size, f"the CPU tier holds {len(tier.chunks)} chunks, more than its {tier.size}"
    stores = [key for j in tier.jobs if not j.load for key in j.keys]
    assert len(stores) == len(set(stores)), "a chunk written by two store jobs"
    assert set(stores) == {k for k, ch in tier.chunks.items() if not ch.ready}, "the unwritten chunks are not the stores'"
    reads: dict = {}
    for j in tier.jobs:
        if j.load:
            for key in j.keys:
                reads[key] = reads.get(key, 0) + 1
    for key, ch in tier.chunks.items():
        assert ch.pins == reads.get(key, 0), f"a chunk pinned {ch.pins} times, read by {reads.get(key, 0)} loads"
        assert ch.pins == 0 or ch.ready, "a chunk read before it is written"
    assert all(key in tier.chunks for key in reads), "a load reads a chunk the tier does not hold"
    numbers = [j.number for j in tier.jobs]
    assert numbers == sorted(numbers) and len(numbers) == len(set(numbers)), "jobs out of sequence"
    ranks = [ch.rank for ch in tier.chunks.values()]
    assert len(ranks) == len(set(ranks)), "two chunks of the same rank"


def check_invariants(c: Configuration) -> None:
    """Raise AssertionError naming the first invariant ``c`` breaks."""
    for st in c.stages:
        if getattr(st, "tier", None) is not None:
            check_tier(st.tier)
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
        if pool.table is not None:  # a pool that shares prefixes: a block is counted once (docs/design/shared-prefixes.md)
            assert not pool.entries, f"pool {p}: a sharing pool with a session's own entry"
            check_table(pool, caps[p], tol)
            continue
        assert abs(pool.allocated - sum(h.units for h in pool.holders)) <= tol, f"pool {p}: allocated is not the holders' sum"
        if pool.groups:  # KV cache groups: a holder takes its coverage in every group less its skipped blocks
            expected = pool.groups * held[p] - sum(h.skipped for h in pool.holders) * pool.block
            assert abs(pool.allocated - expected) <= tol, f"pool {p}: allocated {pool.allocated} but its groups hold {expected}"
            assert all(0 <= h.skipped and h.units >= -tol for h in pool.holders), f"pool {p}: a holder below 0"
        else:
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
    arrived = c.workload.next_serial
    assert all(serial < arrived for serial in c.sessions.keys()), f"a live session that has not arrived ({arrived} arrivals)"
    keys = [(t, q) for t, q, *_ in c.events]
    assert keys == sorted(keys), "pending events out of order"
    assert all(t >= c.time for t, _ in keys), "a pending event in the past"
    waiting = [w.serial for pool in c.pools for w in pool.queue]
    assert len(waiting) == len(set(waiting)), "a session in two queues"
    for s, stage in enumerate(c.stages):
        it = getattr(stage, "iteration", None)  # a step stage's iteration, forming or in flight (stages/step.py)
        if it is None:
            continue
        tol = EPSILON * max(1.0, it.budget) * 10
        given = sum(a.tokens for a in it.assigned)
        assert all(a.tokens >= 0 for a in it.assigned), f"stage {s}: an iteration gives a resident negative tokens"
        assert given <= it.budget + tol, f"stage {s}: iteration {it.number} gives {given} tokens, over its budget {it.budget}"
        slots = getattr(it, "slots", 0.0)  # speculate's draft slots: each resident served takes D more
        assert it.left >= -slots - tol, f"stage {s}: iteration {it.number} has {it.left} of its budget left"
        if it.due is None and not it.tentative:
            assert abs(it.left - (it.budget - slots - given - slots * len(it.assigned))) <= tol, \
                f"stage {s}: iteration {it.number} has {it.left} left of {it.budget} after giving {given}"
        if it.tentative:
            assert all(a.mode == "Decode" for a in it.assigned), f"stage {s}: a prefill given tokens beside tentative decodes"
        if it.selected is not None:
            assert all(a.job_id == it.selected for a in it.assigned), f"stage {s}: the selected prefill does not run alone"


class RunInvariants:
    """The invariants between consecutive configurations of one run: feed
    ``check`` every configuration in order (each is also held to
    ``check_invariants``). ``warmup`` and ``horizon`` are the program's."""

    def __init__(self, warmup: float, horizon: float):
        self.warmup = warmup
        self.horizon = horizon
        self.previous: Configuration | None = None
        self.live: frozenset = frozenset()
        self.left = 0  # sessions that arrived and are no longer live

    def check(self, c: Configuration) -> None:
        """Raise AssertionError naming the first invariant ``c`` (after the configurations before it) breaks."""
        check_invariants(c)
        before = self.previous
        live = frozenset(c.sessions.keys())
        arrived = c.workload.next_serial
        assert c.time <= self.horizon, f"time {c.time} is past the horizon {self.horizon}"
        if before is None:
            self.left = arrived - len(live)
            assert self.left >= 0, "more live sessions than arrivals"
        else:
            assert c.time >= before.time, f"time went back from {before.time} to {c.time}"
            assert arrived >= before.workload.next_serial, "the arrival count went down"
            first_new = before.workload.next_serial
            came_back = [s for s in live if s < first_new and s not in self.live]
            assert not came_back, f"session {min(came_back)} left and came back"
            gone = len(self.live - live)  # live before, not now
            passed = sum(1 for s in range(first_new, arrived) if s not in live)  # arrived and left in between
            self.left += gone + passed
            if before.time >= self.warmup:
                ended = c.statistics.ended - before.statistics.ended
                assert ended == gone + passed, (f"{gone + passed} session(s) left between {before.time} and {c.time}, "
                                                f"but the ended count grew by {ended}")
            else:
                assert c.statistics.ended >= before.statistics.ended, "the ended count went down"
        assert arrived == len(live) + self.left, (f"a session is lost: {arrived} arrived, {len(live)} live, "
                                                  f"{self.left} ended")
        self.previous = c
        self.live = live
