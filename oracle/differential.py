"""The step engine against the serQ reference implementation (pyserq) on
scenarios of the oracle program's shape (issue 9; docs/campaigns.md, "The
step engine against pyserq").

A scenario is a dict of ../shared/oracle/README.md's form (budget, max_seqs,
block_size, num_blocks, chunk, serve, requests of prompt, out, arrive). Its
program is the one-request program (oracle.scenario.request_program):
examples/oracle/vllm_request.sq compiled with the scenario's engine, the
requests as explicit sessions, exactly the reference compiler's IR. Both engines run that one IR;
each answers, per request (the session's serial is its index in
``requests``), the times of its ``first`` and ``done`` observations, with the
kv pool's preemptions and the step stage's iterations. pyserq's report keeps
every observation's samples with their sessions (``Observe.sessions``,
``Observe.times``), so one run gives every request's answer.

The space of scenarios is written once (``build_scenario``) over two ways of
choosing a number: Hypothesis's (tests/test_step_differential.py) and a
seeded ``random.Random`` (the campaign, reproducible byte for byte). A
disagreement is minimised greedily (``minimise``): fewer requests, smaller
numbers, earlier arrivals, a plainer engine, as long as the two still differ.

pyserq is a test-only dependency; this module imports it only through
oracle.peer, and only when a scenario runs on it.
"""

from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass
from typing import Callable

from semantics import ir

#: Every serve order of the space: None is no `serve` clause (admission order).
SERVE_ORDERS: tuple[str | None, ...] = (
    None, "admission", "-admission", "decoding ? 1 : 0", "decoding ? 0 : 1", "remaining", "-remaining")
BLOCK_SIZES = (4, 8, 16)

#: The step stage and the pool whose figures are compared.
STAGE, POOL = "vllm", "kv"


@dataclass(frozen=True)
class Answer:
    """One engine's answer: each request's first-token and done times (a
    tuple per serial, every sample of that serial in the order taken), the kv
    pool's preemptions, the step stage's iterations."""

    first: dict[int, tuple[float, ...]]
    done: dict[int, tuple[float, ...]]
    preemptions: int
    iterations: int

    def as_json(self) -> dict:
        def times(d: dict[int, tuple[float, ...]]) -> dict[str, object]:
            return {str(k): (v[0] if len(v) == 1 else list(v)) for k, v in sorted(d.items())}
        return {"first": times(self.first), "done": times(self.done),
                "preemptions": self.preemptions, "iterations": self.iterations}


def by_serial(sessions, times) -> dict[int, tuple[float, ...]]:
    out: dict[int, list[float]] = {}
    for serial, time in zip(sessions, times):
        out.setdefault(int(serial), []).append(float(time))
    return {k: tuple(v) for k, v in out.items()}


# --------------------------------------------------------------------------
# the space of scenarios
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Space:
    """Where a scenario's numbers are drawn from."""

    name: str
    budgets: tuple[tuple[int, int], ...]  # ranges of budgets, one picked first
    block_sizes: tuple[int, ...]
    requests: int  # one to this many
    prompt: int  # 1 to this many tokens
    out: int
    soon: int  # half the requests arrive at 0..soon, the other half at 0..late
    late: int
    slack: tuple[int, ...]  # blocks beyond what the largest request alone needs
    chunks: tuple[tuple[int, int], ...]  # ranges of chunk caps besides 0 (none)
    max_seqs: int  # 1 to this many


