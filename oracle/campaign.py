"""``serq-ref oracle campaign``: random cases answered by serq-ref and by the
real vLLM 0.33.0 scheduler (or by its recorded answers), every divergence
with the first step at which the two differ and a minimal reproduction.

A case is drawn by oracle/campaign_cases.py (``scenario``, ``serve``: a
scenario with a serve-by key, ``replay``: a small multi-turn trace). serq-ref
answers a scenario with oracle/scenario.py (lib/vllm.sq's engine on the step
clock) and a replay with oracle/replay.py; the real scheduler with
oracle/real/driver.py. The answers compared are the recorded ones: a
scenario's first and done step of every request, its preemptions and steps;
a replay's rows (session, turn, sent, first, done, prompt, cached, out),
times exactly (vLLM's clock adds as oracle/data/README.md says, and so does
serq-ref's).

Both sides follow one rule for a request that preempts itself: vLLM 0.33.0's
(the default: on the priority path the pass goes on past it), or, with
``older_rule``, the older one (the pass ends: seed 001, 0c87a197; the
driver's ``self_preempt_ends_pass``, the records' ``answer_older_rule``;
lib/vllm.sq's ``older_rule = 1``). docs/divergences.md, D1 (fixed).

A case's verdict (``classify``):

- ``agree``: serq-ref's answer is vLLM's under the rule;
- ``D11``: serq-ref's answer is vLLM's when a victim withdrawn from the pass
  that had scheduled it keeps cached only the blocks it computed (serQ's
  rule), where vLLM 0.33.0 also keeps the blocks it allocated for tokens it
  never computed (docs/divergences.md, D11). Decided by asking the real
  scheduler with the driver's ``cache_computed_only`` switch; against
  recorded answers alone, by ``KNOWN``;
- ``differs``: none of these. Each is reported with the lines that differ,
  the first step at which the two differ (the real scheduler's step trace
  beside serq-ref's) and a minimal reproduction (``shrink``: fewest
  requests, smallest numbers, still of the same verdict); both need the real
  scheduler.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from semantics import SERQ_VERSION
from semantics.errors import SerqError, UsageError

from . import campaign_cases, campaign_space

KINDS = ("scenario", "serve", "replay", "space", "priority", "limits", "space-all", "pressure", "spec")
#: speculative decoding's edges (docs/design/speculative-decoding.md, section 8)
KINDS += ("spec-edges",)
DATA = Path(__file__).resolve().parent / "data" / "campaign"
FILES = {"scenario": "scenarios.jsonl", "replay": "replays.jsonl", "serve": "serve.jsonl", "space": "space.jsonl",
         "priority": "priority.jsonl", "limits": "limits.jsonl", "space-all": "space-all.jsonl",
         "pressure": "async-priority-pressure.jsonl", "spec": "spec-decode.jsonl"}
FILES["spec-edges"] = "spec-edges.jsonl"
#: The compared fields of a scenario's answer (``refused`` only when a request was: absent is none).
FIELDS = ("first", "done", "preemptions", "steps", "refused")

AGREE, D11, DIFFERS = "agree", "D11", "differs"
VERDICTS = (AGREE, D11, DIFFERS)
#: What each verdict but agree means, a phrase.
MEANING = {
    D11: "agrees with vLLM when a victim withdrawn from a pass keeps cached only what it computed "
         "(docs/divergences.md, D11)",
    DIFFERS: "differs from vLLM",
}
#: The recorded cases known to diverge for a documented reason that only the
#: real scheduler can confirm (a switch of the driver): (kind, seed, index,
#: rule) -> verdict. Found and confirmed by ``serq-ref oracle campaign`` with
#: vLLM 0.33.0 (docs/divergences.md has each, with its minimal case).
KNOWN = {("serve", 1, 311, "0.33.0"): D11, ("serve", 1, 311, "older rule"): D11}

#: The real scheduler's rules a verdict compares with: the job's switches.
#: "0.33.0" and "older rule" are vLLM's own (``rule_of``); the other two add
#: D11's experiment.
RULES = {"0.33.0": {}, "older rule": {"self_preempt_ends_pass": True},
         "0.33.0, cache computed only": {"cache_computed_only": True},
         "older rule, cache computed only": {"self_preempt_ends_pass": True, "cache_computed_only": True}}


def rule_of(older_rule: bool) -> str:
    """The name in RULES of vLLM's rule that serq-ref follows (lib/vllm.sq's ``older_rule``)."""
    return "older rule" if older_rule else "0.33.0"


# ---------------------------------------------------------------------------
# Drawing and reading cases


def draw(kind: str, seed: int, index: int, asynchronous: bool = False) -> dict:
    """Case ``index`` of ``seed`` as oracle/campaign_cases.py draws it (``space``:
    oracle/campaign_space.py, every knob over its whole range); with
    ``asynchronous`` it says ``"async": true`` (vLLM 0.33.0's default engine,
    the async-*.jsonl files; without, the synchronous engine's). ``space-all``:
    oracle/campaign_space.py's draw_all, which draws the mode itself; ``pressure``: its
    draw_pressure, asynchronous priority cases under memory pressure."""
    case = {"scenario": campaign_cases.scenario, "serve": campaign_cases.serve_scenario,
            "replay": campaign_cases.replay, "space": campaign_space.scenario,
            "priority": campaign_cases.priority_scenario, "limits": campaign_cases.limits_scenario,
            "space-all": campaign_space.scenario_all, "pressure": campaign_space.scenario_pressure,
            "spec": campaign_cases.spec_scenario, "spec-edges": campaign_cases.spec_edges_scenario}[kind](seed, index)
    return {**case, "async": True} if asynchronous else case


def read_recorded(path: str | os.PathLike) -> dict[tuple[int, int], dict]:
    """The records of a campaign file (oracle/data/campaign/*.jsonl), by (seed, index)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {path}: {e}") from None
    records = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            records[(int(record["seed"]), int(record["index"]))] = record
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            raise UsageError(f"{path}:{number}: not a campaign record {{seed, index, case, answer}}") from None
    return records


# ---------------------------------------------------------------------------
# Answers


def _scenario(case: dict) -> dict:
    """A scenario case without the fields only the driver reads."""
    return {k: v for k, v in case.items() if k not in ("kind", "self_preempt_ends_pass", "cache_computed_only",
                                                          "step_trace", "max_steps", "id")}


class _TraceFile:
    """A replay case's trace as a temporary CSV file (oracle/replay.py reads a path)."""

    def __init__(self, case: dict) -> None:
        self.case = case

    def __enter__(self) -> str:
        handle, self.path = tempfile.mkstemp(prefix="serq-campaign-", suffix=".csv")
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            f.write(self.case["trace"])
        return self.path

    def __exit__(self, *exc) -> None:
        os.unlink(self.path)


def serq_answer(kind: str, case: dict, older_rule: bool = False) -> dict:
    """serq-ref's answer to a case, in the compared fields; ``error`` if it
    stopped; ``older_rule``: lib/vllm.sq's switch (a replay serves in
    admission order, where the two rules are one)."""
    from .replay import replay
    from .scenario import run_scenario

    try:
        if kind == "replay":
            with _TraceFile(case) as path:
                rows = replay(path, case["spacing"], case["budget"], case["max_seqs"], case["blocks"],
                              case.get("block_size", 16), None, case.get("chunk", 0) or 0,
                              asynchronous=bool(case.get("async", False)))
            return {"rows": [list(row) for row in rows]}
        return run_scenario(_scenario(case), older_rule=older_rule)
    except SerqError as e:
        return {"error": e.message}


def real_fields(kind: str, answer: dict) -> dict:
    """The compared fields of a driver's (or a recorded) answer; ``error`` if it has none."""
    if "error" in answer:
        return {"error": answer["error"]}
    if answer.get("status", "finished") != "finished":
        return {"error": f"vLLM: {answer['status']}"}
    if kind == "replay":
        return {"rows": answer["rows"]}
    return {key: answer[key] for key in FIELDS if key in answer}


def differences(kind: str, theirs: dict, ours: dict) -> list[str]:
    """One line per request (or figure) whose answers differ."""
    if "error" in theirs or "error" in ours:
        return [f"vLLM: {theirs.get('error', 'answered')}; serq-ref: {ours.get('error', 'answered')}"]
    lines = []
    if kind == "replay":
        columns = ("sent", "first", "done", "prompt", "cached", "out")
        ours_rows = {(r[0], r[1]): r for r in ours["rows"]}
        theirs_rows = {(r[0], r[1]): r for r in theirs["rows"]}
        for key in sorted(set(ours_rows) | set(theirs_rows)):
            a, b = theirs_rows.get(key), ours_rows.get(key)
            if a is None or b is None:
                lines.append(f"session {key[0]} turn {key[1]}: only {'serq-ref' if a is None else 'vLLM'} has it")
            elif list(a) != list(b):
                what = [f"{c} {x!r} vs {y!r}" for c, x, y in zip(columns, a[2:], b[2:]) if x != y]
                lines.append(f"session {key[0]} turn {key[1]}: vLLM vs serq-ref: " + ", ".join(what))
        return lines
    ids = sorted(set(theirs["first"]) | set(theirs["done"]) | set(ours["first"]) | set(ours["done"]), key=int)
    for rid in ids:
        want = (theirs["first"].get(rid), theirs["done"].get(rid))
        got = (ours["first"].get(rid), ours["done"].get(rid))
        if want != got:
            lines.append(f"request {rid}: vLLM first {want[0]} done {want[1]}, serq-ref first {got[0]} done {got[1]}")
    for figure in ("preemptions", "steps"):
        if theirs[figure] != ours[figure]:
            lines.append(f"{figure}: vLLM {theirs[figure]}, serq-ref {ours[figure]}")
    want_refused, got_refused = theirs.get("refused", {}), ours.get("refused", {})
    for rid in sorted(set(want_refused) | set(got_refused), key=int):
        if want_refused.get(rid) != got_refused.get(rid):
            lines.append(f"request {rid}: vLLM refused {want_refused.get(rid)!r}, serq-ref refused {got_refused.get(rid)!r}")
    return lines


def same(a: dict | None, b: dict) -> bool:
    """Whether two answers in the compared fields are equal (a missing one is not)."""
    if a is None or "error" in a or "error" in b:
        return False
    return a == b


def classify(kind: str, ours: dict, real: Callable[[str], dict | None], older_rule: bool = False) -> str:
    """The verdict of serq-ref's answer ``ours`` (under ``older_rule``) given
    ``real(rule)``, the real scheduler's answer under a rule of RULES (None
    when it is not known: a recorded case has no answer with the driver's
    cache_computed_only)."""
    rule = rule_of(older_rule)
    if same(real(rule), ours):
        return AGREE
    if same(real(f"{rule}, cache computed only"), ours):
        return D11
    return DIFFERS


# ---------------------------------------------------------------------------
# Step traces: the first step at which the two differ


def serq_steps(kind: str, case: dict, older_rule: bool = False) -> list[list]:
    """serq-ref's decisions per iteration, as the driver's ``step_trace``
    writes vLLM's: [time, {request id: tokens}, [preempted ids]] (time: a
    scenario's step number, a replay's clock at the iteration's start;
    ids: a scenario's request position, a replay's ``session:turn index``)."""
    from semantics.smallstep.driver import trace

    if kind == "replay":
        from .replay import replay_program, trace_session_numbers

        with _TraceFile(case) as path:
            program, _ = replay_program(path, case["spacing"], case["budget"], case["max_seqs"], case["blocks"],
                                        case.get("block_size", 16), None, case.get("chunk", 0) or 0,
                                        asynchronous=bool(case.get("async", False)))
            numbers = trace_session_numbers(path)
            records = list(trace(program))
    else:
        from .scenario import scenario_program

        program = scenario_program(_scenario(case), older_rule=older_rule)
        numbers = None
        records = trace(program)
    turns: dict[int, int] = {}

    def rid(session: int) -> str:
        return str(session) if numbers is None else f"{numbers[session]}:{turns.get(session, 1) - 1}"

    steps: list[list] = []
    start, tokens, preempted, growing = None, {}, [], {}
    for r in records:
        rule = r["rule"]
        if rule == "session/turn":
            turns[r["session"]] = turns.get(r["session"], 0) + 1
        elif rule == "step/iteration-start":
            start, tokens, preempted, growing = r["time"], {}, [], {}
        elif start is None:
            continue
        elif rule == "step/schedule" and r["tokens"] > 0:
            if r["grow"] == 0:
                tokens[rid(r["session"])] = int(r["tokens"])
            else:
                growing[rid(r["session"])] = int(r["tokens"])
        elif rule == "step/grow" and r["outcome"] == "grew":
            key = rid(r["session"])
            tokens[key] = growing.pop(key)
        elif rule in ("pool/preempt", "step/preempt-parked"):
            preempted.append(rid(r["session"]))
        elif rule == "step/withdraw":
            tokens.pop(rid(r["session"]), None)
        elif rule == "step/iteration":
            time_ = start + 1 if kind != "replay" else start
            if tokens or preempted:  # as the driver records: an empty batch (schedule ahead) decides nothing
                steps.append([_number(time_), dict(sorted(tokens.items())), sorted(preempted)])
            start = None
        elif rule == "step/idle":
            start = None
    return steps


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else x


def first_step_difference(theirs: list[list], ours: list[list], kind: str) -> str | None:
    """The first step at which the real scheduler's step trace and serq-ref's
    differ, described; None if they are the same."""
    what = "step" if kind != "replay" else "the step at clock"
    for a, b in itertools.zip_longest(theirs, ours):
        if a == b:
            continue
        if a is None:
            return f"vLLM's run has ended; serq-ref's goes on: at {what} {b[0]} it schedules {_show(b[1])}" + \
                _preempted(b[2])
        if b is None:
            return f"serq-ref's run has ended; vLLM's goes on: at {what} {a[0]} it schedules {_show(a[1])}" + \
                _preempted(a[2])
        if a[0] != b[0]:
            return (f"vLLM's next step is at {a[0]} ({_show(a[1])}{_preempted(a[2])}), serq-ref's at {b[0]} "
                    f"({_show(b[1])}{_preempted(b[2])})")
        return f"at {what} {a[0]}: vLLM schedules {_show(a[1])}{_preempted(a[2])}; serq-ref {_show(b[1])}" + \
            _preempted(b[2])
    return None


def _show(tokens: dict) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in tokens.items()) + "}" if tokens else "nothing"


def _preempted(ids: list) -> str:
    return f", preempting {', '.join(ids)}" if ids else ""


# ---------------------------------------------------------------------------
# Shrinking


def _smaller(x: float, lo: float) -> Iterator[float]:
    """Values below ``x`` to try, the smallest first: lo, halfway, x - 1."""
    x, lo = int(x), int(lo)
    seen = set()
    for v in (lo, (lo + x) // 2, x - 1):
        if lo <= v < x and v not in seen:
            seen.add(v)
            yield v


def _with(case: dict, **changes) -> dict:
    out = copy.deepcopy(case)
    out.update(changes)
    return out


def scenario_valid(case: dict) -> bool:
    """A scenario the driver and the generator accept: budget >= max_seqs >= 1
    (vLLM's SchedulerConfig), every request fits the pool alone."""
    bs = case["block_size"]
    return (case["max_seqs"] >= 1 and case["budget"] >= case["max_seqs"] and case["num_blocks"] >= 2
            and len(case["requests"]) >= 1
            and all(r["prompt"] >= 1 and r["out"] >= 1
                    and campaign_cases.blocks_needed(r["prompt"], r["out"], bs) <= case["num_blocks"] - 1
                    for r in case["requests"])
            and spec_valid(case))


def spec_valid(case: dict) -> bool:
    """Speculative decoding's settings vLLM 0.33.0 starts with: a budget above the lookahead slots
    (vllm/config/vllm.py:2369-2377), a long-prefill threshold of 0 or at least 1 + K when a waiting request
    can be padded (else an assertion fails, scheduler.py:1579: spec_edges_scenario draws none below)."""
    k = int(case.get("spec_tokens", 0) or 0)
    if not k:
        return True
    if "spec_method" in case and 0 < (case.get("chunk") or 0) < 1 + k:
        return False
    return case.get("spec_method", "ngram") == "ngram" or case["budget"] > k


def scenario_candidates(case: dict) -> Iterator[tuple[bool, dict]]:
    """Smaller scenarios than ``case``, each with whether it drops a request:
    a request fewer; the arrivals moved earlier together, an engine switch
    off, a number smaller (the smallest value first)."""
    requests = case["requests"]
    if len(requests) > 1:
        for i in range(len(requests)):
            yield True, _with(case, requests=requests[:i] + requests[i + 1:])
    arrivals = [r.get("arrive", 0) for r in requests]
    if min(arrivals) > 0:
        yield False, _with(case, requests=[{**r, "arrive": r.get("arrive", 0) - min(arrivals)} for r in requests])
    if case.get("prefix_caching"):
        yield False, _with(case, prefix_caching=False)
    if case.get("chunk"):
        for v in _smaller(case["chunk"], 0):
            yield False, _with(case, chunk=v)
    for key, lo in (("budget", case["max_seqs"]), ("max_seqs", 1), ("num_blocks", 2)):
        for v in _smaller(case[key], lo):
            yield False, _with(case, **{key: v})
    for i, r in enumerate(requests):
        for key, lo in (("prompt", 1), ("out", 1), ("arrive", 0)):
            for v in _smaller(r.get(key, 0), lo):
                changed = dict(r, **{key: v})
                if key == "arrive" and v == 0:
                    changed.pop("arrive")
                yield False, _with(case, requests=requests[:i] + [changed] + requests[i + 1:])


def _trace_rows(text: str) -> list[dict]:
    lines = [line for line in text.splitlines() if line.strip()]
    header = lines[0].split(",")
    return [dict(zip(header, line.split(","))) for line in lines[1:]]


def _trace_text(rows: list[dict]) -> str:
    """Rows as trace CSV, sessions renumbered 0, 1, ... and turns 1, 2, ... in order."""
    out = ["session,turn,new,out,think,forced"]
    sessions = sorted({int(r["session"]) for r in rows})
    for s_new, s in enumerate(sessions):
        turns = sorted((r for r in rows if int(r["session"]) == s), key=lambda r: int(r["turn"]))
        for t_new, r in enumerate(turns, start=1):
            out.append(f"{s_new},{t_new},{int(r['new'])},{int(r['out'])},{float(r['think'])!r},{int(r['forced'])}")
    return "\n".join(out) + "\n"


def replay_valid(case: dict) -> bool:
    """A replay the driver and the generator accept: budget >= max_seqs >= 1,
    every turn fits the pool alone."""
    rows = _trace_rows(case["trace"])
    bs = case.get("block_size", 16)
    return (bool(rows) and case["max_seqs"] >= 1 and case["budget"] >= case["max_seqs"]
            and all(int(r["new"]) >= 1 and int(r["out"]) >= 1
                    and campaign_cases.blocks_needed(int(r["new"]), int(r["out"]), bs) <= case["blocks"]
                    for r in rows))


def replay_candidates(case: dict) -> Iterator[tuple[bool, dict]]:
    """Smaller replays than ``case``, each with whether it drops a session or
    a turn: a session fewer, a turn fewer; the chunk cap or a forced miss
    off, a number smaller (the smallest value first)."""
    rows = _trace_rows(case["trace"])
    sessions = sorted({int(r["session"]) for r in rows})

    def with_rows(new_rows):
        return _with(case, trace=_trace_text(new_rows))

    if len(sessions) > 1:
        for s in sessions:
            yield True, with_rows([r for r in rows if int(r["session"]) != s])
    if len(rows) > 1:
        for i in range(len(rows)):
            if sum(int(r["session"]) == int(rows[i]["session"]) for r in rows) > 1:
                yield True, with_rows(rows[:i] + rows[i + 1:])
    if case.get("chunk"):
        for v in _smaller(case["chunk"], 0):
            yield False, _with(case, chunk=v)
    if case["spacing"] > 0:
        yield False, _with(case, spacing=0)
        if not float(case["spacing"]).is_integer():
            yield False, _with(case, spacing=math.floor(case["spacing"]))
        for v in _smaller(math.floor(case["spacing"]), 0):
            yield False, _with(case, spacing=v)
    for key, lo in (("budget", case["max_seqs"]), ("max_seqs", 1), ("blocks", 1)):
        for v in _smaller(case[key], lo):
            yield False, _with(case, **{key: v})
    for i, r in enumerate(rows):
        if int(r["forced"]):
            yield False, with_rows(rows[:i] + [dict(r, forced="0")] + rows[i + 1:])
        think = float(r["think"])
        if think > 0:
            values = [0.0] + ([float(math.floor(think))] if not think.is_integer() else []) + \
                     [float(v) for v in _smaller(math.floor(think), 0) if v > 0]
            for v in values:
                yield False, with_rows(rows[:i] + [dict(r, think=str(v))] + rows[i + 1:])
        for key in ("new", "out"):
            for v in _smaller(int(r[key]), 1):
                yield False, with_rows(rows[:i] + [dict(r, **{key: str(v)})] + rows[i + 1:])


def shrink(case: dict, still: Callable[[dict], bool], candidates: Callable[[dict], Iterator[tuple[bool, dict]]],
           valid: Callable[[dict], bool], max_tries: int = 1000) -> tuple[dict, int]:
    """The smallest case a greedy search finds from ``case`` for which
    ``still`` holds. ``candidates`` gives the smaller cases of a case, each
    with whether it drops a request or session (``True``) or makes a number
    smaller or a switch off (``False``). The search drops requests while a
    drop keeps ``still`` (the first that does, then again from the new
    case), then takes one smaller number that keeps it, going on from the
    position among the new case's numbers where the last one was found (the
    ones before it were just tried), and drops again; it ends when no number
    keeps ``still`` or ``max_tries`` valid candidates were tried. Returns the
    case and the number of candidates tried."""
    tries = 0

    def keeps(candidate) -> bool:
        nonlocal tries
        if not valid(candidate):
            return False
        tries += 1
        return still(candidate)

    position = 0
    while tries < max_tries:
        dropped = True
        while dropped and tries < max_tries:
            dropped = False
            for candidate in (c for drop, c in candidates(case) if drop):
                if keeps(candidate):
                    case, dropped = candidate, True
                    break
                if tries >= max_tries:
                    break
        options = [c for drop, c in candidates(case) if not drop]
        kept = None
        for step in range(len(options)):
            if tries >= max_tries:
                break
            k = (position + step) % len(options)
            if keeps(options[k]):
                kept = k
                break
        if kept is None:
            break
        case, position = options[kept], kept
    return case, tries


# ---------------------------------------------------------------------------
# The real scheduler's side


class RealScheduler:
    """The real vLLM scheduler through one driver process kept open
    (oracle.real.Driver), asked a case under a rule of RULES."""

    def __init__(self, python=None) -> None:
        from . import real

        self.driver = real.Driver(python)

    def answer(self, kind: str, case: dict, rule: str = "0.33.0", step_trace: bool = False) -> dict:
        job = dict(case, **RULES[rule])
        if kind == "replay" or not job.get("serve"):
            job.pop("self_preempt_ends_pass", None)  # the FCFS path has the one rule
        if step_trace:
            job["step_trace"] = True
        return self.driver.answer(job)

    def fields(self, kind: str, case: dict, rule: str = "0.33.0") -> dict:
        return real_fields(kind, self.answer(kind, case, rule))

    def close(self) -> None:
        self.driver.close()


def verdict_of(kind: str, case: dict, ours: dict, vllm: RealScheduler, older_rule: bool = False) -> str:
    """A case's verdict, every real answer asked of ``vllm`` as needed."""
    cache: dict[str, dict] = {}

    def real(rule):
        if rule not in cache:
            cache[rule] = vllm.fields(kind, case, rule)
        return cache[rule]

    return classify(kind, ours, real, older_rule)


def explain(kind: str, case: dict, verdict: str, vllm: RealScheduler, max_tries: int = 1000,
            older_rule: bool = False) -> dict:
    """For a case of ``verdict`` (not agree): the first step at which vLLM
    (under the rule serq-ref follows) and serq-ref differ, and the same for a
    minimal case of the same verdict."""
    rule = rule_of(older_rule)

    def still(candidate):
        try:
            return verdict_of(kind, candidate, serq_answer(kind, candidate, older_rule), vllm, older_rule) == verdict
        except SerqError:
            return False

    candidates, valid = (replay_candidates, replay_valid) if kind == "replay" else (scenario_candidates,
                                                                                  scenario_valid)
    small, tries = shrink(case, still, candidates, valid, max_tries)
    out = {"first_step": _first_step(kind, case, rule, vllm), "shrunk": small, "tries": tries}
    ours = serq_answer(kind, small, older_rule)
    out["shrunk_differences"] = differences(kind, vllm.fields(kind, small, rule), ours)
    out["shrunk_first_step"] = _first_step(kind, small, rule, vllm)
    return out


def _first_step(kind: str, case: dict, rule: str, vllm: RealScheduler) -> str | None:
    answer = vllm.answer(kind, case, rule, step_trace=True)
    if "error" in answer:
        return f"vLLM: {answer['error']}"
    try:
        ours = serq_steps(kind, case, rule == rule_of(True))
    except SerqError as e:
        return f"serq-ref stopped: {e.message}"
    return first_step_difference(answer["step_trace"], ours, kind)


# ---------------------------------------------------------------------------
# The campaign


class Outcome(dict):
    """One case's outcome: kind, seed, index, verdict, and for a case that
    does not agree, what differs (and, with the real scheduler, first_step,
    shrunk, shrunk_differences, shrunk_first_step)."""


def _jobs(kind: str, cases: list[dict]) -> list[dict]:
    jobs = []
    for case in cases:
        jobs.append(dict(case))
        if kind == "serve":
            jobs.append(dict(case, self_preempt_ends_pass=True))
    return jobs


class _Lazy:
    """A RealScheduler started when first needed (vLLM's import takes 10-25 s)."""

    def __init__(self, python, enabled: bool) -> None:
        self.python, self.enabled, self.scheduler = python, enabled, None

    def get(self) -> RealScheduler | None:
        if self.enabled and self.scheduler is None:
            self.scheduler = RealScheduler(self.python)
        return self.scheduler

    def close(self) -> None:
        if self.scheduler is not None:
            self.scheduler.close()


def serq_answer_case(kind: str, older_rule: bool, case: dict) -> dict:
    """``serq_answer`` as a case of ``semantics.workers.run_cases``."""
    return serq_answer(kind, case, older_rule)


def run(kind: str, count: int, seed: int, start: int = 0, recorded: str | None = None, python=None,
        explain_known: bool = False, max_tries: int = 1000, report=print, older_rule: bool = False,
        workers: int = 1, ray: str | None = None, resume: str | None = None, progress: bool = False,
        asynchronous: bool = False) -> list[Outcome]:
    """Draw ``count`` cases of ``kind`` from ``seed`` (indices ``start`` on),
    answer each with serq-ref and with the real scheduler (or the records of
    ``recorded``), both under vLLM 0.33.0's rule or, with ``older_rule``,
    the older one, and report each case that does not agree as it is found
    (``report``, a line at a time). With the real scheduler, every divergence
    (also a documented one, with ``explain_known``) gets its first differing
    step and a minimal reproduction; against recorded answers that needs the
    real scheduler too, and is left out without it.

    serq-ref's answers are cases of ``semantics.workers.run_cases``: on
    ``workers`` processes or a Ray cluster (``ray``), recorded in the journal
    ``resume`` (a campaign started again with it does not answer them again);
    the real scheduler's answers and the shrinking stay in this process."""
    import functools

    from semantics.progress import CaseProgress
    from semantics.workers import Journal, fingerprint, run_cases

    from . import real

    cases = [draw(kind, seed, index, asynchronous) for index in range(start, start + count)]
    if recorded is not None:
        records = read_recorded(recorded)
        answers = []
        for index, case in zip(range(start, start + count), cases):
            record = records.get((seed, index))
            if record is None:
                raise UsageError(f"{recorded} has no case {seed}/{index} (a campaign file of --kind {kind}?)")
            if record["case"] != case:
                generator = "oracle/campaign_space.py" if kind.startswith("space") else "oracle/campaign_cases.py"
                raise UsageError(f"{recorded}: case {seed}/{index} is not the {kind} case {generator} "
                                 f"draws (a campaign file of another --kind?)")
            answers.append(record["answer"])
            if kind == "serve":
                answers.append(record["answer_older_rule"])
        vllm = _Lazy(python, real.available(python))
        stream: Iterator[dict] = iter(answers)
    else:
        real.find_python(python)  # RealVllmMissing, before any work, without the environment
        vllm = _Lazy(python, True)
        stream = real.iter_answers(_jobs(kind, cases), python)
    outcomes = []
    rule = rule_of(older_rule)
    journal = None
    if resume is not None:
        journal = Journal(resume, fingerprint("oracle campaign", kind, seed, start, count, bool(older_rule),
                                              SERQ_VERSION), count)
    bar = CaseProgress(count, f"campaign {kind}", draw=progress)
    ours_stream = run_cases(functools.partial(serq_answer_case, kind, older_rule), cases, workers=workers, ray=ray,
                            progress=bar, journal=journal,
                            labels=[f"{kind} {seed}/{index}" for index in range(start, start + count)],
                            note=bar.write)
    try:
        for index, case in zip(range(start, start + count), cases):
            answer = next(stream)
            older = next(stream) if kind == "serve" else None
            ours = next(ours_stream)
            current = real_fields(kind, answer)
            # the FCFS path (every kind but serve) has the one rule
            known = {"0.33.0": current, "older rule": real_fields(kind, older) if older is not None else current}
            theirs = known[rule]

            def lookup(rule, known=known, case=case):
                if rule not in known:
                    scheduler = vllm.get()
                    known[rule] = None if scheduler is None else scheduler.fields(kind, case, rule)
                return known[rule]

            if same(theirs, ours):
                verdict = AGREE
            else:
                verdict = classify(kind, ours, lookup, older_rule)
                if verdict == DIFFERS and not vllm.enabled and (kind, seed, index, rule) in KNOWN:
                    verdict = KNOWN[(kind, seed, index, rule)]
            outcome = Outcome(kind=kind, seed=seed, index=index, verdict=verdict)
            if verdict != AGREE:
                outcome["differences"] = differences(kind, theirs, ours)
                if vllm.enabled and (verdict == DIFFERS or explain_known):
                    outcome.update(explain(kind, case, verdict, vllm.get(), max_tries, older_rule))
                    outcome["case"] = case
                report_outcome(outcome, report, explained=vllm.enabled)
            outcomes.append(outcome)
    finally:
        ours_stream.close()
        bar.close()
        if journal is not None:
            journal.close()
        vllm.close()
        if hasattr(stream, "close"):
            stream.close()
    return outcomes


def report_outcome(outcome: Outcome, report=print, explained: bool = True) -> None:
    """The lines of a case that does not agree."""
    verdict = outcome["verdict"]
    name = f"{outcome['kind']} {outcome['seed']}/{outcome['index']}"
    report(f"{name}: {MEANING[verdict]}")
    for line in outcome["differences"]:
        report(f"  {line}")
    if "first_step" in outcome:
        report(f"  first step that differs: {outcome['first_step']}")
        report(f"  minimal reproduction ({outcome['tries']} cases tried): {json.dumps(outcome['shrunk'])}")
        for line in outcome["shrunk_differences"]:
            report(f"    {line}")
        report(f"    first step that differs: {outcome['shrunk_first_step']}")
    elif verdict == DIFFERS and not explained:
        report("  (the first step that differs and a minimal reproduction need the real scheduler: --vllm-python)")


def summary(kind: str, outcomes: list[Outcome], seconds: float) -> str:
    """One line: the counts of each verdict."""
    counts = {v: sum(o["verdict"] == v for o in outcomes) for v in VERDICTS}
    parts = [f"{counts[AGREE]} agree"]
    if counts[D11] or kind == "serve":
        parts.append(f"{counts[D11]} D11")
    parts.append(f"{counts[DIFFERS]} differ")
    return f"{kind}: {len(outcomes)} cases, " + ", ".join(parts) + f" ({seconds:.0f} s)"


def timed_run(*args, **kwargs) -> tuple[list[Outcome], float]:
    started = time.perf_counter()
    outcomes = run(*args, **kwargs)
    return outcomes, time.perf_counter() - started
