"""The field's grading recorded (issue 24, docs/field.md): the runs of
`serq-ref oracle check --engine ADAPTER --logs DIR` over the corpora, read
back, every differing case's first difference found (`oracle diverge` of
serq-ref's log against the peer's) and classified, each class minimised, all
written to docs/data/field.json.

    PYTHONPATH=. python examples/adapters/field.py record RUNS [--minimise TRIES] [--out docs/data/field.json]

RUNS is the directory the grading wrote (NAME.out: oracle check's standard
output; NAME.time: its time and the load; NAME/: its --logs directory), one
NAME per row of RUNS below; docs/field.md shows the commands. serq-ref
answers the corpus as vLLM 0.33.0 does (docs/conformance.md), so its log
stands in for vLLM's at the first difference, and its rules there are the
rules that decided the step.

Minimising a class (--minimise TRIES, the peers installed:
$SERQ_DYNAMO_PYTHON, $SERQ_VIDUR_PYTHON) runs oracle/campaign.py's shrink on
the class's smallest case: a smaller scenario is kept while the peer's answer
still differs from serq-ref's and its first difference is still of the class.
A class the previous record (--previous, default --out) has minimised keeps
that minimised case; only a new class is minimised.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from oracle.campaign import scenario_candidates, scenario_valid, shrink  # noqa: E402
from oracle.check import Selection, cases_of  # noqa: E402
from oracle.schedule_log import (_empty_step, compared, read_log, serq_log, step_differences,  # noqa: E402
                                 write_log)
from oracle.scenario import request_key  # noqa: E402
from semantics.errors import SerqError  # noqa: E402

ADAPTERS = "examples/adapters"
DYNAMO = f"$SERQ_DYNAMO_PYTHON {ADAPTERS}/dynamo_adapter.py"
VIDUR = f"$SERQ_VIDUR_PYTHON {ADAPTERS}/vidur_adapter.py"
SHARED = ("oracle/data/shared/vllm", "oracle/data/shared/serve")
#: the multi-turn replays: outside `oracle check`'s contract (they answer per turn), so
#: `field.py replays` asks each peer's adapter for each case itself (it says why it is unsupported)
REPLAYS = "oracle/data/campaign/replays.jsonl"

#: (run name, peer, engine command as docs/field.md shows it, corpus paths, --every)
RUNS = (
    ("dynamo-shared", "dynamo", DYNAMO, SHARED, 1),
    ("dynamo-scenarios", "dynamo", DYNAMO, ("oracle/data/campaign/scenarios.jsonl",), 1),
    ("dynamo-serve", "dynamo", DYNAMO, ("oracle/data/campaign/serve.jsonl",), 20),
    ("dynamo-priority", "dynamo", DYNAMO, ("oracle/data/campaign/priority.jsonl",), 20),
    ("dynamo-async-scenarios", "dynamo", DYNAMO, ("oracle/data/campaign/async-scenarios.jsonl",), 20),
    ("dynamo-replays", "dynamo", DYNAMO, (REPLAYS,), 1),
    ("vidur-vllm-shared", "vidur-vllm", f"{VIDUR} vllm", SHARED, 1),
    ("vidur-vllm-scenarios", "vidur-vllm", f"{VIDUR} vllm", ("oracle/data/campaign/scenarios.jsonl",), 1),
    ("vidur-vllm-serve", "vidur-vllm", f"{VIDUR} vllm", ("oracle/data/campaign/serve.jsonl",), 5),
    ("vidur-vllm-priority", "vidur-vllm", f"{VIDUR} vllm", ("oracle/data/campaign/priority.jsonl",), 5),
    ("vidur-vllm-async-scenarios", "vidur-vllm", f"{VIDUR} vllm", ("oracle/data/campaign/async-scenarios.jsonl",), 5),
    ("vidur-vllm-replays", "vidur-vllm", f"{VIDUR} vllm", (REPLAYS,), 1),
    ("vidur-sarathi-shared", "vidur-sarathi", f"{VIDUR} sarathi", SHARED, 1),
    ("vidur-sarathi-scenarios", "vidur-sarathi", f"{VIDUR} sarathi", ("oracle/data/campaign/scenarios.jsonl",), 1),
    ("vidur-sarathi-serve", "vidur-sarathi", f"{VIDUR} sarathi", ("oracle/data/campaign/serve.jsonl",), 5),
    ("vidur-sarathi-priority", "vidur-sarathi", f"{VIDUR} sarathi", ("oracle/data/campaign/priority.jsonl",), 5),
    ("vidur-sarathi-async-scenarios", "vidur-sarathi", f"{VIDUR} sarathi",
     ("oracle/data/campaign/async-scenarios.jsonl",), 5),
    ("vidur-sarathi-replays", "vidur-sarathi", f"{VIDUR} sarathi", (REPLAYS,), 1),
)


def command_line(engine: str, paths, every: int, logs: str) -> str:
    if paths == (REPLAYS,):
        run = os.path.basename(logs)
        return f"PYTHONPATH=. python {ADAPTERS}/field.py replays {os.path.dirname(logs)} {run.rsplit('-', 1)[0]}"
    return (f"serq-ref oracle check {' '.join(paths)}" + (f" --every {every}" if every > 1 else "")
            + f" --engine \"{engine}\" --logs {logs}")


# --------------------------------------------------------------------------
# a run read back
# --------------------------------------------------------------------------

#: a run graded again in part (its cases by --cases) after an adapter's fix: NAME -> the part's run
RERUNS = {"dynamo-scenarios": "dynamo-scenarios-rerun"}


#: a run graded in parts, each part its own `oracle check` (NAME -> (part, its --every); a part's
#: NAME.cases file, when there is one, holds its --cases): every case of the run is in one part
COMPOSED = {f"vidur-{s}-scenarios": ((f"vidur-{s}-scenarios-every4", 4), (f"vidur-{s}-scenarios-rest", 1))
            for s in ("vllm", "sarathi")}


def part_cases(runs: Path, name: str) -> list[str] | None:
    path = runs / f"{name}.cases"
    return path.read_text().strip().split(",") if path.exists() else None


def read_run(runs: Path, name: str, paths, every: int) -> dict | None:
    """A run's verdicts: one `oracle check`'s, with the verdicts of its part
    graded again (RERUNS) in place of its own, or its parts' together
    (COMPOSED)."""
    if name in COMPOSED:
        parts = [read_one(runs, part, paths, part_every, part_cases(runs, part))
                 for part, part_every in COMPOSED[name]]
        if any(part is None for part in parts):
            return None
        cases = Selection((), every, None).choose([c for p in paths for c in cases_of(str(ROOT / p), True)])
        run = {"cases": cases, "verdicts": {}, "logs": {}, "parts": [], "composed": True}
        for part in parts:
            overlap = set(part["verdicts"]) & set(run["verdicts"])
            assert not overlap, (name, sorted(overlap)[:3])  # a case is graded by one part only
            run["verdicts"].update(part["verdicts"])
            run["logs"].update(part["logs"])
            run["parts"] += part["parts"]
        missing = [c.label for c in cases if c.label not in run["verdicts"]]
        assert not missing, (name, missing[:3])  # every case graded
        return run
    run = read_one(runs, name, paths, every)
    again = RERUNS.get(name)
    if run is None or again is None:
        return run
    part = read_one(runs, again, paths, every, part_cases(runs, again))
    if part is None:
        return None
    for label in part["verdicts"]:
        run["verdicts"][label], run["logs"][label] = part["verdicts"][label], part["logs"][label]
    run["parts"] = [dict(run["parts"][0]), dict(part["parts"][0])]
    return run


class Replay:
    """A multi-turn replay case of campaign/replays.jsonl, as the record reads a case."""

    def __init__(self, path: str, index: int, case: dict):
        self.label, self.index, self.case = f"campaign/{os.path.basename(path)}#{index}", index, case
        self.stem = f"{Path(path).stem}-{index}"

    def data(self) -> dict:
        return self.case


def replay_cases(path: str) -> list[Replay]:
    with open(path, encoding="utf-8") as f:
        return [Replay(path, i, json.loads(line)["case"]) for i, line in enumerate(f) if line.strip()]


def grade_replays(runs: Path, peer: str, jobs: int) -> int:
    """Each replay case asked of the peer's adapter (as `oracle check` asks
    a scenario), its verdicts written as `oracle check` writes them, to
    RUNS/PEER-replays.out; its time and load to .time."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    name = f"{peer}-replays"
    cases = replay_cases(str(ROOT / REPLAYS))
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    began, wall = time.strftime("%H:%M:%S", time.gmtime()), time.monotonic()

    def ask(case: Replay) -> list[str]:
        with tempfile.TemporaryDirectory(prefix="field-replay-") as workdir:
            try:
                answer, _ = peer_answer(peer, case.data(), workdir)
            except (subprocess.TimeoutExpired, ValueError) as error:
                return [f"{case.label}: the engine gave no answer: {type(error).__name__}"]
        if answer is None:
            return [f"{case.label}: the engine gave no answer (it exited with an error)"]
        why = answer.get("unsupported")
        if isinstance(why, str) and why.strip():
            return [f"{case.label}: unsupported by the engine: {why}"]
        return [f"{case.label}: the engine answered a replay, which the contract does not grade: "
                f"{json.dumps(answer)[:200]}"]

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        said = list(pool.map(ask, cases))
    unsupported = sum(1 for lines in said if "unsupported by the engine: " in lines[0])
    closing = f"0 passed, {len(cases) - unsupported} failed" + (f", {unsupported} unsupported" if unsupported else "")
    (runs / f"{name}.out").write_text("".join(line + "\n" for lines in said for line in lines) + closing + "\n")
    after = Path("/proc/loadavg").read_text().split()[:3] if load else []
    (runs / f"{name}.time").write_text(
        f"{time.monotonic() - wall:.2f} s wall ({jobs} at once)\nrc={int(unsupported < len(cases))} "
        f"load_before={' '.join(load)} load_after={' '.join(after)} started {began} "
        f"ended {time.strftime('%H:%M:%S', time.gmtime())}\n")
    print(f"{name}: {closing}", file=sys.stderr)
    return 0 if unsupported == len(cases) else 1


