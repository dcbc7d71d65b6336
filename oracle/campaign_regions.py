"""The knob regions the campaigns beyond the seed share (oracle/campaign_prefix.py,
campaign_sliding.py, campaign_kv.py): each draws a scenario's engine, its
requests' arrivals and its pool from a seeded ``random.Random`` in the
same order, so that one function per knob keeps the three generators'
regions (and their recorded corpora) the same.

- ``block``: ``small`` (1-7), ``common`` (8, 16, 32), ``odd`` (9-40 but 16 and 32);
- ``max_seqs``: ``one``, ``few`` (2-4), ``some`` (5-16);
- ``budget``: ``small`` (max_seqs .. 64), ``medium`` (65-512), at least max_seqs;
- ``threshold``: the long-prefill threshold, ``off`` (0), ``below_budget``, ``above_budget`` (up to twice it);
- ``requests``: ``few`` (2-4), ``several`` (5-12), ``many`` (13-24);
- ``arrivals``: ``together`` (all at step 0), ``staggered`` (0-10), ``spread`` (0-150);
- ``pool``: usable blocks ``tight`` (the largest need .. 3 more), ``some`` (up to half-way to all the
  needs at once), ``loose`` (more than all of them).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .campaign_cases import blocks_needed


@dataclass(frozen=True)
class Engine:
    """A case's engine knobs and its number of requests."""

    block_size: int
    max_seqs: int
    budget: int
    threshold: int
    requests: int


def block(r: random.Random, region: str) -> int:
    if region == "small":
        return r.randint(1, 7)
    if region == "common":
        return r.choice((8, 16, 32))
    return r.choice([b for b in range(9, 41) if b not in (16, 32)])


def engine(r: random.Random, region: dict[str, str]) -> Engine:
    """The block size, max_seqs, budget (never below max_seqs, vLLM's config/scheduler.py:331-336), the
    long-prefill threshold and the number of requests, drawn in that order."""
    bs = block(r, region["block"])
    max_seqs = {"one": 1, "few": r.randint(2, 4), "some": r.randint(5, 16)}[region["max_seqs"]]
    budget = r.randint(max_seqs, 64) if region["budget"] == "small" else r.randint(65, 512)
    budget = max(budget, max_seqs)
    threshold = {"off": 0, "below_budget": r.randint(1, max(1, budget - 1)),
                 "above_budget": r.randint(budget + 1, 2 * budget)}[region["threshold"]]
    n = {"few": r.randint(2, 4), "several": r.randint(5, 12), "many": r.randint(13, 24)}[region["requests"]]
    return Engine(bs, max_seqs, budget, threshold, n)


def arrive(r: random.Random, region: str, request: dict) -> None:
    """``request``'s arrival step, drawn into it (none: it arrives at step 0)."""
    if region == "staggered":
        request["arrive"] = r.randint(0, 10)
    elif region == "spread":
        request["arrive"] = r.randint(0, 150)


def usable_blocks(r: random.Random, region: str, need: int, total: int) -> int:
    """The pool's usable blocks, for requests whose largest need is ``need`` blocks and all of whose needs
    sum to ``total`` (every request fits alone)."""
    return {"tight": r.randint(need, need + 3), "some": r.randint(need, max(need, (need + total) // 2)),
            "loose": r.randint(total + 1, total + 20)}[region]


def case(r: random.Random, region: dict[str, str], e: Engine, requests: list[dict], fields: tuple[str, ...]) -> dict:
    """The scenario of ``requests`` (each with the request fields in ``fields``' order) on engine ``e``: its
    pool drawn for their needs under ``region["pool"]``, prefix caching and the mode as ``region`` says."""
    requests = [{k: q[k] for k in fields if k in q} for q in requests]
    need = max(blocks_needed(q["prompt"], q["out"], e.block_size) for q in requests)
    total = sum(blocks_needed(q["prompt"], q["out"], e.block_size) for q in requests)
    usable = usable_blocks(r, region["pool"], need, total)
    out = {"kind": "scenario", "budget": e.budget, "max_seqs": e.max_seqs, "block_size": e.block_size,
           "num_blocks": usable + 1, "chunk": e.threshold, "prefix_caching": region["prefix_caching"] == "on",
           "requests": requests}
    if region["mode"] == "async":
        out["async"] = True
    return out