#: the issue's space: budgets 16-128; blocks of 4, 8 or 16; one to eight
#: requests of 1-96 prompt and 1-40 output tokens, arriving at steps 0-24
#: (half of them at 0-3, so that they meet); max_seqs 1-8; a chunk cap of 0
#: (none) or 8-64; the pool from tight (the largest request alone just fits:
#: prompt + out <= usable blocks x block size) to twenty blocks more
ISSUE = Space("issue", ((16, 128),), (4, 8, 16), 8, 96, 40, 3, 24, (0, 0, 1, 2, 4, 8, 20), ((8, 64),), 8)
#: a wider one: budgets 1-16 or 16-256 (a budget below a block, below the
#: chunk), blocks of 1 to 32, chunk caps 1-8 or 8-128, up to ten requests of
#: up to 200 + 60 tokens arriving up to step 60, max_seqs 1-12
WIDE = Space("wide", ((1, 16), (16, 256)), (1, 2, 4, 8, 16, 32), 10, 200, 60, 5, 60, (0, 0, 1, 3, 10, 50),
             ((1, 8), (8, 128)), 12)


def build_scenario(integer: Callable[[int, int], int], choice: Callable[[tuple], object], space: Space = ISSUE) -> dict:
    """A scenario of the oracle program's shape from ``space``, each number
    chosen by ``integer(lo, hi)`` (inclusive) or ``choice(options)``; any
    serve order."""
    def one(options: tuple):
        return options[0] if len(options) == 1 else choice(options)

    budget = integer(*one(space.budgets))
    block_size = choice(space.block_sizes)
    n = integer(1, space.requests)
    requests = []
    for _ in range(n):
        prompt = integer(1, space.prompt)
        out = integer(1, space.out)
        late = integer(0, 1)
        arrive = integer(0, space.late) if late else integer(0, space.soon)
        requests.append({"prompt": prompt, "out": out, "arrive": arrive})
    need = max(-(-(r["prompt"] + r["out"]) // block_size) for r in requests)
    slack = choice(space.slack)
    chunk = choice((0, integer(*one(space.chunks))))
    scenario = {"budget": budget, "max_seqs": integer(1, space.max_seqs), "block_size": block_size,
                "num_blocks": need + slack + 1, "chunk": chunk}
    serve = choice(SERVE_ORDERS)
    if serve is not None:
        scenario["serve"] = serve
    scenario["requests"] = requests
    return scenario


def random_scenario(rng: random.Random, space: Space = ISSUE) -> dict:
    return build_scenario(rng.randint, lambda options: options[rng.randrange(len(options))], space)


def fits_alone(scenario: dict) -> bool:
    usable = (scenario["num_blocks"] - 1) * scenario["block_size"]
    return all(r["prompt"] + r["out"] <= usable for r in scenario["requests"])


# --------------------------------------------------------------------------
# the two engines
# --------------------------------------------------------------------------

def program_of(scenario: dict) -> ir.Program:
    """The scenario's IR (oracle.scenario.request_program)."""
    from .scenario import request_program

    return request_program(scenario, "<scenario>", json.dumps(scenario)).program


def answer_here(program: ir.Program) -> Answer:
    """serq-ref's fast engine (semantics.fast.run: the small-step definition's results, byte for byte)."""
    from semantics import fast

    result = fast.run(program)
    observes = {record.name: record for record in result.observes}

    def samples(name: str) -> dict[int, tuple[float, ...]]:
        record = observes.get(name)
        rows = record.samples if record else ()
        return by_serial([serial for _, serial, _, _ in rows], [time for time, _, _, _ in rows])

    stage = next(s for s in result.stages if s.name == STAGE)
    pool = next(p for p in result.pools if p.name == POOL)
    return Answer(samples("first"), samples("done"), pool.preemptions, stage.iterations)


def answer_on_pyserq(program: ir.Program) -> Answer:
    """pyserq's run of the same IR (oracle.peer): the samples' sessions and
    times of each observation."""
    from oracle.peer import run_on_pyserq

    report = run_on_pyserq(program)
    observes = report.observes

    def samples(name: str) -> dict[int, tuple[float, ...]]:
        if name not in observes:
            return {}
        observe = observes[name]
        return by_serial(observe.sessions, observe.times)

    return Answer(samples("first"), samples("done"), report.pool(POOL).preemptions,
                  report.stage(STAGE).iterations)


#: What a scenario exercised in serq-ref's run (its step trace), by name.
FEATURES = {
    "preemption": "a pool/preempt on kv",
    "preempted_decode": "a victim preempted while decoding (its re-executed hold reads computed + 1)",
    "preempted_twice": "a request preempted twice",
    "withdraw": "step/withdraw: a victim the iteration had already served gives its tokens back",
    "withdraw_decode": "step/withdraw of a decoding victim (where a position advanced at scheduling would show)",
    "self_preemption": "step/grow preempted the grower itself (the pass ends)",
    "empty_iteration": "the iteration that only preempted (no token)",
    "admit_stop": "step/admit-stop: a head that does not fit the kv pool stops the admissions",
    "seq_cap": "step/admit-stop for want of a request slot (reqs full)",
    "chunked": "a prefill given fewer tokens than it has left",
}


def features(program: ir.Program, max_seqs: int) -> set[str]:
    """The FEATURES serq-ref's run of ``program`` (its request slots
    ``max_seqs``) exercised, from its step trace (docs/step-trace.md)."""
    from semantics.smallstep import driver

    seen: set[str] = set()
    mode: dict[int, str] = {}
    preempted: dict[int, int] = {}
    prefills: dict[int, int] = {}
    slots = 0
    for record in driver.trace(program):
        rule = record["rule"]
        if rule == "step/schedule":
            mode[record["session"]] = record["mode"]
            if record["mode"] == "prefill" and record["tokens"] > 0:
                prefills[record["job"]] = prefills.get(record["job"], 0) + 1
                if prefills[record["job"]] > 1:
                    seen.add("chunked")
        elif rule in ("pool/admit", "pool/release") and record["pool"] == "reqs":
            slots += 1 if rule == "pool/admit" else -1
        elif rule == "pool/preempt" and record["pool"] == POOL:
            seen.add("preemption")
            serial = record["session"]
            preempted[serial] = preempted.get(serial, 0) + 1
            if preempted[serial] > 1:
                seen.add("preempted_twice")
            if mode.get(serial) == "decode":
                seen.add("preempted_decode")
        elif rule == "step/withdraw":
            seen.add("withdraw")
            if mode.get(record["session"]) == "decode":
                seen.add("withdraw_decode")
        elif rule == "step/grow" and record["outcome"] == "preempted":
            seen.add("self_preemption")
        elif rule == "step/iteration" and record["tokens"] == 0:
            seen.add("empty_iteration")
        elif rule == "step/admit-stop":
            seen.add("seq_cap" if slots >= max_seqs else "admit_stop")
    return seen


@dataclass(frozen=True)
class Outcome:
    scenario: dict
    here: Answer
    pyserq: Answer

    @property
    def agree(self) -> bool:
        return self.here == self.pyserq

    def differences(self) -> list[str]:
        """One line per figure that differs: the request, both answers."""
        lines = []
        for field in ("first", "done"):
            a, b = getattr(self.here, field), getattr(self.pyserq, field)
            for serial in sorted(set(a) | set(b)):
                if a.get(serial) != b.get(serial):
                    lines.append(f"request {serial} {field}: serq-ref {list(a.get(serial, ()))}, "
                                 f"pyserq {list(b.get(serial, ()))}")
        for field in ("preemptions", "iterations"):
            a, b = getattr(self.here, field), getattr(self.pyserq, field)
            if a != b:
                lines.append(f"{field}: serq-ref {a}, pyserq {b}")
        return lines


def compare(scenario: dict) -> Outcome:
    program = program_of(scenario)
    return Outcome(scenario, answer_here(program), answer_on_pyserq(program))


# --------------------------------------------------------------------------
# minimising a disagreement
# --------------------------------------------------------------------------

def _smaller(v: int, floor: int) -> list[int]:
    """Smaller values to try for ``v``, smallest first: the floor, half,
    three quarters, one less."""
    return sorted(x for x in {floor, v // 2, v - v // 4, v - 1} if floor <= x < v)


def _candidates(s: dict):
    """Simpler scenarios than ``s``, simplest first (each one change)."""
    reqs = s["requests"]
    for k in range(len(reqs)):
        if len(reqs) > 1:
            yield {**s, "requests": reqs[:k] + reqs[k + 1:]}
    if "serve" in s:
        yield {k: v for k, v in s.items() if k != "serve"}
    if s.get("chunk", 0):
        yield {**s, "chunk": 0}
    need = max(-(-(r["prompt"] + r["out"]) // s["block_size"]) for r in reqs)
    if s["num_blocks"] > need + 1:  # the tightest pool every request still fits alone
        yield {**s, "num_blocks": need + 1}
    for key, floor in (("max_seqs", 1), ("budget", 1), ("num_blocks", 2), ("chunk", 1)):
        v = s.get(key, 0)
        if v > floor:
            for smaller in _smaller(v, floor):
                yield {**s, key: smaller}
    if s["block_size"] > 1:
        yield {**s, "block_size": s["block_size"] // 2, "num_blocks": 2 * (s["num_blocks"] - 1) + 1}
    for k, r in enumerate(reqs):
        for key, floor in (("arrive", 0), ("prompt", 1), ("out", 1)):
            for smaller in _smaller(r[key], floor):
                yield {**s, "requests": reqs[:k] + [{**r, key: smaller}] + reqs[k + 1:]}
    # earliest arrival at 0, everything shifted with it
    first = min(r["arrive"] for r in reqs)
    if first > 0:
        yield {**s, "requests": [{**r, "arrive": r["arrive"] - first} for r in reqs]}


def minimise(scenario: dict, differs: Callable[[dict], bool] | None = None, budget: int = 2000) -> dict:
    """A locally minimal scenario that still differs (every one-change
    simplification of it agrees, or fits no more), trying at most ``budget``
    candidates."""
    if differs is None:
        def differs(s: dict) -> bool:
            return not compare(s).agree
    current, tries = scenario, 0
    progress = True
    while progress and tries < budget:
        progress = False
        for candidate in _candidates(current):
            if not fits_alone(candidate):
                continue
            tries += 1
            if differs(candidate):
                current, progress = candidate, True
                break
            if tries >= budget:
                break
    return current


# --------------------------------------------------------------------------
# a campaign
# --------------------------------------------------------------------------

def campaign(seed: int, count: int, progress: Callable[[int, int], None] | None = None,
             space: Space = ISSUE) -> dict:
    """``count`` scenarios of ``space`` from ``random.Random(seed)``, each run by both
    engines; every disagreement minimised; how many scenarios exercised each
    of FEATURES. The result is data with no times or dates, the same for the
    same code, seed and count."""
    rng = random.Random(seed)
    agreed = requests = 0
    exercised = {name: 0 for name in FEATURES}
    disagreements = []
    for k in range(count):
        scenario = random_scenario(rng, space)
        requests += len(scenario["requests"])
        program = program_of(scenario)
        outcome = Outcome(scenario, answer_here(program), answer_on_pyserq(program))
        for name in features(program, scenario["max_seqs"]):
            exercised[name] += 1
        if outcome.agree:
            agreed += 1
        else:
            small = minimise(scenario)
            small_outcome = compare(small)
            disagreements.append({"index": k, "scenario": scenario, "differences": outcome.differences(),
                                  "minimal": small, "serq_ref": small_outcome.here.as_json(),
                                  "pyserq": small_outcome.pyserq.as_json(),
                                  "minimal_differences": small_outcome.differences()})
        if progress:
            progress(k + 1, len(disagreements))
    return {"space": dataclasses.asdict(space), "seed": seed, "scenarios": count, "requests": requests, "agreed": agreed,
            "disagreed": count - agreed, "exercised": exercised,
            "features": FEATURES, "disagreements": disagreements}