def read_one(runs: Path, name: str, paths, every: int, with_cases=None) -> dict | None:
    out = runs / f"{name}.out"
    if not out.exists():
        return None
    cases = [c for p in paths for c in (replay_cases(str(ROOT / p)) if p == REPLAYS else cases_of(str(ROOT / p), True))]
    if with_cases is not None:
        wanted = {int(i) for i in with_cases}
        cases = [c for c in cases if c.index in wanted]
    else:
        cases = Selection((), every, None).choose(cases)
    by_label = {c.label: c for c in cases}
    lines: dict[str, list[str]] = {}
    closing = None
    for line in out.read_text().splitlines():
        if re.fullmatch(r"\d+ passed, \d+ failed(, \d+ unsupported)?", line):
            closing = line
            continue
        label = line.split(": ", 1)[0]
        if label in by_label:
            lines.setdefault(label, []).append(line[len(label) + 2:])
    if closing is None:
        return None  # the run has not ended
    verdicts = {}
    for case in cases:
        said = lines.get(case.label, [])
        if any(s.startswith("passed as the documented variant") for s in said):
            said = []
        if said and said[0].startswith("unsupported by the engine: "):
            verdicts[case.label] = ("unsupported", said[0][len("unsupported by the engine: "):])
        else:
            verdicts[case.label] = ("differ", said) if said else ("agree", None)
    time = (runs / f"{name}.time").read_text().split("\n") if (runs / f"{name}.time").exists() else []
    counts = {"agree": 0, "differ": 0, "unsupported": 0}
    for verdict, _ in verdicts.values():
        counts[verdict] += 1
    said = f"{counts['agree']} passed, {counts['differ']} failed" + (
        f", {counts['unsupported']} unsupported" if counts["unsupported"] else "")
    assert said == closing, (name, said, closing)  # the run's own count, read back the same
    return {"cases": cases, "verdicts": verdicts, "logs": {c.label: runs / name for c in cases},
            "parts": [{"run": name, "cases": len(cases), "closing": closing, "time": [t for t in time if t]}]}


