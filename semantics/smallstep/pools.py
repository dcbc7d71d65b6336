"""Pool rules (seed 002 §3, Pools; seed 000).

- ``session/hold-enter``: a hold joins the queue of its first pool; its units
  and reserve are evaluated then only to judge ``pool/reject`` (a hold that
  can never fit: its units, or its reserve when larger, above a cap).
- ``pool/admit``: the head of a queue (a preempted hold first; then the
  ``queue by`` keys re-evaluated now, then join order; fifo: join order) is
  admitted when every pool of its hold has room for max(units, reserve) next
  to the allocated units: used + r <= cap. Cached prefixes never block. The
  first that does not fit blocks the rest.
- ``pool/consume``: with a cache clause, the session takes at most ``reuse``
  units of its own cached prefix (``cached`` := what it took); the rest of
  that entry stays as a dead entry with the same age.
- ``pool/evict-entry`` / ``pool/evict-block``: entries are evicted in the
  pool's order (lru: release time then release order; by: keys then release
  order) until allocations and cache fit; with a block size, one block from
  the tail of the entry at a time.
- ``pool/spill``: an evicted piece for which the spill predicate holds
  becomes a write job on the link stage; ``pool/spill-land``: when the write
  completes it becomes (part of) its session's entry in the tier.
- ``pool/release``: an allocation is given back; min(cache, computed) units
  stay cached, rounded down to blocks (the hold's cache clause; none without).
- ``pool/lease``, ``pool/lease-end``: a leased allocation outlives its scope
  until a release, its time, or the session's end.
- ``pool/grow``, ``pool/grow-wait``, ``pool/grow-resume``: grow, or wait (in
  stall order, the head blocking the rest).
- ``pool/preempt``: under preempt lifo, the most recently admitted holder in
  a scope (never a lease) loses its hold and re-enters the head of the queue.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ..errors import LimitError
from .configuration import (AT_STAGE, DECODE, ENDED, FINISHING, GROWING, HOLD, QUEUED, ActiveHold, Allocation, CacheEntry,
                            Configuration, Frame, Holding, LeaseState, PendingHold, Waiting, innermost_hold, insert_event,
                            own_entry_index, remove_event, ready_from, ready_serials, replace_at)
from .machine import (EPSILON, Machine, count_pool, explain_pool, fail, follow_up, is_warm, make_ready, mark_dirty,
                      runner_up, session_env, with_draws)
from .rules import rule
from . import groups, sharing, window_sharing
from .values import Env, resolve_index


# -- reading pools ---------------------------------------------------------------


#: The most cache blocks one admission, growth or landing may evict (make_room).
MAX_EVICTIONS = 1_000_000


def _set_pool(c: Configuration, p: int, pool) -> Configuration:
    return c._replace(pools=replace_at(c.pools, p, pool))


# -- joining a queue -------------------------------------------------------------


def enter_hold(m: Machine, c: Configuration, serial: int, stmt: tuple[int, int], preempted: bool) -> Configuration:
    """A hold statement reached (or re-executed after a preemption): its
    pools are resolved and its units and reserve evaluated now, only to judge
    whether it can ever fit; it is rejected (pool/reject) or joins its first
    pool's queue (session/hold-enter)."""
    s = c.sessions[serial]
    hold = m.holds[stmt]
    env = session_env(m, c, s, stmt)
    pools = tuple(resolve_index(ref, index, env, "pool") for ref, index in zip(hold.refs, hold.indices))
    for k, p in enumerate(pools):
        units = max(0.0, hold.units[k](env))
        reserve = max(0.0, hold.reserves[k](env)) if hold.reserves[k] is not None else 0.0
        if (m.round_up(p, max(units, reserve)) if m.kv_groups[p] is None
                else groups.admission_needs(m, p, units, max(units, reserve))[0]) > m.caps[p] + EPSILON:
            c = c._replace(sessions=c.sessions.set(serial, with_draws(s, env)))
            return reject(m, c, serial, p, units, reserve)
    return join_queue(m, c._replace(sessions=c.sessions.set(serial, with_draws(s, env))), serial, stmt, pools, preempted)


@rule("session/hold-enter", "the hold waits in its first pool's queue: at its end, or at its head after a preemption (at its end, to be chosen by the keys as any, under requeue by key)",
      "002 §3 Pools: hold m₁(u₁) ... joins the queue of m₁; Ties: a preempted session re-enters at the head, ahead of the key; "
      "requeue by key: docs/design/priorities-and-limits.md")
def join_queue(m: Machine, c: Configuration, serial: int, stmt: tuple[int, int], pools: tuple[int, ...],
               preempted: bool) -> Configuration:
    s = c.sessions[serial]._replace(status=QUEUED, pending=PendingHold(stmt, pools, c.time))
    first = pools[0]
    pool = c.pools[first]
    if preempted and m.requeue_key[first]:
        # requeue by key: it joins as any hold does, its keys then its new join number choosing it
        # (vLLM 0.33.0's priority queue: prepend_request pushes into the heap, request_queue.py:160-166)
        preempted = False
    waiting = Waiting(serial, c.sequence, preempted)
    queue = (waiting,) + pool.queue if preempted else pool.queue + (waiting,)
    c = c._replace(sessions=c.sessions.set(serial, s), sequence=c.sequence + 1)
    c = mark_dirty(m, _set_pool(c, first, pool._replace(queue=queue)), first)
    if m.observer:
        m.notify("session/hold-enter", c, {"session": serial, "pool": m.pool_name(first), "head": preempted,
                                           "queued": len(queue)})
    return c


def fail_infinite(m: Machine, c: Configuration, p: int, what: str, stmt) -> None:
    """An allocation of inf units (which only a pool of cap inf admits) is a
    RunError naming the statement: a holder's units are counted, added and
    taken back, and inf - inf is no count."""
    fail(f"{what} on pool {m.pool_name(p)} come to inf units: an allocation must be a finite number of units "
         f"(a pool counts what its holders take and give back)", c, stmt)


@rule("pool/reject", "a hold whose units, or reserve when larger, are above a pool's cap (as they evaluate when it joins; with KV cache groups, counted in every group as pool/admit-groups counts them) ends its session",
      "002 §3 Pools: A request that can never fit ... is rejected: the session ends.")
def reject(m: Machine, c: Configuration, serial: int, p: int, units: float, reserve: float) -> Configuration:
    """pool/reject: a hold that can never fit ends its session (the follow-up session/end)."""
    what = f"reserve {reserve:g}" if reserve > units else f"units {units:g}"
    c = count_pool(c, p, rejected=1)
    c = explain_pool(c, p, f"session {serial} rejected: {what} above cap {m.caps[p]:g}")
    if m.observer:
        m.notify("pool/reject", c, {"session": serial, "pool": m.pool_name(p), "units": units, "reserve": reserve})
    return follow_up(c, ("session/end", serial))


# -- admission -------------------------------------------------------------------


