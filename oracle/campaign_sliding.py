"""Sliding-window and hybrid KV cache cases for the campaign against the real vLLM scheduler (issue 20, section 1).

Each case is a scenario with ``kv_groups`` (docs/oracle.md;
docs/design/sliding-window.md): a sliding-window model alone
(``[{"kind": "sliding", "window": W}]``) or a hybrid one, a full-attention
group and a sliding-window group over one block pool
(``[{"kind": "full"}, {"kind": "sliding", "window": W}]``). Plain Python and
deterministic: case ``index`` of ``seed`` comes from its own
``random.Random(seed * 1_000_003 + index + SLIDING_OFFSET)``, a stream apart
from the other generators', so any one case can be drawn again alone.

The knobs and their regions (``draw`` returns the case and the region of each):

- ``groups``: ``sliding`` (alone) or ``hybrid`` (full + sliding);
- ``window``: the window in tokens against the block size bs: ``one_block``
  (1 .. bs), ``few_blocks`` (bs + 1 .. 4 bs), ``many_blocks`` (4 bs + 1 ..
  16 bs), ``beyond`` (longer than every request: nothing ever leaves it, but
  vLLM's admission cap still counts it);
- ``block``: the block size, ``small`` (1-7), ``common`` (8, 16, 32), ``odd``
  (9-40 but 16 and 32);
- ``max_seqs``: ``one``, ``few`` (2-4), ``some`` (5-16);
- ``budget``: ``small`` (max_seqs .. 64), ``medium`` (65-512), always at least
  max_seqs;
- ``threshold``: the long-prefill threshold, ``off`` (0), ``below_budget``,
  ``above_budget``;
- ``requests``: ``few`` (2-4), ``several`` (5-12), ``many`` (13-24);
- ``prompts``: ``short`` (1 .. 2 bs + 8), ``long`` (up to 12 bs + 100: many
  blocks leave the window during the prefill);
- ``outs``: ``short`` (1-8), ``long`` (9-120: the window slides over the
  output);
- ``arrivals``: ``together`` (before step 1), ``staggered`` (0-10),
  ``spread`` (0-150);
- ``sharing``: ``none`` (every prompt its own) or ``system`` (a system prompt
  of one key at the head of every request, ``prompt_segments``: hits across
  requests, which must hold in every group);
- ``pool``: the usable blocks against the largest request's need ``need``
  and the sum of the needs ``total``, a need counted as the driver's fit
  rule counts it (``need_of``: all its blocks in a full group, at most
  vLLM's admission cap in a sliding one): ``tight`` (need .. need + 3),
  ``some`` (up to (need + total) / 2), ``loose`` (total + 1 ..);
- ``prefix_caching``: ``on``, ``off``;
- ``mode``: ``sync``, ``async``.

Every case is one vLLM 0.33.0 accepts and that the driver answers without
refusing a request: budget >= max_seqs, the threshold at most
max_model_len (8192), every request fits the pool alone.

    python -m oracle.record sliding-window --count 2000 --seed 1 [--processes 2]

(oracle/record.py) records the corpus oracle/data/campaign/sliding-window.jsonl
(one JSON line per case: seed, index, case, answer) on the real scheduler.
"""

from __future__ import annotations

import math
import random

from . import campaign_regions as regions

#: Added to a case's stream so that no case shares another generator's stream.
SLIDING_OFFSET = 727_000_000
#: The corpus's file under oracle/data/campaign/.
CORPUS = "sliding-window.jsonl"
#: The driver's max_model_len for a scenario that gives none (oracle/real/driver.py).
MAX_MODEL_LEN = 8192

KNOBS: dict[str, tuple[str, ...]] = {
    "groups": ("sliding", "hybrid"),
    "window": ("one_block", "few_blocks", "many_blocks", "beyond"),
    "block": ("small", "common", "odd"),
    "max_seqs": ("one", "few", "some"),
    "budget": ("small", "medium"),
    "threshold": ("off", "below_budget", "above_budget"),
    "requests": ("few", "several", "many"),
    "prompts": ("short", "long"),
    "outs": ("short", "long"),
    "arrivals": ("together", "staggered", "spread"),
    "sharing": ("none", "system"),
    "pool": ("tight", "some", "loose"),
    "prefix_caching": ("on", "off"),
    "mode": ("sync", "async"),
}


