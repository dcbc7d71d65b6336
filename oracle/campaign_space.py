"""Whole-space cases for the campaign against the real vLLM scheduler (issue 18, §4).

oracle/campaign_cases.py draws its scenarios from a few shapes (block sizes
8, 16 and 32, chunk caps up to 128 or just above the budget, budgets from a
short list, at most eight requests of at most 600 prompt tokens, arrivals
within 40 steps). This module draws every knob of a scenario over its whole
valid range, each knob's range cut into named *regions*, and the regions of
the knobs drawn independently, so every combination of regions comes up.
Plain Python and deterministic: case ``index`` of ``seed`` comes from its own
``random.Random(seed * 1_000_003 + index + SPACE_OFFSET)`` (a stream apart
from campaign_cases.py's), so any one case can be drawn again alone.

The knobs and their regions (``KNOBS``; ``draw`` returns the case and the
region of each knob it drew):

- ``block``: the block size, ``one`` (1), ``small`` (2-7), ``common`` (8,
  16, 32), ``odd`` (9-63 but 16 and 32), ``large`` (64-128). vLLM takes any
  block size > 0 (config/cache.py:187).
- ``max_seqs``: ``one``, ``few`` (2-4), ``some`` (5-16), ``many`` (17-128).
- ``budget``: ``at_max_seqs`` (budget = max_seqs, the least vLLM accepts:
  config/scheduler.py:331-336), ``small`` (up to 64), ``medium`` (65-512),
  ``large`` (513-4096); always >= max_seqs.
- ``threshold``: the long-prefill threshold (the scenario's ``chunk``),
  ``off`` (0), ``one`` (1), ``below_block`` (2 .. block - 1), ``below_budget``
  (up to budget - 1), ``at_budget``, ``above_budget`` (budget + 1 up to
  twice the budget, at most max_model_len: config/scheduler.py:355-360).
  A region that is empty for the drawn block and budget falls to the next
  one down (``below_block`` with a block of 2 is ``one``).
- ``requests``: how many, ``one``, ``few`` (2-4), ``several`` (5-12),
  ``many`` (13-32).
- ``prompts``: ``within_block`` (1 .. block), ``within_chunk`` (up to the
  first chunk a request gets: the threshold, else the budget),
  ``beyond_chunk`` (the chunk plus 1 to 24 blocks), ``long`` (up to 4000
  tokens), ``mixed`` (each request from one of those).
- ``outs``: ``one`` (1), ``short`` (2-16), ``long`` (17-300), ``mixed``.
- ``arrivals``: ``together`` (all before step 1), ``staggered`` (0-8),
  ``spread`` (0-200), ``bursts`` (two to four bursts 1-30 steps apart),
  ``long_gaps`` (bursts 100-2000 steps apart: the engine idles between).
- ``pool``: the usable blocks (num_blocks - 1) against the largest
  request's need ``need`` (campaign_cases.blocks_needed) and the sum of all
  the requests' needs ``total``: ``barely_one`` (need: the largest request
  alone fills the cache), ``one_plus`` (need + 1 .. need + 3), ``some``
  (need .. (need + total) / 2), ``most`` ((need + total) / 2 .. total),
  ``never_tight`` (total + 1 and more: no request ever waits for memory).
- ``prefix_caching``: ``on``, ``off``.
- ``mode``: ``sync`` (vLLM's synchronous scheduling; ``async`` is a
  parameter of ``draw`` for when the driver answers it, off by default).
- ``priority``: ``fcfs`` (``serve`` is a parameter: with it a case gets a
  serve-by key of campaign_cases.SERVE_KEYS, vLLM's priority path; user
  priorities are a later knob, off by default).

Every case is one vLLM 0.33.0 accepts and finishes: budget >= max_seqs,
threshold <= max_model_len (8192, the driver's default for a scenario), a
request's prompt and output within max_model_len, every request fits the
pool alone (prompt and all but its last output token, in blocks, at most
the usable blocks). The work is kept within about ``STEP_BOUND`` steps
(prompts over a small first chunk are shortened, never below the chunk
plus a block, so ``beyond_chunk`` stays beyond it), so a corpus of
thousands of cases is answered in minutes.
"""