def select_head(m: Machine, c: Configuration, p: int, budget: tuple[int, float] | None = None,
                skip: tuple = ()) -> tuple[Waiting, tuple | None]:
    """The hold the pool tries: a preempted one first, else by the queue's
    keys (re-evaluated now, ``waited`` since it joined; ``budget`` as
    admissible's), then join order; with it, when a step trace observes the
    run, why (the order it came first in, its keys, the hold that would come
    next), else None."""
    queue = c.pools[p].queue
    if skip:  # offload to: the holds offload/wait passed over in the iteration forming (docs/design/cpu-offloading.md)
        queue = tuple(w for w in queue if w.serial not in skip)
    keys = m.queue_keys[p]
    if keys is None or queue[0].preempted:
        why = None
        if m.observer:  # the order it came first in, and the hold that would come next
            why = ("head" if queue[0].preempted else "join", (), (queue[1].serial, ()) if len(queue) > 1 else None)
        return queue[0], why
    ranked = [] if m.observer else None  # with an observer: every hold's key, for the record (runner_up)
    best, best_key = None, None
    sessions, now = c.sessions, c.time
    env = Env(c)  # one environment, set to each waiting session in turn (a queue can be thousands long)
    env.budget = budget
    for w in queue:
        s = sessions[w.serial]
        env.attrs, env.serial, env.stream, env.draws = s.attrs, s.serial, s.stream, s.draws
        env.waited = now - s.pending.joined
        key = [k(env) for k in keys]
        key.append(w.join)
        if ranked is not None:
            ranked.append((key, w.serial))
        if best is None or key < best_key:
            best, best_key = w, key
    why = None
    if ranked is not None:
        runner = runner_up(ranked, best.serial)
        why = ("keys", tuple(best_key[:-1]), None if runner is None else (runner[1], tuple(runner[0][:-1])))
    return best, why


class Admission(NamedTuple):
    """The premise of pool/admit evaluated for a queue's head: the hold it
    tries, its header's values (evaluated now: "the unit expressions are
    evaluated when the session is admitted") and whether it fits."""

    waiting: Waiting
    units: tuple[float, ...]  # per pool of the hold, what it takes
    needs: tuple[float, ...]  # per pool, the room it must find: max(units, reserve)
    reuse: float  # at most this much of its own cached prefix is consumed (inf without reuse)
    draws: int  # the session's stream position after the header (a header may draw)
    fits: bool  # every pool has room: allocated + round_up(need) <= cap (cached prefixes never block)
    why: tuple | None  # with a step trace: (order, key, runner_up) of the head's choice (select_head), else None
    #: the hold's content clause read now, when one of its pools shares prefixes (docs/design/shared-prefixes.md)
    content: tuple = ()


def admissible(m: Machine, c: Configuration, p: int, budget: tuple[int, float] | None = None,
               skip: tuple = ()) -> Admission | None:
    """The premise of pool/admit at pool ``p``: its head (select_head), its
    header evaluated now, and whether it fits every pool of its hold; None
    when the queue is empty. ``budget``: (step stage, budget left) when that
    stage admits (seed 002 §3: "budget_left(S) then evaluates to the budget
    left"), which the queue's keys and the header read."""
    if not c.pools[p].queue or (skip and all(w.serial in skip for w in c.pools[p].queue)):
        return None
    waiting, why = select_head(m, c, p, budget, skip)
    s = c.sessions[waiting.serial]
    stmt = s.pending.stmt
    hold = m.holds[stmt]
    env = session_env(m, c, s, stmt)
    env.budget = budget
    units = tuple([max(0.0, f(env)) for f in hold.units])
    needs = tuple([max(u, max(0.0, r(env)) if r is not None else 0.0) for u, r in zip(units, hold.reserves)])
    reuse = max(0.0, hold.reuse(env)) if hold.reuse is not None else math.inf
    for q in s.pending.pools:
        if m.kv_groups[q] is not None and c.pools[q].table is None and hold.cache is not None and reuse > 0 and (
                own_entry_index(c.pools[q].entries, s.serial) >= 0 or any(x == q for x, _ in s.preempted_at)):
            fail(f"pool {m.pool_name(q)} has KV cache groups: a hold that would consume its own cached prefix "
                 f"there (a reuse above 0, after its session cached one or was preempted) is modelled only in a pool "
                 f"that shares prefixes (`share prefixes;`: the hit must hold in every group, "
                 f"docs/design/sliding-window.md, section 1 (c))", c, stmt)
    if not any(c.pools[q].table is not None for q in s.pending.pools):
        fits = all(groups.fits(m, c, q, u, need) if m.kv_groups[q] is not None
                   else c.pools[q].allocated + m.round_up(q, need) <= m.caps[q] + EPSILON
                   for q, u, need in zip(s.pending.pools, units, needs))
        return Admission(waiting, units, needs, reuse, env.draws, fits, why)
    # a pool that shares prefixes: the hit's blocks another hold references take no free unit (vLLM 0.33.0's
    # admission check, kv_cache_manager.py:531-548: the new blocks and the hit's blocks in the free queue)
    content = sharing.evaluate_content(m, stmt, env)
    fits = True
    for q, u, need in zip(s.pending.pools, units, needs):
        if c.pools[q].table is not None and m.kv_groups[q] is not None:  # the hit in every group
            fits = fits and window_sharing.fits(m, c, q, s.serial, content, reuse, u, need, hold.cache is not None)
            continue
        room = m.round_up(q, need)
        if c.pools[q].table is not None and hold.cache is not None:
            room -= sharing.live_units(m, c, q, sharing.hit_blocks(m, c, q, s.serial, content, reuse, u))
        fits = fits and c.pools[q].allocated + room <= m.caps[q] + EPSILON
    return Admission(waiting, units, needs, reuse, env.draws, fits, why, content)


def header_drawn(c: Configuration, a: Admission) -> Configuration:
    """``c`` with the head's stream where its header's evaluation left it (every evaluation draws anew)."""
    s = c.sessions[a.waiting.serial]
    return c if s.draws == a.draws else c._replace(sessions=c.sessions.set(s.serial, s._replace(draws=a.draws)))


@rule("pool/admit", "the queue's head fits every pool of its hold (allocated + round_up(max(units, reserve)) <= cap): it takes its units and its body runs",
      "002 §3 Pools: The head of a queue is admitted when every pool of its hold has room for its reserve units next to the allocated units (used + r <= cap ...; cached prefixes never block)")
