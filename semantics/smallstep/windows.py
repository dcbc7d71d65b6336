"""Facts of a pool's KV cache groups (docs/design/sliding-window.md): what
``groups (full, window (W))`` makes of a pool, read once from the IR when the
machine is built. The rules that use them are in groups.py.

A grouped pool's hold has one block table per group, all of the same
length: its ``Allocation.units`` (the coverage, what its position may reach)
is that length in units. What it takes from the pool (its ``Holding.units``,
summed in the pool's ``allocated``) is every group's real blocks: the full
group's whole table and the window group's table less the blocks that have
left the window (``Holding.skipped``, given back by pool/slide)."""

from __future__ import annotations

import math
from typing import NamedTuple

from .. import ir


class GroupFacts(NamedTuple):
    """A grouped pool: whether it has a full-attention group, its window W
    (units), its block size, and the window group's admission cap in units
    (inf when nothing caps it)."""

    full: bool
    window: float
    block: float
    cap: float

    @property
    def count(self) -> int:
        """The groups: a hold's coverage is taken once per group."""
        return 2 if self.full else 1

    def footprint(self, coverage: float, skipped: int) -> float:
        """The units a hold of ``coverage`` units with ``skipped`` blocks out of the window takes: every
        group's table, the window group's less its skipped blocks."""
        return self.count * coverage - skipped * self.block


def group_facts(program: ir.Program, p: int) -> GroupFacts | None:
    """The facts of pool ``p``'s groups, or None for a pool without the
    option (one full group: the seed's pool).

    The admission cap is vLLM 0.33.0's ``max_admission_blocks_per_request``
    (vllm/v1/kv_cache_interface.py:918-944), ceil(min(W - 1 + in_flight,
    max_len) / bs) + 1 blocks, with in_flight the budget of the step stage
    the pool is the memory of, twice under ``schedule ahead``
    (max_concurrent_batches x max_num_batched_tokens, config/vllm.py:587-609),
    and max_len its ``speculate ... within (L)`` when given; the budget must be
    a constant for the cap to exist (vLLM's is), else the window group counts
    its whole sequence at admission, as a full group does."""
    pool = program.pools[p]
    if not pool.groups:
        return None
    full = any(g.kind == "Full" for g in pool.groups)
    window = next(g.window for g in pool.groups if g.kind == "Window")
    block = pool.block
    cap = math.inf
    for stage in program.stages:
        kind = stage.kind
        if isinstance(kind, ir.Step) and kind.memory == p and isinstance(kind.budget, ir.Num):
            in_flight = max(0.0, kind.budget.value) * (2.0 if kind.schedule_ahead else 1.0)
            reach = window - 1.0 + in_flight
            if kind.spec_within and kind.spec_within > 0:
                reach = min(reach, float(kind.spec_within))
            cap = (math.ceil(reach / block - 1e-9) + 1) * block
            break
    return GroupFacts(full, window, block, cap)
