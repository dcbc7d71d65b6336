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

from .campaign_cases import PRIORITY_MODES, SCENARIO_MAX_MODEL_LEN, SERVE_KEYS, blocks_needed

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


def _requests(r: random.Random, regions: dict[str, str], step_bound: int = STEP_BOUND) -> tuple[dict, list[list[int]]]:
    """The engine's numbers and the requests ([prompt, out, arrive]) of the
    regions drawn (``regions``' budget and threshold may fall to another
    region: set here); the work kept within about ``step_bound`` steps."""
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
    # The work within step_bound: a request's prefill takes about prompt / first_chunk steps.
    steps = sum(math.ceil(p / first_chunk) + o for p, o, _ in requests)
    if steps > step_bound:
        share = step_bound / steps
        floor_ = first_chunk + block if regions["prompts"] == "beyond_chunk" else 1
        for q in requests:
            q[0] = max(floor_, min(q[0], int(q[0] * share)))
            q[1] = max(1, int(q[1] * share)) if q[1] > 16 else q[1]
    for q in requests:
        q[0] = min(q[0], SCENARIO_MAX_MODEL_LEN - q[1])
    return {"budget": budget, "max_seqs": max_seqs, "block_size": block, "chunk": chunk}, requests


def draw(seed: int, index: int, mode: str = "sync", serve: bool = False) -> tuple[dict, dict[str, str]]:
    """Case ``index`` of ``seed`` and the region of each knob it drew
    (module docstring): the kind ``space`` (space.jsonl), synchronous FCFS
    unless told. ``mode``: "sync" (the default; "async" is drawn
    into the case as ``"async": true`` for a driver that answers it);
    ``serve``: every case gets a serve-by key of campaign_cases.SERVE_KEYS.
    ``draw_all`` draws mode, policy and the limits too."""
    if mode not in ("sync", "async"):
        raise ValueError(f"mode is sync or async, not {mode!r}")
    r = _rng(seed, index)
    regions = {knob: r.choice(KNOBS[knob]) for knob in KNOBS if knob not in ("mode", "priority")}
    regions["mode"], regions["priority"] = mode, "serve" if serve else "fcfs"
    engine, requests = _requests(r, regions)
    block = engine["block_size"]
    needs = [blocks_needed(p, o, block) for p, o, _ in requests]
    need, total = max(needs), sum(needs)
    usable = _usable(r, regions["pool"], need, total)
    prefix_caching = regions["prefix_caching"] == "on"
    case = _case(engine, usable, engine["chunk"], prefix_caching, requests)
    if serve:
        case["serve"] = r.choice(SERVE_KEYS)
    if mode == "async":
        case["async"] = True
    return case, regions


def _case(engine: dict, usable: int, chunk: int, prefix_caching: bool, requests: list) -> dict:
    """The scenario both kinds draw (before their own fields): the engine's knobs, a pool of ``usable``
    blocks (vLLM's null block besides: ``num_blocks`` is one more), and the requests ``[prompt, out,
    arrive]``, an arrival at 0 left out."""
    return {
        "kind": "scenario",
        "budget": engine["budget"],
        "max_seqs": engine["max_seqs"],
        "block_size": engine["block_size"],
        "num_blocks": usable + 1,
        "chunk": chunk,
        "prefix_caching": prefix_caching,
        "requests": [{"prompt": p, "out": o, **({"arrive": a} if a else {})} for p, o, a in requests],
    }


# ---------------------------------------------------------------------------
# The kind ``space-all`` (space-all.jsonl): both modes, priorities and limits on

#: Added to a case's stream for the kind space-all (a stream apart from space's and campaign_cases.py's).
SPACE_ALL_OFFSET = 888_000_000

#: The kind space-all's knobs: space's (but its priority parameter), then mode, policy, the
#: priorities' pattern and the limits (module docstring of draw_all).
ALL_KNOBS: dict[str, tuple[str, ...]] = {
    **{knob: regions for knob, regions in KNOBS.items() if knob not in ("mode", "priority")},
    "mode": ("sync", "async"),
    "policy": ("fcfs", "priority"),
    "priorities": ("none",) + PRIORITY_MODES,
    "max_model_len": ("default", "refuses_some", "ends_some", "above_all", "cache_too_small"),
    "never_fits": ("none", "prompt", "with_output"),
    "watermark": ("zero", "low", "medium", "high"),
}