# --------------------------------------------------------------------------
# the first difference, and its class
# --------------------------------------------------------------------------

def dynamo_clock(log: dict, late: int = 0) -> tuple[dict, dict, dict]:
    """serq-ref's log read on the mocker's clock: its fixed timing model
    charges an iteration prefill_ms when it computes prompt tokens plus
    decode_ms when it decodes (both 1 ms), so an iteration that mixes the two
    takes 2 ms; when idle the mocker waits for the next arrival. With
    ``late``, the clock also idles that many iterations before a step that
    readmits a victim (the mocker logs the readmission when vLLM would, and
    runs it an iteration later: docs/field.md). Returns the log of
    admissions and finishes at the times the mocker would log them if it
    took vLLM's decisions, the map of those times back to steps, and the map
    of each iteration's start time to its step."""
    steps, back, starts = {}, {}, {}
    clock, busy, victims = 0, False, set()
    for number in range(1, max(log["steps"], default=0) + 1):
        record = log["steps"].get(number)
        if record is None or not record["scheduled"]:
            busy = False
            victims |= set(record["preempted"]) if record is not None else set()
            continue
        logged = start = clock if busy else max(clock, number - 1)
        if late and victims & set(record["admitted"]):
            start += late
        starts[start] = number
        modes = {e.get("mode") for e in record["scheduled"]}
        clock, busy = start + ("prefill" in modes) + ("decode" in modes), True
        victims = (victims - set(record["admitted"])) | set(record["preempted"])
        for at, key in ((logged + 1, "admitted"), (clock, "finished")):
            if record[key]:
                step = steps.setdefault(at, _empty_step(at))
                step[key] += record[key]
                back.setdefault(at, number)
    for step in steps.values():
        step["rules"] = {}
    return {"path": log["path"], "header": dict(log["header"], fields=["admitted", "finished"]),
            "steps": steps}, back, starts


def first_difference(a: dict, b: dict) -> tuple[int, list[str], dict, dict] | None:
    fields, ordered = compared(a, b)
    for number in sorted(set(a["steps"]) | set(b["steps"])):
        sa, sb = a["steps"].get(number, _empty_step(number)), b["steps"].get(number, _empty_step(number))
        found = step_differences(sa, sb, fields, ordered)
        if found:
            return number, [what for what, _ in found if what], sa, sb
    return None


def _modes(step: dict) -> set[str]:
    return {e.get("mode") for e in step["scheduled"]}


def _tokens(step: dict) -> dict[str, int]:
    return {e["request"]: e["tokens"] for e in step["scheduled"]}