def admit(m: Machine, c: Configuration, p: int, a: Admission) -> Configuration:
    """pool/admit (its premise: ``admissible``, which found ``a`` fits): the
    hold leaves the queue and takes its units on every pool, consuming its own
    cached prefix (pool/consume) and evicting (pool/evict-*) as needed; its
    body runs."""
    waiting, units, reuse = a.waiting, a.units, a.reuse
    serial = waiting.serial
    s = c.sessions[serial]
    pending = s.pending
    hold = m.holds[pending.stmt]
    pool = c.pools[p]
    k = pool.queue.index(waiting)
    c = _set_pool(c, p, pool._replace(queue=pool.queue[:k] + pool.queue[k + 1:]))
    admission = c.sequence
    s = s._replace(holds=s.holds + (ActiveHold(admission, pending.stmt, ()),))
    c = c._replace(sequence=admission + 1, sessions=c.sessions.set(serial, s))
    cached = 0.0
    for q, u, whole in zip(pending.pools, units, a.needs):
        consumed = 0.0
        if c.pools[q].table is not None:  # a pool that shares prefixes: pool/hit, pool/admit-shared
            need = m.round_up(q, u)
            if need == math.inf:
                fail_infinite(m, c, q, "the hold's units", pending.stmt)
            if m.kv_groups[q] is not None:  # KV cache groups: pool/hit-groups, pool/admit-shared-groups
                hit = ((), (), 0, 0.0, 0)
                if hold.cache is not None:
                    c, hit = window_sharing.hit_groups(m, c, q, serial, a.content, reuse, u)
                    consumed = hit[4] * m.block_sizes[q]
                    cached = max(cached, consumed)
                resumed = any(x == q for x, _ in s.preempted_at)
                prompt = c.pools[q].table.prompts.get(serial, whole) if resumed else whole
                c = window_sharing.admit_shared_groups(m, c, q, serial, admission, a.content, hold.cache is not None,
                                                       hit, need, prompt, pending.stmt)
            else:
                ids = ()
                if hold.cache is not None:
                    c, ids = sharing.hit(m, c, q, serial, a.content, reuse, u)
                    consumed = len(ids) * m.block_sizes[q]
                    cached = max(cached, consumed)
                c = sharing.admit_shared(m, c, q, serial, admission, a.content, hold.cache is not None, ids, need,
                                         pending.stmt)
            c = mark_dirty(m, count_pool(c, q, admissions=1), q) if is_warm(m, c) else mark_dirty(m, c, q)
            s = c.sessions[serial]
            active = s.holds[-1]
            active = active._replace(allocations=active.allocations + (Allocation(q, need, consumed, False),))
            c = c._replace(sessions=c.sessions.set(serial, s._replace(holds=s.holds[:-1] + (active,))))
            continue
        if hold.cache is not None:
            c, consumed = consume_prefix(m, c, q, serial, reuse)
            cached = max(cached, consumed)
        need = m.round_up(q, u)
        if need == math.inf:
            fail_infinite(m, c, q, "the hold's units", pending.stmt)
        if m.kv_groups[q] is not None:  # a pool with KV cache groups: pool/admit-groups
            c = groups.admit_groups(m, c, q, serial, admission, u, whole, pending.stmt)
            if is_warm(m, c):
                c = count_pool(c, q, admissions=1)
            continue
        c = m.make_room(m, c, q, need, pending.stmt)
        pool = c.pools[q]
        c = _set_pool(c, q, pool._replace(allocated=pool.allocated + need,
                                          holders=pool.holders + (Holding(admission, serial, admission, need, False),)))
        c = mark_dirty(m, count_pool(c, q, admissions=1), q) if is_warm(m, c) else mark_dirty(m, c, q)
        s = c.sessions[serial]
        active = s.holds[-1]
        active = active._replace(allocations=active.allocations + (Allocation(q, need, min(consumed, need), False),))
        c = c._replace(sessions=c.sessions.set(serial, s._replace(holds=s.holds[:-1] + (active,))))
    if is_warm(m, c):
        c = count_pool(c, p, wait_sum=c.time - pending.joined, wait_count=1)
    s = c.sessions[serial]
    attrs = list(s.attrs)
    attrs[m.program.slot_cached] = cached
    s = s._replace(attrs=tuple(attrs), frames=s.frames + (Frame(hold.body, HOLD, pending.stmt, s.pc),), pc=0,
                   admission=admission)
    c = make_ready(m, c, s)
    if m.observer:
        allocations = s.holds[-1].allocations
        order, key, runner = a.why
        m.notify("pool/admit", c, {"session": serial, "pool": m.pool_name(p), "units": allocations[0].units,
                                   "allocations": [(m.pool_name(a.pool), a.units) for a in allocations],
                                   "cached": cached, "waited": c.time - pending.joined,
                                   "order": order, "key": key, "runner_up": runner})
    return c


@rule("pool/consume", "with a cache clause, the admitted session takes at most reuse units of its own cached prefix; the rest stays as a dead entry of the same age",
      "002 §3 Pools: on admission the session consumes at most ρ units of its own cached prefix ...; the rest of that entry stays in the cache as a dead entry with the same age")
def consume_prefix(m: Machine, c: Configuration, q: int, serial: int, reuse: float) -> tuple[Configuration, float]:
    """pool/consume: the session takes at most ``reuse`` of its own cached
    prefix on ``q``; the rest stays as a dead entry of the same age."""
    pool = c.pools[q]
    k = own_entry_index(pool.entries, serial)
    if k < 0:
        return c, 0.0
    entry = pool.entries[k]
    consumed = min(entry.units, m.round_down(q, reuse))
    rest = entry.units - consumed
    if rest > EPSILON:
        entries = replace_at(pool.entries, k, entry._replace(owner=None, units=rest))
    else:
        entries = pool.entries[:k] + pool.entries[k + 1:]
    c = _set_pool(c, q, pool._replace(entries=entries, cached=pool.cached - consumed))
    if m.observer:
        m.notify("pool/consume", c, {"session": serial, "pool": m.pool_name(q), "consumed": consumed, "dead": rest})
    return c, consumed


# -- eviction and spill ----------------------------------------------------------------


def make_room(m: Machine, c: Configuration, q: int, need: float, stmt=None) -> Configuration:
    """Evict until allocated + cached + need <= cap (``m.make_room`` is this,
    or the fast engine's ``make_room_lru``). Backstop: entries go block by block
    (seed 000: "An entry is evicted from its tail, block by block"), so room
    for more than MAX_EVICTIONS blocks at once is a LimitError naming the pool
    (and ``stmt``, the statement that needs the room), where it would run for
    ever (1e308 units in blocks of 1). A pool that shares prefixes evicts
    from its free order (sharing.make_room_shared)."""
    if c.pools[q].table is not None:
        return sharing.make_room_shared(m, c, q, need, stmt)
    check_evictions(m, c, q, need, stmt)
    while True:
        pool = c.pools[q]
        if pool.allocated + pool.cached + need <= m.caps[q] + EPSILON or not pool.entries:
            return c
        c = evict_one(m, c, q)


def check_evictions(m: Machine, c: Configuration, q: int, need: float, stmt=None) -> None:
    """make_room's backstop: a LimitError (a limit of serq-ref, not of the program) when the room needed
    is more than MAX_EVICTIONS blocks."""
    pool = c.pools[q]
    block = m.block_sizes[q]
    evicted = min(pool.allocated + pool.cached + need - m.caps[q], pool.cached)  # at least, in units
    if block and evicted / block > MAX_EVICTIONS:
        raise LimitError(f"pool {m.pool_name(q)}: making room for {need:g} units evicts {evicted / block:g} blocks "
                         f"of {block:g} one by one, more than the {MAX_EVICTIONS:,} serq-ref evicts at once (a "
                         f"limit of its implementation, which evicts block by block, not of the program)",
                         stmt=stmt, time=c.time)


def _entry_env(m: Machine, c: Configuration, entry: CacheEntry, size: float, env: Env | None = None) -> Env:
    """The environment eviction keys and spill clauses read for ``entry``
    (a piece of ``size``): ``env`` set to it, or a new one."""
    live = c.sessions.get(entry.source)
    attrs = live.attrs if live is not None else c.ended_attrs.get(entry.source)
    if env is None:
        env = Env(c, attrs, entry.source, m.stream_machine, c.workload.machine_draws)
    else:
        env.attrs, env.serial = attrs, entry.source
    env.size = size
    env.age = c.time - entry.released
    env.last = entry.released
    env.queued = 1.0 if live is not None and live.status == QUEUED else 0.0
    return env


