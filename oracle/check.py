"""``serq-ref oracle check PATH ... [--engine COMMAND]``: recorded answers
against an engine's (docs/conformance.md is the contract).

A case is a scenario with a recorded answer:

- in a directory: ``NAME.json`` with ``NAME.out.json`` beside it (and, for
  serq-ref's own engine only, ``NAME.ir.json``: the reference
  implementation's compiled oracle program); ``NAME.VARIANT.out.json`` beside
  it is the answer of a documented variant of the recorded engine (e.g.
  ``older-rule``: vLLM's older self-preemption rule, docs/vllm-0.33.md D1);
- in a campaign file ``FILE.jsonl`` (oracle/data/campaign): each line
  ``{seed, index, case, answer, answer_VARIANT?}``, the case a scenario (its
  ``kind`` dropped), labelled ``FILE.jsonl#INDEX``.

Without ``--engine`` serq-ref answers in process. With it, COMMAND (split as
a shell would, run without one) is run once per case with the scenario's path
appended and must print the answer in the ``.out.json`` shape on its standard
output; a case from a campaign file is written to a temporary
``NAME-INDEX.json`` first. A case passes when the engine's answer is the
recorded one (every request's first and done step, the preemptions and the
steps, and which requests were refused and why: ``refused``, absent when
none was), or the answer of a documented variant (said in a line). Everything
else fails with a line per request or figure that differs, or with the
reason the engine gave no answer (exit status, time-out, not JSON, not the
shape); the report closes with ``N passed, M failed``. serq-ref answers a
scenario under the vLLM rule its corpus was recorded on (oracle/scenario.py,
``recorded_vllm``: ../shared/oracle the older self-preemption rule,
oracle/data 0.33.0's), or the one ``older_rule`` names; an IR file under the
rule it has.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shlex
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from semantics.errors import SerqError, UsageError

from .scenario import (answer_path, cases_in, older_rule_for, read_json, read_json_text, request_key, run_ir,
                       run_scenario, split_label)

#: The figures of an answer besides its requests, compared when recorded.
FIGURES = ("preemptions", "steps")
#: The environment variable naming where an engine may write its schedule log (``--logs``).
LOG_VARIABLE = "SERQ_SCHEDULE_LOG"
#: The kinds of difference the summary counts, in its order, with what each says.
KINDS = {
    "exited": "the engine exited with a non-zero status",
    "timeout": "the engine gave no answer in time",
    "output": "the engine's output is not an answer (not JSON, not the shape)",
    "stopped": "serq-ref stopped",
    "preemptions": "preemption count",
    "first": "first-token step",
    "done": "done step",
    "steps": "steps (the last step + 1)",
}
#: The scenario features the summary counts failures by: (name, test of a scenario).
FEATURES = (
    ("prefix caching", lambda d: bool(d.get("prefix_caching"))),
    ("a serve key (priority path)", lambda d: "serve" in d),
    ("a long-prefill chunk threshold", lambda d: bool(d.get("chunk"))),
    ("staggered arrivals", lambda d: any(r.get("arrive", 0) for r in d["requests"])),
    ("several requests", lambda d: len(d["requests"]) > 1),
)


@dataclass
class Case:
    """One scenario with its recorded answer (and documented variants' answers)."""

    label: str
    recorded: dict
    path: str | None = None  # the scenario (or IR) file; None: ``scenario`` is written out for an engine
    scenario: dict | None = None
    stem: str = ""  # the file name an engine gets when the case is written out
    variants: dict[str, dict] = field(default_factory=dict)
    #: what ``--cases`` selects it by: a campaign line's ``index``; a directory's
    #: case's position among the directory's cases (from 0), and its NAME
    index: int = 0
    name: str = ""
    source: str = ""  # the PATH of the command line it came from

    def data(self) -> dict | None:
        """The scenario (None for an IR file: it has no scenario's fields)."""
        if self.scenario is not None:
            return self.scenario
        if self.path is not None and not self.path.endswith(".ir.json"):
            return read_json(self.path)
        return None


@dataclass
class Outcome:
    """A case's verdict: ``lines`` empty when it passed; ``variant`` the
    documented variant whose answer it gave, if not the recorded one."""

    label: str
    lines: list[str]
    variant: str | None = None
    #: what differs, by kind (``KINDS``): how many requests (1 for a figure, or for no answer)
    kinds: dict[str, int] = field(default_factory=dict)
    #: the engine's reason it cannot express the scenario (its answer ``{"unsupported": WHY}``):
    #: counted apart, neither passed nor failed (docs/conformance.md, "Unsupported")
    unsupported: str | None = None
    case: Case | None = field(default=None, repr=False, compare=False)

    @property
    def passed(self) -> bool:
        return not self.lines

    @property
    def failed(self) -> bool:
        return bool(self.lines) and self.unsupported is None


# --------------------------------------------------------------------------
# the cases of a directory or a campaign file
# --------------------------------------------------------------------------

def cases_of(path: str, engine: bool) -> list[Case]:
    """The cases of a directory or a ``.jsonl`` campaign file, in order (by
    file name; by line). An external engine gets scenarios only."""
    if path.endswith(".jsonl") and not os.path.isdir(path):
        return jsonl_cases(path)
    if not os.path.isdir(path):
        raise UsageError(f"no such directory or campaign file: {path}")
    out = []
    for scenario in cases_in(path):
        if engine and scenario.endswith(".ir.json"):
            continue
        label = os.path.join(os.path.basename(os.path.dirname(scenario)), os.path.basename(scenario))
        name = os.path.basename(scenario)
        name = name[:-len(".ir.json")] if name.endswith(".ir.json") else name[:-len(".json")]
        out.append(Case(label, read_json(answer_path(scenario)), path=scenario,
                        variants=_variant_files(scenario), index=len(out), name=name, source=path,
                        stem=f"{os.path.basename(os.path.normpath(path))}-{name}"))
    return out


def _variant_files(scenario: str) -> dict[str, dict]:
    """``NAME.VARIANT.out.json`` beside ``NAME.json``, by variant name."""
    if scenario.endswith(".ir.json"):
        return {}
    directory, name = os.path.split(scenario)
    stem = name[:-len(".json")]
    variants = {}
    for other in sorted(os.listdir(directory or ".")):
        if other.startswith(stem + ".") and other.endswith(".out.json") and other != stem + ".out.json":
            variant = other[len(stem) + 1:-len(".out.json")]
            if variant and "." not in variant:
                variants[variant] = read_json(os.path.join(directory, other))
    return variants


def jsonl_cases(path: str) -> list[Case]:
    """The cases of a campaign file: each line's case, answer and ``answer_VARIANT``s."""
    from semantics.errors import ProgramError, Span

    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise UsageError(f"no such directory or campaign file: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {path}: {e}") from None
    name = os.path.basename(path)
    stem = name[:-len(".jsonl")]
    label_dir = os.path.basename(os.path.dirname(os.path.abspath(path)))
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise ProgramError(f"not JSON: {e.msg}", Span(path, number, e.colno)) from None
        if not isinstance(record, dict) or not isinstance(record.get("case"), dict) \
                or not isinstance(record.get("answer"), dict):
            raise ProgramError("a campaign line is {seed, index, case, answer, ...}", Span(path, number, 1))
        if "requests" not in record["case"]:
            raise ProgramError(f"this case is {record['case'].get('kind', 'no scenario')!r}, not a scenario: a "
                               f"campaign file here is one of scenarios (a replay answers per turn: `serq-ref "
                               f"oracle campaign N --seed 1 --kind replay --recorded FILE` checks those)", Span(path, number, 1))
        index = record.get("index", number - 1)
        scenario = {k: v for k, v in record["case"].items() if k != "kind"}
        variants = {key[len("answer_"):].replace("_", "-"): value for key, value in sorted(record.items())
                    if key.startswith("answer_") and isinstance(value, dict)}
        out.append(Case(f"{label_dir}/{name}#{index}", record["answer"], scenario=scenario,
                        stem=f"{stem}-{index}", variants=variants, index=index, source=path))
    return out


# --------------------------------------------------------------------------
# the engines
# --------------------------------------------------------------------------

class SerqRef:
    """serq-ref's small-step engine, in process: a scenario under the vLLM rule
    ``older_rule`` says, or (None) the one its corpus was recorded on
    (oracle/scenario.py, ``recorded_vllm``; a campaign file's cases: 0.33.0's)."""

    name = "serq-ref"

    def __init__(self, older_rule: bool | None = None):
        self.older_rule = older_rule

    def answer(self, case: Case) -> tuple[dict | None, str | None]:
        try:
            if case.path is not None and case.path.endswith(".ir.json"):
                return run_ir(case.path), None
            if case.path is not None:
                return run_scenario(read_json(case.path), case.path, self.older_rule), None
            return run_scenario(case.scenario, case.label, self.older_rule), None
        except SerqError as e:
            return None, f"serq-ref stopped: {e.message}"


class Command:
    """An external engine: ``argv`` + the scenario's path, its answer on stdout."""

    name = "engine"

    def __init__(self, command: str, timeout: float, workdir: str):
        try:
            self.argv = shlex.split(command)
        except ValueError as e:
            raise UsageError(f"--engine {command!r}: {e}") from None
        if not self.argv:
            raise UsageError("--engine: an empty command")
        program = self.argv[0]
        if shutil.which(program) is None and not (os.sep in program and os.path.isfile(program)):
            raise UsageError(f"--engine: no such program: {program}")
        self.timeout = timeout
        self.workdir = workdir

    def answer(self, case: Case, log: str | None = None) -> tuple[dict | None, str | None]:
        """The engine's answer to ``case`` (or the reason it has none); with
        ``log``, the engine is asked to write its schedule log there (the
        environment's ``SERQ_SCHEDULE_LOG``: docs/conformance.md)."""
        path = case.path
        if path is None:
            path = os.path.join(self.workdir, case.stem + ".json")
            with open(path, "w", encoding="utf-8") as f:
                f.write(json.dumps(case.scenario) + "\n")
        env = None
        if log is not None:
            env = {**os.environ, LOG_VARIABLE: log}
        try:
            done = subprocess.run(self.argv + [path], capture_output=True, timeout=self.timeout,
                                  stdin=subprocess.DEVNULL, env=env)
        except subprocess.TimeoutExpired:
            return None, f"the engine gave no answer within {self.timeout:g} s"
        except OSError as e:
            return None, f"the engine could not be started: {e.strerror}"
        finally:
            if case.path is None:
                os.unlink(path)
        if done.returncode != 0:
            said = _last_line(done.stderr) or _last_line(done.stdout)
            return None, f"the engine exited with status {done.returncode}" + (f": {said}" if said else "")
        try:
            text = done.stdout.decode("utf-8")
        except UnicodeDecodeError:
            return None, "the engine's output is not UTF-8 text"
        try:
            answer = json.loads(text)
        except json.JSONDecodeError as e:
            shown = text.strip()[:60]
            return None, f"the engine's output is not JSON ({e.msg}): {shown!r}"
        if isinstance(answer, dict) and "unsupported" in answer:
            why = answer["unsupported"]
            if not isinstance(why, str) or not why.strip():
                return None, "the engine's answer is not the .out.json shape: `unsupported` is not a reason (a string)"
            return {"unsupported": why.strip()}, None
        problem = shape_problem(answer)
        if problem:
            return None, f"the engine's answer is not the .out.json shape: {problem}"
        return answer, None


def _last_line(data: bytes) -> str:
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def _is_step(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def shape_problem(answer: object) -> str | None:
    """What keeps ``answer`` from being an answer in the ``.out.json`` shape
    (docs/conformance.md), or None."""
    if not isinstance(answer, dict):
        return "not a JSON object"
    for key in ("first", "done"):
        if key not in answer:
            return f"no `{key}`"
        if not isinstance(answer[key], dict):
            return f"`{key}` is not an object of request id to step"
        for request, step in answer[key].items():
            if not _is_step(step):
                return f"`{key}` of request {request} is {json.dumps(step)}, not a number"
    for key in FIGURES:
        if key not in answer:
            return f"no `{key}`"
        if not _is_step(answer[key]):
            return f"`{key}` is {json.dumps(answer[key])}, not a number"
    refused = answer.get("refused", {})
    if not isinstance(refused, dict) or not all(isinstance(why, str) for why in refused.values()):
        return "`refused` is not an object of request id to a reason"
    cached = answer.get("cached", {})
    if not isinstance(cached, dict) or not all(_is_step(n) for n in cached.values()):
        return "`cached` is not an object of request id to a number of tokens"
    return None


# --------------------------------------------------------------------------
# the comparison
# --------------------------------------------------------------------------

def differences(label: str, recorded: dict, ours: dict, who: str = "serq-ref") -> list[str]:
    """One line per request, and per figure, where ``ours`` differs from
    ``recorded`` (numbers compare by value: 3 and 3.0 are the same step)."""
    lines = []
    requests = sorted(set(recorded.get("first", {})) | set(recorded.get("done", {})) | set(ours["first"])
                      | set(ours["done"]), key=request_key)
    for request in requests:
        want = (recorded.get("first", {}).get(request), recorded.get("done", {}).get(request))
        got = (ours["first"].get(request), ours["done"].get(request))
        if want != got:
            lines.append(f"{label}: request {request}: recorded first {_show(want[0])} done {_show(want[1])}, "
                         f"{who} first {_show(got[0])} done {_show(got[1])}")
    for figure in FIGURES:
        if figure in recorded and recorded[figure] != ours.get(figure):
            lines.append(f"{label}: {figure}: recorded {recorded[figure]}, {who} {_show(ours.get(figure))}")
    # the refused requests and why (docs/design/priorities-and-limits.md): absent is none
    want_refused, got_refused = recorded.get("refused", {}), ours.get("refused", {})
    for request in sorted(set(want_refused) | set(got_refused), key=request_key):
        if want_refused.get(request) != got_refused.get(request):
            lines.append(f"{label}: request {request}: recorded refused {_reason(want_refused.get(request))}, "
                         f"{who} refused {_reason(got_refused.get(request))}")
    # the prefix hit of each request's first admission, when the record has it (a scenario with
    # prompt_segments: docs/design/shared-prefixes.md); an answer without it differs
    if "cached" in recorded:
        want_cached, got_cached = recorded["cached"], ours.get("cached", {})
        for request in sorted(set(want_cached) | set(got_cached), key=request_key):
            if want_cached.get(request) != got_cached.get(request):
                lines.append(f"{label}: request {request}: recorded cached {_show(want_cached.get(request))}, "
                             f"{who} cached {_show(got_cached.get(request))}")
    return lines


def _reason(why) -> str:
    return "no" if why is None else json.dumps(why)


def _show(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def judge(case: Case, answer: dict | None, reason: str | None, who: str) -> Outcome:
    """A case's outcome from an engine's answer (or the reason it has none)."""
    if answer is None:
        return Outcome(case.label, [f"{case.label}: {reason}"], kinds={reason_kind(reason): 1})
    if "unsupported" in answer:
        return Outcome(case.label, [f"{case.label}: unsupported by the engine: {answer['unsupported']}"],
                       unsupported=answer["unsupported"])
    lines = differences(case.label, case.recorded, answer, who)
    if not lines:
        return Outcome(case.label, [])
    for variant, variant_answer in case.variants.items():
        if not differences(case.label, variant_answer, answer, who):
            return Outcome(case.label, [], variant)
    return Outcome(case.label, lines, kinds=difference_kinds(case.recorded, answer))


def reason_kind(reason: str) -> str:
    """The kind (``KINDS``) of the reason an engine gave no answer."""
    if reason.startswith("the engine gave no answer within"):
        return "timeout"
    if reason.startswith(("the engine exited", "the engine could not be started")):
        return "exited"
    if reason.startswith("serq-ref stopped"):
        return "stopped"
    return "output"


def difference_kinds(recorded: dict, ours: dict) -> dict[str, int]:
    """What differs between two answers, by kind: the requests whose first
    (or done) step differs, and each figure that differs (as 1)."""
    kinds: dict[str, int] = {}
    for key in ("first", "done"):
        requests = set(recorded.get(key, {})) | set(ours[key])
        n = sum(recorded.get(key, {}).get(r) != ours[key].get(r) for r in requests)
        if n:
            kinds[key] = n
    for figure in FIGURES:
        if figure in recorded and recorded[figure] != ours.get(figure):
            kinds[figure] = 1
    return kinds


@dataclass(frozen=True)
class Selection:
    """Which cases ``oracle check`` runs (``--cases``, ``--every``, ``--limit``):
    every ``every``-th case by position in the whole list, and the cases
    ``items`` names (an index: a campaign line's ``index``, a directory
    case's position there from 0; a name: a directory's NAME.json); with
    ``items`` alone, only those; then the first ``limit``. Default: every case."""

    items: tuple[str, ...] = ()
    every: int | None = None
    limit: int | None = None

    def choose(self, cases: list[Case]) -> list[Case]:
        indices = {int(item) for item in self.items if item.isdigit()}
        names = {item for item in self.items if not item.isdigit()}
        every = self.every if self.every is not None else (None if self.items else 1)
        chosen = [case for k, case in enumerate(cases)
                  if (every is not None and k % every == 0) or case.index in indices or case.name in names]
        for item in self.items:
            if not any(case.index == int(item) if item.isdigit() else case.name == item for case in cases):
                raise UsageError(f"--cases {item}: no case " + (f"with index {item}" if item.isdigit() else
                                                                  f"named {item}") + " in "
                                 + ", ".join(dict.fromkeys(case.source for case in cases)))
        return chosen if self.limit is None else chosen[:self.limit]


def parse_cases(text: str) -> tuple[str, ...]:
    """``--cases I,J,...``: indices (``3``), ranges (``10-20``, both ends in)
    and directory case names, in order, each once."""
    items: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        low, dash, high = part.partition("-")
        if dash and low.isdigit() and high.isdigit():
            if int(high) < int(low):
                raise UsageError(f"--cases {part}: a range goes up")
            if int(high) - int(low) > 1_000_000:
                raise UsageError(f"--cases {part}: a range of at most a million cases")
            items += [str(k) for k in range(int(low), int(high) + 1)]
        elif part.isdigit() or all(c.isalnum() or c in "_-." for c in part):
            items.append(str(int(part)) if part.isdigit() else part)
        else:
            raise UsageError(f"--cases {part!r}: an index, a range I-J or a scenario NAME")
    return tuple(dict.fromkeys(items))


@dataclass
class Logs:
    """``--logs DIR`` (made by ``logs_in``): each failed case's schedule logs, the engine's
    (``NAME.engine.log``, when it wrote one) and serq-ref's (``NAME.serq-ref.log``);
    ``missing``: the failed cases the engine wrote no log for."""

    directory: str
    written: dict[str, tuple[str | None, str]] = field(default_factory=dict)  # label -> (engine's, serq-ref's)
    missing: list[str] = field(default_factory=list)


def check(paths: list[str], command: str | None = None, jobs: int = 1, timeout: float = 60.0,
          report=None, older_rule: bool | None = None, selection: Selection = Selection(),
          logs: Logs | None = None, workers: int = 1, ray: str | None = None,
          resume: str | None = None, progress: bool = False) -> list[Outcome]:
    """The cases of every path that ``selection`` chooses, answered by
    serq-ref (``command`` None) or by ``command``; ``report(outcome)`` is
    called for each, in the cases' order. With ``logs``, every failed case's
    schedule logs are written to its directory (``keep_logs``). ``workers``
    processes or a Ray cluster (``ray``) answer the cases
    (semantics/workers.py), ``resume`` a journal of the cases answered;
    ``progress``: a bar on a terminal's stderr."""
    from semantics.progress import CaseProgress
    from semantics.workers import Journal, fingerprint, run_cases

    cases = []
    for path in paths:
        found = cases_of(path, command is not None)
        if not found:
            raise UsageError(f"{path} has no case: no scenario NAME.json with its answer NAME.out.json beside it"
                             if os.path.isdir(path) else f"{path} has no case")
        cases += found
    cases = selection.choose(cases)
    if not cases:
        raise UsageError("no case chosen (--limit 0)")
    outcomes = []
    journal = None
    if resume is not None:
        key = fingerprint("oracle check", command, older_rule, [(c.label, c.recorded, c.variants) for c in cases])
        journal = Journal(resume, key, len(cases), encode=lambda o: [o.label, o.lines, o.variant, o.kinds, o.unsupported],
                          decode=lambda j: Outcome(*j))
    with tempfile.TemporaryDirectory(prefix="serq-ref-check-") as workdir, \
            CaseProgress(len(cases), "oracle check", draw=progress) as bar:
        engine = SerqRef(older_rule) if command is None else Command(command, timeout, workdir)
        one = functools.partial(answer_and_judge, engine, logs=workdir if logs is not None else None)
        pool = None
        if command is not None and jobs > 1:
            pool = ThreadPoolExecutor(max_workers=jobs)
            results = pool.map(one, cases)
        else:
            results = run_cases(one, cases, workers=workers, ray=ray,
                                progress=bar, journal=journal, labels=[case.label for case in cases])
        try:
            for case, outcome in zip(cases, results):
                outcome.case = case  # here, not in the worker: no case travels back from a process, a cluster or a journal
                outcomes.append(outcome)
                if pool is not None:
                    bar.advance()
                if logs is not None and outcome.failed:
                    keep_logs(outcome.case, logs, workdir if command is not None else None, older_rule)
                if report is not None:
                    report(outcome)
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
            if journal is not None:
                journal.close()
    return outcomes


def answer_and_judge(engine, case: Case, logs: str | None = None) -> Outcome:
    """A case answered by ``engine`` and judged; with ``logs`` (a directory) an
    external engine is asked to write its schedule log there, as
    ``STEM.log``, kept only when the case fails."""
    if logs is None or isinstance(engine, SerqRef):
        outcome = judge(case, *engine.answer(case), engine.name)
    else:
        log = os.path.join(logs, case.stem + ".log")
        outcome = judge(case, *engine.answer(case, log), engine.name)
        if outcome.passed and os.path.exists(log):
            os.unlink(log)
    return outcome


def logs_in(directory: str) -> Logs:
    """``--logs DIR``: the directory made if it is not there."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--logs {directory}: cannot make the directory: {e.strerror}") from None
    return Logs(directory)


def keep_logs(case: Case, kept: Logs, workdir: str | None, older_rule: bool | None) -> None:
    """A failed case's logs into ``kept.directory``: the engine's, from where it
    was asked to write it (``workdir``; None: serq-ref was the engine), and serq-ref's."""
    from .schedule_log import serq_log, write_log

    engine_log = None
    if workdir is not None:
        written = os.path.join(workdir, case.stem + ".log")
        if os.path.exists(written):
            engine_log = os.path.join(kept.directory, case.stem + ".engine.log")
            shutil.move(written, engine_log)
        else:
            kept.missing.append(case.label)
    data = _valid(case)
    serq = os.path.join(kept.directory, case.stem + ".serq-ref.log")
    if data is None:
        return
    try:
        _, log = serq_log(data, case.path or case.label, older_rule if case.path else
                          (older_rule if older_rule is not None else older_rule_for(case.source)))
    except SerqError:
        return
    write_log(log, serq)
    kept.written[case.label] = (engine_log, serq)


def summary(outcomes: list[Outcome], command: str | None, shown: int = 5) -> list[str]:
    """The lines after the cases' own: the failed cases counted by kind of
    difference (a case may count under several) and by scenario feature (of
    the cases checked that have it), a few of each kind's labels, and the
    command that runs the failed cases again. Empty when fewer than two
    failed (one case's own lines say all of it)."""
    cases = [o.case for o in outcomes]
    failed = [(o, o.case) for o in outcomes if o.failed]
    if len(failed) < 2:
        return []
    lines = [f"summary: {len(failed):,} of {len(outcomes):,} cases failed"]
    lines.append("  by kind of difference (a case may have several):")
    for kind, meaning in KINDS.items():
        labels = [o.label for o, _ in failed if kind in o.kinds]
        if not labels:
            continue
        requests = sum(o.kinds[kind] for o, _ in failed if kind in o.kinds)
        count = f"{len(labels):,} case" + ("s" if len(labels) != 1 else "")
        if kind in ("first", "done"):
            count += f", {requests:,} request" + ("s" if requests != 1 else "")
        lines.append(f"    {meaning}: {count}: " + ", ".join(labels[:shown]) + (", …" if len(labels) > shown else ""))
    datas = [_valid(c) for c in cases]
    if any(d is not None for d in datas):
        lines.append("  by scenario feature (failed of the cases checked with it):")
        failing = {id(c) for _, c in failed}
        for name, has in FEATURES:
            with_it = [c for c, d in zip(cases, datas) if d is not None and has(d)]
            bad = sum(id(c) in failing for c in with_it)
            lines.append(f"    {name}: {bad:,} of {len(with_it):,}")
    by_source: dict[str, list[Case]] = {}
    for _, c in failed:
        by_source.setdefault(c.source, []).append(c)
    engine_part = f" --engine {shlex.quote(command)}" if command is not None else ""
    for source, bad in by_source.items():
        items = [str(c.index) if c.path is None else c.name for c in bad]
        more = f" (the first 20 of {len(items):,})" if len(items) > 20 else ""
        lines.append(f"  again{more}: serq-ref oracle check {shlex.quote(source)} --cases {','.join(items[:20])}"
                     f"{engine_part}")
    first = failed[0][1]
    alone = f"{first.source}#{first.index}" if first.path is None else first.path
    if not alone.endswith(".ir.json"):
        lines.append(f"  the first alone, with serq-ref's schedule log: serq-ref oracle run {shlex.quote(alone)} "
                     f"--log FILE")
    return lines


def _valid(case: Case) -> dict | None:
    """The case's scenario when it is one (``check_scenario``), else None."""
    from .scenario import check_scenario

    try:
        data = case.data()
        if data is not None:
            check_scenario(data)
        return data
    except SerqError:
        return None


def diverge_lines(kept: Logs, count: int, show_paths: bool = True) -> list[str]:
    """``oracle diverge`` of serq-ref's log against the engine's, for the first
    ``count`` failed cases with both logs (serq-ref's answer is vLLM 0.33.0's
    on the corpus but D11's case, so its log stands in for vLLM's)."""
    from .schedule_log import diverge, read_log

    lines = []
    pairs = [(label, engine, serq) for label, (engine, serq) in kept.written.items() if engine is not None]
    for label, engine, serq in pairs[:count]:
        lines.append(f"diverge {label}: serq-ref's log (A) against the engine's (B)"
                     + (f": serq-ref oracle diverge {shlex.quote(serq)} {shlex.quote(engine)}" if show_paths else ""))
        try:
            found, _ = diverge(read_log(serq), read_log(engine))
        except SerqError as e:
            found = [f"the engine's log is not a schedule log: {e.message}"]
        lines += [f"  {line}" for line in found]
    if not pairs and kept.missing:
        lines.append(f"diverge: the engine wrote no schedule log for the {len(kept.missing):,} failed case(s) "
                     f"(an engine writes it to the path ${LOG_VARIABLE} names: docs/conformance.md)")
    return lines


def variant_line(outcome: Outcome) -> str:
    return (f"{outcome.label}: passed as the documented variant `{outcome.variant}` "
            f"(its recorded answer), not as the recorded answer")



def campaign_case(spec: str) -> tuple[dict, dict]:
    """The scenario and the recorded answer of the campaign case ``FILE.jsonl#INDEX``
    (the line whose ``index`` is INDEX); a label naming no case, or a file that
    is no campaign file, is a usage error naming the label."""
    file, index = split_label(spec)
    if not os.path.isfile(file):
        raise UsageError(f"{spec}: no such campaign file: {file}")
    cases = jsonl_cases(file)
    for case in cases:
        if case.index == index:
            return case.scenario, case.recorded
    known = sorted(case.index for case in cases)
    span = f"#{known[0]} to #{known[-1]}" if known else "none"
    raise UsageError(f"{spec}: the file has no case with index {index} (its cases: {span})")


def read_scenario(spec: str, older_rule: bool | None = None) -> tuple[object, str | None, bool]:
    """A scenario given on a command line: a file's path, or a campaign case's
    label ``FILE.jsonl#INDEX``. Returns the scenario, its JSON text (None for
    a campaign case: its errors are located at the label) and the vLLM rule it
    runs under (``older_rule``, else the one its corpus was recorded on)."""
    if split_label(spec) is not None:
        data, _ = campaign_case(spec)
        return data, None, older_rule_for(split_label(spec)[0], older_rule)
    data, text = read_json_text(spec)
    return data, text, older_rule_for(spec, older_rule)