def classify(peer: str, scenario: dict, serq: dict, engine: dict) -> dict:
    """A differing case's first difference and its class: (class key, the
    step, what differs, serq-ref's record and rules of the step)."""
    original = serq
    back = starts = None
    if peer == "dynamo":
        serq, back, starts = dynamo_clock(serq)
    found = first_difference(serq, engine)
    if found is None and peer == "dynamo":
        # the decisions agree on the mocker's clock: the figures part at vLLM's first step that both
        # decodes and prefills, which the fixed timing model charges 2 ms
        mixed = [n for n in sorted(original["steps"]) if {"prefill", "decode"} <= _modes(original["steps"][n])]
        if not mixed:
            return {"class": "dynamo-clock", "step": None, "what": []}
        orig = original["steps"][mixed[0]]
        return {"class": "dynamo-clock", "step": mixed[0],
                "what": ["a step that decodes and prefills: the mocker's iteration of it takes 2 ms"],
                "serq_step": show(orig), "rules": {e["request"]: orig["rules"].get(e["request"], [])
                                                   for e in orig["scheduled"]}}
    if found is None:
        return {"class": "logs-agree", "step": None, "what": []}
    number, what, sa, sb = found
    step = back.get(number, number) if back is not None else number
    if back is not None and number not in back:
        # the mocker logged something at a time serq-ref's decisions never reach on its clock: the step before
        step = max([s for t, s in back.items() if t < number], default=1)
    orig = original["steps"].get(step, _empty_step(step))
    concerned = sorted({w.split(":")[0].split()[1] for w in what if w.startswith("request ")}, key=request_key)
    rules = {r: orig["rules"].get(r, []) for r in concerned}
    if not any(rules.values()):
        # vLLM did nothing with the requests concerned at that step (the peer admitted one that vLLM did
        # not): the rules of the step are those of the requests vLLM did act on
        rules = dict(orig["rules"])
    if peer == "dynamo":
        key = dynamo_class(scenario, number, starts, what)
        if key not in ("dynamo-clock", "dynamo-clock-arrival") and any(
                record["preempted"] for n, record in original["steps"].items() if n <= step):
            key += "-after-a-preemption"
            if first_difference(dynamo_clock(original, late=1)[0], engine) is None:
                # on the clock that idles an iteration before each readmission the two agree: the
                # difference is first at vLLM's first readmission
                key = "dynamo-idles-an-iteration-before-a-readmission"
                step = readmission(original)
                orig = original["steps"][step]
                what = [f"request {r}: readmitted at step {step}, the mocker idles an iteration before it"
                        for r in orig["admitted"]]
                rules = {r: orig["rules"].get(r, []) for r in orig["admitted"]}
    else:
        key = vidur_class(peer, scenario, step, sa, sb, what)
    return {"class": key, "step": step, "what": what[:4], "serq_step": show(orig), "rules": rules}


def readmission(log: dict) -> int:
    """The first step of ``log`` that admits a request preempted before it."""
    victims: set[str] = set()
    for number in sorted(log["steps"]):
        record = log["steps"][number]
        if victims & set(record["admitted"]):
            return number
        victims |= set(record["preempted"])
    raise ValueError("no readmission")


def show(step: dict) -> str:
    parts = ["scheduled " + (", ".join(f"{e['request']}: {e['tokens']} {e.get('mode', '')}".strip()
                                       for e in step["scheduled"]) or "nothing")]
    parts += [f"{k} [{', '.join(step[k])}]" for k in ("admitted", "preempted", "finished") if step[k]]
    return "; ".join(parts)


def dynamo_class(scenario: dict, number: int, starts: dict, what: list[str]) -> str:
    """The class of the mocker's first difference (at ``number`` on its clock)."""
    early = [w.split(":")[0].split()[1] for w in what if w.endswith("admitted in B only")]
    step = starts.get(number - 1)
    if early and step is not None and all(
            scenario["requests"][int(r)].get("arrive", 0) > step - 1 for r in early):
        # the mocker admits at its iteration starting at number - 1 ms a request that arrived (in ms)
        # after vLLM's step of that iteration began: the clock that runs ahead, seen by an arrival
        return "dynamo-clock-arrival"
    if any("admitted in A only" in w for w in what) and not any("admitted in B only" in w for w in what):
        return "dynamo-admits-later"
    if any("admitted in B only" in w for w in what) and not any("admitted in A only" in w for w in what):
        return "dynamo-admits-earlier"
    if any("admitted" in w for w in what):
        return "dynamo-admits-other"
    if any("finished in A only" in w for w in what):
        return "dynamo-finishes-later"
    return "dynamo-finishes-earlier"


