"""The table of blocks of a pool that shares prefixes (docs/design/shared-prefixes.md): its values and the
reading of it that needs no rule (a block's identity, a hold's hit), which the rules of sharing.py change and
the pool observables read (``cachedin``)."""

from __future__ import annotations

import math
from typing import NamedTuple

import immutables

from .configuration import records

#: Units compared with this tolerance (the machine's EPSILON).
EPSILON = 1e-9

#: The key of a session's own units: ``(OWN, serial)``, never equal to a content key (a number).
OWN = "own"


class SharedHold(NamedTuple):
    """A hold's part of a sharing pool's table: its content (segments (key, length), lengths positive), its
    session (whose own units follow the content), its blocks in order, how many of them (from the first)
    are registered, and whether it takes part in the cache (a cache clause)."""

    content: tuple[tuple[object, float], ...]
    serial: int
    blocks: tuple[int, ...]
    registered: int
    caching: bool
    #: in a pool with KV cache groups (docs/design/sliding-window.md §1 (c)): ``blocks`` is the full group's table
    #: (empty without one), ``window`` the window group's, -1 for a block behind the window (vLLM's null block),
    #: ``wcached`` how many of its blocks (from the first) registration has looked at (num_cached_block), and
    #: ``boundaries`` the token positions whose last ceil((W - 1) / bs) blocks the window group registers (the
    #: prompt less one, and the junction of its hit)
    window: tuple[int, ...] = ()
    wcached: int = 0
    boundaries: tuple[float, ...] = ()


class SharedTable(NamedTuple):
    """A sharing pool's cache as a table of blocks: ``counts`` every block a hold references or the free order
    keeps (block id -> reference count); ``names`` the registered ones' identities; ``index`` identity -> the
    registered copies, in registration order; ``free`` the free order (registered blocks at count 0, the head
    the next evicted); ``holds`` (serial, hold id) -> SharedHold; ``next_id`` the next block's id."""

    counts: immutables.Map
    names: immutables.Map
    index: immutables.Map
    free: tuple[int, ...]
    holds: immutables.Map
    next_id: int
    #: in a pool with KV cache groups: session -> the units its request came with (vLLM's num_prompt_tokens), kept
    #: across a preemption, whose resumption is the same request
    prompts: immutables.Map = immutables.Map()


records(SharedHold, SharedTable)


def empty_table() -> SharedTable:
    return SharedTable(immutables.Map(), immutables.Map(), immutables.Map(), (), immutables.Map(), 0)


# -- identities ------------------------------------------------------------------------------------------------


def evaluate_content(m, stmt: tuple[int, int], env) -> tuple[tuple[object, float], ...]:
    """The hold's content clause read in ``env`` (its admission's): the segments of positive length, each
    (key, length); the link check has made sure the expressions neither draw nor read a pool's hit."""
    out = []
    for key, length in m.holds[stmt].content:
        n = length(env)
        if n > EPSILON:
            out.append((key(env), n))
    return tuple(out)


def identity(content: tuple, serial: int, b: int, bs: float) -> tuple:
    """Block ``b``'s identity: the content cut at (b + 1) x bs, the units past it the session's own."""
    end = (b + 1) * bs
    out = []
    acc = 0.0
    for key, length in content:
        if acc + length >= end - EPSILON:
            out.append((key, end - acc))
            return tuple(out)
        out.append((key, length))
        acc += length
    out.append(((OWN, serial), end - acc))
    return tuple(out)


def window_identity(content: tuple, serial: int, b: int, bs: float) -> tuple:
    """Block ``b``'s identity in a window group: its identity tagged with the group (vLLM keys a cached block by
    its hash and its group: BlockHashWithGroupId)."""
    return ("window", identity(content, serial, b, bs))


def window_run(table: SharedTable, content: tuple, serial: int, bs: float, limit: int, need: int) -> int:
    """The window group's hit in blocks within ``limit`` blocks (vLLM 0.33.0 SlidingWindowManager.
    find_longest_cache_hit, single_type_kv_cache_manager.py:969-1065): scanning leftwards from the last block
    within the limit, the right end of the first run of ``need`` registered blocks (at least one); without one,
    the run of registered blocks from block 0."""
    index = table.index
    run = 0
    for i in range(int(limit) - 1, -1, -1):
        if window_identity(content, serial, i, bs) in index:
            run += 1
            if run >= max(need, 1):
                return i + run
        else:
            run = 0
    return run


# -- the hit in every group (a pool with KV cache groups: docs/design/sliding-window.md §1 (c)) -------------------

def need_blocks(m, q: int) -> int:
    """The window group's run a hit needs: ceil((W - 1) / bs) blocks (_contiguous_blocks_for_hit,
    single_type_kv_cache_manager.py:955-966)."""
    g = m.kv_groups[q]
    return math.ceil((g.window - 1.0) / g.block - EPSILON)


