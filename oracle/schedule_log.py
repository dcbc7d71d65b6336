"""The per-step schedule log (docs/conformance.md, "The schedule log"): what
an engine did at each step of a scenario, in a form any engine can write, and
the first step at which two engines' logs differ.

A log is JSON lines. The first is a header::

    {"format": "serq-schedule-log", "version": 1, "engine": "serq-ref 0.1.0", "scenario": "preempt.json"}

then one line per step at which something happened, by step number::

    {"step": 2, "scheduled": [{"request": "0", "tokens": 1, "mode": "decode"}],
     "admitted": [], "preempted": ["1"], "finished": [],
     "rules": {"0": ["step/schedule", "step/grow"], "1": ["step/schedule", "pool/preempt", "step/grow"]}}

``scheduled`` lists the requests the step computed tokens for, in the order
the engine scheduled them, with the tokens and (optionally) ``prefill`` or
``decode``; ``admitted`` the requests moved from waiting to running at this
step, ``preempted`` the victims in the order they were chosen, ``finished``
the requests whose last token this step sampled. A step with none of these
may be left out; a step left out is an empty one. An engine that records
only some of the four says which in the header (``"fields": ["scheduled",
"preempted"]``), and one whose lists are not in decision order says which
(``"unordered": ["preempted"]``): diverge compares what both record, in
order only where both keep it. ``rules`` is optional
(serq-ref writes it): per request, the named rules of the semantics applied
to it in that step, in order, each once.

serq-ref writes its log from the step trace of the scenario's program
(semantics.smallstep.driver.trace): an iteration that starts at time t is
step t + 1 (the step clock: an iteration costs 1), as oracle.campaign's
``serq_steps`` reads it.
"""

from __future__ import annotations

import json
import sys

from semantics.errors import ProgramError, Span, UsageError

from .scenario import request_key

FORMAT = "serq-schedule-log"
VERSION = 1
#: The fields of a step record, besides ``step``; the four compared.
COMPARED = ("scheduled", "admitted", "preempted", "finished")
MODES = ("prefill", "decode")


# --------------------------------------------------------------------------
# serq-ref's log
# --------------------------------------------------------------------------

def serq_log(data: dict, path: str = "<scenario>", older_rule: bool | None = None,
             text: str | None = None) -> tuple[dict, list[dict]]:
    """A scenario's answer and its schedule log on serq-ref (header first), under the vLLM rule
    ``run_scenario`` takes (``older_rule``; None: the one the scenario's corpus was recorded on);
    ``text``: the JSON text of ``data``, to locate its errors in."""
    from semantics import SERQ_VERSION
    from semantics.smallstep.driver import trace

    from .scenario import older_rule_for, run_scenario, scenario_program

    older_rule = older_rule_for(path, older_rule)
    answer = run_scenario(data, path, older_rule, text)
    program = scenario_program(data, path, older_rule=older_rule, text=text)
    header = {"format": FORMAT, "version": VERSION, "engine": f"serq-ref {SERQ_VERSION}",
              "scenario": path.replace("\\", "/").rsplit("/", 1)[-1]}
    return answer, [header] + steps_of_trace(trace(program))


