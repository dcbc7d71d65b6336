"""CPU-offloading cases for the campaign against the real vLLM scheduler (issue 20, section 3).

Each case is a scenario with ``offload`` (vLLM 0.33.0's native CPU
offloading: its OffloadingConnector, CPU manager and LRU policy over a tier
of ``cpu_blocks`` chunks; ``load_delay`` and ``store_delay`` the steps the
driver's worker takes; docs/oracle.md, docs/design/cpu-offloading.md) and
prefix caching on, whose requests share prompts so that the GPU pool evicts
what the tier still holds. Plain Python and deterministic: case ``index`` of
``seed`` comes from its own ``random.Random(seed * 1_000_003 + index +
OFFLOAD_OFFSET)``, a stream apart from the other generators', so any one case
can be drawn again alone.

The knobs and their regions (``draw`` returns the case and the region of
each); the engine's, the arrivals' and the pool's are campaign_regions.py's:

- ``tier``: the CPU tier's chunks against the blocks of all the prompts
  ``total``: ``tiny`` (1-3), ``small`` (4 .. total / 2), ``fits`` (total /
  2 .. 2 total), ``huge`` (2 total .. 1,000,000);
- ``load_delay``: ``zero``, ``short`` (1-3), ``long`` (4-40);
- ``store_delay``: ``next`` (1, the least), ``short`` (2-4), ``long`` (5-40);
- ``sharing``: how the prompts share tokens (``prompt_segments``):
  ``sessions`` (a few sessions, each request a turn that repeats its
  session's earlier turns and adds to them), ``documents`` (a few
  documents, each request one of them whole or a head of it, then its own
  question), ``repeat`` (a few prompts asked again and again, whole);
- ``block``, ``max_seqs``, ``budget``, ``threshold``, ``requests``,
  ``arrivals``, ``pool`` (campaign_regions.py);
- ``outs``: ``short`` (1-8), ``long`` (9-60);
- ``mode``: ``sync``, ``async``.

Every case is one vLLM 0.33.0 accepts: budget >= max_seqs, the threshold
at most max_model_len (8192), every request fits the pool alone.

    python -m oracle.record cpu-offload --count 2000 --seed 1 [--processes 2]

(oracle/record.py) records the corpus oracle/data/campaign/cpu-offload.jsonl
(one JSON line per case: seed, index, case, answer with ``offload``) on the
real scheduler.
"""

from __future__ import annotations

import random

from . import campaign_regions as regions
from .campaign_cases import blocks_needed

#: Added to a case's stream so that no case shares another generator's stream.
OFFLOAD_OFFSET = 647_000_000
#: The corpus's file under oracle/data/campaign/.
CORPUS = "cpu-offload.jsonl"

KNOBS: dict[str, tuple[str, ...]] = {
    "tier": ("tiny", "small", "fits", "huge"),
    "load_delay": ("zero", "short", "long"),
    "store_delay": ("next", "short", "long"),
    "sharing": ("sessions", "documents", "repeat"),
    "block": ("small", "common", "odd"),
    "max_seqs": ("one", "few", "some"),
    "budget": ("small", "medium"),
    "threshold": ("off", "below_budget", "above_budget"),
    "requests": ("few", "several", "many"),
    "outs": ("short", "long"),
    "arrivals": ("together", "staggered", "spread"),
    "pool": ("tight", "some", "loose"),
    "mode": ("sync", "async"),
}


def _delay(r: random.Random, region: str) -> int:
    return {"zero": 0, "short": r.randint(1, 3), "long": r.randint(4, 40)}[region]


def _store_delay(r: random.Random, region: str) -> int:
    return {"next": 1, "short": r.randint(2, 4), "long": r.randint(5, 40)}[region]


def _prompts(r: random.Random, region: str, n: int, bs: int) -> list[dict]:
    """``n`` requests' prompts and segments under the sharing ``region``."""
    out = []
    if region == "sessions":
        sessions = [0] * r.randint(1, 4)  # each session's length so far
        for _ in range(n):
            s = r.randrange(len(sessions))
            grown = sessions[s] + r.randint(1, 3 * bs + 20)
            sessions[s] = grown
            out.append({"prompt": grown, "prompt_segments": [[f"s{s}", grown]]})
    elif region == "documents":
        docs = [r.randint(bs, 6 * bs + 40) for _ in range(r.randint(1, 3))]
        for _ in range(n):
            d = r.randrange(len(docs))
            head = docs[d] if r.random() < 0.6 else r.randint(1, docs[d])
            out.append({"prompt": head + r.randint(1, 2 * bs + 8), "prompt_segments": [[f"d{d}", head]]})
    else:
        prompts = [r.randint(1, 6 * bs + 40) for _ in range(r.randint(1, 3))]
        for _ in range(n):
            p = r.randrange(len(prompts))
            out.append({"prompt": prompts[p], "prompt_segments": [[f"p{p}", prompts[p]]]})
    return out


def draw(seed: int, index: int) -> tuple[dict, dict[str, str]]:
    """Case ``index`` of ``seed`` and the region of each knob it drew."""
    r = random.Random(seed * 1_000_003 + index + OFFLOAD_OFFSET)
    region = {knob: r.choice(choices) for knob, choices in KNOBS.items()}
    region["prefix_caching"] = "on"
    e = regions.engine(r, region)
    requests = _prompts(r, region["sharing"], e.requests, e.block_size)
    for req in requests:
        req["out"] = r.randint(1, 8) if region["outs"] == "short" else r.randint(9, 60)
        regions.arrive(r, region["arrivals"], req)
    out = regions.case(r, region, e, requests, ("prompt", "out", "arrive", "prompt_segments"))
    total = sum(blocks_needed(q["prompt"], 1, e.block_size) for q in requests)
    cpu = {"tiny": r.randint(1, 3), "small": r.randint(min(4, total), max(4, total // 2)),
           "fits": r.randint(max(1, total // 2), max(1, 2 * total)),
           "huge": r.randint(2 * total, 1_000_000)}[region["tier"]]
    out["offload"] = {"cpu_blocks": cpu, "load_delay": _delay(r, region["load_delay"]),
                      "store_delay": _store_delay(r, region["store_delay"])}
    return out, region


def scenario(seed: int, index: int) -> dict:
    """Case ``index`` of ``seed`` (``draw`` without the regions)."""
    return draw(seed, index)[0]