def evict_one(m: Machine, c: Configuration, q: int) -> Configuration:
    """The first entry in the pool's order (lru: release time, then release
    order, which is how entries are kept; by: the keys, read for each entry
    now, then release order) loses its tail: one block (pool/evict-block), or
    its last block or, without a block size, all of it (pool/evict-entry)."""
    pool = c.pools[q]
    keys = m.evict_keys[q]
    draws = c.workload.machine_draws
    why = None  # with a step trace: (order, key, runner_up) of the choice
    if keys is None:
        k = 0
        if m.observer:  # lru: the key is the release time (then the release order, which is the entries' order)
            entries = pool.entries
            why = ("lru", (entries[0].released,), None if len(entries) < 2 else
                   (entries[1].source, entries[1].released, (entries[1].released,)))
    else:
        best = None
        ranked = [] if m.observer else None  # with an observer: every entry's key, for the record (runner_up)
        env = Env(c, None, -1, m.stream_machine, draws)  # set to each entry in turn
        for i, entry in enumerate(pool.entries):
            _entry_env(m, c, entry, entry.units, env)
            env.draws = draws
            key = tuple(f(env) for f in keys) + (entry.order,)
            draws = env.draws
            if ranked is not None:
                ranked.append((key, i))
            if best is None or key < best[0]:
                best = (key, i)
        k = best[1]
        if ranked is not None:
            runner = runner_up(ranked, k)
            other = None if runner is None else pool.entries[runner[1]]
            why = ("keys", best[0][:-1], None if runner is None else (other.source, other.released, runner[0][:-1]))
    if draws != c.workload.machine_draws:  # the keys may draw, on the machine's stream
        c = c._replace(workload=c.workload._replace(machine_draws=draws))
    entry = pool.entries[k]
    block = m.block_sizes[q]
    if block and entry.units - block > EPSILON:
        return evict_block(m, c, q, k, block, why)
    return evict_entry(m, c, q, k, min(block, entry.units) if block else entry.units, why)


@rule("pool/evict-block", "one block from the tail of the first entry in the pool's order, which keeps the rest",
      "000: An entry is evicted from its tail, block by block; 002 §3 Pools: evict lru orders by release time and then release order, evict by (k₁, …) by the keys and then release order")
def evict_block(m: Machine, c: Configuration, q: int, k: int, block: float, why: tuple | None = None) -> Configuration:
    pool = c.pools[q]
    entry = pool.entries[k]
    rest = entry.units - block
    c = _set_pool(c, q, pool._replace(entries=replace_at(pool.entries, k, entry._replace(units=rest)),
                                      cached=pool.cached - block))
    return _evicted(m, c, q, entry, block, rest, "pool/evict-block", why)


@rule("pool/evict-entry", "the first entry in the pool's order goes: its last block, or all of it without a block size",
      "002 §3 Pools: Eviction is per entry, or per block from the tail of the entry when the pool has block b")
def evict_entry(m: Machine, c: Configuration, q: int, k: int, units: float, why: tuple | None = None) -> Configuration:
    pool = c.pools[q]
    entry = pool.entries[k]
    c = _set_pool(c, q, pool._replace(entries=pool.entries[:k] + pool.entries[k + 1:], cached=pool.cached - units))
    return _evicted(m, c, q, entry, units, 0.0, "pool/evict-entry", why)


def _evicted(m: Machine, c: Configuration, q: int, entry: CacheEntry, removed: float, rest: float,
             rule_name: str, why: tuple | None) -> Configuration:
    """The conclusion both evictions share: the pool retried, counted, traced (``why``: evict_one's
    choice), and the piece spilled if its predicate holds."""
    c = mark_dirty(m, c, q)  # a waiting hold's header may read its own cached prefix
    if is_warm(m, c):
        c = count_pool(c, q, evicted_entries=0 if rest else 1, evicted_units=removed)
    if m.observer:
        order, key, runner = why
        m.notify(rule_name, c, {"pool": m.pool_name(q), "source": entry.source, "dead": entry.owner is None,
                                "units": removed, "left": rest, "released": entry.released, "order": order,
                                "key": key, "runner_up": runner})
    if m.spill[q] is not None:
        c = spill(m, c, q, entry, removed)
    return c


@rule("pool/spill", "an evicted piece for which the pool's spill predicate holds becomes a write job of the given work on the link stage",
      "002 §2: spill POOL via STAGE ( expr ) when ( expr ) -- write evicted prefixes to a tier; 000 spill")
def spill(m: Machine, c: Configuration, q: int, entry: CacheEntry, units: float) -> Configuration:
    """pool/spill: an evicted piece whose predicate holds is written to the tier through the link stage:
    the write job's arrival there is the follow-up ``enter-stage`` (its completion lands it:
    pool/spill-land), or, of no work, the piece lands at once."""
    to, via, work_of, when = m.spill[q]
    env = _entry_env(m, c, entry, units)
    take = when(env) != 0.0
    work = max(0.0, work_of(env)) if take else 0.0
    if env.draws != c.workload.machine_draws:
        c = c._replace(workload=c.workload._replace(machine_draws=env.draws))
    if not take:
        return c
    if is_warm(m, c):
        c = count_pool(c, q, spills=1)
    if m.observer:
        m.notify("pool/spill", c, {"pool": m.pool_name(q), "tier": m.pool_name(to), "via": m.stage_name(via),
                                   "source": entry.source, "units": units, "work": work})
    if work <= 0:
        return land_spill(m, c, to, entry.source, units)
    return follow_up(c, ("enter-stage", (via,), work, (to, entry.source, units)))


@rule("pool/spill-land", "a written piece joins its session's entry in the tier (dead if the session ended), released now; what cannot fit next to the tier's allocations is not kept",
      "000 spill: the evicted prefix is written to the tier")
def land_spill(m: Machine, c: Configuration, to: int, source: int, units: float) -> Configuration:
    """pool/spill-land: the written piece joins its session's entry in the
    tier (dead if the session has ended), released now; what cannot fit next
    to the tier's allocations is not kept."""
    pool = c.pools[to]
    owner = source if source in c.sessions else None
    k = own_entry_index(pool.entries, source) if owner is not None else -1
    previous = pool.entries[k].units if k >= 0 else 0.0
    room = m.caps[to] - pool.allocated - previous
    keep = m.round_down(to, min(units, max(0.0, room)))
    if keep <= 0:
        return c
    if k >= 0:
        pool = pool._replace(entries=pool.entries[:k] + pool.entries[k + 1:], cached=pool.cached - previous)
        c = _set_pool(c, to, pool)
    c = m.make_room(m, c, to, previous + keep)
    pool = c.pools[to]
    entry = CacheEntry(owner, source, previous + keep, c.time, c.sequence)
    c = _set_pool(c._replace(sequence=c.sequence + 1), to,
                  pool._replace(entries=pool.entries + (entry,), cached=pool.cached + entry.units))
    c = mark_dirty(m, c, to)
    if m.observer:
        m.notify("pool/spill-land", c, {"pool": m.pool_name(to), "source": source, "units": keep})
    return c


# -- release ---------------------------------------------------------------------


@rule("pool/release", "an allocation goes back; with the hold's cache clause min(cache, computed) units stay cached for the session, rounded down to blocks (replacing its previous entry there)",
      "002 §3 Pools: At the end of the body the units are released and min(ℓ, computed) units stay cached, rounded down to blocks")
def release_units(m: Machine, c: Configuration, serial: int, q: int, units: float, computed: float,
                  stmt: tuple[int, int], holder_id: int) -> Configuration:
    c, kept = give_back(m, c, serial, q, units, computed, stmt, holder_id)
    if m.observer:
        m.notify("pool/release", c, {"session": serial, "pool": m.pool_name(q), "units": units, "cached": kept})
    return c