def steps_of_trace(records) -> list[dict]:
    """The step records of a scenario program's step trace."""
    steps: dict[int, dict] = {}
    current: dict | None = None
    scheduled: dict[str, dict] = {}   # request -> its entry, in scheduling order
    growing: dict[str, dict] = {}     # scheduled on condition that its grow succeeds
    rules: dict[str, list[str]] = {}

    def close() -> None:
        if current is None:
            return
        current["scheduled"] = [entry for entry in scheduled.values() if entry["tokens"] > 0]
        current["rules"] = {request: names for request, names in sorted(rules.items(), key=lambda kv: int(kv[0]))}

    for record in records:
        rule = record["rule"]
        if rule == "step/iteration-start":
            close()
            number = _whole(record["time"]) + 1
            current = steps.setdefault(number, _empty(number))
            scheduled, growing, rules = {}, {}, {}
            continue
        if rule == "session/observe" and record.get("name") == "done":
            number = _whole(record["time"])
            steps.setdefault(number, _empty(number))["finished"].append(str(record["session"]))
        if current is None or "session" not in record:
            continue
        request = str(record["session"])
        names = rules.setdefault(request, [])
        if rule not in names and not rule.startswith("session/set"):
            names.append(rule)
        if rule == "step/schedule":
            entry = {"request": request, "tokens": _whole(record["tokens"])}
            if record.get("mode") in MODES:
                entry["mode"] = record["mode"]
            if record.get("grow", 0) > 0:
                growing[request] = entry
                scheduled.setdefault(request, {"request": request, "tokens": 0})
            else:
                _add(scheduled, entry)
        elif rule == "step/grow":
            entry = growing.pop(request, None)
            if entry is not None and record.get("outcome") == "grew":
                scheduled[request] = {**entry, "tokens": scheduled[request]["tokens"] + entry["tokens"]}
        elif rule == "step/withdraw":
            scheduled.pop(request, None)
            growing.pop(request, None)
        elif rule == "step/admit":
            current["admitted"].append(request)
        elif rule == "pool/preempt":
            current["preempted"].append(request)
    close()
    out = []
    for number in sorted(steps):
        step = steps[number]
        step.setdefault("scheduled", [])
        step.setdefault("rules", {})
        if any(step[key] for key in COMPARED):
            out.append(step)
    return out


def _empty(number: int) -> dict:
    return {"step": number, "admitted": [], "preempted": [], "finished": []}


def _add(scheduled: dict[str, dict], entry: dict) -> None:
    before = scheduled.get(entry["request"])
    if before is None:
        scheduled[entry["request"]] = entry
    else:
        scheduled[entry["request"]] = {**before, **entry, "tokens": before["tokens"] + entry["tokens"]}


def _whole(x: float) -> int | float:
    return int(x) if float(x).is_integer() else x


def write_log(log: list[dict], path: str) -> None:
    text = "".join(json.dumps({key: record[key] for key in _order(record)}) + "\n" for record in log)
    if path == "-":
        sys.stdout.write(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror}") from None


def _order(record: dict) -> list[str]:
    """A record's keys in the documented order, any others after them by name."""
    known = ("format", "version", "engine", "scenario", "step") + COMPARED + ("rules",)
    return [k for k in known if k in record] + sorted(k for k in record if k not in known)


# --------------------------------------------------------------------------
# reading a log (any engine's)
# --------------------------------------------------------------------------

def read_log(path: str) -> dict:
    """A schedule log: ``{"path", "header", "steps": {number: record}}``; a
    ProgramError at the line (and column) of anything not in the format."""
    from semantics.textfile import read_text

    text = read_text(path)
    header, steps, last = None, {}, None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = Span(path, number, 1)
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise ProgramError(f"not JSON: {e.msg}", Span(path, number, e.colno)) from None
        if not isinstance(record, dict):
            raise ProgramError("a log line is a JSON object", where)
        if header is None:
            if record.get("format") != FORMAT:
                raise ProgramError(f'the first line is the header {{"format": "{FORMAT}", "version": {VERSION}, '
                                   f'"engine": ...}}', where)
            if record.get("version") != VERSION:
                raise ProgramError(f"schedule log version {json.dumps(record.get('version'))}: this serq-ref reads "
                                   f"version {VERSION}", where)
            for key in ("fields", "unordered"):
                value = record.get(key, list(COMPARED) if key == "fields" else [])
                if not isinstance(value, list) or any(v not in COMPARED for v in value):
                    raise ProgramError(f"`{key}` is a list of some of {', '.join(COMPARED)}", where)
            header = record
            continue
        step = _check_step(record, where)
        if last is not None and step["step"] <= last:
            raise ProgramError(f"step {step['step']} after step {last}: steps go up", where)
        last = step["step"]
        steps[step["step"]] = step
    if header is None:
        raise ProgramError("an empty file: a log starts with its header line", Span(path, 1, 1))
    return {"path": path, "header": header, "steps": steps}


