"""KV-connector cases for the campaign against the real vLLM scheduler (issue 20, section 2).

Each case is a scenario of a decode instance whose requests' prompts were
prefilled elsewhere (``remote``: the prompt tokens loaded through the KV
connector, ``kv_delay``: the steps the transfer takes; docs/oracle.md,
docs/design/kv-connector.md). Plain Python and deterministic: case
``index`` of ``seed`` comes from its own ``random.Random(seed * 1_000_003 +
index + KV_OFFSET)``, a stream apart from the other generators', so any one
case can be drawn again alone.

The knobs and their regions (``draw`` returns the case and the region of each):

- ``remote``: what each request loads: ``whole`` (its whole prompt, NIXL's
  pull), ``partial`` (a prefix of it, 1 .. prompt - 1 tokens), ``mixed``
  (each request whole, partial or local), ``some_local`` (whole, and about a
  third of the requests local: no ``remote``);
- ``delay``: the steps a transfer takes: ``zero``, ``short`` (1-3), ``long``
  (4-40), ``mixed`` (each request 0-40);
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
  ``spread`` (0-150);
- ``pool``: the usable blocks against the largest request's need ``need``
  and the sum of the needs ``total``: ``tight`` (need .. need + 3),
  ``some`` (up to (need + total) / 2), ``loose`` (total + 1 ..);
- ``prefix_caching``: ``on``, ``off``;
- ``shared``: ``none`` (4 in 5: every prompt its own), ``system`` (a system
  prompt at the head of every request, ``prompt_segments``: a local prefix
  hit the connector is told of, and loads only past it);
- ``mode``: ``sync``, ``async``.

Every case is one vLLM 0.33.0 accepts: budget >= max_seqs, the threshold
at most max_model_len (8192), every request fits the pool alone.

    python -m oracle.record kv-connector --count 2000 --seed 1 [--processes 2]

(oracle/record.py) records the corpus oracle/data/campaign/kv-connector.jsonl
(one JSON line per case: seed, index, case, answer with ``transfers``) on the
real scheduler.
"""

from __future__ import annotations

import random

from . import campaign_regions as regions

#: Added to a case's stream so that no case shares another generator's stream.
KV_OFFSET = 523_000_000
#: The corpus's file under oracle/data/campaign/.
CORPUS = "kv-connector.jsonl"

KNOBS: dict[str, tuple[str, ...]] = {
    "remote": ("whole", "partial", "mixed", "some_local"),
    "delay": ("zero", "short", "long", "mixed"),
    "block": ("small", "common", "odd"),
    "max_seqs": ("one", "few", "some"),
    "budget": ("small", "medium"),
    "threshold": ("off", "below_budget", "above_budget"),
    "requests": ("few", "several", "many"),
    "outs": ("short", "long"),
    "arrivals": ("together", "staggered", "spread"),
    "pool": ("tight", "some", "loose"),
    "prefix_caching": ("on", "off"),
    "shared": ("none", "system"),
    "mode": ("sync", "async"),
}


def _remote(r: random.Random, region: str, prompt: int) -> int | None:
    """A request's remote tokens under ``region`` (None: a local request)."""
    if region == "mixed":
        region = r.choice(("whole", "partial", "local"))
    elif region == "some_local":
        region = "local" if r.random() < 1 / 3 else "whole"
    if region == "local":
        return None
    if region == "partial" and prompt > 1:
        return r.randint(1, prompt - 1)
    return prompt


def _delay(r: random.Random, region: str) -> int:
    return {"zero": 0, "short": r.randint(1, 3), "long": r.randint(4, 40), "mixed": r.randint(0, 40)}[region]


def draw(seed: int, index: int) -> tuple[dict, dict[str, str]]:
    """Case ``index`` of ``seed`` and the region of each knob it drew."""
    r = random.Random(seed * 1_000_003 + index + KV_OFFSET)
    region = {knob: r.choice(regions) for knob, regions in KNOBS.items()}
    region["shared"] = "system" if r.random() < 0.2 else "none"
    e = regions.engine(r, region)
    bs, n = e.block_size, e.requests
    system = r.randint(1, 4 * bs + 20) if region["shared"] == "system" else 0
    requests = []
    for _ in range(n):
        prompt = system + r.randint(1, 6 * bs + 40)
        req = {"prompt": prompt, "out": r.randint(1, 8) if region["outs"] == "short" else r.randint(9, 60)}
        regions.arrive(r, region["arrivals"], req)
        if system:
            req["prompt_segments"] = [["sys", system]]
        remote = _remote(r, region["remote"], prompt)
        if remote is not None:
            req["remote"] = remote
            req["kv_delay"] = _delay(r, region["delay"])
        requests.append(req)
    if not any("remote" in q for q in requests):  # a case of the connector has a request that loads
        requests[0]["remote"] = requests[0]["prompt"]
        requests[0]["kv_delay"] = _delay(r, region["delay"])
    return regions.case(r, region, e, requests, ("prompt", "out", "arrive", "prompt_segments", "remote", "kv_delay")), region


def scenario(seed: int, index: int) -> dict:
    """Case ``index`` of ``seed`` (``draw`` without the regions)."""
    return draw(seed, index)[0]