def reuse_limit(m, q: int, stmt, env) -> float:
    """The blocks a hold's hit may reach, read for ``cachedin``: its reuse clause rounded down to blocks (inf
    without one). A window group's hit depends on where the lookup starts (vLLM's max_cache_hit_length), so in a
    pool with groups ``cachedin`` is the hit within the reuse (for a full group alone that is min(hit, reuse))."""
    hold = m.holds[stmt]
    if hold.reuse is None:
        return math.inf
    # read outside the admission (a reuse that read cachedin would ask for itself: it reads 0), its draws undone
    draws = env.draws
    env.stmt = None
    try:
        reuse = max(0.0, hold.reuse(env))
    finally:
        env.stmt, env.draws = stmt, draws
    return m.round_down(q, reuse) / m.block_sizes[q]


def group_hit(m, table, q: int, content: tuple, serial: int, limit: float) -> tuple[int, int, float]:
    """The premise of pool/hit-groups: (the hit in blocks, the full group's run, the junction in units: the full
    group's run when the window group's hit is shorter, else 0), within ``limit`` blocks. One pass: the full
    group first, its run bounding the window group's (kv_cache_coordinator.py:838-840, 916-917)."""
    g = m.kv_groups[q]
    bs = g.block
    limit = math.floor(limit + EPSILON) if math.isfinite(limit) else math.inf
    if g.full:
        full = hit_run(table, content, serial, bs, limit)
        if not full:
            return 0, 0, 0.0
        e = window_run(table, content, serial, bs, full, need_blocks(m, q))
        return e, full, full * bs if full > e else 0.0
    if not math.isfinite(limit):  # no cap: as far as a registered window block reaches (its identity's units)
        limit = max((round(sum(length for _, length in name[1]) / bs) for name in table.index
                     if name[0] == "window"), default=0)
    return window_run(table, content, serial, bs, limit, need_blocks(m, q)), 0, 0.0



def hit_run(table: SharedTable, content: tuple, serial: int, bs: float, limit: float) -> int:
    """The longest run of blocks 0, 1, ... of a hold with ``content`` that ``table`` has registered, at most
    ``limit`` blocks (vLLM's find_longest_cache_hit)."""
    b = 0
    index = table.index
    while b < limit and identity(content, serial, b, bs) in index:
        b += 1
    return b


def hold_hit(m, c, q: int, stmt: tuple[int, int], env) -> float:
    """``cachedin(q)`` of the hold ``stmt`` in its admission's ``env``: bs x the run of its blocks the table
    has (the program caps it: reuse)."""
    table = c.pools[q].table
    bs = m.block_sizes[q]
    if m.kv_groups[q] is not None:  # the hit in every group, within the hold's reuse (docs/design/sliding-window.md)
        return bs * group_hit(m, table, q, evaluate_content(m, stmt, env), env.serial, reuse_limit(m, q, stmt, env))[0]
    return bs * hit_run(table, evaluate_content(m, stmt, env), env.serial, bs, math.inf)


def check_table(pool, cap: float, tol: float) -> None:
    """The invariants of a sharing pool's table (invariants.check_invariants): allocated is the units of the
    blocks a hold references, counted once; the holders' units are the references; cached is the free order's
    units; every free block is registered at count 0; the index and the names agree; every hold's blocks are
    referenced and its registered ones named."""
    table = pool.table
    bs = pool.block
    live = [i for i, n in table.counts.items() if n > 0]
    assert all(n >= 0 for n in table.counts.values()), "a negative reference count"
    assert abs(pool.allocated - len(live) * bs) <= tol, f"allocated {pool.allocated} is not {len(live)} blocks"
    assert abs(pool.cached - len(table.free) * bs) <= tol, "cached is not the free order's blocks"
    assert len(set(table.free)) == len(table.free), "a block twice in the free order"
    assert all(table.counts[i] == 0 and i in table.names for i in table.free), "a free block referenced or unnamed"
    assert sum(1 for n in table.counts.values() if n == 0) == len(table.free), "a block at 0 outside the free order"
    refs: dict[int, int] = {}
    for hold in table.holds.values():
        for b, i in enumerate(hold.blocks):
            refs[i] = refs.get(i, 0) + 1
            if b < hold.registered:
                assert i in table.names, "a registered block without its identity"
        if pool.groups:  # KV cache groups: every group's table of one length, the window's nulls first
            assert not hold.blocks or len(hold.blocks) == len(hold.window), "the groups' tables differ in length"
            nulls = sum(1 for i in hold.window if i < 0)
            assert all(i < 0 for i in hold.window[:nulls]), "a null block after a real one in the window group"
            for i in hold.window[nulls:]:
                refs[i] = refs.get(i, 0) + 1
    assert refs == {i: n for i, n in table.counts.items() if n > 0}, "the counts are not the holds' references"
    if pool.groups:  # a holder's skipped blocks are its window group's nulls
        for h in pool.holders:
            hold = table.holds.get((h.serial, h.hold_id))
            assert hold is None or h.skipped == sum(1 for i in hold.window if i < 0), "skipped is not the nulls"
    assert abs(sum(h.units for h in pool.holders) - sum(refs.values()) * bs) <= tol, "holders are not the references"
    for name, copies in table.index.items():
        assert copies and all(table.names.get(i) == name for i in copies), "the index and the names disagree"
    assert sum(len(v) for v in table.index.values()) == len(table.names), "a named block outside the index"