def _check_step(record: dict, where: Span) -> dict:
    number = record.get("step")
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not float(number).is_integer() \
            or number < 1:
        raise ProgramError(f"`step` is {json.dumps(number)}: a whole number from 1", where)
    out = {"step": int(number), "rules": {}}
    scheduled = record.get("scheduled", [])
    if not isinstance(scheduled, list):
        raise ProgramError("`scheduled` is a list of {request, tokens, mode?}", where)
    out["scheduled"] = []
    for entry in scheduled:
        if not isinstance(entry, dict) or "request" not in entry or "tokens" not in entry:
            raise ProgramError("`scheduled` is a list of {request, tokens, mode?}", where)
        tokens = entry["tokens"]
        if isinstance(tokens, bool) or not isinstance(tokens, (int, float)) or tokens < 0:
            raise ProgramError(f"request {entry['request']}: `tokens` is {json.dumps(tokens)}, not a count", where)
        if "mode" in entry and entry["mode"] not in MODES:
            raise ProgramError(f"request {entry['request']}: `mode` is {json.dumps(entry['mode'])}: "
                               f"\"prefill\" or \"decode\"", where)
        out["scheduled"].append({"request": str(entry["request"]), "tokens": _whole(tokens),
                                 **({"mode": entry["mode"]} if "mode" in entry else {})})
    for key in ("admitted", "preempted", "finished"):
        value = record.get(key, [])
        if not isinstance(value, list):
            raise ProgramError(f"`{key}` is a list of request ids", where)
        out[key] = [str(request) for request in value]
    rules = record.get("rules", {})
    if not isinstance(rules, dict) or not all(isinstance(v, list) for v in rules.values()):
        raise ProgramError("`rules` is an object of request id to a list of rule names", where)
    out["rules"] = {str(k): [str(name) for name in v] for k, v in rules.items()}
    return out


# --------------------------------------------------------------------------
# the first step at which two logs differ
# --------------------------------------------------------------------------

def _empty_step(number: int) -> dict:
    return {"step": number, "scheduled": [], "admitted": [], "preempted": [], "finished": [], "rules": {}}


def step_differences(a: dict, b: dict, fields=COMPARED, ordered=("preempted",)) -> list[tuple[str, str | None]]:
    """What differs between two engines' records of one step: (what, the
    request it concerns or None). ``scheduled`` compares each request's
    tokens, and its mode where both give one (not the order); ``admitted``
    and ``finished`` as sets; ``preempted`` in order (the victims' order is
    a decision)."""
    out: list[tuple[str, str | None]] = []
    sa = {e["request"]: e for e in a["scheduled"]} if "scheduled" in fields else {}
    sb = {e["request"]: e for e in b["scheduled"]} if "scheduled" in fields else {}
    for request in sorted(set(sa) | set(sb), key=request_key):
        ea, eb = sa.get(request), sb.get(request)
        if ea is None or eb is None or ea["tokens"] != eb["tokens"]:
            out.append((f"request {request}: scheduled {_tokens(ea)} against {_tokens(eb)}", request))
        elif "mode" in ea and "mode" in eb and ea["mode"] != eb["mode"]:
            out.append((f"request {request}: {ea['mode']} against {eb['mode']}", request))
    for key in [k for k in ("admitted", "finished", "preempted") if k in fields]:
        if key == "preempted" and key in ordered:
            continue
        only_a = sorted(set(a[key]) - set(b[key]), key=request_key)
        only_b = sorted(set(b[key]) - set(a[key]), key=request_key)
        for request in only_a:
            out.append((f"request {request}: {key} in A only", request))
        for request in only_b:
            out.append((f"request {request}: {key} in B only", request))
    if "preempted" in fields and "preempted" in ordered and a["preempted"] != b["preempted"]:
        concerned = sorted(set(a["preempted"]) ^ set(b["preempted"]), key=request_key) \
            or sorted(set(a["preempted"]), key=request_key)
        out.append((f"preempted {_ids(a['preempted'])} against {_ids(b['preempted'])}", None))
        out += [("", request) for request in concerned]
    return out


def _tokens(entry: dict | None) -> str:
    if entry is None:
        return "nothing"
    return f"{entry['tokens']}" + (f" ({entry['mode']})" if "mode" in entry else "")


def _ids(requests: list[str]) -> str:
    return "[" + ", ".join(requests) + "]"


def show_step(step: dict) -> str:
    """One engine's record of a step, on one line."""
    scheduled = ", ".join(f"{e['request']}: {e['tokens']}" + (f" {e['mode']}" if "mode" in e else "")
                          for e in step["scheduled"]) or "nothing"
    parts = [f"scheduled {scheduled}"]
    for key in ("admitted", "preempted", "finished"):
        if step[key]:
            parts.append(f"{key} {_ids(step[key])}")
    return "; ".join(parts)


