"""Pool rules of a pool that shares prefixes (docs/design/shared-prefixes.md,
sections 3 and 5; a serq-ref extension of IR v13).

A pool with ``share prefixes`` keeps, instead of each session's own cached
prefix, a table of blocks (``SharedTable``, the pool's ``table``): every
block a hold references or the free order keeps, its reference count, the
identity of the registered ones, and the free order (the registered blocks
at count 0, least recently freed first). A hold's block b has the identity
``identity(content, serial, b, bs)``: its content clause's segments cut at
(b + 1) x bs, the units past the content the session's own, so two holds'
blocks are the same exactly when their units up to the block's end are the
same content (vLLM 0.33.0's hash chain without the hash:
kv_cache_utils.py:953-1036).

- ``pool/hit``: at admission, the longest run of the hold's blocks 0, 1, ...
  that the table has (the earliest registered copy of each), capped by the
  hold's reuse and its units (kv_cache_manager.py:266-307,
  single_type_kv_cache_manager.py:603).
- ``pool/admit-shared``: the hit blocks touched (counts up, those at 0 out
  of the free order), the hold's other blocks taken new, from the free units
  that are no cached block's first, then from the free order's head
  (kv_cache_manager.py:531-548, block_pool.py:706-740, 792-810).
- ``pool/evict-shared``: a new block is needed and no free unit is uncached:
  the free order's head block leaves the table (block_pool.py:706-740,
  ``_maybe_evict_cached_block`` :769).
- ``pool/register``: the tokens a step stage schedules for a hold's growing
  run register its full blocks up to them, so that an admission later in
  the same iteration hits them (kv_cache_manager.py:621-625,
  block_pool.py:230); a hold's release registers those within
  min(cache, computed) that no iteration registered.
- ``pool/release-shared``: a released or preempted hold's blocks, tail
  first, counts down; a registered block at 0 (within the cache clause)
  joins the free order's tail, any other becomes a free unit that is no
  cached block (single_type_kv_cache_manager.py:598-599,
  block_pool.py:816-847).

Ties: the free order is the sequence these rules make (releases in the
order the step's rules release, each hold's blocks tail first), and the
duplicates of one identity are kept in registration order: nothing falls to
a tie.
"""

from __future__ import annotations

import math

from .blocks import SharedHold, evaluate_content, hit_run, identity
from .configuration import Configuration, Holding, innermost_hold, replace_at
from .machine import EPSILON, Machine, count_pool, is_warm, mark_dirty
from .rules import rule

def hit_blocks(m: Machine, c: Configuration, q: int, serial: int, content: tuple, reuse: float,
               units: float) -> tuple[int, ...]:
    """The premise of pool/hit: the hit's blocks (the earliest registered copy of each identity): the run of
    the hold's blocks the table has, at most reuse (down to blocks) and its units (up to blocks)."""
    bs = m.block_sizes[q]
    table = c.pools[q].table
    limit = min(m.round_down(q, reuse), m.round_up(q, units)) / bs
    run = hit_run(table, content, serial, bs, limit)
    return tuple(table.index[identity(content, serial, b, bs)][0] for b in range(run))


def live_units(m: Machine, c: Configuration, q: int, ids: tuple[int, ...]) -> float:
    """The units of the blocks of ``ids`` another hold references (count above 0): a hit on them takes no
    free unit (vLLM's admission check counts only the hit blocks that leave the free queue)."""
    counts = c.pools[q].table.counts
    return m.block_sizes[q] * sum(1 for i in ids if counts[i] > 0)


# -- admission ---------------------------------------------------------------------------------------------------


@rule("pool/hit", "in a pool that shares prefixes, a hold with a cache clause is admitted: its hit is the longest run of its blocks 0, 1, ... the table has registered (the earliest registered copy of each), at most its reuse and its units; cached := the hit's units",
      "docs/design/shared-prefixes.md §5; vLLM 0.33.0 kv_cache_manager.py:266-307 (get_computed_blocks), single_type_kv_cache_manager.py:603 (find_longest_cache_hit)")