def give_back(m: Machine, c: Configuration, serial: int, q: int, units: float, computed: float,
              stmt: tuple[int, int], holder_id: int) -> tuple[Configuration, float]:
    """The conclusion pool/release and pool/lease-end share: ``units`` of
    ``q`` go back; with the hold's cache clause min(cache, computed) units
    stay cached for the session, rounded down to blocks (the session's
    previous entry there is replaced). Returns the units kept cached."""
    pool = c.pools[q]
    if pool.table is not None:  # a pool that shares prefixes: pool/register, pool/release-shared
        hold = m.holds[stmt]
        s = c.sessions[serial]
        want = None
        if hold.cache is not None:
            env = session_env(m, c, s, stmt)
            want = max(0.0, hold.cache(env))
            s = with_draws(s, env)
            c = c._replace(sessions=c.sessions.set(serial, s))
        give = sharing.give_back_shared if m.kv_groups[q] is None else window_sharing.give_back_groups
        c, kept = give(m, c, serial, q, units, computed, holder_id, want)
        if m.keeps_ended_attrs:
            c = c._replace(ended_attrs=c.ended_attrs.set(serial, s.attrs))
        return mark_dirty(m, c, q), kept
    if m.kv_groups[q] is not None:  # every group's real blocks go back (kv_cache_coordinator.py:404-412)
        units = next(h.units for h in pool.holders if h.serial == serial and h.hold_id == holder_id)
    pool = pool._replace(allocated=pool.allocated - units,
                         holders=tuple(h for h in pool.holders if not (h.serial == serial and h.hold_id == holder_id)))
    kept = 0.0
    hold = m.holds[stmt]
    s = c.sessions[serial]
    if hold.cache is not None:
        env = session_env(m, c, s, stmt)
        want = max(0.0, hold.cache(env))
        s = with_draws(s, env)
        kept = m.round_down(q, min(want, computed, units))  # (units: a grouped hold's blocks, at most what went back)
        if kept > 0:
            k = own_entry_index(pool.entries, serial)
            entries, cached = pool.entries, pool.cached
            if k >= 0:
                cached -= entries[k].units
                entries = entries[:k] + entries[k + 1:]
            entries = entries + (CacheEntry(serial, serial, kept, c.time, c.sequence),)
            pool = pool._replace(entries=entries, cached=cached + kept)
            c = c._replace(sequence=c.sequence + 1)
    c = _set_pool(c, q, pool)
    if m.keeps_ended_attrs:
        c = c._replace(ended_attrs=c.ended_attrs.set(serial, s.attrs))
    return mark_dirty(m, c._replace(sessions=c.sessions.set(serial, s)), q), kept


def _computed(a: Allocation) -> float:
    return a.position if a.advanced else a.units


#: What a hold's release does to the hold once its last allocation is back (release_next): nothing (the
#: hold's exit pops it: session/hold-exit), pop the hold (an end), or pop the hold and unwind the frames to
#: the hold statement (a preemption: it executes the hold again)
KEEP, POP, UNWIND = None, "pop", "unwind"


def release_items(serial: int, hold: ActiveHold, lease_pool: int | None = None, preempted: bool = False,
                  unhashed: tuple[int, float] | None = None, after=KEEP) -> tuple:
    """The follow-up work of giving hold ``hold`` of session ``serial`` back: one ``pool/release`` item
    per allocation, in the hold's order (release_next); one for a hold a release statement emptied, when
    it is to be popped."""
    n = len(hold.allocations) if after is KEEP else max(1, len(hold.allocations))
    return (("pool/release", serial, hold.hold_id, lease_pool, preempted, unhashed, after),) * n


def release_next(m: Machine, c: Configuration, serial: int, hold_id: int, lease_pool: int | None = None,
                 preempted: bool = False, unhashed: tuple[int, float] | None = None, after=KEEP) -> Configuration:
    """The first allocation left in the session's hold ``hold_id`` goes back
    (pool/release), or, on ``lease_pool``, outlives the hold (pool/lease). A
    preempted hold caches only what it computed (its position: the consumed
    prefix, advanced by loads), not its allocation; ``unhashed`` (pool,
    units): that many units at the end of the position on that pool are not
    cached (schedule ahead: _in_flight_decode). When it was the hold's last
    allocation, ``after`` says what becomes of the hold (KEEP, POP, UNWIND)."""
    s = c.sessions[serial]
    h = next(i for i, x in enumerate(s.holds) if x.hold_id == hold_id)
    hold = s.holds[h]
    a = hold.allocations[0] if hold.allocations else None  # none: a release statement gave them back
    if a is not None:
        s = s._replace(holds=replace_at(s.holds, h, hold._replace(allocations=hold.allocations[1:])))
        c = c._replace(sessions=c.sessions.set(serial, s))
    if a is None:
        pass
    elif a.pool == lease_pool:
        c = start_lease(m, c, serial, hold, a)
    else:
        computed = a.position if preempted else _computed(a)
        if unhashed is not None and a.pool == unhashed[0]:
            computed -= unhashed[1]
        c = release_units(m, c, serial, a.pool, a.units, computed, hold.stmt, hold.hold_id)
    if after is KEEP or len(hold.allocations) > 1:
        return c
    s = c.sessions[serial]
    frames, pc = s.frames, s.pc
    if after == UNWIND:  # back to the hold statement's block, its frame pointing past it, as when it was first executed
        while not (frames[-1].kind == HOLD and frames[-1].origin == hold.stmt):
            frames = frames[:-1]
        frames, pc = frames[:-1], frames[-1].resume
    return c._replace(sessions=c.sessions.set(serial, s._replace(holds=s.holds[:-1], frames=frames, pc=pc)))


@rule("pool/lease", "a leased allocation outlives its hold's scope, neither evictable nor a victim, until a release, its time or the session's end",
      "002 §3 Pools: A hold's lease m (t) keeps its allocation on m past the scope's end, neither evictable nor a preemption victim")
def start_lease(m: Machine, c: Configuration, serial: int, hold: ActiveHold, a: Allocation) -> Configuration:
    """pool/lease: the allocation stays the session's past the scope, neither
    evictable nor a victim, until release, its time, or the session's end."""
    compiled = m.holds[hold.stmt]
    s = c.sessions[serial]
    env = session_env(m, c, s, hold.stmt)
    duration = max(0.0, compiled.lease_duration(env))
    s = with_draws(s, env)
    lease_id = c.sequence
    seq = lease_id + 1
    due, events = None, c.events
    if math.isfinite(duration):
        due = (c.time + duration, seq)
        seq += 1
        events = insert_event(events, due, "lease", serial, lease_id)
    lease = LeaseState(lease_id, a.pool, a.units, _computed(a), hold.stmt, due)
    pool = c.pools[a.pool]
    holders = tuple(h._replace(hold_id=lease_id, leased=True) if h.serial == serial and h.hold_id == hold.hold_id else h
                    for h in pool.holders)
    c = _set_pool(c, a.pool, pool._replace(holders=holders))
    s = s._replace(leases=s.leases + (lease,))
    c = c._replace(sessions=c.sessions.set(serial, s), events=events, sequence=seq)
    if m.observer:
        m.notify("pool/lease", c, {"session": serial, "pool": m.pool_name(a.pool), "units": a.units, "seconds": duration})
    return c


@rule("pool/lease-end", "a lease ends (the session's release, its time, or the session's end): the leased units go back, caching per the hold's clause",
      "002 §3 Pools: A hold's lease m (t) keeps its allocation on m past the scope's end ... until the session's release m, t seconds, or the session's end, and cache applies then")
def end_lease(m: Machine, c: Configuration, serial: int, lease_id: int, expired: bool) -> Configuration:
    s = c.sessions[serial]
    lease = next(x for x in s.leases if x.lease_id == lease_id)
    events = c.events
    if lease.due is not None and not expired:
        events = remove_event(events, lease.due)
    s = s._replace(leases=tuple(x for x in s.leases if x.lease_id != lease_id))
    c = c._replace(sessions=c.sessions.set(serial, s), events=events)
    c, kept = give_back(m, c, serial, lease.pool, lease.units, lease.computed, lease.stmt, lease_id)
    if m.observer:
        m.notify("pool/lease-end", c, {"session": serial, "pool": m.pool_name(lease.pool), "units": lease.units,
                                       "cached": kept})
    return c