def vidur_class(peer: str, scenario: dict, step: int, sa: dict, sb: dict, what: list[str]) -> str:
    """The class of Vidur's first difference (A: serq-ref's step, B: Vidur's)."""
    ta, tb = _tokens(sa), _tokens(sb)
    prompt = {str(i): r["prompt"] for i, r in enumerate(scenario["requests"])}
    if peer == "vidur-vllm":
        if {"prefill", "decode"} <= _modes(sa) and len(_modes(sb)) == 1:
            return "vidur-vllm-prefill-and-decode-never-mixed"
        if any(e.get("mode") == "prefill" and e["tokens"] < prompt[e["request"]] and tb.get(e["request"]) != e["tokens"]
               for e in sa["scheduled"]):
            return "vidur-vllm-no-chunked-prefill"
        left_out = [e["tokens"] for e in sa["scheduled"] if e.get("mode") == "prefill" and e["request"] not in tb]
        if left_out and tb and (len(tb) + 1) * max(list(tb.values()) + left_out[:1]) > scenario["budget"]:
            # its batch is counted padded: the number of requests times the longest
            return "vidur-vllm-batch-counted-padded"
    if sa["preempted"] and any(r not in ta for r in tb):
        return f"{peer}-admits-in-a-step-that-preempts"
    if set(sa["preempted"]) != set(sb["preempted"]):
        if sb["preempted"] and not sa["preempted"]:
            return f"{peer}-preempts-where-vllm-does-not"
        if set(sa["preempted"]) < set(sb["preempted"]) and all(
                r in ta for r in set(sb["preempted"]) - set(sa["preempted"])):
            # vLLM's victims and more: the others vLLM schedules at that step
            return f"{peer}-preempts-where-vllm-does-not"
        if sa["preempted"] and not sb["preempted"]:
            return f"{peer}-does-not-preempt-where-vllm-does"
        return f"{peer}-another-victim"
    if any(r not in ta for r in tb):
        return f"{peer}-schedules-a-request-vllm-does-not"
    if any(r not in tb for r in ta):
        return f"{peer}-leaves-out-a-request-vllm-schedules"
    if any(ta[r] != tb[r] for r in ta):
        return f"{peer}-another-token-count"
    if any("finished" in w for w in what):
        return f"{peer}-finishes-at-another-step"
    return f"{peer}-other"


# --------------------------------------------------------------------------
# minimising a class
# --------------------------------------------------------------------------

def peer_command(peer: str) -> list[str]:
    if peer == "dynamo":
        return [os.environ["SERQ_DYNAMO_PYTHON"], str(ROOT / ADAPTERS / "dynamo_adapter.py")]
    return [os.environ["SERQ_VIDUR_PYTHON"], str(ROOT / ADAPTERS / "vidur_adapter.py"), peer.split("-", 1)[1]]


def peer_answer(peer: str, scenario: dict, workdir: str) -> tuple[dict | None, dict | None]:
    path, log = os.path.join(workdir, "case.json"), os.path.join(workdir, "case.engine.log")
    Path(path).write_text(json.dumps(scenario))
    if os.path.exists(log):
        os.unlink(log)
    done = subprocess.run(peer_command(peer) + [path], capture_output=True, timeout=120,
                          env={**os.environ, "SERQ_SCHEDULE_LOG": log})
    if done.returncode != 0:
        return None, None
    answer = json.loads(done.stdout)
    return answer, (read_log(log) if os.path.exists(log) else None)


def serq_answer(scenario: dict, workdir: str) -> tuple[dict, dict]:
    answer, log = serq_log(scenario, "case.json", False)
    path = os.path.join(workdir, "case.serq-ref.log")
    write_log(log, path)
    return answer, read_log(path)


FIGURES = ("first", "done", "preemptions", "steps")


def differs(a: dict, b: dict) -> bool:
    return any(a.get(k) != b.get(k) for k in FIGURES)


def _numbers(case: dict) -> dict[tuple, int]:
    """A scenario's numbers by where they stand (an absent arrival is 0)."""
    out = {(k,): v for k, v in case.items() if isinstance(v, int) and not isinstance(v, bool)}
    for i, r in enumerate(case["requests"]):
        out.update({("requests", i, k): r.get(k, 0) for k in ("prompt", "out", "arrive")})
    return out


def _set(case: dict, where: tuple, value: int) -> dict:
    out = json.loads(json.dumps(case))
    if where[0] == "requests":
        out["requests"][where[1]][where[2]] = value
        if where[2] == "arrive" and value == 0:
            out["requests"][where[1]].pop("arrive")
    else:
        out[where[0]] = value
    return out


def field_candidates(case: dict):
    """oracle/campaign.py's smaller scenarios, with more values between a
    number's halfway and one less: that shrinker tries a number's least
    value, its halfway and one less, so a number that cannot halve came
    down by one a pass (hundreds of tries from 200 to 120); here the one
    less is preceded by the number less a quarter, an eighth, ... of its
    distance to its least value, so it comes down in halves of what is
    left. Then a smaller block (a power of two, the pool's blocks the
    same): a block of 16 where 32 would do makes a case's numbers smaller."""
    numbers, least = _numbers(case), {}
    for drop, candidate in scenario_candidates(case):
        if not drop and len(candidate["requests"]) == len(case["requests"]):
            changed = [(w, v) for w, v in _numbers(candidate).items() if numbers.get(w) != v]
            if len(changed) == 1:
                where, value = changed[0]
                least.setdefault(where, value)
                old = numbers[where]
                if value == old - 1:
                    gap, d = old - least[where], (old - least[where]) // 4
                    while gap > 3 and d >= 2:
                        yield False, _set(case, where, old - d)
                        d //= 2
        yield drop, candidate
    size = case["block_size"]
    while size > 1:
        size //= 2
        yield False, dict(case, block_size=size)