from __future__ import annotations

import math
import random

from .campaign_cases import SCENARIO_MAX_MODEL_LEN, SERVE_KEYS, blocks_needed

#: Added to a case's stream so that no case shares campaign_cases.py's stream.
SPACE_OFFSET = 777_000_000

#: Each knob's regions, in the order the module docstring gives them.
KNOBS: dict[str, tuple[str, ...]] = {
    "block": ("one", "small", "common", "odd", "large"),
    "max_seqs": ("one", "few", "some", "many"),
    "budget": ("at_max_seqs", "small", "medium", "large"),
    "threshold": ("off", "one", "below_block", "below_budget", "at_budget", "above_budget"),
    "requests": ("one", "few", "several", "many"),
    "prompts": ("within_block", "within_chunk", "beyond_chunk", "long", "mixed"),
    "outs": ("one", "short", "long", "mixed"),
    "arrivals": ("together", "staggered", "spread", "bursts", "long_gaps"),
    "pool": ("barely_one", "one_plus", "some", "most", "never_tight"),
    "prefix_caching": ("on", "off"),
    "mode": ("sync", "async"),
    "priority": ("fcfs", "serve"),
}

#: About the most steps a case's requests would take one after another (prefill chunks plus outputs).
STEP_BOUND = 2500


def _rng(seed: int, index: int) -> random.Random:
    return random.Random(seed * 1_000_003 + index + SPACE_OFFSET)


def _block(r: random.Random, region: str) -> int:
    if region == "one":
        return 1
    if region == "small":
        return r.randint(2, 7)
    if region == "common":
        return r.choice((8, 16, 32))
    if region == "odd":
        return r.choice([b for b in range(9, 64) if b not in (16, 32)])
    return r.randint(64, 128)


def _max_seqs(r: random.Random, region: str) -> int:
    return {"one": lambda: 1, "few": lambda: r.randint(2, 4), "some": lambda: r.randint(5, 16),
            "many": lambda: r.randint(17, 128)}[region]()


def _budget(r: random.Random, region: str, max_seqs: int) -> tuple[str, int]:
    """The budget of ``region``, or of the next region up when it has no value >= max_seqs."""
    ranges = {"small": (1, 64), "medium": (65, 512), "large": (513, 4096)}
    if region == "at_max_seqs":
        return region, max_seqs
    lo, hi = ranges[region]
    if hi <= max_seqs:
        # small with max_seqs >= 64: the next region up has room
        region, (lo, hi) = "medium", ranges["medium"]
    return region, r.randint(max(lo, max_seqs + 1), hi)


def _threshold(r: random.Random, region: str, block: int, budget: int) -> tuple[str, int]:
    """The long-prefill threshold of ``region`` (falling to the next region down when it is empty)."""
    order = KNOBS["threshold"]
    while True:
        if region == "off":
            return region, 0
        if region == "one":
            return region, 1
        if region == "below_block" and block > 2 and budget > 2:
            return region, r.randint(2, min(block, budget) - 1)
        if region == "below_budget" and budget > 2:
            return region, r.randint(2, budget - 1)
        if region == "at_budget" and budget > 1:
            return region, budget
        if region == "above_budget":
            return region, r.randint(budget + 1, min(2 * budget + 1, SCENARIO_MAX_MODEL_LEN))
        region = order[order.index(region) - 1]


def _prompt(r: random.Random, region: str, block: int, first_chunk: int) -> tuple[str, int]:
    if region == "mixed":
        region = r.choice(("within_block", "within_chunk", "beyond_chunk", "long"))
    if region == "within_block":
        return region, r.randint(1, block)
    if region == "within_chunk":
        return region, r.randint(1, first_chunk)
    if region == "beyond_chunk":
        return region, first_chunk + r.randint(1, 24 * block)
    return region, r.randint(1, 4000)


def _out(r: random.Random, region: str) -> int:
    if region == "mixed":
        region = r.choice(("one", "short", "long"))
    return {"one": lambda: 1, "short": lambda: r.randint(2, 16), "long": lambda: r.randint(17, 300)}[region]()