# -- grow and preempt --------------------------------------------------------------------


def _allocate_more(m: Machine, c: Configuration, serial: int, p: int, need: float, stmt=None) -> Configuration:
    s = c.sessions[serial]
    h, k = innermost_hold(s, p)
    if c.pools[p].table is not None:  # new blocks at the end of the hold's (they count in allocated there)
        grow = sharing.grow_hold if m.kv_groups[p] is None else window_sharing.grow
        c = grow(m, c, p, serial, s.holds[h].hold_id, need, stmt)
        c = _set_pool(c, p, c.pools[p]._replace(allocated=c.pools[p].allocated - taken_by(m, p, need)))
    else:
        c = m.make_room(m, c, p, taken_by(m, p, need), stmt)
    s = c.sessions[serial]
    hold = s.holds[h]
    a = hold.allocations[k]
    hold = hold._replace(allocations=replace_at(hold.allocations, k, a._replace(units=a.units + need)))
    s = s._replace(holds=replace_at(s.holds, h, hold))
    pool = c.pools[p]
    taken = taken_by(m, p, need)
    holders = tuple(x._replace(units=x.units + taken) if x.serial == serial and x.hold_id == hold.hold_id else x
                    for x in pool.holders)
    c = _set_pool(c, p, pool._replace(allocated=pool.allocated + taken, holders=holders))
    return c._replace(sessions=c.sessions.set(serial, s))


#: What a growth came to (step/grow reads it in the grower: ``grow``): it grew, it waits (preempt none), or
#: the grower itself was the victim of its own growth (preempt lifo).
GREW = "grew"
WAITS = "waits"
PREEMPTED = "preempted"
DEFERRED = "deferred"  # defer free: its victim was in flight (step/defer)


def growth_need(m: Machine, c: Configuration, serial: int, p: int, amount: float, stmt) -> float:
    """The units a growth of the innermost hold on ``p`` by ``amount`` adds:
    to whole blocks (seed 002 §3: "grow m (d) enlarges the innermost hold on m
    by d (rounded to blocks)"); outside a hold on ``p``, or inf, a RunError."""
    s = c.sessions[serial]
    h, k = innermost_hold(s, p)
    if h < 0:
        fail(f"grow {m.pool_name(p)} outside a hold of {m.pool_name(p)}", c, stmt)
    current = s.holds[h].allocations[k].units
    need = m.round_up(p, current + amount) - current
    if need == math.inf:
        fail_infinite(m, c, p, "the grow's units", stmt)
    return need


def taken_by(m: Machine, p: int, need: float) -> float:
    """The units a growth of a hold's coverage by ``need`` takes from pool ``p``: ``need``, or, in a pool
    with KV cache groups, ``need`` in every group (each table grows to the same length:
    single_type_kv_cache_manager.py:229-236, 370-411; docs/design/sliding-window.md)."""
    g = m.kv_groups[p]
    return need if g is None else g.count * need


def grow_fits(m: Machine, c: Configuration, p: int, need: float) -> bool:
    """The premise of pool/grow: the pool has room for ``need`` more units (in every group, with KV cache
    groups) next to the allocated ones."""
    return c.pools[p].allocated + taken_by(m, p, need) <= m.caps[p] + EPSILON


@rule("pool/grow", "the innermost hold on the pool takes the growth (to blocks), cache entries evicted as needed",
      "002 §3 Pools: grow m (d) enlarges the innermost hold on m by d (rounded to blocks)")
def grow_allocate(m: Machine, c: Configuration, serial: int, p: int, need: float, stmt=None) -> Configuration:
    """pool/grow (its premise: grow_fits): the innermost hold on ``p`` takes
    ``need`` more units, cache entries evicted as needed."""
    c = _allocate_more(m, c, serial, p, need, stmt)
    if m.observer:
        m.notify("pool/grow", c, {"session": serial, "pool": m.pool_name(p), "units": need})
    return c


@rule("pool/grow-wait", "a growth that does not fit and has no victim (preempt none) waits, behind the pool's earlier growers",
      "002 §3 Pools: If it does not fit: with preempt none the session waits and resumes where it was")
def grow_wait(m: Machine, c: Configuration, serial: int, p: int, amount: float, need: float) -> Configuration:
    """pool/grow-wait (its premise: the growth does not fit and there is no
    victim): the session waits to grow, behind the pool's earlier growers."""
    s = c.sessions[serial]._replace(status=GROWING, growth=(p, amount))
    pool = c.pools[p]
    c = _set_pool(c, p, pool._replace(growers=pool.growers + (serial,)))
    c = c._replace(sessions=c.sessions.set(serial, s))
    if m.observer:
        m.notify("pool/grow-wait", c, {"session": serial, "pool": m.pool_name(p), "units": need})
    return c


def grow(m: Machine, c: Configuration, serial: int, p: int, amount: float, stmt) -> Configuration:
    """A growth of the innermost hold on ``p`` by ``amount`` (the ``pool/grow``
    follow-up, and the grow statement's rule): it grows (pool/grow) when it
    fits; else, when the pool has a victim (preempt lifo or by:
    choose_victim), the victim is preempted (pool/preempt; under schedule
    ahead a parked one: the follow-up step/preempt-parked) and, unless the
    grower was its own victim, the growth is tried again once the
    preemption's follow-up work is done (a ``pool/grow`` item after it);
    with no victim it waits (pool/grow-wait). What it came to shows in the
    grower: still holding more (grew), growing (waits), or queued or gone
    from its stage (preempted)."""
    need = growth_need(m, c, serial, p, amount, stmt)
    if need <= EPSILON or grow_fits(m, c, p, need):
        return c if need <= EPSILON else grow_allocate(m, c, serial, p, need, stmt)
    victim = choose_victim(m, c, p) if m.lifo[p] else None
    if victim is None:
        return grow_wait(m, c, serial, p, amount, need)
    why = (serial,) + explain_victim(m, c, p) if m.observer else None
    again = ("pool/grow", serial, p, amount, stmt)
    deferring = _defers(m, c, p, victim)
    if deferring is not None:  # defer free: a victim the iteration in flight was given tokens is not preempted
        return follow_up(c, ("step/defer", deferring, serial, victim, p, why))
    if c.sessions[victim].status == FINISHING:  # schedule ahead: a parked session (its hold exits now)
        # (speculate: a parked grower, served once more, that is its own victim grows no further)
        return follow_up(c, ("step/preempt-parked", victim, p, why), *(() if victim == serial else (again,)))
    if victim == serial:
        return preempt(m, c, victim, p, why)
    return follow_up(preempt(m, c, victim, p, why), again)  # the preemption's work, then the growth's next attempt