def minimise(peer: str, key: str, scenario: dict, tries: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="field-shrink-") as workdir:
        def still(candidate: dict) -> bool:
            try:
                ours, ours_log = serq_answer(candidate, workdir)
                theirs, their_log = peer_answer(peer, candidate, workdir)
            except (SerqError, subprocess.TimeoutExpired, ValueError):
                return False
            if theirs is None or "unsupported" in theirs or their_log is None or not differs(ours, theirs):
                return False
            return classify(peer, candidate, ours_log, their_log)["class"] == key

        small, used = shrink(scenario, still, field_candidates, scenario_valid, tries)
        ours, ours_log = serq_answer(small, workdir)
        theirs, their_log = peer_answer(peer, small, workdir)
        found = classify(peer, small, ours_log, their_log)
    return {"scenario": small, "tries": used, "vllm": {k: ours[k] for k in FIGURES},
            "peer": {k: theirs[k] for k in FIGURES}, "first_difference": found}


# --------------------------------------------------------------------------
# the record
# --------------------------------------------------------------------------

def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record(runs: Path, tries: int, previous: dict | None, peers: tuple[str, ...] = ()) -> dict:
    data = {"format": 1, "about": "issue 24: the field's simulators graded by the conformance contract "
                                  "(docs/field.md; written by examples/adapters/field.py record)",
            "peers": {
                "dynamo": {"name": "NVIDIA Dynamo mocker", "version": "ai-dynamo-runtime 1.6.1 (PyPI)",
                           "setup": f"bash {ADAPTERS}/setup-dynamo.sh"},
                "vidur-vllm": {"name": "Vidur, vllm replica scheduler", "version": "microsoft/vidur 7d47513",
                               "setup": f"bash {ADAPTERS}/setup-vidur.sh"},
                "vidur-sarathi": {"name": "Vidur, sarathi replica scheduler", "version": "microsoft/vidur 7d47513",
                                  "setup": f"bash {ADAPTERS}/setup-vidur.sh"}},
            "corpora": {}, "runs": [], "classes": {}}
    old_classes = (previous or {}).get("classes", {})
    for name, peer, engine, paths, every in RUNS:
        run = read_run(runs, name, paths, every)
        if run is None:
            continue
        for p in paths:
            for f in ([ROOT / p] if p.endswith(".jsonl") else sorted((ROOT / p).glob("*.json"))):
                data["corpora"][str(f.relative_to(ROOT))] = sha256(f)
        counts = {"graded": len(run["cases"]), "agree": 0, "differ": 0, "unsupported": 0}
        reasons: dict[str, int] = {}
        differences = []
        for case in run["cases"]:
            verdict, said = run["verdicts"][case.label]
            counts[verdict] += 1
            if verdict == "unsupported":
                reason = re.sub(r"\(\d+\)", "(N)", said)
                reasons[reason] = reasons.get(reason, 0) + 1
            if verdict != "differ":
                continue
            logs = run["logs"][case.label]
            engine_log, serq = logs / f"{case.stem}.engine.log", logs / f"{case.stem}.serq-ref.log"
            scenario = case.data()
            if said and said[0].startswith("the engine"):
                found = {"class": f"{peer}-no-answer", "step": None, "what": said[:1]}
            elif not engine_log.exists() or not serq.exists():
                found = {"class": f"{peer}-no-log", "step": None, "what": said[:2]}
            else:
                found = classify(peer, scenario, read_log(str(serq)), read_log(str(engine_log)))
            differences.append({"case": case.label, **found})
            cls = data["classes"].setdefault(found["class"], {"peer": peer, "cases": 0, "examples": []})
            cls["cases"] += 1
            if len(cls["examples"]) < 3:
                cls["examples"].append({"case": case.label, **{k: v for k, v in found.items() if k != "class"}})
            size = (len(scenario["requests"]), sum(r["prompt"] + r["out"] for r in scenario["requests"]))
            if "smallest" not in cls or size < tuple(cls["smallest"]["size"]):
                cls["smallest"] = {"case": case.label, "size": list(size), "scenario": scenario}
        assert sum(counts[k] for k in ("agree", "differ", "unsupported")) == counts["graded"]
        for part in run["parts"]:
            part_every = dict(COMPOSED.get(name, ())).get(part["run"], every)
            cases = f" --cases $(cat runs/{part['run']}.cases)" if part_cases(runs, part["run"]) else ""
            part["command"] = command_line(engine, paths, part_every, f"runs/{part['run']}").replace(
                " --engine", cases + " --engine", 1)
        data["runs"].append({"name": name, "peer": peer, "corpus": list(paths), "every": every,
                             "command": command_line(engine, paths, every, f"runs/{name}"),
                             **counts, "unsupported_reasons": reasons, "parts": run["parts"],
                             **({"composed": True} if run.get("composed") else {}),
                             "differences": differences})
    for key, cls in data["classes"].items():
        if key in old_classes and "minimised" in old_classes[key]:  # kept: only a class without one is minimised
            cls["minimised"] = old_classes[key]["minimised"]
        elif tries > 0 and (not peers or cls["peer"] in peers):
            print(f"minimising {key} from {cls['smallest']['case']} ...", file=sys.stderr, flush=True)
            cls["minimised"] = {"from": cls["smallest"]["case"],
                                **minimise(cls["peer"], key, cls["smallest"]["scenario"], tries)}
    return data


