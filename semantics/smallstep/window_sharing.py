"""Pool rules of a pool with KV cache groups that shares prefixes (docs/design/sliding-window.md, section 1 (c);
docs/design/shared-prefixes.md): ``groups (full, window (W))`` or ``groups (window (W))`` beside
``share prefixes``. Each hold has one block table per group in the pool's one table of blocks (blocks.SharedHold:
``blocks`` the full group's, ``window`` the window group's, -1 for a block behind the window); a window group's
block has an identity of its own (``blocks.window_identity``), so the groups' caches are apart, as vLLM keys a
cached block by its hash and its group.

- ``pool/hit-groups``: the hit in every group: the full group's run from block 0, then the window group's hit
  within it (scanning from the right, the first run of ceil((W - 1) / bs) registered blocks; without one the run
  from block 0), the hit the shorter (vLLM 0.33.0 kv_cache_coordinator.py:806-941, one pass for one full and one
  window group; single_type_kv_cache_manager.py:969-1065).
- ``pool/admit-shared-groups``: the hit's blocks touched in every group (the window group's only those inside
  the window, the ones behind it nulls), the hold's other blocks taken new in every group
  (kv_cache_manager.py:531-548, 570-625; single_type_kv_cache_manager.py:176-325).
- ``pool/register-window``: a window group registers only the ceil((W - 1) / bs) blocks ending at the last block
  boundary at or before the prompt less one, and at the junction of its hit (retention interval 0:
  kv_cache_coordinator.py:65-87, 358-381; single_type_kv_cache_manager.py:476-535, 1067-1146;
  kv_cache_manager.py:319-325).
- ``pool/slide-shared``: the window group's blocks behind the window go back, tail first: a registered one at
  count 0 joins the free order's tail, any other is a free unit outside the cache
  (single_type_kv_cache_manager.py:655-720, block_pool.py:816-849).

Growth takes the same new blocks in every group (``grow``); a release gives back the full group's blocks, then
the window group's, each tail first (pool/release-shared; kv_cache_coordinator.py:404-412). The follow-ups
``pool/register`` and ``pool/slide`` of a step stage come here (``register_served``, ``slide_any``), which pass a
pool without the table or the groups to sharing's and groups' rules.
"""

from __future__ import annotations

import math

from .blocks import SharedHold, group_hit, identity, need_blocks, window_identity
from .configuration import Configuration, Holding, innermost_hold, replace_at
from .groups import holding_index, slide, slide_target
from .machine import EPSILON, Machine, mark_dirty
from .rules import rule
from . import sharing

