"""Random cases for the campaign against the real vLLM scheduler (issue 10).

Plain Python and deterministic: case ``index`` of seed ``seed`` is drawn from
its own ``random.Random(seed * 1_000_003 + index)``, so any one case can be
drawn again without the others, on any machine.

Two kinds, each a JSON object the driver (oracle/real/driver.py) answers:

- ``scenario(seed, index)``: the format of ../shared/oracle/vllm/NAME.json
  (budget, max_seqs, block_size, num_blocks, chunk, prefix_caching, one to
  eight requests with prompt, out and arrive). Pools run from tight (a
  request's worth of blocks and a little more: preemptions, self-preemption,
  head-of-line blocking) through medium to loose (1000 blocks), budgets from
  16 to 2048 tokens, max_seqs from 1 to 64, the long-prefill threshold 0 or a
  cap, prefix caching on or off, arrivals staggered over 40 steps. Every
  request fits the pool alone: its prompt and all but its last output token,
  in blocks, are at most the usable blocks (num_blocks - 1; vLLM serves no
  request larger than its cache: it refuses prompts over max_model_len and
  does not start a cache that cannot hold one). budget >= max_seqs, as
  vLLM's SchedulerConfig requires.
- ``serve_scenario(seed, index)``: a scenario with a serve-by key
  (admission, -admission, decoding ? 1 : 0, decoding ? 0 : 1), answered by
  vLLM's priority path with its running list re-sorted by the key.
- ``priority_scenario(seed, index)``: a scenario drawn as ``scenario``
  draws it, under vLLM's priority policy with a priority per request: all
  equal, two values, a few values in -3..3, all distinct (negative among
  them), or wide (-10^6..10^6), so that ties, negative priorities and every
  request its own priority all occur (docs/design/priorities-and-limits.md).
- ``limits_scenario(seed, index)``: a scenario drawn as ``scenario`` draws
  it, with a deployment's limits: ``max_model_len`` (three in four cases:
  below the largest prompt, so some prompts are refused; above it but below
  a prompt plus its output, so some requests end at the limit; or 1024 to
  8192, so that small caches are refused at start), the long-prefill
  threshold kept within it as vLLM requires; without one, sometimes a
  request that could never finish in the cache (refused under the recorded
  convention); and a ``watermark`` (0 in two cases of five, else 0.01 to
  0.5).
- ``spec_scenario(seed, index)``: a scenario drawn as ``scenario`` draws it,
  with speculative decoding: 1 to 8 draft tokens and an acceptance pattern
  per request (docs/design/speculative-decoding.md), synchronous or
  asynchronous.
- ``replay(seed, index)``: a small multi-turn trace (one to six sessions of
  one to five turns, the columns session,turn,new,out,think,forced as CSV
  text) with spacing, budget, max_seqs, blocks (usable, block size 16) and a
  chunk cap, replayed with the prefix cache on under the replay protocol of
  ../shared/oracle/README.md. Each turn's prompt extends the previous one;
  in tight pools half the turns generate 8 to 48 tokens, so decodes grow;
  about one turn in seven is a forced miss (forced = 1: a nonce at the head
  of the prompt, which the session's later turns keep). Pools are tight to
  medium, caps small, so turns queue, evict each other's prefixes and are
  preempted.
"""

from __future__ import annotations

import math
import random

SCENARIO_MAX_MODEL_LEN = 8192


def _rng(seed: int, index: int) -> random.Random:
    return random.Random(seed * 1_000_003 + index)


def blocks_needed(prompt: int, out: int, block_size: int) -> int:
    """The blocks a request holds at its largest: its prompt and every output
    token but the last (the last is sampled, never computed)."""
    return math.ceil((prompt + out - 1) / block_size)


def _prompt(r: random.Random) -> int:
    size = r.choices(("small", "medium", "large"), weights=(3, 4, 2))[0]
    if size == "small":
        return r.randint(1, 40)
    if size == "medium":
        return r.randint(41, 200)
    return r.randint(201, 600)