def minimise_again(data: dict, tries: int, peers: tuple[str, ...] = (), keys: tuple[str, ...] = ()) -> None:
    """Each class's minimised case shrunk further, by ``tries`` more
    candidates, from the smaller of its minimised case and its smallest
    case (both of the class); a class without one is minimised from its
    smallest case. In place."""
    for key, cls in data["classes"].items():
        if (peers and cls["peer"] not in peers) or (keys and key not in keys) or "smallest" not in cls:
            continue
        before = cls.get("minimised")
        start, origin, used = cls["smallest"]["scenario"], cls["smallest"]["case"], 0
        if before and _size(before["scenario"]) <= _size(start) and \
                minimise(cls["peer"], key, before["scenario"], 0)["first_difference"]["class"] == key:
            # (a case minimised before a class was split or renamed may be of another class now)
            start, origin, used = before["scenario"], before["from"], before["tries"]
        print(f"minimising {key} from {origin} ...", file=sys.stderr, flush=True)
        small = minimise(cls["peer"], key, start, tries)
        small["tries"] += used
        cls["minimised"] = {"from": origin, **small}
        print(f"  {key}: {_size(small['scenario'])} after {small['tries']} tries", file=sys.stderr, flush=True)


def _size(scenario: dict) -> tuple[int, int, int]:
    """A scenario's size as the minimiser orders it: its requests, their
    tokens, then its engine's numbers."""
    return (len(scenario["requests"]), sum(r["prompt"] + r["out"] + r.get("arrive", 0) for r in scenario["requests"]),
            scenario["budget"] + scenario["max_seqs"] + scenario["num_blocks"] + scenario["block_size"])


def table(data: dict) -> list[str]:
    """docs/field.md's tables, from the data."""
    lines = ["| peer | corpus | graded | agree | differ | unsupported |", "|---|---|---:|---:|---:|---:|"]
    for run in data["runs"]:
        corpus = ", ".join(p.replace("oracle/data/", "") for p in run["corpus"])
        if run["every"] > 1:
            corpus += f" (every {run['every']}th)"
        if run.get("composed"):
            corpus += f" (in {len(run['parts'])} parts)"
        lines.append(f"| {run['peer']} | {corpus} | {run['graded']:,} | {run['agree']:,} | {run['differ']:,} | "
                     f"{run['unsupported']:,} |")
    totals: dict[str, list[int]] = {}
    for run in data["runs"]:
        t = totals.setdefault(run["peer"], [0, 0, 0, 0])
        for i, k in enumerate(("graded", "agree", "differ", "unsupported")):
            t[i] += run[k]
    for peer, t in totals.items():
        lines.append(f"| **{peer}** | **all** | **{t[0]:,}** | **{t[1]:,}** | **{t[2]:,}** | **{t[3]:,}** |")
    lines += ["", "| class | peer | cases | minimised case (from) | its first difference | serq-ref's rules there |",
              "|---|---|---:|---|---|---|"]
    for key, cls in sorted(data["classes"].items(), key=lambda kv: (kv[1]["peer"], -kv[1]["cases"])):
        small = cls.get("minimised")
        if small:
            sc = small["scenario"]
            shown = (f"budget {sc['budget']}, max_seqs {sc['max_seqs']}, {sc['num_blocks']} blocks of "
                     f"{sc['block_size']}, " + ", ".join(
                         f"{r['prompt']}+{r['out']}" + (f"@{r['arrive']}" if r.get("arrive") else "")
                         for r in sc["requests"]) + f" ({small['from']})")
            fd = small["first_difference"]
            where = (f"step {fd['step']}: " + "; ".join(fd["what"][:2])) if fd.get("step") else "-"
            rules = sorted({r for named in fd.get("rules", {}).values() for r in named})
            rules = ", ".join(f"`{r}`" for r in rules) or "-"
        else:
            shown, where, rules = "-", "-", "-"
        lines.append(f"| {key} | {cls['peer']} | {cls['cases']:,} | {shown} | {where} | {rules} |")
    return lines