def hit_ids(m: Machine, c: Configuration, q: int, serial: int, content: tuple, reuse: float,
            units: float) -> tuple[tuple[int, ...], tuple[int, ...], int, float, int]:
    """The blocks the hit touches: the full group's first ``e`` (the earliest registered copy of each) and the
    window group's inside the window, from max(0, e x bs - W + 1) // bs (those before it are nulls:
    single_type_kv_cache_manager.py:268-325); with the window's nulls, the junction and ``e``. The limit is the reuse
    (down to blocks: vLLM's max_cache_hit_length, which the junction is the full group's run within) and the units
    (up to blocks), as pool/hit's."""
    g = m.kv_groups[q]
    bs = g.block
    table = c.pools[q].table
    e, _, junction = group_hit(m, table, q, content, serial, m.round_down(q, reuse) / bs)
    if e * bs > m.round_up(q, units) + EPSILON:  # a hold whose units stop short of its hit: the hit within them
        e, _, _ = group_hit(m, table, q, content, serial, m.round_up(q, units) / bs)
    full = tuple(table.index[identity(content, serial, b, bs)][0] for b in range(e)) if g.full else ()
    skipped = int(max(0.0, e * bs - g.window + 1.0) // bs)
    window = tuple(table.index[window_identity(content, serial, b, bs)][0] for b in range(skipped, e))
    return full, window, skipped, junction, e


def fits(m: Machine, c: Configuration, q: int, serial: int, content: tuple, reuse: float, units: float,
         need: float, caching: bool) -> bool:
    """The premise of pool/admit-shared-groups: vLLM 0.33.0's two checks (kv_cache_manager.py:531-548, 570-588),
    each group's new blocks past the hit plus the hit's blocks that would leave the free order, next to the
    allocated units: the whole sequence's (a window group's at most its cap), then the units' now."""
    g = m.kv_groups[q]
    bs = g.block
    full, window, _, _, e = hit_ids(m, c, q, serial, content, reuse, units) if caching else ((), (), 0, 0.0, 0)
    hit = e * bs
    counts = c.pools[q].table.counts
    revived = bs * sum(1 for i in full + window if counts[i] == 0)
    whole = m.round_up(q, need)
    sequence = (max(whole - hit, 0.0) if g.full else 0.0) + max(min(whole, g.cap) - hit, 0.0) + revived
    now = g.count * max(m.round_up(q, units) - hit, 0.0) + revived
    allocated = c.pools[q].allocated
    return allocated + sequence <= m.caps[q] + EPSILON and allocated + now <= m.caps[q] + EPSILON


@rule("pool/hit-groups", "in a pool with KV cache groups that shares prefixes, a hold with a cache clause is admitted: its hit is the full group's run of registered blocks from block 0 (within its reuse and units), then the window group's hit within it (scanning from the right, the first run of ceil((W - 1) / bs) registered blocks, its right end; without one, the run from block 0), the shorter of the two; its junction is the full group's run when that is longer; cached := the hit's units",
      "serq-ref extension (docs/design/sliding-window.md §1 (c)): vLLM 0.33.0 HybridKVCacheCoordinator.find_longest_cache_hit, kv_cache_coordinator.py:806-941 (one pass for one full and one other group, the full group cut to the hit); SlidingWindowManager.find_longest_cache_hit, single_type_kv_cache_manager.py:969-1065; the junction, kv_cache_manager.py:319-325")
def hit_groups(m: Machine, c: Configuration, q: int, serial: int, content: tuple, reuse: float,
               units: float) -> tuple[Configuration, tuple]:
    hit = hit_ids(m, c, q, serial, content, reuse, units)
    full, window, skipped, junction, e = hit
    if m.observer:
        counts = c.pools[q].table.counts
        m.notify("pool/hit-groups", c, {"session": serial, "pool": m.pool_name(q), "blocks": e,
                                        "units": e * m.block_sizes[q], "window": len(window), "skipped": skipped,
                                        "junction": junction,
                                        "freed": sum(1 for i in full + window if counts[i] == 0)})
    return c, hit


@rule("pool/admit-shared-groups", "in a pool with KV cache groups that shares prefixes, the admitted hold (fitting both checks: the whole sequence's new blocks in every group, a window group's at most its cap, and its units' now, each past the hit, plus the hit's blocks at count 0) touches its hit in every group (the window group's blocks behind the window are nulls) and takes its other blocks new in every group, the full group's first",
      "serq-ref extension (docs/design/sliding-window.md §1 (c)): vLLM 0.33.0 allocate_slots, kv_cache_manager.py:531-548, 570-625; get_num_blocks_to_allocate, add_local_computed_blocks, single_type_kv_cache_manager.py:176-325; block_pool.py:706-740, 792-810")
def admit_shared_groups(m: Machine, c: Configuration, q: int, serial: int, hold_id: int, content: tuple,
                        caching: bool, hit: tuple, units: float, prompt: float, stmt=None) -> Configuration:
    """``hit`` is pool/hit-groups' (full ids, window ids, nulls, junction, hit blocks); ``units`` the hold's
    coverage (to blocks); ``prompt`` the units its request came with (the window group's registration)."""
    g = m.kv_groups[q]
    bs = g.block
    full, window, skipped, junction, e = hit
    pool = c.pools[q]
    table = pool.table
    counts, free = table.counts, table.free
    ids = full + window
    revived = [i for i in ids if counts[i] == 0]
    if revived:
        gone = set(revived)
        free = tuple(i for i in free if i not in gone)
    for i in ids:
        counts = counts.set(i, counts[i] + 1)
    hold = SharedHold(content, serial, full, len(full), caching, (-1,) * skipped + window, e,
                      (prompt - 1.0, junction) if junction > 0 else (prompt - 1.0,))
    table = table._replace(counts=counts, free=free, holds=table.holds.set((serial, hold_id), hold),
                           prompts=table.prompts.set(serial, prompt))
    holding = Holding(hold_id, serial, hold_id, len(ids) * bs, False, skipped)
    pool = pool._replace(table=table, allocated=pool.allocated + len(revived) * bs, cached=len(free) * bs,
                         holders=pool.holders + (holding,))
    c = c._replace(pools=replace_at(c.pools, q, pool))
    new = round(units / bs) - e  # per group
    c = sharing._take_new(m, c, q, g.count * new * bs, stmt)
    pool = c.pools[q]
    table = pool.table
    first = table.next_id - g.count * new
    fresh_full = tuple(range(first, first + new)) if g.full else ()
    fresh_window = tuple(range(table.next_id - new, table.next_id))
    hold = hold._replace(blocks=full + fresh_full, window=hold.window + fresh_window)
    table = table._replace(holds=table.holds.set((serial, hold_id), hold))
    holders = pool.holders[:-1] + (holding._replace(units=holding.units + g.count * new * bs),)
    c = c._replace(pools=replace_at(c.pools, q, pool._replace(table=table, holders=holders)))
    if m.observer:
        m.notify("pool/admit-shared-groups", c, {"session": serial, "pool": m.pool_name(q), "hit": e,
                                                 "revived": len(revived), "new": new, "groups": g.count,
                                                 "skipped": skipped})
    return c


def grow(m: Machine, c: Configuration, q: int, serial: int, hold_id: int, need: float, stmt=None) -> Configuration:
    """pool/grow's part in such a pool: ``need`` units of new blocks at the end of every group's table
    (single_type_kv_cache_manager.py:370-411), the full group's taken first."""
    g = m.kv_groups[q]
    n = round(need / g.block)
    c = sharing._take_new(m, c, q, g.count * need, stmt)
    table = c.pools[q].table
    hold = table.holds[(serial, hold_id)]
    first = table.next_id - g.count * n
    hold = hold._replace(blocks=hold.blocks + (tuple(range(first, first + n)) if g.full else ()),
                         window=hold.window + tuple(range(table.next_id - n, table.next_id)))
    table = table._replace(holds=table.holds.set((serial, hold_id), hold))
    return c._replace(pools=replace_at(c.pools, q, c.pools[q]._replace(table=table)))


# -- registration --------------------------------------------------------------------------------------------------


def window_mask(m: Machine, q: int, hold: SharedHold, b: int) -> bool:
    """Whether the window group registers its block ``b``: one of the ceil((W - 1) / bs) blocks ending at a
    boundary of the hold's, down to a block (reachable_block_mask under retention interval 0,
    single_type_kv_cache_manager.py:1067-1146)."""
    bs = m.block_sizes[q]
    need = need_blocks(m, q)
    for boundary in hold.boundaries:
        end = math.floor(boundary / bs + EPSILON)
        if end - need <= b < end:
            return True
    return False


def registers_window(m: Machine, c: Configuration, q: int, serial: int, hold_id: int, upto: float) -> bool:
    """The premise of pool/register-window: the hold takes part in the cache and its window group has a full block
    below ``upto`` units that registration has not looked at yet."""
    hold = c.pools[q].table.holds.get((serial, hold_id))
    if hold is None or not hold.caching or not hold.window:
        return False
    return min(len(hold.window), math.floor(upto / m.block_sizes[q] + EPSILON)) > hold.wcached


@rule("pool/register-window", "in a pool with a window group that shares prefixes, a hold's tokens scheduled by an iteration (or, at its release, its computed prefix within its cache clause) register, of the window group's full blocks up to them, only the ceil((W - 1) / bs) blocks ending at the last block boundary at or before its prompt less one, and at its hit's junction",
      "serq-ref extension (docs/design/sliding-window.md §1 (c)): vLLM 0.33.0 retention interval 0 (config/cache.py:275): replay_boundaries, kv_cache_coordinator.py:65-87, 358-381; SingleTypeKVCacheManager.cache_blocks, single_type_kv_cache_manager.py:476-535; SlidingWindowManager.reachable_block_mask, :1067-1146; the junction, kv_cache_manager.py:319-325, sched/scheduler.py:1110-1127")
def register_window(m: Machine, c: Configuration, q: int, serial: int, hold_id: int, upto: float) -> Configuration:
    pool = c.pools[q]
    table = pool.table
    bs = m.block_sizes[q]
    hold = table.holds[(serial, hold_id)]
    end = min(len(hold.window), math.floor(upto / bs + EPSILON))
    names, index = table.names, table.index
    named = 0
    for b in range(hold.wcached, end):
        block = hold.window[b]
        if block < 0 or not window_mask(m, q, hold, b):
            continue
        name = window_identity(hold.content, hold.serial, b, bs)
        names = names.set(block, name)
        index = index.set(name, index.get(name, ()) + (block,))
        named += 1
    first = hold.wcached
    hold = hold._replace(wcached=end)
    table = table._replace(names=names, index=index, holds=table.holds.set((serial, hold_id), hold))
    c = c._replace(pools=replace_at(c.pools, q, pool._replace(table=table)))
    c = mark_dirty(m, c, q)
    if m.observer:
        m.notify("pool/register-window", c, {"session": serial, "pool": m.pool_name(q), "from": first, "to": end,
                                             "registered": named})
    return c


# -- the slide -----------------------------------------------------------------------------------------------------


@rule("pool/slide-shared", "when the step serves a hold on a pool with a window group that shares prefixes, before its growth, the window group's blocks wholly before processed - W + 1 become nulls and go back tail first: each count goes down; a registered block at 0 joins the free order's tail, any other becomes a free unit outside the cache",
      "serq-ref extension (docs/design/sliding-window.md §1 (b), (c)): vLLM 0.33.0 kv_cache_manager.py:556-568; remove_skipped_blocks, _remove_blocks_in_range, single_type_kv_cache_manager.py:655-720 (backwards); block_pool.py:816-849 (free_blocks: hashed blocks to the free queue's tail)")
def slide_shared(m: Machine, c: Configuration, q: int, serial: int, hold_id: int, coverage: float,
                 processed: float) -> Configuration:
    g = m.kv_groups[q]
    i = holding_index(c, q, serial, hold_id)
    if i < 0:
        return c
    pool = c.pools[q]
    holding = pool.holders[i]
    table = pool.table
    hold = table.holds[(serial, hold_id)]
    target = min(slide_target(g, processed, coverage), len(hold.window))
    if target <= holding.skipped:
        return c
    counts, names, index = table.counts, table.names, table.index
    joined, dropped = [], 0
    window = list(hold.window)
    for b in range(target - 1, holding.skipped - 1, -1):
        block = window[b]
        window[b] = -1
        if block < 0:
            break
        n = counts[block] - 1
        if n > 0:
            counts = counts.set(block, n)
            continue
        dropped += 1
        if block in names:
            counts = counts.set(block, 0)
            joined.append(block)
        else:
            counts = counts.delete(block)
    gone = target - holding.skipped
    table = table._replace(counts=counts, names=names, index=index, free=table.free + tuple(joined),
                           holds=table.holds.set((serial, hold_id), hold._replace(window=tuple(window))))
    holders = pool.holders[:i] + (holding._replace(units=holding.units - gone * g.block, skipped=target),) \
        + pool.holders[i + 1:]
    c = c._replace(pools=replace_at(c.pools, q, pool._replace(
        table=table, allocated=pool.allocated - dropped * g.block, cached=len(table.free) * g.block,
        holders=holders)))
    c = mark_dirty(m, c, q)
    if m.observer:
        m.notify("pool/slide-shared", c, {"session": serial, "pool": m.pool_name(q), "processed": processed,
                                          "blocks": gone, "skipped": target, "freed": dropped,
                                          "cached": len(joined)})
    return c


# -- the follow-ups and the release ---------------------------------------------------------------------------------


def slide_any(m: Machine, c: Configuration, q: int, serial: int, hold_id: int, coverage: float,
              processed: float) -> Configuration:
    """The follow-up ``pool/slide`` of a step stage: pool/slide-shared in a pool that shares prefixes, else
    pool/slide (groups.py)."""
    if c.pools[q].table is not None:
        return slide_shared(m, c, q, serial, hold_id, coverage, processed)
    return slide(m, c, q, serial, hold_id, coverage, processed)


def register_served(m: Machine, c: Configuration, q: int | None, serial: int, position: float,
                    tokens: float) -> Configuration:
    """The follow-up ``pool/register`` of a step stage: sharing.register_served (the full group's blocks), then,
    in a pool with a window group, pool/register-window up to the same tokens."""
    c = sharing.register_served(m, c, q, serial, position, tokens)
    if q is None or c.pools[q].table is None or m.kv_groups[q] is None:
        return c
    h, _ = innermost_hold(c.sessions[serial], q)
    if h < 0:
        return c
    hold_id = c.sessions[serial].holds[h].hold_id
    if registers_window(m, c, q, serial, hold_id, position + tokens):
        c = register_window(m, c, q, serial, hold_id, position + tokens)
    return c


def give_back_groups(m: Machine, c: Configuration, serial: int, q: int, units: float, computed: float,
                     holder_id: int, want: float | None) -> tuple[Configuration, float]:
    """pool/release's conclusion in such a pool: sharing.give_back_shared's, with the window group's computed
    prefix within the cache clause registered too (pool/register-window) before the blocks go back
    (pool/release-shared, every group's)."""
    if want is not None:
        upto = m.round_down(q, min(want, computed))
        if sharing.registers(m, c, q, serial, holder_id, upto):
            c = sharing.register(m, c, q, serial, holder_id, upto)
        if registers_window(m, c, q, serial, holder_id, upto):
            c = register_window(m, c, q, serial, holder_id, upto)
    return sharing.release_shared(m, c, serial, q, holder_id, units, m.round_down(q, want) if want is not None else 0.0)
