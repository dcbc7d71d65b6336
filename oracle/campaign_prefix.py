"""Shared-prefix cases for the campaign against the real vLLM scheduler (issue 19, section 1).

Each case is a scenario whose requests share prompt tokens by key
(``prompt_segments``, docs/oracle.md; docs/design/shared-prefixes.md). Plain
Python and deterministic: case ``index`` of ``seed`` comes from its own
``random.Random(seed * 1_000_003 + index + PREFIX_OFFSET)``, a stream apart
from the other generators', so any one case can be drawn again alone.

The knobs and their regions (``draw`` returns the case and the region of each):

- ``structure``: how the prompts overlap: ``system`` (one system prompt, the
  same key and length, at the head of every request, its own question after
  it), ``heads`` (one key at several lengths: shared heads of several
  lengths, some of them not block-aligned), ``tree`` (a tree of prefixes: a
  root key, branch keys under it, leaf keys under those, each request a path
  from the root), ``identical`` (a few prompts, each sent several times
  whole: no own tokens), ``mixed`` (each request one of those shapes, or a
  prompt of its own);
- ``block``: the block size, ``small`` (1-7), ``common`` (8, 16, 32), ``odd``
  (9-40 but 16 and 32);
- ``max_seqs``: ``one``, ``few`` (2-4), ``some`` (5-16);
- ``budget``: ``small`` (max_seqs .. 64), ``medium`` (65-512), always at least
  max_seqs;
- ``threshold``: the long-prefill threshold, ``off`` (0), ``below_budget``,
  ``above_budget``;
- ``requests``: ``few`` (2-4), ``several`` (5-12), ``many`` (13-24);
- ``outs``: ``short`` (1-8), ``long`` (9-60);
- ``arrivals``: ``together`` (before step 1), ``staggered`` (0-10),
  ``spread`` (0-150: early requests finish, their blocks wait in the free
  queue to be hit or evicted);
- ``pool``: the usable blocks against the largest request's need ``need``
  and the sum of the needs ``total``: ``tight`` (need .. need + 3),
  ``some`` (up to (need + total) / 2), ``loose`` (total + 1 ..: nothing is
  evicted for want of room, but a hit may still be);
- ``prefix_caching``: ``on`` (9 in 10), ``off``;
- ``mode``: ``sync``, ``async``.

Every case is one vLLM 0.33.0 accepts and finishes: budget >= max_seqs, the
threshold at most max_model_len (8192), every request fits the pool alone
(prompt and all but its last output token, in blocks, at most the usable
blocks).

    python -m oracle.record shared-prefix --count 3000 --seed 1 [--processes 2]

(oracle/record.py) records the corpus oracle/data/campaign/shared-prefix.jsonl
(one JSON line per case: seed, index, case, answer with ``cached``) on the
real scheduler;

    python -m oracle.record shared-head-replays --spacings 4 8 12 16 20 22 23 24 28 32 40

the full trace with a system prompt of 1,000 tokens (oracle/record.py's
``SHARED_HEAD``) shared by every session (the driver's ``shared_head``),
oracle/data/replay/shared-head-*.
"""

from __future__ import annotations

import random

from . import campaign_regions as regions

#: Added to a case's stream so that no case shares another generator's stream.
PREFIX_OFFSET = 919_000_000
#: The corpus's file under oracle/data/campaign/.
CORPUS = "shared-prefix.jsonl"

KNOBS: dict[str, tuple[str, ...]] = {
    "structure": ("system", "heads", "tree", "identical", "mixed"),
    "block": ("small", "common", "odd"),
    "max_seqs": ("one", "few", "some"),
    "budget": ("small", "medium"),
    "threshold": ("off", "below_budget", "above_budget"),
    "requests": ("few", "several", "many"),
    "outs": ("short", "long"),
    "arrivals": ("together", "staggered", "spread"),
    "pool": ("tight", "some", "loose"),
    "prefix_caching": ("on", "off"),
    "mode": ("sync", "async"),
}


def _requests_of(r: random.Random, structure: str, n: int, bs: int) -> list[dict]:
    """``n`` requests' prompts (and segments) of one structure."""
    def own(at_least: int = 1) -> int:
        return r.randint(at_least, 3 * bs + 20)

    if structure == "system":
        length = r.randint(1, 6 * bs + 30)
        return [{"prompt": length + own(), "prompt_segments": [["sys", length]]} for _ in range(n)]
    if structure == "heads":
        full = r.randint(bs + 1, 8 * bs + 40)
        out = []
        for _ in range(n):
            length = r.choice((full, r.randint(1, full), bs * r.randint(1, max(1, full // bs))))
            length = min(length, full)
            out.append({"prompt": length + r.choice((0, own())), "prompt_segments": [["doc", length]]})
        return out
    if structure == "tree":
        root = r.randint(1, 4 * bs + 10)
        branches = {b: r.randint(1, 3 * bs + 10) for b in range(r.randint(1, 3))}
        leaves = {(b, f): r.randint(1, 2 * bs + 10) for b in branches for f in range(r.randint(1, 3))}
        out = []
        for _ in range(n):
            depth = r.choice((1, 2, 2, 3, 3))
            b = r.choice(sorted(branches))
            segments = [["root", root]]
            if depth >= 2:
                segments.append([f"b{b}", branches[b]])
            if depth >= 3:
                f = r.choice(sorted(f for (bb, f) in leaves if bb == b))
                segments.append([f"b{b}l{f}", leaves[(b, f)]])
            total = sum(length for _, length in segments)
            out.append({"prompt": total + r.choice((0, own())), "prompt_segments": segments})
        return out
    if structure == "identical":
        kinds = [r.randint(1, 6 * bs + 30) for _ in range(r.randint(1, 3))]
        out = []
        for _ in range(n):
            k = r.randrange(len(kinds))
            out.append({"prompt": kinds[k], "prompt_segments": [[f"p{k}", kinds[k]]]})
        return out
    # mixed: each request its own shape, sharing the keys of the case
    out = []
    for _ in range(n):
        shape = r.choice(("system", "heads", "tree", "identical", "own"))
        if shape == "own":
            out.append({"prompt": r.randint(1, 5 * bs + 30)})
        else:
            out.append(_requests_of(r, shape, 1, bs)[0])
    return out


def draw(seed: int, index: int) -> tuple[dict, dict[str, str]]:
    """Case ``index`` of ``seed`` and the region of each knob it drew."""
    r = random.Random(seed * 1_000_003 + index + PREFIX_OFFSET)
    region = {knob: r.choice(regions) for knob, regions in KNOBS.items()}
    region["prefix_caching"] = "off" if r.random() < 0.1 else "on"
    e = regions.engine(r, region)
    bs, n = e.block_size, e.requests
    requests = _requests_of(r, region["structure"], n, bs)
    for req in requests:
        req["out"] = r.randint(1, 8) if region["outs"] == "short" else r.randint(9, 60)
        regions.arrive(r, region["arrivals"], req)
    return regions.case(r, region, e, requests, ("prompt", "out", "arrive", "prompt_segments")), region


def scenario(seed: int, index: int) -> dict:
    """Case ``index`` of ``seed`` (``draw`` without the regions)."""
    return draw(seed, index)[0]