def explain(peer: str, which: str, data: str) -> int:
    classes = json.loads(Path(data).read_text())["classes"] if os.path.exists(data) else {}
    if which in classes:
        scenario = classes[which]["minimised"]["scenario"]
    elif "#" in which:
        path, index = which.rsplit("#", 1)
        with open(path, encoding="utf-8") as f:
            scenario = json.loads(f.readlines()[int(index)])["case"]
    else:
        scenario = json.loads(Path(which).read_text())
    print(json.dumps(scenario))
    with tempfile.TemporaryDirectory(prefix="field-explain-") as workdir:
        ours, ours_log = serq_answer(scenario, workdir)
        theirs, their_log = peer_answer(peer, scenario, workdir)
    if theirs is None:
        print(f"{peer}: no answer")
        return 1
    if "unsupported" in theirs:
        print(f"{peer}: unsupported: {theirs['unsupported']}")
        return 0
    print("vLLM 0.33.0 (serq-ref):", json.dumps({k: ours[k] for k in FIGURES}))
    print(f"{peer}:", json.dumps({k: theirs[k] for k in FIGURES}))
    if not differs(ours, theirs):
        print("agree")
        return 0
    found = classify(peer, scenario, ours_log, their_log)
    print(f"class {found['class']}, first difference at step {found['step']}")
    for what in found["what"]:
        print(f"  {what}")
    if found.get("serq_step"):
        print(f"  vLLM's step (serq-ref's log): {found['serq_step']}")
    for request, rules in found.get("rules", {}).items():
        print(f"  serq-ref's rules for request {request} there: {', '.join(rules)}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="field.py")
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="read the runs, classify, minimise, write the data")
    rec.add_argument("runs")
    rec.add_argument("--minimise", type=int, default=0, metavar="TRIES")
    rec.add_argument("--out", default=str(ROOT / "docs" / "data" / "field.json"))
    rec.add_argument("--previous", help="the record whose minimised cases are kept (default: --out's)")
    rec.add_argument("--peers", default="", help="minimise only these peers' classes (comma-separated)")
    mini = sub.add_parser("minimise", help="shrink the recorded classes' minimised cases further")
    mini.add_argument("--tries", type=int, default=200)
    mini.add_argument("--data", default=str(ROOT / "docs" / "data" / "field.json"))
    mini.add_argument("--out", help="where to write the record (default: --data)")
    mini.add_argument("--peers", default="", help="only these peers' classes (comma-separated)")
    mini.add_argument("--classes", default="", help="only these classes (comma-separated)")
    rep = sub.add_parser("replays", help="ask a peer's adapter for each multi-turn replay case")
    rep.add_argument("runs")
    rep.add_argument("peer", choices=("dynamo", "vidur-vllm", "vidur-sarathi"))
    rep.add_argument("--jobs", type=int, default=2)
    exp = sub.add_parser("explain", help="one scenario asked of a peer: the verdict, its class, the first "
                                         "difference and serq-ref's rules there")
    exp.add_argument("peer", choices=("dynamo", "vidur-vllm", "vidur-sarathi"))
    exp.add_argument("scenario", help="a scenario file, a campaign file's case (FILE.jsonl#I), or a class of "
                                      "the record (its minimised case)")
    exp.add_argument("--data", default=str(ROOT / "docs" / "data" / "field.json"))
    tab = sub.add_parser("table", help="print docs/field.md's tables from the data")
    tab.add_argument("--data", default=str(ROOT / "docs" / "data" / "field.json"))
    tab.add_argument("--times", action="store_true", help="the runs' times and loads instead of the tables")
    tab.add_argument("--commands", action="store_true", help="each run's commands instead of the tables")
    args = parser.parse_args(argv)
    if args.command == "table":
        data = json.loads(Path(args.data).read_text())
        if args.times or args.commands:
            for run in data["runs"]:
                for part in run["parts"]:
                    if args.commands:
                        print(f"- {part['run']}: `{part.get('command', run['command'])}`")
                    else:
                        print(f"- {part['run']} ({part['cases']:,} cases, `{part['closing']}`): "
                              + "; ".join(part["time"]))
            return 0
        print("\n".join(table(data)))
        return 0
    if args.command == "explain":
        return explain(args.peer, args.scenario, args.data)
    if args.command == "replays":
        return grade_replays(Path(args.runs), args.peer, args.jobs)
    if args.command == "minimise":
        data = json.loads(Path(args.data).read_text())
        minimise_again(data, args.tries, tuple(p for p in args.peers.split(",") if p),
                       tuple(k for k in args.classes.split(",") if k))
        Path(args.out or args.data).write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
        return 0
    source = args.previous or args.out
    previous = json.loads(Path(source).read_text()) if os.path.exists(source) else None
    data = record(Path(args.runs), args.minimise, previous, tuple(p for p in args.peers.split(",") if p))
    Path(args.out).write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    print(f"{args.out}: {len(data['runs'])} runs, {len(data['classes'])} classes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