def choose_victim(m: Machine, c: Configuration, p: int) -> int | None:
    """The premise of pool/preempt's victim (seed 002 §3 Pools, Ties: "the
    preemption victim: the most recently admitted holder"). For a pool that is
    a step stage's memory, "the holder that is a resident of the step stage the
    pool is the memory of and was admitted last — by the session's latest
    admission" (a holder away from the engine is in no running list); for any
    other pool, its most recently admitted holder in a scope. A lease is never
    a victim. None: no victim. Under schedule ahead a session parked at such
    an engine (step/park) is still running there, and a candidate
    (docs/design/async-scheduling.md)."""
    if m.preempt_keys[p] is not None:
        ranked = victims_by_keys(m, c, p)
        return min(ranked)[-1] if ranked else None
    engines = m.engines_of_memory[p]
    if engines:
        best = None
        for holding in c.pools[p].holders:
            if holding.leased:
                continue
            s = c.sessions[holding.serial]
            if (s.job is not None and s.job[0] in engines or s.status == FINISHING and _parked_at(c, engines, s.serial)) \
                    and (best is None or s.admission > best.admission):
                best = s
        return None if best is None else best.serial
    for holding in reversed(c.pools[p].holders):
        if not holding.leased:
            return holding.serial
    return None


def _in_flight_decode(m: Machine, c: Configuration, serial: int, p: int) -> float:
    """Under schedule ahead: 1 when ``serial``, a victim on ``p``, the memory
    of a schedule-ahead engine, was given a decode token by the engine's
    last ended iteration and not yet by the one being formed (its
    ``decoded``), else 0. vLLM caches a block only once the ids of its
    tokens are known (kv_cache_manager.py:615-625, scheduler.py:2403-2415);
    the token that decode's KV is for was sampled by the batch before, whose
    output is applied only after the next batch is formed: its position is
    not cached yet when the request is preempted while that batch is formed
    (docs/design/async-scheduling.md)."""
    for e in m.engines_of_memory[p]:
        st = c.stages[e]
        if m.steps[e].ahead and serial in st.decoded:
            it = st.iteration
            served = it is not None and it.due is None and any(a.serial == serial for a in it.assigned)
            # speculate: every token it was given is in flight (its drafts not yet rolled back either)
            given = next((tokens for x, tokens in st.given if x == serial), 1.0)
            return 0.0 if served else given
    return 0.0


def _rejected_in_flight(m: Machine, c: Configuration, serial: int, p: int) -> float:
    """Under schedule ahead and speculate: the drafts (and tokens past its last) that ``serial``'s last ended
    iteration gave it and did not accept, not yet rolled back while the next is formed (StepState.rejects),
    else 0. A victim's computed position leaves them out: vLLM still delivers the preempted request's stale
    output, its accepted tokens and no more (scheduler.py:2318-2364), and the request resumes with them."""
    for e in m.engines_of_memory[p]:
        for item in c.stages[e].rejects:
            if item[2].serial == serial:
                return item[4]
    return 0.0


def _defers(m: Machine, c: Configuration, p: int, victim: int) -> int | None:
    """The premise of step/defer (stages/step.py, defers): the engine with ``defer free`` whose memory is ``p``,
    forming an iteration while the one in flight gave ``victim`` tokens; None if none."""
    for s in m.engines_of_memory[p]:
        st = c.stages[s]
        if m.steps[s].defer and st.iteration is not None and st.iteration.due is None and victim in st.flight:
            return s
    return None


def _parked_at(c: Configuration, engines: tuple[int, ...], serial: int) -> bool:
    return any(serial in c.stages[e].parked for e in engines)


def victims_by_keys(m: Machine, c: Configuration, p: int) -> list[tuple]:
    """Under ``preempt by (k₁, …)``: the candidates lifo would take from
    (the engine's residents holding ``p`` when ``p`` is a step stage's
    memory, the sessions parked there under schedule ahead included, else
    its holders in a scope; never a lease), each as (its keys evaluated now, -its latest admission, its serial): the victim is the
    least, so keys tie to the last admitted (lifo). vLLM 0.33.0's priority
    path takes the running request with the largest (priority,
    arrival_time), scheduler.py:932-936: preempt by (-priority, -arrival)."""
    engines = m.engines_of_memory[p]
    keys = m.preempt_keys[p]
    env = Env(c)
    ranked = []
    for holding in c.pools[p].holders:
        if holding.leased:
            continue
        s = c.sessions[holding.serial]
        if engines:
            parked = s.status == FINISHING and _parked_at(c, engines, s.serial)
            if not parked and (s.job is None or s.job[0] not in engines):
                continue
            # a parked session (schedule ahead) has run its last decode: decoding, as lifo's candidate
            resident = None if parked else next((r for r in c.stages[s.job[0]].jobs if r.job_id == s.job[1]), None)
            env.decoding = 1.0 if parked or resident is not None and resident.mode == DECODE else 0.0
        else:
            env.decoding = 0.0
        env.attrs, env.serial, env.stream, env.draws = s.attrs, s.serial, s.stream, s.draws
        env.admission = float(s.admission)
        ranked.append(tuple(k(env) for k in keys) + (-s.admission, s.serial))
    return ranked


def explain_victim(m: Machine, c: Configuration, p: int) -> tuple[str, tuple[int, ...]]:
    """For the step trace (only with an observer): how choose_victim chose
    and among whom, oldest admission first, so that the victim is the last:
    ("memory", the engines' residents holding ``p`` by their sessions'
    latest admission) or ("holders", the pool's holders in a scope in the
    order they were admitted)."""
    if m.preempt_keys[p] is not None:
        return "keys", tuple(x[-1] for x in sorted(victims_by_keys(m, c, p), reverse=True))
    engines = m.engines_of_memory[p]
    if engines:
        residents = {}
        for holding in c.pools[p].holders:
            s = c.sessions[holding.serial]
            if not holding.leased and (s.job is not None and s.job[0] in engines
                                       or s.status == FINISHING and _parked_at(c, engines, s.serial)):
                residents[s.serial] = s.admission
        return "memory", tuple(sorted(residents, key=residents.get))
    return "holders", tuple(h.serial for h in c.pools[p].holders if not h.leased)


def fitting_grower(m: Machine, c: Configuration, p: int) -> tuple[int, float] | None:
    """The premise of pool/grow-resume: the first grower of ``p`` in stall
    order and the units it needs, when they fit; None when there is no
    grower or the first does not fit (the head blocks the rest)."""
    if not c.pools[p].growers:
        return None
    serial = c.pools[p].growers[0]
    s = c.sessions[serial]
    _, amount = s.growth
    h, k = innermost_hold(s, p)
    current = s.holds[h].allocations[k].units
    need = m.round_up(p, current + amount) - current
    return (serial, need) if grow_fits(m, c, p, need) else None


@rule("pool/grow-resume", "the first grower of the pool fits now: it grows and goes on (a step stage's resident stays at the stage, to be served)",
      "002 §3 Ties: A pool's growers: the order they stalled, the head blocking the rest.")
def resume_grower(m: Machine, c: Configuration, p: int, serial: int, need: float) -> Configuration:
    pool = c.pools[p]
    c = _set_pool(c, p, pool._replace(growers=pool.growers[1:]))
    c = _allocate_more(m, c, serial, p, need)
    s = c.sessions[serial]
    if s.job is not None:  # a resident of a step stage whose growth waited: served again at its next iteration
        c = c._replace(sessions=c.sessions.set(serial, s._replace(status=AT_STAGE, growth=None)))
    else:
        c = make_ready(m, c, s)
    if m.observer:
        m.notify("pool/grow-resume", c, {"session": serial, "pool": m.pool_name(p), "units": need})
    return c