def hit(m: Machine, c: Configuration, q: int, serial: int, content: tuple, reuse: float,
        units: float) -> tuple[Configuration, tuple[int, ...]]:
    ids = hit_blocks(m, c, q, serial, content, reuse, units)
    if m.observer:
        counts = c.pools[q].table.counts
        m.notify("pool/hit", c, {"session": serial, "pool": m.pool_name(q), "blocks": len(ids),
                                 "units": len(ids) * m.block_sizes[q],
                                 "freed": sum(1 for i in ids if counts[i] == 0)})
    return c, ids


@rule("pool/admit-shared", "in a pool that shares prefixes, the admitted hold (the hit's blocks at count 0 plus its new blocks fitting the free units) touches its hit (counts up, those at 0 out of the free order) and takes its other blocks new: from the free units no cached block holds, then from the free order's head (pool/evict-shared)",
      "docs/design/shared-prefixes.md §5; vLLM 0.33.0 kv_cache_manager.py:531-548 (the admission check), block_pool.py:792-810 (touch), 706-740 (get_new_blocks)")
def admit_shared(m: Machine, c: Configuration, q: int, serial: int, hold_id: int, content: tuple, caching: bool,
                 ids: tuple[int, ...], need: float, stmt=None) -> Configuration:
    bs = m.block_sizes[q]
    pool = c.pools[q]
    table = pool.table
    counts = table.counts
    free = table.free
    revived = [i for i in ids if counts[i] == 0]
    if revived:
        gone = set(revived)
        free = tuple(i for i in free if i not in gone)
    for i in ids:
        counts = counts.set(i, counts[i] + 1)
    # the hold holds its hit first (so that every configuration's counts are its holds' references), then
    # takes its new blocks, evicting as it does
    hold = SharedHold(content, serial, ids, len(ids), caching)
    table = table._replace(counts=counts, free=free, holds=table.holds.set((serial, hold_id), hold))
    holding = Holding(hold_id, serial, hold_id, len(ids) * bs, False)
    pool = pool._replace(table=table, allocated=pool.allocated + len(revived) * bs, cached=len(free) * bs,
                         holders=pool.holders + (holding,))
    c = c._replace(pools=replace_at(c.pools, q, pool))
    new = need - len(ids) * bs
    c = _take_new(m, c, q, new, stmt)
    pool = c.pools[q]
    table = pool.table
    fresh = tuple(range(table.next_id - round(new / bs), table.next_id))
    table = table._replace(holds=table.holds.set((serial, hold_id), hold._replace(blocks=ids + fresh)))
    holders = pool.holders[:-1] + (holding._replace(units=need),)
    c = c._replace(pools=replace_at(c.pools, q, pool._replace(table=table, holders=holders)))
    if m.observer:
        m.notify("pool/admit-shared", c, {"session": serial, "pool": m.pool_name(q), "hit": len(ids),
                                          "revived": len(revived), "new": len(fresh)})
    return c


def _take_new(m: Machine, c: Configuration, q: int, new: float, stmt=None) -> Configuration:
    """``new`` units of new blocks taken (counts 1, unregistered): the free order's head evicted while the
    free units no cached block holds are too few (pool/evict-shared); ``pool.allocated`` counts them."""
    c = make_room_shared(m, c, q, new, stmt)
    pool = c.pools[q]
    table = pool.table
    n = round(new / m.block_sizes[q])
    counts = table.counts
    for i in range(table.next_id, table.next_id + n):
        counts = counts.set(i, 1)
    table = table._replace(counts=counts, next_id=table.next_id + n)
    return c._replace(pools=replace_at(c.pools, q, pool._replace(table=table, allocated=pool.allocated + new)))


def make_room_shared(m: Machine, c: Configuration, q: int, need: float, stmt=None) -> Configuration:
    """Evict the free order's head block (pool/evict-shared) until allocated + cached + need <= cap."""
    while True:
        pool = c.pools[q]
        if pool.allocated + pool.cached + need <= m.caps[q] + EPSILON or not pool.table.free:
            return c
        c = evict_shared(m, c, q)


@rule("pool/evict-shared", "in a pool that shares prefixes, a new block is needed and no free unit is outside the cache: the free order's head block (least recently freed; within a release the tail first) leaves the table",
      "docs/design/shared-prefixes.md §5; vLLM 0.33.0 block_pool.py:706-740 (get_new_blocks pops the free queue's head), :769 (_maybe_evict_cached_block)")
