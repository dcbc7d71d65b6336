"""Pool rules of KV cache groups (docs/design/sliding-window.md): a pool
with ``groups (full, window (W))`` or ``groups (window (W))``, each hold one
block table per group over the pool's one capacity (windows.py: the facts).

- ``pool/admit-groups``: the head fits when, next to the allocated units,
  there is room for its whole sequence in every group, a window group's at
  most its admission cap, and for its units in every group; it takes its
  units' blocks in every group (vLLM 0.33.0 kv_cache_manager.py:531-548 and
  :570-588, single_type_kv_cache_manager.py:176-266 with the cap of
  kv_cache_interface.py:918-944, scheduler.py:1449).
- ``pool/slide``: when the step serves a hold, before its growth, the window
  group gives back its blocks wholly before processed - W + 1 (processed: the
  hold's position less the tokens of an iteration still in flight); a full
  group gives back nothing (kv_cache_manager.py:556-568,
  single_type_kv_cache_manager.py:655-720, :1148-1184).

Growth (every group grows by the same blocks: single_type_kv_cache_manager.py
:229-236, :370-411) and release (every group's real blocks:
kv_cache_coordinator.py:404-412) are pool/grow's and pool/release's, which
count a grouped hold's units through GroupFacts.footprint.
"""

from __future__ import annotations

import math

from .configuration import Allocation, Configuration, Holding
from .machine import EPSILON, Machine, mark_dirty
from .rules import rule
from .windows import GroupFacts


def admission_needs(m: Machine, q: int, units: float, need: float) -> tuple[float, float]:
    """The two counts of a grouped pool's admission check, in units: every
    group's blocks for the whole sequence, round_up(need) (a window group's
    at most its cap: apply_admission_cap), and every group's blocks for the
    units the hold takes now."""
    g = m.kv_groups[q]
    whole = m.round_up(q, need)
    sequence = (whole if g.full else 0.0) + min(whole, g.cap)
    return sequence, g.count * m.round_up(q, units)


def fits(m: Machine, c: Configuration, q: int, units: float, need: float) -> bool:
    """The premise of pool/admit-groups: both counts fit next to the allocated units (the cached never block)."""
    sequence, now = admission_needs(m, q, units, need)
    allocated = c.pools[q].allocated
    return allocated + sequence <= m.caps[q] + EPSILON and allocated + now <= m.caps[q] + EPSILON


@rule("pool/admit-groups", "in a pool with KV cache groups the admitted hold takes its units' blocks in every group (its premise: room for its whole sequence in every group, a window group's at most its admission cap, and for those blocks)",
      "serq-ref extension (docs/design/sliding-window.md): vLLM 0.33.0 allocate_slots' full-sequence check and allocation, kv_cache_manager.py:531-548, 570-588; single_type_kv_cache_manager.py:176-266; max_admission_blocks_per_request, kv_cache_interface.py:918-944; scheduler.py:1449")
def admit_groups(m: Machine, c: Configuration, q: int, serial: int, admission: int, units: float, need: float,
                 stmt) -> Configuration:
    """pool/admit-groups (its premise: ``fits``): the hold's coverage is
    round_up(units), taken once per group: the pool's holding, and the
    allocation of the session's hold being admitted (its last)."""
    coverage = m.round_up(q, units)
    g = m.kv_groups[q]
    taken = g.footprint(coverage, 0)
    c = m.make_room(m, c, q, taken, stmt)
    pool = c.pools[q]
    c = c._replace(pools=c.pools[:q] + (pool._replace(
        allocated=pool.allocated + taken,
        holders=pool.holders + (Holding(admission, serial, admission, taken, False, 0),)),) + c.pools[q + 1:])
    s = c.sessions[serial]
    active = s.holds[-1]
    active = active._replace(allocations=active.allocations + (Allocation(q, coverage, 0.0, False),))
    c = c._replace(sessions=c.sessions.set(serial, s._replace(holds=s.holds[:-1] + (active,))))
    c = mark_dirty(m, c, q)
    if m.observer:
        sequence, _ = admission_needs(m, q, units, need)
        m.notify("pool/admit-groups", c, {"session": serial, "pool": m.pool_name(q), "coverage": coverage,
                                          "units": taken, "groups": g.count, "sequence": sequence,
                                          "cap": g.cap})
    return c


def holding_index(c: Configuration, q: int, serial: int, hold_id: int) -> int:
    """The index of the session's holding of hold ``hold_id`` among pool ``q``'s holders (-1: none)."""
    for i, h in enumerate(c.pools[q].holders):
        if h.serial == serial and h.hold_id == hold_id:
            return i
    return -1


def slide_target(g: GroupFacts, processed: float, coverage: float) -> int:
    """The window group's blocks wholly before processed - W + 1, at most its table's (get_num_skipped_tokens,
    single_type_kv_cache_manager.py:1148-1184; remove_skipped_blocks caps them at the table, :682-720)."""
    skipped_tokens = max(0.0, processed - g.window + 1.0)
    return int(min(math.floor(skipped_tokens / g.block + EPSILON), math.floor(coverage / g.block + EPSILON)))


@rule("pool/slide", "when the step serves a hold on a pool with a window group, before its growth, the window group gives back its blocks wholly before processed - W + 1 (processed: the position less the tokens still in flight)",
      "serq-ref extension (docs/design/sliding-window.md): vLLM 0.33.0 allocate_slots frees the skipped blocks first, on the processed tokens (kv_cache_manager.py:556-568); remove_skipped_blocks, _remove_blocks_in_range (single_type_kv_cache_manager.py:655-720); get_num_skipped_tokens (:1148-1184)")
def slide(m: Machine, c: Configuration, q: int, serial: int, hold_id: int, coverage: float,
          processed: float) -> Configuration:
    """pool/slide: the premise, a holding whose window group has blocks to
    give back; the conclusion, they go back (the holding's units and the
    pool's allocated less them), the pool retried."""
    g = m.kv_groups[q]
    i = holding_index(c, q, serial, hold_id)
    if i < 0:
        return c
    holding = c.pools[q].holders[i]
    target = slide_target(g, processed, coverage)
    if target <= holding.skipped:
        return c
    freed = (target - holding.skipped) * g.block
    pool = c.pools[q]
    holders = pool.holders[:i] + (holding._replace(units=holding.units - freed, skipped=target),) + pool.holders[i + 1:]
    c = c._replace(pools=c.pools[:q] + (pool._replace(allocated=pool.allocated - freed, holders=holders),)
                   + c.pools[q + 1:])
    c = mark_dirty(m, c, q)
    if m.observer:
        m.notify("pool/slide", c, {"session": serial, "pool": m.pool_name(q), "processed": processed,
                                   "blocks": target - holding.skipped, "skipped": target, "units": freed})
    return c