def detach(m: Machine, c: Configuration, serial: int) -> tuple[Configuration, tuple]:
    """Take the session out of whatever it waits for or runs at: out of a
    pool's growers or queue, and out of the ready sequence, now; its job's
    leaving its stage is follow-up work, returned (``stage/leave``)."""
    s = c.sessions[serial]
    items = () if s.job is None else (("stage/leave", s.job[0], s.job[1]),)
    if s.growth is not None:  # the growers behind it may fit now
        p = s.growth[0]
        pool = c.pools[p]
        c = mark_dirty(m, _set_pool(c, p, pool._replace(growers=tuple(x for x in pool.growers if x != serial))), p)
    if s.pending is not None:  # the holds behind it may fit now
        p = s.pending.pools[0]
        pool = c.pools[p]
        c = mark_dirty(m, _set_pool(c, p, pool._replace(queue=tuple(w for w in pool.queue if w.serial != serial))), p)
    s = c.sessions[serial]._replace(job=None, growth=None, pending=None)
    return c._replace(sessions=c.sessions.set(serial, s), ready=ready_from(x for x in ready_serials(c.ready) if x != serial)), items


@rule("pool/preempt", "under preempt lifo (the last admitted) or preempt by (the least keys) the victim's job leaves its stage, its hold is released with its computed prefix cached, computed is set, and it re-enters the head of the queue (under requeue by key, the queue by its keys)",
      "002 §3 Pools: with preempt lifo the holder ... admitted last ... is preempted: its job leaves its stage, its hold is released with its computed prefix cached, and it re-enters the head of the pool's queue; "
      "preempt by, requeue by key: docs/design/priorities-and-limits.md")
def preempt(m: Machine, c: Configuration, victim: int, p: int, why: tuple | None = None) -> Configuration:
    """pool/preempt (its premise: ``choose_victim`` chose ``victim``, for
    the reason ``why`` when a step trace observes the run): ``computed`` is
    set, the preemption counted; its follow-up work: the victim's job leaves
    its stage (stage/leave), its hold on ``p`` (and every hold inside it) is
    released with the computed prefix cached (pool/release), and it
    re-enters the head of the queue to execute the hold again
    (session/hold-enter). A second preemption without progress past the
    first's position counts the session stuck."""
    s = c.sessions[victim]
    h, k = innermost_hold(s, p)
    computed = s.holds[h].allocations[k].position - _rejected_in_flight(m, c, victim, p)
    unhashed = _in_flight_decode(m, c, victim, p)
    previous = dict(s.preempted_at).get(p)
    if previous is not None and computed <= previous + EPSILON and s.stuck < 0:
        s = s._replace(stuck=p)
        c = count_pool(c, p, stuck=1)
        c = explain_pool(c, p, f"session {victim} stuck: preempted again at position {computed:g} "
                               f"without passing {previous:g}")
    attrs = list(s.attrs)
    # a hold preempted again during its re-execution keeps the furthest position it reached: what the request
    # had computed is not lost (docs/semantics.md, "computed after a second preemption")
    attrs[m.program.slot_computed] = max(computed, attrs[m.program.slot_computed])
    s = s._replace(attrs=tuple(attrs), preempted_at=tuple((q, x) for q, x in s.preempted_at if q != p) + ((p, computed),))
    c, items = detach(m, c._replace(sessions=c.sessions.set(victim, s)), victim)
    for inner in reversed(s.holds[h:]):  # innermost first, the hold on p last
        items += release_items(victim, inner, preempted=True, unhashed=(p, unhashed), after=UNWIND)
    c = count_pool(c, p, preemptions=1)
    if m.observer:
        grower, by, candidates = why
        m.notify("pool/preempt", c, {"session": victim, "pool": m.pool_name(p), "computed": computed,
                                     "grower": grower, "by": by, "candidates": candidates})
    return follow_up(c, *items, ("session/hold-enter", victim, s.holds[h].stmt, True))


# -- statements on pools -----------------------------------------------------------


def release_statement(m: Machine, c: Configuration, serial: int, p: int) -> Configuration:
    """The release statement: the innermost hold on ``p`` gives its
    allocation back now, caching per its clause (pool/release); without one,
    the session's lease of ``p`` ends (pool/lease-end); with neither, nothing
    happens."""
    s = c.sessions[serial]
    h, k = innermost_hold(s, p)
    if h < 0:
        for lease in s.leases:
            if lease.pool == p:
                return end_lease(m, c, serial, lease.lease_id, expired=False)
        return c
    hold = s.holds[h]
    a = hold.allocations[k]
    hold2 = hold._replace(allocations=hold.allocations[:k] + hold.allocations[k + 1:])
    s = s._replace(holds=replace_at(s.holds, h, hold2),
                   preempted_at=tuple((q, x) for q, x in s.preempted_at if q != p))
    c = c._replace(sessions=c.sessions.set(serial, s))
    return release_units(m, c, serial, p, a.units, _computed(a), hold.stmt, hold.hold_id)


@rule("session/drop", "the session's own cached prefix on the pool is discarded",
      "002 §2: drop POOL; -- discard the own cached prefix")
def drop_statement(m: Machine, c: Configuration, serial: int, p: int) -> Configuration:
    """session/drop: the session's own cached prefix on ``p`` is discarded."""
    pool = c.pools[p]
    k = own_entry_index(pool.entries, serial)
    if k < 0:
        return c
    units = pool.entries[k].units
    c = _set_pool(c, p, pool._replace(entries=pool.entries[:k] + pool.entries[k + 1:], cached=pool.cached - units))
    c = mark_dirty(m, c, p)
    if m.observer:
        m.notify("session/drop", c, {"session": serial, "pool": m.pool_name(p), "units": units})
    return c


@rule("session/load", "the innermost hold's computed position on the pool advances, within its allocation (else a RunError)",
      "002 §3 Pools: load m (n) advances the innermost enclosing hold's position on m by n tokens, which its allocation must cover")
def load_statement(m: Machine, c: Configuration, serial: int, p: int, amount: float, stmt) -> Configuration:
    """session/load: the innermost hold's computed position on ``p`` advances by ``amount``, within its allocation."""
    s = c.sessions[serial]
    h, k = innermost_hold(s, p)
    if h < 0:
        fail(f"load {m.pool_name(p)} outside a hold of {m.pool_name(p)}", c, stmt)
    hold = s.holds[h]
    a = hold.allocations[k]
    if a.position + amount > a.units + EPSILON:
        fail(f"load {m.pool_name(p)} ({amount:g}): the hold has {a.units:g} allocated and {a.position:g} computed; "
             f"a load must fit the allocation (grow first)", c, stmt)
    s = s._replace(holds=replace_at(s.holds, h, advance_position(hold, k, amount)))
    c = c._replace(sessions=c.sessions.set(serial, s))
    if m.observer:
        m.notify("session/load", c, {"session": serial, "pool": m.pool_name(p), "position": a.position + amount})
    return c


def advance_position(hold: ActiveHold, k: int, amount: float) -> ActiveHold:
    """The hold with its position on its ``k``-th pool advanced by ``amount``
    (a load, or the tokens an iteration gave a growing run). From then on
    every pool of the hold counts its position as what it computed, not its
    allocation: the hold computes one sequence, and a pool no run grew (a
    request slot beside the KV) computed nothing past its consumed prefix
    (docs/semantics.md, "computed position")."""
    allocations = tuple(a._replace(position=a.position + amount, advanced=True) if i == k
                        else (a if a.advanced else a._replace(advanced=True))
                        for i, a in enumerate(hold.allocations))
    return hold._replace(allocations=allocations)


def expire_lease(m: Machine, c: Configuration, serial: int, lease_id: int) -> Configuration:
    """The event of a lease's time: it ends if it still exists."""
    s = c.sessions.get(serial)
    if s is None or s.status == ENDED or not any(x.lease_id == lease_id for x in s.leases):
        return c
    return end_lease(m, c, serial, lease_id, expired=True)
