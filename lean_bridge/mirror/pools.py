"""Pool rules on a pool's state (lean/SerqRef/Pools.lean): eviction, the
consumption of a session's own prefix, allocation, growth, release.

Everything is in blocks: a pool's capacity is ⌊cap / block⌋ blocks, an
allocation of u units takes ``blocks_for(u)`` blocks, a cached prefix of c
units keeps ⌊c / block⌋. (With ``used + r ≤ cap`` in units and allocations in
whole blocks, the two readings admit and evict the same.)
"""

from __future__ import annotations

from typing import Any

from ..arith import holds, monus, ndiv, nmin, nmul
from ..syntax import Pool
from .state import (ActiveHold, Entry, Holder, Machine, PoolState, Session, cached_blocks, held_blocks, pool_of,
                    session_of, replace)


def evict(held: Any, need: Any, cap: Any, entries: tuple[Entry, ...]) -> tuple[Entry, ...]:
    """``evict`` (pool/evict-block, pool/evict-entry): the least recently
    released entry loses blocks from its tail, then the next, until
    ``held + cached + need ≤ cap`` or nothing is cached. Block by block from
    the front is this: an entry goes whole while the excess is at least its
    size, and the first entry larger than the excess loses exactly the excess."""
    if not entries:
        return ()
    e, es = entries[0], entries[1:]
    excess = monus(held + e.blocks + cached_blocks(es) + need, cap)
    if holds(excess == 0):
        return entries
    if holds(e.blocks <= excess):
        return evict(held, need, cap, es)
    return (replace(e, blocks=monus(e.blocks, excess)),) + es


def consume_entries(serial: int, want: Any | None, entries: tuple[Entry, ...]) -> tuple[tuple[Entry, ...], Any]:
    """``consumeEntries`` (pool/consume): the session takes at most ``want``
    blocks of its own entry (None: all of it); the rest stays, dead, where
    the entry was (the same age)."""
    if not entries:
        return (), 0
    e, es = entries[0], entries[1:]
    if e.owner == serial:
        took = e.blocks if want is None else nmin(e.blocks, want)
        rest = monus(e.blocks, took)
        if holds(rest == 0):
            return es, took
        return (Entry(None, rest),) + es, took
    rest_entries, took = consume_entries(serial, want, es)
    return (e,) + rest_entries, took


def find_holder(serial: int, hold: int, holders: tuple[Holder, ...]) -> Holder | None:
    """``findHolder``: the allocation of the session's hold ``hold``."""
    for h in holders:
        if h.serial == serial and h.hold == hold:
            return h
    return None


def innermost_hold(s: Session, q: int) -> ActiveHold | None:
    """``innermostHold``: the session's innermost hold on ``q``."""
    for h in s.holds:
        if q in h.pools:
            return h
    return None


def innermost_holder(m: Machine, serial: int, q: int) -> Holder | None:
    """``innermostHolder``: the allocation of the session's innermost hold on ``q``."""
    h = innermost_hold(session_of(m, serial), q)
    if h is None:
        return None
    return find_holder(serial, h.id, pool_of(m, q).holders)


def grow_holder(ps: PoolState, pool: Pool, serial: int, hold: int, need: Any) -> PoolState:
    """``growHolder`` (pool/grow): room is made for ``need`` more blocks, which the hold takes."""
    entries = evict(held_blocks(ps.holders), need, pool.cap, ps.entries)
    holders = tuple(replace(h, blocks=h.blocks + need) if h.serial == serial and h.hold == hold else h
                    for h in ps.holders)
    return replace(ps, entries=entries, holders=holders)


def release_units(ps: PoolState, serial: int, hold: int, kept: Any) -> PoolState:
    """``releaseUnits`` (pool/release): the hold's allocation goes; ``kept``
    blocks (when some) become the session's entry, the newest, replacing its
    previous one."""
    holders = tuple(h for h in ps.holders if not (h.serial == serial and h.hold == hold))
    if holds(kept == 0):
        return replace(ps, holders=holders)
    entries = tuple(e for e in ps.entries if e.owner != serial) + (Entry(serial, kept),)
    return replace(ps, holders=holders, entries=entries)


def computed_units(pool: Pool, a: Holder, preempted: bool) -> Any:
    """``computedUnits``: what a released allocation has computed: its
    position after a growing run moved it or when preempted, else the whole
    allocation."""
    if preempted or a.advanced:
        return a.position
    return nmul(a.blocks, pool.block)


def kept_blocks(pool: Pool, a: Holder, want: Any, computed: Any) -> Any:
    """``keptBlocks``: min(cache, computed) units, in whole blocks, and never
    more than the allocation given back."""
    return nmin(ndiv(nmin(want, computed), pool.block), a.blocks)