#: The knobs of space-all whose regions are not drawn equally often: a cache too small for
#: max_model_len refuses every request (nothing runs), so it is the rarest.
ALL_WEIGHTS: dict[str, tuple[int, ...]] = {"max_model_len": (3, 2, 2, 2, 1)}

#: The work of a space-all case within about this many steps (the asynchronous driver takes
#: about six times as long a step as the synchronous one).
STEP_BOUND_ALL = 1500


def _threshold_region(chunk: int, block: int, budget: int) -> str:
    """The threshold region a chunk cap lies in (the least one that names it)."""
    if chunk == 0:
        return "off"
    if chunk == 1:
        return "one"
    if chunk < min(block, budget):
        return "below_block"
    if chunk < budget:
        return "below_budget"
    return "at_budget" if chunk == budget else "above_budget"


def _priorities(r: random.Random, pattern: str, n: int) -> list[int]:
    """Each request's priority under ``pattern`` (campaign_cases.PRIORITY_MODES)."""
    if pattern == "equal":
        return [r.randint(-2, 2)] * n
    if pattern == "two":
        pair = r.sample(range(-3, 4), 2)
        return [r.choice(pair) for _ in range(n)]
    if pattern == "few":
        return [r.randint(-3, 3) for _ in range(n)]
    if pattern == "distinct":
        return r.sample(range(-n, n + 1), n)
    return [r.randint(-1_000_000, 1_000_000) for _ in range(n)]