def scenario(seed: int, index: int) -> dict:
    """Scenario ``index`` of ``seed`` (module docstring)."""
    r = _rng(seed, index)
    regime = r.choices(("tight", "medium", "loose"), weights=(45, 35, 20))[0]
    block_size = r.choices((16, 8, 32), weights=(70, 15, 15))[0]
    n = r.randint(1, 8)
    requests = []
    for _ in range(n):
        if regime == "tight" and r.random() < 0.6:
            # long outputs grow the KV past the admission's reserve: preemptions
            out = r.randint(10, 80)
        else:
            out = r.choice((1, 2, 3, r.randint(1, 12), r.randint(1, 40)))
        request = {"prompt": _prompt(r), "out": out}
        mode = r.random()
        if mode < 0.3:
            pass  # arrives before step 1
        elif mode < 0.6:
            request["arrive"] = r.randint(0, 6)
        else:
            request["arrive"] = r.randint(0, 40)
        requests.append(request)
    need = max(blocks_needed(q["prompt"], q["out"], block_size) for q in requests)
    if regime == "tight":
        usable = need + r.randint(0, 2)
        budget = r.choice((16, 24, 32, 48, 64, 100))
        max_seqs = r.randint(1, min(8, budget))
    elif regime == "medium":
        usable = need + r.randint(max(1, need // 2), 2 * need + 4)
        budget = r.choice((32, 64, 128, 256))
        max_seqs = r.randint(1, 8)
    else:
        usable = 999
        budget = r.choice((256, 512, 1024, 2048))
        max_seqs = r.choice((4, 16, 64))
    mode = r.random()
    if mode < 0.5:
        chunk = 0
    elif mode < 0.9:
        chunk = r.randint(1, min(budget, 128))
    else:
        chunk = r.randint(budget, budget + 64)
    return {
        "kind": "scenario",
        "budget": budget,
        "max_seqs": max_seqs,
        "block_size": block_size,
        "num_blocks": usable + 1,
        "chunk": chunk,
        "prefix_caching": r.random() < 0.5,
        "requests": requests,
    }


def replay(seed: int, index: int) -> dict:
    """Replay ``index`` of ``seed`` (module docstring)."""
    r = _rng(seed, index)
    block_size = 16
    sessions = r.randint(1, 6)
    tight = r.random() < 0.6
    lines = ["session,turn,new,out,think,forced"]
    need = 1
    for s in range(sessions):
        turns = r.randint(1, 5)
        new = r.randint(8, 300)
        for t in range(1, turns + 1):
            if t > 1:
                new += r.randint(1, 200)
            out = r.randint(1, 8) if not tight or r.random() < 0.5 else r.randint(8, 48)
            think = 0.0 if t == turns else r.choice((0.0, 1.0, 2.0, 3.0, 5.0, round(r.uniform(0, 8), 3)))
            forced = int(r.random() < 0.15)
            lines.append(f"{s},{t},{new},{out},{think},{forced}")
            need = max(need, blocks_needed(new, out, block_size))
    blocks = need + (r.randint(0, 4) if tight else r.randint(need // 2 + 1, 3 * need))
    max_seqs = r.randint(1, 6)
    budget = max(max_seqs, r.choice((16, 32, 48, 64, 128, 256)))
    chunk = 0 if r.random() < 0.8 else r.randint(8, 128)
    return {
        "kind": "replay",
        "trace": "\n".join(lines) + "\n",
        "spacing": r.choice((0, 1, 2, 3, 5, 8, 12, round(r.uniform(0, 10), 2))),
        "budget": budget,
        "max_seqs": max_seqs,
        "blocks": blocks,
        "block_size": block_size,
        "chunk": chunk,
    }


#: The serve-by keys of serve_scenario: the four orders the serve/ oracles
#: and docs/design/step-engine.md use.
SERVE_KEYS = ("admission", "-admission", "decoding ? 1 : 0", "decoding ? 0 : 1")


def serve_scenario(seed: int, index: int) -> dict:
    """A scenario drawn as ``scenario`` draws it, served by one of SERVE_KEYS
    (a third stream of cases: vLLM's priority path with the running list
    re-sorted, as the serve/ oracles run)."""
    case = scenario(seed, index)
    case["serve"] = _rng(seed, index + 500_000_000).choice(SERVE_KEYS)
    return case


#: How priority_scenario draws the priorities of a case's requests.
PRIORITY_MODES = ("equal", "two", "few", "distinct", "wide")


def priority_scenario(seed: int, index: int) -> dict:
    """A scenario drawn as ``scenario`` draws it, under the priority policy
    with a priority per request (PRIORITY_MODES; module docstring)."""
    case = scenario(seed, index)
    r = _rng(seed, index + 700_000_000)
    mode = r.choice(PRIORITY_MODES)
    n = len(case["requests"])
    if mode == "equal":
        values = [r.randint(-2, 2)] * n
    elif mode == "two":
        pair = r.sample(range(-3, 4), 2)
        values = [r.choice(pair) for _ in range(n)]
    elif mode == "few":
        values = [r.randint(-3, 3) for _ in range(n)]
    elif mode == "distinct":
        values = r.sample(range(-n, n + 1), n)
    else:
        values = [r.randint(-1_000_000, 1_000_000) for _ in range(n)]
    case["policy"] = "priority"
    case["requests"] = [dict(q, priority=v) for q, v in zip(case["requests"], values)]
    return case


def limits_scenario(seed: int, index: int) -> dict:
    """A scenario drawn as ``scenario`` draws it, with max_model_len and a
    watermark, or a request that never fits (module docstring)."""
    case = scenario(seed, index)
    r = _rng(seed, index + 800_000_000)
    requests = case["requests"]
    largest = max(q["prompt"] for q in requests)
    usable = case["num_blocks"] - 1
    if r.random() < 0.75:
        mode = r.choice(("below", "between", "large"))
        if mode == "below":
            length = r.randint(max(2, min(q["prompt"] for q in requests) // 2), largest)
        elif mode == "between":
            length = r.randint(largest + 1, largest + max(q["out"] for q in requests) + 16)
        else:
            length = r.choice((1024, 2048, 4096, SCENARIO_MAX_MODEL_LEN))
        case["max_model_len"] = length
        # vLLM refuses a long-prefill threshold above max_model_len (config/scheduler.py:355-360)
        case["chunk"] = min(case["chunk"], length)
    elif r.random() < 0.5:
        # a request that could never finish in the cache: the prompt alone, or with its output
        block_size = case["block_size"]
        if r.random() < 0.5:
            big = {"prompt": usable * block_size + r.randint(1, 64), "out": r.randint(1, 8)}
        else:
            prompt = r.randint(1, usable * block_size)
            big = {"prompt": prompt, "out": usable * block_size - prompt + 1 + r.randint(1, 32)}
        if r.random() < 0.5:
            big["arrive"] = r.randint(0, 10)
        requests.insert(r.randint(0, len(requests)), big)
    if r.random() >= 0.4:
        case["watermark"] = round(r.uniform(0.01, 0.5), 2)
    return case


#: How spec_scenario draws a request's acceptance pattern.
ACCEPT_MODES = ("none", "all", "constant", "cycle", "mixed")


def spec_scenario(seed: int, index: int) -> dict:
    """A scenario drawn as ``scenario`` draws it, with speculative decoding
    (docs/design/speculative-decoding.md): ``spec_tokens`` K from 1 to 8 and an
    acceptance pattern per request, drawn by a mode (ACCEPT_MODES): none
    accepted (no ``accept``, the default [0]), all K, one constant of 0..K,
    a cycle of 2 to 4 values of 0..K, or each request its own of those;
    synchronous or asynchronous (half each). Prompts are at least 2 tokens: a
    waiting request with one token to compute is padded to 1 + K rows
    (vllm/v1/core/sched/scheduler.py:1308-1330), which serq-ref does not model."""
    case = scenario(seed, index)
    r = _rng(seed, index + 900_000_000)
    k = r.randint(1, 8)
    mode = r.choice(ACCEPT_MODES)

    def pattern(how: str) -> list[int] | None:
        if how == "none":
            return None
        if how == "all":
            return [k]
        if how == "constant":
            return [r.randint(0, k)]
        return [r.randint(0, k) for _ in range(r.randint(2, 4))]

    requests = []
    for q in case["requests"]:
        q = dict(q, prompt=max(2, q["prompt"]))
        accept = pattern(r.choice(ACCEPT_MODES[:4]) if mode == "mixed" else mode)
        if accept is not None:
            q["accept"] = accept
        requests.append(q)
    case["requests"] = requests
    case["spec_tokens"] = k
    if r.random() < 0.5:
        case["async"] = True
    return case


def as_job(case: dict) -> dict:
    """The driver job of a case (a case is already one)."""
    return dict(case)


#: spec_edges_scenario's drafters (oracle/real/driver.py's SPEC_METHODS): lookahead slots and draft slots (0, 0),
#: (K, 1) and (K, K).
SPEC_METHODS = ("ngram", "draft_model", "parallel_draft_model")


def spec_edges_scenario(seed: int, index: int) -> dict:
    """A spec_scenario case pushed to the edges speculative decoding's first
    corpus left out (docs/design/speculative-decoding.md, section 8): the
    drafter (SPEC_METHODS: lookahead slots and a draft-slot budget), one-token
    prompts (a waiting request with one token left, padded to 1 + K,
    vllm/v1/core/sched/scheduler.py:1308-1330; a resumed request whose cache
    hit leaves it one token occurs with prefix caching, drawn more often
    here), and a max_model_len near a request's prompt + out (the drafts
    clamped, scheduler.py:851-857), from below the largest prompt (refusals)
    to far above it. The KV cache holds one request of max_model_len (else
    vLLM refuses to start) and every request alone with its last drafts and
    lookahead. The long-prefill threshold is 0 or at least 1 + K: below it a
    padded request fails vLLM 0.33.0's assertion (scheduler.py:1579)."""
    case = spec_scenario(seed, index)
    r = _rng(seed, index + 1_100_000_000)
    k = case["spec_tokens"]
    method = r.choice(SPEC_METHODS)
    lookahead = 0 if method == "ngram" else k
    requests = case["requests"]
    if r.random() < 0.6:  # one-token prompts
        for q in requests:
            if r.random() < 0.5:
                q["prompt"] = 1
    else:
        for q in requests:  # prompts of 1 + a few blocks: a resumed request's hit can leave it one token
            if r.random() < 0.3:
                q["prompt"] = 1 + case["block_size"] * r.randint(1, 3)
    case["prefix_caching"] = r.random() < 0.7
    block_size = case["block_size"]
    need = max(math.ceil((q["prompt"] + q["out"] - 1 + k + lookahead) / block_size) for q in requests)
    usable = max(case["num_blocks"] - 1, need)
    mode = r.random()
    if mode < 0.7:  # near a request's end
        largest = max(x["prompt"] for x in requests)
        q = r.choice(requests) if r.random() < 0.4 else next(x for x in requests if x["prompt"] == largest)
        length = max(largest + 1, q["prompt"] + q["out"] + r.randint(-(k + 2), k + 2))
        if r.random() < 0.1:  # at or below the largest prompt: refusals
            length = r.randint(max(1, largest - k), largest)
        case["max_model_len"] = length
        usable = max(usable, math.ceil(length / block_size))
    elif mode < 0.85:
        case["max_model_len"] = r.choice((256, 1024, SCENARIO_MAX_MODEL_LEN))
        usable = max(usable, math.ceil(case["max_model_len"] / block_size))
    case["num_blocks"] = usable + 1
    chunk = case["chunk"]
    if 0 < chunk < 1 + k:
        chunk = r.choice((0, r.randint(1 + k, max(1 + k, min(case["budget"], 128)))))
    if "max_model_len" in case:
        chunk = min(chunk, case["max_model_len"])  # vLLM refuses a threshold above it
        if 0 < chunk < 1 + k:
            chunk = 0
    case["chunk"] = chunk
    case["spec_method"] = method
    return case
