"""Fast forms of make_room (semantics/smallstep/pools.py): the
pool/evict-block and pool/evict-entry rules one room needs, computed in a
loop, the configuration built once."""

from __future__ import annotations

import heapq

from ..smallstep.configuration import CacheEntry, Configuration, PoolState, PoolStats, Statistics, replace_at
from ..smallstep.machine import EPSILON, Machine, is_warm, mark_dirty
from ..smallstep.pools import MAX_EVICTIONS, _entry_env, _set_pool, check_evictions, make_room
from ..smallstep.values import Env
from .records import setter


def make_room_lru(m: Machine, c: Configuration, q: int, need: float, stmt=None) -> Configuration:
    """Fast form of make_room (fast.py) for a pool that evicts lru and spills
    nothing, when no step trace observes the run: the pool/evict-block and
    pool/evict-entry rules make_room applies one at a time (always to the
    first entry, which keeps its place while it loses its tail), computed in
    a loop with the same arithmetic in the same order, the configuration built
    once. (A replay of the 333-session trace evicts 200 000 blocks; one
    configuration each was half its time.)"""
    if m.evict_keys[q] is not None or m.spill[q] is not None:
        return make_room(m, c, q, need, stmt)
    pool = c.pools[q]
    cap, block, allocated, cached = m.caps[q], m.block_sizes[q], pool.allocated, pool.cached
    entries = pool.entries
    if block and min(allocated + cached + need - cap, cached) / block > MAX_EVICTIONS:
        check_evictions(m, c, q, need, stmt)  # the backstop's LimitError
    if allocated + cached + need <= cap + EPSILON or not entries:
        return c
    # whole numbers of units (a block pool's usual counts): every sum and difference below is exact, so the
    # run of pool/evict-block rules on one entry is computed at once (its count j, then j * block)
    whole = bool(block) and _whole(block) and _whole(cap) and _whole(allocated) and _whole(need)
    first, left, cached, removed, gone = evict_lru(entries, block, cap, allocated, cached, need, whole)
    # the first entry kept, with what is left of it (its record built once, not once per block evicted)
    if first < len(entries) and left != entries[first].units:
        entries = (_set_entry_units(entries[first], left),) + entries[first + 1:]
    else:
        entries = entries[first:]
    c = mark_dirty(m, _set_pools(c, replace_at(c.pools, q, _set_entries_cached(pool, entries, cached))), q)
    if c.time >= m.warmup:  # the counts (_count_evictions), each piece's units added one at a time
        statistics = c.statistics
        stats = statistics.pools[q]
        stats = _set_evicted(stats, stats.evicted_entries + gone, add_evicted_units(stats.evicted_units, removed))
        c = _set_statistics(c, _set_pool_stats(statistics, replace_at(statistics.pools, q, stats)))
    return c


#: below it every whole number is a float, and sums of three and differences of them are exact
_EXACT = 2.0 ** 50


def _whole(x) -> bool:
    """Whether ``x`` is a whole number of magnitude below _EXACT."""
    return -_EXACT < x < _EXACT and float(x).is_integer()