def evict_shared(m: Machine, c: Configuration, q: int) -> Configuration:
    pool = c.pools[q]
    table = pool.table
    block = table.free[0]
    name = table.names[block]
    copies = tuple(i for i in table.index[name] if i != block)
    index = table.index.set(name, copies) if copies else table.index.delete(name)
    table = table._replace(counts=table.counts.delete(block), names=table.names.delete(block), index=index,
                           free=table.free[1:])
    bs = m.block_sizes[q]
    c = c._replace(pools=replace_at(c.pools, q, pool._replace(table=table, cached=pool.cached - bs)))
    c = mark_dirty(m, c, q)
    if is_warm(m, c):
        c = count_pool(c, q, evicted_entries=1, evicted_units=bs)
    if m.observer:
        m.notify("pool/evict-shared", c, {"pool": m.pool_name(q), "block": block, "copies": len(copies),
                                          "free": len(table.free)})
    return c


def grow_hold(m: Machine, c: Configuration, q: int, serial: int, hold_id: int, need: float, stmt=None) -> Configuration:
    """pool/grow's part in a pool that shares prefixes: ``need`` units of new blocks at the end of the hold's
    blocks (taken as an admission's new blocks are); with KV cache groups, window_sharing.grow."""
    c = _take_new(m, c, q, need, stmt)
    table = c.pools[q].table
    n = round(need / m.block_sizes[q])
    hold = table.holds[(serial, hold_id)]
    hold = hold._replace(blocks=hold.blocks + tuple(range(table.next_id - n, table.next_id)))
    table = table._replace(holds=table.holds.set((serial, hold_id), hold))
    return c._replace(pools=replace_at(c.pools, q, c.pools[q]._replace(table=table)))


# -- registration ------------------------------------------------------------------------------------------------


def registers(m: Machine, c: Configuration, q: int, serial: int, hold_id: int, upto: float) -> bool:
    """The premise of pool/register: the hold takes part in the cache and has a full block below ``upto``
    units that is not registered yet."""
    hold = c.pools[q].table.holds.get((serial, hold_id))
    if hold is None or not hold.caching:
        return False
    return min(len(hold.blocks), math.floor(upto / m.block_sizes[q] + EPSILON)) > hold.registered


@rule("pool/register", "in a pool that shares prefixes, a hold's tokens scheduled by an iteration (or, at its release, its computed prefix within its cache clause) register its full blocks up to them: each gets its identity in the table, after the copies registered before it",
      "docs/design/shared-prefixes.md §5; vLLM 0.33.0 kv_cache_manager.py:621-625 (allocate_slots caches up to the computed and scheduled tokens), block_pool.py:230 (cache_full_blocks)")
def register(m: Machine, c: Configuration, q: int, serial: int, hold_id: int, upto: float) -> Configuration:
    pool = c.pools[q]
    table = pool.table
    bs = m.block_sizes[q]
    hold = table.holds[(serial, hold_id)]
    end = min(len(hold.blocks), math.floor(upto / bs + EPSILON))
    names, index = table.names, table.index
    for b in range(hold.registered, end):
        block = hold.blocks[b]
        name = identity(hold.content, hold.serial, b, bs)
        names = names.set(block, name)
        index = index.set(name, index.get(name, ()) + (block,))
    first = hold.registered
    hold = hold._replace(registered=end)
    table = table._replace(names=names, index=index, holds=table.holds.set((serial, hold_id), hold))
    c = c._replace(pools=replace_at(c.pools, q, pool._replace(table=table)))
    c = mark_dirty(m, c, q)  # a waiting hold's hit may grow
    if m.observer:
        m.notify("pool/register", c, {"session": serial, "pool": m.pool_name(q), "from": first, "to": end})
    return c


def register_served(m: Machine, c: Configuration, q: int | None, serial: int, position: float,
                    tokens: float) -> Configuration:
    """An iteration gave ``tokens`` (drafts left out, and under schedule ahead the token in flight, whose
    id is not known yet) to a run of ``serial`` growing pool ``q`` from ``position``: pool/register when
    ``q`` shares prefixes and a full block of the innermost hold on it is below position + tokens and
    unregistered (kv_cache_manager.py:621-625: cached up to the computed and scheduled tokens, capped at the
    request's known tokens)."""
    if q is None or c.pools[q].table is None:
        return c
    s = c.sessions[serial]
    h, _ = innermost_hold(s, q)
    if h < 0:
        return c
    hold_id = s.holds[h].hold_id
    if registers(m, c, q, serial, hold_id, position + tokens):
        c = register(m, c, q, serial, hold_id, position + tokens)
    return c