def admission_cap(window: int, block_size: int, budget: int, asynchronous: bool,
                  max_model_len: int = MAX_MODEL_LEN) -> int:
    """vLLM 0.33.0's per-request admission cap of a sliding-window group, in
    blocks (SlidingWindowSpec.max_admission_blocks_per_request,
    vllm/v1/kv_cache_interface.py:918-944): the window less one token plus
    the tokens in flight (one budget per concurrent batch: two under
    asynchronous scheduling, vllm/config/vllm.py:587-609), at most
    max_model_len, in blocks, plus one for a window that starts mid-block."""
    in_flight = budget * (2 if asynchronous else 1)
    return math.ceil(min(window - 1 + in_flight, max_model_len) / block_size) + 1


def need_of(case: dict, request: dict) -> int:
    """The blocks the driver's fit rule counts for ``request`` alone in the
    cache (oracle/real/driver.py, fit_refusal): its tokens but the last in
    blocks per full group, at most the admission cap per sliding group."""
    bs = case["block_size"]
    tokens = min(request["prompt"] + request["out"] - 1, MAX_MODEL_LEN - 1)
    blocks = math.ceil(tokens / bs)
    need = 0
    for group in case["kv_groups"]:
        if group["kind"] == "full":
            need += blocks
        else:
            need += min(blocks, admission_cap(group["window"], bs, case["budget"], bool(case.get("async"))))
    return need


def draw(seed: int, index: int) -> tuple[dict, dict[str, str]]:
    """Case ``index`` of ``seed`` and the region of each knob it drew."""
    r = random.Random(seed * 1_000_003 + index + SLIDING_OFFSET)
    region = {knob: r.choice(regions) for knob, regions in KNOBS.items()}
    e = regions.engine(r, region)
    bs, max_seqs, budget, threshold, n = e.block_size, e.max_seqs, e.budget, e.threshold, e.requests
    longest = 2 * bs + 8 if region["prompts"] == "short" else 12 * bs + 100
    system = r.randint(1, longest) if region["sharing"] == "system" else 0
    requests = []
    for _ in range(n):
        prompt = r.randint(1, longest)
        req: dict = {"prompt": max(prompt, system + r.choice((0, 1, r.randint(1, 2 * bs))))}
        req["out"] = r.randint(1, 8) if region["outs"] == "short" else r.randint(9, 120)
        regions.arrive(r, region["arrivals"], req)
        if system:
            req["prompt_segments"] = [["sys", system]]
        requests.append(req)
    biggest = max(q["prompt"] + q["out"] for q in requests)
    window = {"one_block": r.randint(1, bs), "few_blocks": r.randint(bs + 1, 4 * bs),
              "many_blocks": r.randint(4 * bs + 1, 16 * bs),
              "beyond": r.randint(biggest, biggest + 4 * bs)}[region["window"]]
    groups = [{"kind": "sliding", "window": window}]
    if region["groups"] == "hybrid":
        groups.insert(0, {"kind": "full"})
    case = {"kind": "scenario", "budget": budget, "max_seqs": max_seqs, "block_size": bs, "num_blocks": 0,
            "chunk": threshold, "prefix_caching": region["prefix_caching"] == "on", "kv_groups": groups,
            "requests": requests}
    if region["mode"] == "async":
        case["async"] = True
    needs = [need_of(case, q) for q in requests]
    need, total = max(needs), sum(needs)
    usable = regions.usable_blocks(r, region["pool"], need, total)
    case["num_blocks"] = usable + 1
    return case, region


def scenario(seed: int, index: int) -> dict:
    """Case ``index`` of ``seed`` (``draw`` without the regions)."""
    return draw(seed, index)[0]