def draw_all(seed: int, index: int) -> tuple[dict, dict[str, str]]:
    """Case ``index`` of ``seed`` of the kind space-all and the region of
    each of its knobs (``ALL_KNOBS``), from ``random.Random(seed * 1_000_003
    + index + SPACE_ALL_OFFSET)``. The knobs of ``draw`` (over the same
    ranges, the work within ``STEP_BOUND_ALL``), and:

    - ``mode``: ``sync`` (vLLM's Scheduler) or ``async`` (AsyncScheduler,
      vLLM 0.33.0's default: the case says ``"async": true``);
    - ``policy``: ``fcfs`` or ``priority`` (``"policy": "priority"``, every
      request a ``priority``);
    - ``priorities``: under the priority policy, the pattern of
      campaign_cases.PRIORITY_MODES (``equal``: all tied, ``two``, ``few``
      values in -3..3, ``distinct``, ``wide`` in -10^6..10^6); ``none``
      under FCFS;
    - ``max_model_len``: ``default`` (not given: 8192 and the recorded
      convention, under which a request that never fits is refused),
      ``refuses_some`` (at most the largest prompt: that prompt, and any
      other not below it, is refused), ``ends_some`` (above the largest
      prompt and at most a request's prompt + out - 1, else, when no
      request's is above the largest prompt, the same for some request's
      prompt: that request is served and ends at the limit, check_stop;
      drawn as ``above_all`` when every request has ``out`` 1),
      ``above_all`` (above every prompt + out, up to twice that or 32768),
      ``cache_too_small`` (above what the cache holds: vLLM would not
      start, every request refused; ``above_all`` when max_model_len is
      within one block, which any cache holds; drawn with weight 1 against 3 for
      ``default`` and 2 for the others, ``ALL_WEIGHTS``). Given, the threshold is cut to it
      (config/scheduler.py:355-360; the ``threshold`` region is then the
      cut value's) and, but for ``cache_too_small``, the pool is drawn
      against ceil(max_model_len / block) as well as the requests' needs,
      so the cache is one vLLM starts;
    - ``never_fits`` (only under ``default``; else ``none``): a request
      whose ``prompt`` alone, or whose prompt ``with_output``, needs more
      blocks than the cache has (refused under the recorded convention),
      put among the others;
    - ``watermark``: ``zero`` (not given), ``low`` (0.01-0.1), ``medium``
      (0.1-0.5), ``high`` (0.5-0.99), two decimals (vLLM's range [0, 1):
      config/scheduler.py:196).
    """
    r = random.Random(seed * 1_000_003 + index + SPACE_ALL_OFFSET)
    knobs = [k for k in ALL_KNOBS if k != "priorities"]
    regions = {knob: r.choices(ALL_KNOBS[knob], ALL_WEIGHTS[knob])[0] if knob in ALL_WEIGHTS
               else r.choice(ALL_KNOBS[knob]) for knob in knobs}
    regions["priorities"] = r.choice(PRIORITY_MODES) if regions["policy"] == "priority" else "none"
    if regions["max_model_len"] != "default":
        regions["never_fits"] = "none"
    engine, requests = _requests(r, regions, STEP_BOUND_ALL)
    block, chunk = engine["block_size"], engine["chunk"]
    length = None
    prompts = [p for p, _, _ in requests]
    lifetimes = [p + o for p, o, _ in requests]
    region = regions["max_model_len"]
    if region == "refuses_some":
        length = r.randint(max(1, min(prompts) // 2), max(prompts))
    elif region == "ends_some":
        # above the largest prompt, at most a request's prompt + out - 1 (so it ends at the limit);
        # else above a prompt, at most that request's prompt + out - 1
        if max(lifetimes) - 1 > max(prompts):
            length = r.randint(max(prompts) + 1, max(lifetimes) - 1)
        else:
            tall = [k for k in range(len(requests)) if lifetimes[k] - 1 > prompts[k]]
            if tall:
                k = r.choice(tall)
                length = r.randint(prompts[k] + 1, lifetimes[k] - 1)
        if length is None:
            region = regions["max_model_len"] = "above_all"
    if region in ("above_all", "cache_too_small"):
        length = r.randint(max(lifetimes) + 1, min(32768, 2 * max(lifetimes) + 16))
    accepted = [(p, o) for p, o, _ in requests if length is None or p < length]
    limit = SCENARIO_MAX_MODEL_LEN if length is None else length
    needs = [-(-min(p + o - 1, limit - 1) // block) for p, o in accepted] or [1]
    need, total = max(needs), sum(needs)
    if length is not None and region != "cache_too_small":
        # the cache holds one request of max_model_len (kv_cache_planning.py:151-183)
        need = max(need, -(-length // block))
        total = max(total, need)
    usable = _usable(r, regions["pool"], need, total)
    if region == "cache_too_small":
        # too small for one request of max_model_len (but the requests may fit); a max_model_len
        # within one block fits any cache: such a case is above_all's
        usable = max(1, min(usable, -(-length // block) - 1))
        if -(-length // block) <= usable:
            region = regions["max_model_len"] = "above_all"
    if length is not None and chunk > length:
        chunk = length
        regions["threshold"] = _threshold_region(chunk, block, engine["budget"])
    never = regions["never_fits"]
    if never != "none" and usable * block >= SCENARIO_MAX_MODEL_LEN - 1:
        # a cache that holds the longest request (8191 tokens computed): nothing can be too long for it
        never = regions["never_fits"] = "none"
    if never != "none":
        if never == "prompt":
            big = [usable * block + r.randint(1, 64), r.randint(1, 8)]
        else:
            prompt = r.randint(1, usable * block)
            big = [prompt, usable * block - prompt + 2 + r.randint(0, 32)]
        big[0] = min(big[0], SCENARIO_MAX_MODEL_LEN - 1)
        big[1] = min(big[1], SCENARIO_MAX_MODEL_LEN - big[0])
        requests.insert(r.randint(0, len(requests)), big + [r.choice([a for _, _, a in requests])])
    case = _case(engine, usable, chunk, regions["prefix_caching"] == "on", requests)
    if regions["policy"] == "priority":
        case["policy"] = "priority"
        values = _priorities(r, regions["priorities"], len(requests))
        case["requests"] = [dict(q, priority=v) for q, v in zip(case["requests"], values)]
    if length is not None:
        case["max_model_len"] = length
    w = regions["watermark"]
    if w != "zero":
        lo, hi = {"low": (0.01, 0.1), "medium": (0.1, 0.5), "high": (0.5, 0.99)}[w]
        case["watermark"] = round(r.uniform(lo, hi), 2)
    if regions["mode"] == "async":
        case["async"] = True
    return case, regions


def scenario_all(seed: int, index: int) -> dict:
    """Case ``index`` of ``seed`` of the kind space-all."""
    return draw_all(seed, index)[0]


def regions_all(seed: int, index: int) -> dict[str, str]:
    """The regions case ``index`` of ``seed`` of the kind space-all was drawn from."""
    return draw_all(seed, index)[1]


def scenario(seed: int, index: int) -> dict:
    """Case ``index`` of ``seed`` (synchronous, FCFS)."""
    return draw(seed, index)[0]


def regions_of(seed: int, index: int) -> dict[str, str]:
    """The regions case ``index`` of ``seed`` was drawn from (synchronous, FCFS)."""
    return draw(seed, index)[1]


# ---------------------------------------------------------------------------
# The kind ``pressure`` (async-priority-pressure.jsonl): vLLM 0.33.0's default engine under
# the priority policy, with memory tight enough that requests are preempted while others wait

#: Added to a case's stream for the kind pressure (a stream apart from the other kinds').
PRESSURE_OFFSET = 999_000_000

#: The kind pressure's knobs and their regions (module docstring of draw_pressure).
PRESSURE_KNOBS: dict[str, tuple[str, ...]] = {
    "block": ("one", "small", "common"),
    "max_seqs": ("few", "some"),
    "budget": ("tight", "roomy"),
    "threshold": ("off", "below_budget"),
    "requests": ("several", "many"),
    "prompts": ("short", "blocks"),
    "outs": ("long", "mixed"),
    "arrivals": ("waves", "trickle", "during"),
    "priorities": ("two", "few", "distinct", "wide", "urgent_late"),
    "pool": ("barely_one", "one_plus", "tight"),
    "prefix_caching": ("on", "off"),
    "watermark": ("zero", "low"),
}

#: The work of a pressure case within about this many steps (its requests one after another).
STEP_BOUND_PRESSURE = 900


def _pressure_arrivals(r: random.Random, region: str, n: int) -> list[int]:
    """Arrival steps, in request order: a first group at step 0 (at least two requests, so that
    some run before the others come), the rest while those run."""
    first = r.randint(2, max(2, n // 2))
    if region == "waves":
        starts = [0]
        for _ in range(r.randint(1, 3)):
            starts.append(starts[-1] + r.randint(5, 60))
        later = sorted(r.choice(starts[1:]) + r.randint(0, 2) for _ in range(n - first))
    elif region == "trickle":
        later, t = [], 0
        for _ in range(n - first):
            t += r.randint(1, 15)
            later.append(t)
    else:  # during: all within the first group's decodes
        later = sorted(r.randint(1, 40) for _ in range(n - first))
    return [0] * first + later


def _pressure_priorities(r: random.Random, region: str, n: int, first: int) -> list[int]:
    """Each request's priority (smaller first) under ``region``: PRIORITY_MODES' patterns but
    ``equal``, and ``urgent_late``: the requests that arrive after the first group more urgent,
    on the whole, than those they find running (so a victim is requeued behind them)."""
    if region == "urgent_late":
        return ([r.randint(0, 5) for _ in range(first)]
                + [r.randint(-5, 2) for _ in range(n - first)])
    return _priorities(r, region, n)


def draw_pressure(seed: int, index: int) -> tuple[dict, dict[str, str]]:
    """Case ``index`` of ``seed`` of the kind pressure and the region of each
    of its knobs (``PRESSURE_KNOBS``), from ``random.Random(seed * 1_000_003
    + index + PRESSURE_OFFSET)``. Every case is asynchronous (``"async":
    true``: vLLM 0.33.0's default AsyncScheduler) under the priority policy,
    a region of the space that space-all reaches rarely (about one case in
    fifteen of its asynchronous priority cases preempts): few sequences,
    many requests with long decodes, arriving in groups while the first ones
    run, and a pool a little above what the largest request needs, so that
    decodes run out of blocks, the victim is the running (or parked)
    request with the largest (priority, arrival), and the order in which a
    victim and the requests that came while it ran are admitted again
    decides who runs.

    - ``block``: ``one`` (1), ``small`` (2-7), ``common`` (8 or 16);
    - ``max_seqs``: ``few`` (2-4), ``some`` (5-12);
    - ``budget``: ``tight`` (max_seqs to 64), ``roomy`` (65-512; at least max_seqs);
    - ``threshold``: ``off``, ``below_budget`` (2 to budget - 1, when the budget is above 2);
    - ``requests``: ``several`` (6-12), ``many`` (13-24);
    - ``prompts``: ``short`` (1 to 2 blocks), ``blocks`` (1 to 8 blocks);
    - ``outs``: ``long`` (30-200), ``mixed`` (1-200, a third of them 1-8);
    - ``arrivals``: a first group at step 0 (2 to half the requests), then
      ``waves`` (one to three groups 5-60 steps apart), ``trickle`` (one
      every 1-15 steps), ``during`` (each within steps 1-40);
    - ``priorities``: ``two``, ``few``, ``distinct``, ``wide`` (as space-all
      draws them) or ``urgent_late`` (the first group 0..5, the later ones
      -5..2);
    - ``pool``: the usable blocks against the largest request's need and the
      sum of all: ``barely_one`` (the need), ``one_plus`` (need + 1..3),
      ``tight`` (need up to need + (total - need) / 4);
    - ``prefix_caching``: ``on``, ``off``;
    - ``watermark``: ``zero`` or ``low`` (0.01-0.1).

    Every case is one vLLM 0.33.0 accepts and finishes: every request fits
    the cache alone, max_model_len the driver's default."""
    r = random.Random(seed * 1_000_003 + index + PRESSURE_OFFSET)
    regions = {knob: r.choice(names) for knob, names in PRESSURE_KNOBS.items()}
    block = {"one": lambda: 1, "small": lambda: r.randint(2, 7), "common": lambda: r.choice((8, 16))}[regions["block"]]()
    max_seqs = r.randint(2, 4) if regions["max_seqs"] == "few" else r.randint(5, 12)
    budget = r.randint(max_seqs, 64) if regions["budget"] == "tight" else r.randint(max(65, max_seqs), 512)
    if regions["threshold"] == "below_budget" and budget > 2:
        chunk = r.randint(2, budget - 1)
    else:
        regions["threshold"], chunk = "off", 0
    n = r.randint(6, 12) if regions["requests"] == "several" else r.randint(13, 24)
    arrivals = _pressure_arrivals(r, regions["arrivals"], n)
    first = arrivals.count(0)
    most = 2 if regions["prompts"] == "short" else 8
    requests = []
    for k in range(n):
        prompt = r.randint(1, most * block)
        if regions["outs"] == "long":
            out = r.randint(30, 200)
        else:
            out = r.randint(1, 8) if r.random() < 1 / 3 else r.randint(1, 200)
        requests.append([prompt, out, arrivals[k]])
    first_chunk = min(chunk, budget) if chunk else budget
    steps = sum(math.ceil(p / first_chunk) + o for p, o, _ in requests)
    if steps > STEP_BOUND_PRESSURE:
        share = STEP_BOUND_PRESSURE / steps
        for q in requests:
            q[1] = max(1, int(q[1] * share)) if q[1] > 8 else q[1]
    needs = [blocks_needed(p, o, block) for p, o, _ in requests]
    need, total = max(needs), sum(needs)
    if regions["pool"] == "barely_one":
        usable = need
    elif regions["pool"] == "one_plus":
        usable = need + r.randint(1, 3)
    else:
        usable = r.randint(need, need + max(0, (total - need) // 4))
    case = _case({"budget": budget, "max_seqs": max_seqs, "block_size": block, "chunk": chunk}, usable, chunk,
                 regions["prefix_caching"] == "on", requests)
    case["policy"] = "priority"
    values = _pressure_priorities(r, regions["priorities"], n, first)
    case["requests"] = [dict(q, priority=v) for q, v in zip(case["requests"], values)]
    if regions["watermark"] == "low":
        case["watermark"] = round(r.uniform(0.01, 0.1), 2)
    case["async"] = True
    return case, regions


def scenario_pressure(seed: int, index: int) -> dict:
    """Case ``index`` of ``seed`` of the kind pressure."""
    return draw_pressure(seed, index)[0]


def regions_pressure(seed: int, index: int) -> dict[str, str]:
    """The regions case ``index`` of ``seed`` of the kind pressure was drawn from."""
    return draw_pressure(seed, index)[1]