def compared(a: dict, b: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The fields both logs record, and those of them both keep in decision order."""
    def listed(log: dict, key: str, default) -> list[str]:
        return log["header"].get(key, default)

    fields = tuple(f for f in COMPARED if f in listed(a, "fields", COMPARED) and f in listed(b, "fields", COMPARED))
    ordered = tuple(f for f in ("preempted",) if f not in listed(a, "unordered", []) + listed(b, "unordered", []))
    return fields, ordered


def first_difference(a: dict, b: dict) -> int | None:
    """The first step number at which the logs differ, or None."""
    fields, ordered = compared(a, b)
    for number in sorted(set(a["steps"]) | set(b["steps"])):
        if step_differences(a["steps"].get(number, _empty_step(number)), b["steps"].get(number, _empty_step(number)),
                            fields, ordered):
            return number
    return None


def diverge(a: dict, b: dict) -> tuple[list[str], bool]:
    """The report of ``oracle diverge``: (lines, whether the logs differ)."""
    names = (f"A ({a['header'].get('engine', '?')}, {a['path']})", f"B ({b['header'].get('engine', '?')}, {b['path']})")
    number = first_difference(a, b)
    if number is None:
        steps = len(set(a["steps"]) | set(b["steps"]))
        return [f"no difference: the two logs agree at every step ({steps} steps with something done)"], False
    sa = a["steps"].get(number, _empty_step(number))
    sb = b["steps"].get(number, _empty_step(number))
    found = step_differences(sa, sb, *compared(a, b))
    lines = [f"first difference at step {number}"]
    lines += [f"  {what}" for what, _ in found if what]
    lines.append(f"  {names[0]}: {show_step(sa)}")
    lines.append(f"  {names[1]}: {show_step(sb)}")
    concerned = []
    for _, request in found:
        if request is not None and request not in concerned:
            concerned.append(request)
    # a victim decides what the step does after it (a request that preempts
    # itself ends the pass): its rules are shown too
    for request in sa["preempted"] + sb["preempted"]:
        if request not in concerned:
            concerned.append(request)
    for side, step in (("A", sa), ("B", sb)):
        if not step["rules"]:
            continue
        lines.append(f"  the rules of {side} at step {number}:")
        for request in concerned or sorted(step["rules"], key=request_key):
            rules = step["rules"].get(request)
            lines.append(f"    request {request}: " + (", ".join(rules) if rules else "no rule applied to it"))
    return lines, True


# --------------------------------------------------------------------------
# the real vLLM scheduler's log
# --------------------------------------------------------------------------

def vllm_log(data: dict, path: str = "<scenario>", python=None, older_rule: bool = False,
             text: str | None = None) -> tuple[dict, list[dict]]:
    """A scenario's answer and schedule log on the real vLLM 0.33.0 scheduler
    (oracle/real/driver.py, its ``step_trace``; with ``older_rule`` its
    self-preemption rule patched to the older one, D1): per ``schedule()``
    call the tokens of each request and the preempted ids, which the driver
    sorts; it says nothing of admissions and finishes. ``text``: the JSON
    text of ``data``, to locate its errors in."""
    from . import real
    from .scenario import check_scenario

    check_scenario(data, path, text)
    job = real.scenario_job({k: v for k, v in data.items() if k != "kind"}, step_trace=True,
                            **({"self_preempt_ends_pass": True} if older_rule else {}))
    (answer,) = real.answer_all([job], python)
    if "error" in answer:
        raise ProgramError(f"the real scheduler could not run it: {answer['error']}", Span(path, 1, 1))
    header = {"format": FORMAT, "version": VERSION, "engine": f"vLLM {real.VLLM_VERSION} (oracle/real/driver.py)",
              "scenario": path.replace("\\", "/").rsplit("/", 1)[-1], "fields": ["scheduled", "preempted"],
              "unordered": ["preempted"]}
    steps = []
    for time_, tokens, preempted in answer["step_trace"]:
        steps.append({"step": _whole(time_),
                      "scheduled": [{"request": str(r), "tokens": int(n)} for r, n in tokens.items()],
                      "preempted": [str(r) for r in preempted]})
    return real.recorded_fields(answer), [header] + steps