# -- release -----------------------------------------------------------------------------------------------------


@rule("pool/release-shared", "in a pool that shares prefixes, a released or preempted hold's blocks go back tail first: each count goes down; a block at 0 that is registered and within the cache clause joins the free order's tail, any other becomes a free unit outside the cache",
      "docs/design/shared-prefixes.md §5; vLLM 0.33.0 single_type_kv_cache_manager.py:598-599 (freed in reverse), block_pool.py:816-847 (free_blocks: hashed blocks to the free queue's tail)")
def release_shared(m: Machine, c: Configuration, serial: int, q: int, hold_id: int, units: float,
                   keep: float) -> tuple[Configuration, float]:
    """The blocks of hold ``hold_id`` (``units`` of them) go back; those registered within ``keep`` units
    (the cache clause's value, down to blocks) join the free order when their count reaches 0. Returns the
    units that joined it."""
    bs = m.block_sizes[q]
    pool = c.pools[q]
    table = pool.table
    hold = table.holds[(serial, hold_id)]
    kept_blocks = math.floor(keep / bs + EPSILON)
    counts, names, index = table.counts, table.names, table.index
    joined = []
    dropped = 0
    # with KV cache groups, the full group's blocks, then the window group's real ones, each tail first
    # (kv_cache_coordinator.py:404-412)
    order = [(b, hold.blocks[b]) for b in range(len(hold.blocks) - 1, -1, -1)]
    order += [(b, hold.window[b]) for b in range(len(hold.window) - 1, -1, -1) if hold.window[b] >= 0]
    for b, block in order:
        n = counts[block] - 1
        if n > 0:
            counts = counts.set(block, n)
            continue
        dropped += 1
        name = names.get(block)
        if name is not None and b < kept_blocks:
            counts = counts.set(block, 0)
            joined.append(block)
            continue
        counts = counts.delete(block)
        if name is not None:  # registered beyond the cache clause: not kept
            names = names.delete(block)
            copies = tuple(i for i in index[name] if i != block)
            index = index.set(name, copies) if copies else index.delete(name)
    table = table._replace(counts=counts, names=names, index=index, free=table.free + tuple(joined),
                           holds=table.holds.delete((serial, hold_id)))
    pool = pool._replace(table=table, allocated=pool.allocated - dropped * bs, cached=len(table.free) * bs,
                         holders=tuple(x for x in pool.holders if not (x.serial == serial and x.hold_id == hold_id)))
    c = c._replace(pools=replace_at(c.pools, q, pool))
    if m.observer:
        m.notify("pool/release-shared", c, {"session": serial, "pool": m.pool_name(q), "blocks": len(order),
                                            "freed": dropped, "cached": len(joined)})
    return c, len(joined) * bs


def give_back_shared(m: Machine, c: Configuration, serial: int, q: int, units: float, computed: float,
                     holder_id: int, want: float | None) -> tuple[Configuration, float]:
    """pool/release's conclusion in a pool that shares prefixes: with the hold's cache clause (``want``, its
    value; None without one), its computed prefix within it registered (pool/register), then its blocks
    released (pool/release-shared), those registered within ``want`` kept. Returns the units that joined the
    free order. (The synchronous engine registered the computed prefix as it scheduled it; under schedule
    ahead, the token the last iteration fed to a finished run is registered here, as vLLM 0.33.0 caches it
    when it applies that iteration's output, before it frees the request: scheduler.py:2401-2415; a
    preempted one's ``computed`` leaves out the token in flight, pools._in_flight_decode.)"""
    keep = 0.0
    if want is not None:
        upto = m.round_down(q, min(want, computed))
        if registers(m, c, q, serial, holder_id, upto):
            c = register(m, c, q, serial, holder_id, upto)
        keep = m.round_down(q, want)
    return release_shared(m, c, serial, q, holder_id, units, keep)