def _arrivals(r: random.Random, region: str, n: int) -> list[int]:
    if region == "together":
        return [0] * n
    if region == "staggered":
        return [r.randint(0, 8) for _ in range(n)]
    if region == "spread":
        return [r.randint(0, 200) for _ in range(n)]
    gap = (1, 30) if region == "bursts" else (100, 2000)
    starts = [0]
    for _ in range(r.randint(1, 3)):
        starts.append(starts[-1] + r.randint(*gap))
    return [r.choice(starts) + r.randint(0, 2) for _ in range(n)]


def _usable(r: random.Random, region: str, need: int, total: int) -> int:
    if region == "barely_one":
        return need
    if region == "one_plus":
        return need + r.randint(1, 3)
    middle = (need + total) // 2
    if region == "some":
        return r.randint(need, max(need, middle))
    if region == "most":
        return r.randint(max(need, middle), max(need, total))
    return total + r.randint(1, max(1, total))


def draw(seed: int, index: int, mode: str = "sync", serve: bool = False) -> tuple[dict, dict[str, str]]:
    """Case ``index`` of ``seed`` and the region of each knob it drew
    (module docstring). ``mode``: "sync" (the default; "async" is drawn
    into the case as ``"async": true`` for a driver that answers it);
    ``serve``: every case gets a serve-by key of campaign_cases.SERVE_KEYS."""
    if mode not in ("sync", "async"):
        raise ValueError(f"mode is sync or async, not {mode!r}")
    r = _rng(seed, index)
    regions = {knob: r.choice(KNOBS[knob]) for knob in KNOBS if knob not in ("mode", "priority")}
    regions["mode"], regions["priority"] = mode, "serve" if serve else "fcfs"
    block = _block(r, regions["block"])
    max_seqs = _max_seqs(r, regions["max_seqs"])
    regions["budget"], budget = _budget(r, regions["budget"], max_seqs)
    regions["threshold"], chunk = _threshold(r, regions["threshold"], block, budget)
    first_chunk = min(chunk, budget) if chunk else budget
    n = {"one": lambda: 1, "few": lambda: r.randint(2, 4), "several": lambda: r.randint(5, 12),
         "many": lambda: r.randint(13, 32)}[regions["requests"]]()
    arrivals = _arrivals(r, regions["arrivals"], n)
    requests = []
    for k in range(n):
        _, prompt = _prompt(r, regions["prompts"], block, first_chunk)
        out = _out(r, regions["outs"])
        requests.append([prompt, out, arrivals[k]])
    # The work within STEP_BOUND: a request's prefill takes about prompt / first_chunk steps.
    steps = sum(math.ceil(p / first_chunk) + o for p, o, _ in requests)
    if steps > STEP_BOUND:
        share = STEP_BOUND / steps
        floor_ = first_chunk + block if regions["prompts"] == "beyond_chunk" else 1
        for q in requests:
            q[0] = max(floor_, min(q[0], int(q[0] * share)))
            q[1] = max(1, int(q[1] * share)) if q[1] > 16 else q[1]
    for q in requests:
        q[0] = min(q[0], SCENARIO_MAX_MODEL_LEN - q[1])
    needs = [blocks_needed(p, o, block) for p, o, _ in requests]
    need, total = max(needs), sum(needs)
    usable = _usable(r, regions["pool"], need, total)
    prefix_caching = regions["prefix_caching"] == "on"
    case = {
        "kind": "scenario",
        "budget": budget,
        "max_seqs": max_seqs,
        "block_size": block,
        "num_blocks": usable + 1,
        "chunk": chunk,
        "prefix_caching": prefix_caching,
        "requests": [{"prompt": p, "out": o, **({"arrive": a} if a else {})} for p, o, a in requests],
    }
    if serve:
        case["serve"] = r.choice(SERVE_KEYS)
    if mode == "async":
        case["async"] = True
    return case, regions


def scenario(seed: int, index: int) -> dict:
    """Case ``index`` of ``seed`` (synchronous, FCFS)."""
    return draw(seed, index)[0]


def regions_of(seed: int, index: int) -> dict[str, str]:
    """The regions case ``index`` of ``seed`` was drawn from (synchronous, FCFS)."""
    return draw(seed, index)[1]