def evict_lru(entries, block, cap, allocated, cached, need, whole: bool) -> tuple:
    """The pool/evict-block and pool/evict-entry rules make_room applies one at a time to an lru pool that
    spills nothing (always to the first entry, which keeps its place while it loses its tail), until the
    need fits or no entry is left, computed in a loop with the same arithmetic in the same order; with
    ``whole`` (the block, cap, allocated and need whole numbers) a run of pool/evict-block rules on one entry
    is computed at once. Shared by make_room_lru and the step loop's _Run._make_room. Returns (first, left,
    cached, removed, gone): the entries before ``first`` are evicted, ``left`` is what is left of the first
    entry kept, ``cached`` the pool's cached units after, ``removed`` the pieces evicted as (units, times)
    and ``gone`` the number of entries evicted."""
    removed, gone = [], 0
    n = len(entries)
    first = 0  # the entries before it are evicted
    left = entries[0].units  # what is left of the first entry
    while allocated + cached + need > cap + EPSILON and first < n:
        if block and left - block > EPSILON:  # pool/evict-block
            if whole and _whole(cached) and _whole(left):
                deficit = allocated + cached + need - cap
                j = min(-(-deficit // block), -(-(left - block) // block))  # to the room, or to the last block
                left = left - j * block
                cached = cached - j * block
                removed.append((block, int(j)))
                continue
            left = left - block
            cached = cached - block
            removed.append((block, 1))
        else:  # pool/evict-entry
            units = min(block, left) if block else left
            first += 1
            if first < n:
                left = entries[first].units
            cached = cached - units
            removed.append((units, 1))
            gone += 1
    return first, left, cached, removed, gone


def add_evicted_units(units, removed: list):
    """``units`` with evict_lru's pieces added one at a time, as the rules count them (_count_evictions); a
    piece evicted ``times`` times at once is added as one product when every number is whole (the same sum,
    exact either way)."""
    for r, times in removed:
        if times == 1:
            units += r
        elif _whole(units) and _whole(r) and abs(units) + r * times < _EXACT:
            units += r * times
        else:
            for _ in range(times):
                units += r
    return units


#: make_room_by's mark, in a memo of keys, that some key it holds is NaN
NAN_KEYS = "NaN"


def _count_evictions(m: Machine, c: Configuration, q: int, removed: list, gone: int) -> Configuration:
    """The counts of a fast form's evictions, as the rules count them: entries gone, and each piece's
    units added one at a time (after the warm-up)."""
    if c.time >= m.warmup:  # is_warm
        statistics = c.statistics
        stats = statistics.pools[q]
        units = stats.evicted_units
        for r in removed:
            units += r
        stats = _set_evicted(stats, stats.evicted_entries + gone, units)
        c = _set_statistics(c, _set_pool_stats(statistics, replace_at(statistics.pools, q, stats)))
    return c


_set_evicted = setter(PoolStats, "evicted_entries", "evicted_units")
_set_statistics = setter(Configuration, "statistics")
_set_pool_stats = setter(Statistics, "pools")
_set_pools = setter(Configuration, "pools")
_set_entries_cached = setter(PoolState, "entries", "cached")
_set_entry_units = setter(CacheEntry, "units")


def make_room_by(m: Machine, c: Configuration, q: int, need: float, stmt=None) -> Configuration:
    """Fast form of make_room (fast.py) for a pool that evicts by keys that
    read only their entry and draw nothing (Machine.evict_local), and spills
    nothing, when no step trace observes the run: evict_one reads every
    entry's keys for each block it evicts, though between two evictions of
    one room only the entry that lost a block has other keys (its size).
    Here each entry's keys are read once, and the evicted one's again after
    it shrinks. The first eviction of a room takes the first least key in
    the pool's entry order with ``min``, which makes evict_one's comparisons
    in evict_one's order (NaN keys included); the next ones pop a heap while
    no key is NaN (the order is then total, and the heap's least is the
    scan's first least), and go back to ``min`` otherwise. The configuration
    is built once, the counts added one eviction at a time as make_room_lru
    does. Keys that read only the entry's size and release time are kept
    between rooms too (Machine.evict_memo), by release order and size. (An
    `evict by (last)` block pool spent seven times an lru one's run in
    evict_one.)"""
    check_evictions(m, c, q, need, stmt)
    pool = c.pools[q]
    cap, block, allocated, cached = m.caps[q], m.block_sizes[q], pool.allocated, pool.cached
    if allocated + cached + need <= cap + EPSILON or not pool.entries:
        return c
    keys_of = m.evict_keys[q]
    env = Env(c, None, -1, m.stream_machine, c.workload.machine_draws)
    memo = m.evict_memo[q]
    if memo is None:
        memo = {}  # within this room only
    elif len(memo) > 2 * len(pool.entries) + 4096 or NAN_KEYS in memo:
        memo.clear()  # keys of entries gone or shrunk since (or a NaN among them: read the live ones again)

    def key(entry: CacheEntry) -> tuple:
        _entry_env(m, c, entry, entry.units, env)
        kk = memo[(entry.order, entry.units)] = tuple(f(env) for f in keys_of) + (entry.order,)
        if not all(x == x for x in kk):
            memo[NAN_KEYS] = True  # a NaN key was read: the heap's order would not be the scan's
        return kk

    known = memo.get
    entries = list(pool.entries)
    keys = [known((e.order, e.units)) or key(e) for e in entries]  # None: evicted
    removed, gone = [], 0
    heap = None
    while allocated + cached + need > cap + EPSILON:
        if heap is None and removed and NAN_KEYS not in memo:
            heap = [(kk, i) for i, kk in enumerate(keys) if kk is not None]
            heapq.heapify(heap)
        if heap is not None:
            if not heap:
                break
            kk, k = heapq.heappop(heap)
            if keys[k] is not kk:
                continue  # an entry gone, or one that has shrunk since
        else:
            live = [i for i, kk in enumerate(keys) if kk is not None]
            if not live:
                break
            k = min(live, key=keys.__getitem__)
        entry = entries[k]
        if block and entry.units - block > EPSILON:  # pool/evict-block
            entry = entries[k] = entry._replace(units=entry.units - block)
            kk = keys[k] = known((entry.order, entry.units)) or key(entry)
            if heap is not None:
                if NAN_KEYS not in memo:
                    heapq.heappush(heap, (kk, k))
                else:
                    heap = None  # a NaN key: the scan decides from here on
            cached = cached - block
            removed.append(block)
        else:  # pool/evict-entry
            units = min(block, entry.units) if block else entry.units
            keys[k] = None
            cached = cached - units
            removed.append(units)
            gone += 1
    entries = tuple(e for e, kk in zip(entries, keys) if kk is not None)
    c = mark_dirty(m, _set_pool(c, q, pool._replace(entries=entries, cached=cached)), q)
    return _count_evictions(m, c, q, removed, gone)


def make_room_fast(m: Machine, c: Configuration, q: int, need: float, stmt=None) -> Configuration:
    """The fast form of make_room that fits pool ``q``: make_room_by, make_room_lru, or the definition (a pool
    that shares prefixes: its free order's evictions are the definition's, pool/evict-shared)."""
    if c.pools[q].table is not None:
        return make_room(m, c, q, need, stmt)
    if m.spill[q] is None and m.evict_local[q]:
        return make_room_by(m, c, q, need, stmt)
    return make_room_lru(m, c, q, need, stmt)
