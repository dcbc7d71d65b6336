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

from .scenario import answer_path, cases_in, read_json, request_key, run_ir, run_scenario

#: The figures of an answer besides its requests, compared when recorded.
FIGURES = ("preemptions", "steps")


@dataclass
class Case:
    """One scenario with its recorded answer (and documented variants' answers)."""

    label: str
    recorded: dict
    path: str | None = None  # the scenario (or IR) file; None: ``scenario`` is written out for an engine
    scenario: dict | None = None
    stem: str = ""  # the file name an engine gets when the case is written out
    variants: dict[str, dict] = field(default_factory=dict)


@dataclass
class Outcome:
    """A case's verdict: ``lines`` empty when it passed; ``variant`` the
    documented variant whose answer it gave, if not the recorded one."""

    label: str
    lines: list[str]
    variant: str | None = None

    @property
    def passed(self) -> bool:
        return not self.lines


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
        out.append(Case(label, read_json(answer_path(scenario)), path=scenario,
                        variants=_variant_files(scenario)))
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
                        stem=f"{stem}-{index}", variants=variants))
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

    def answer(self, case: Case) -> tuple[dict | None, str | None]:
        path = case.path
        if path is None:
            path = os.path.join(self.workdir, case.stem + ".json")
            with open(path, "w", encoding="utf-8") as f:
                f.write(json.dumps(case.scenario) + "\n")
        try:
            done = subprocess.run(self.argv + [path], capture_output=True, timeout=self.timeout,
                                  stdin=subprocess.DEVNULL)
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
        return Outcome(case.label, [f"{case.label}: {reason}"])
    lines = differences(case.label, case.recorded, answer, who)
    if not lines:
        return Outcome(case.label, [])
    for variant, variant_answer in case.variants.items():
        if not differences(case.label, variant_answer, answer, who):
            return Outcome(case.label, [], variant)
    return Outcome(case.label, lines)


def check(paths: list[str], command: str | None = None, jobs: int = 1, timeout: float = 60.0,
          report=None, older_rule: bool | None = None, workers: int = 1, ray: str | None = None,
          resume: str | None = None, progress: bool = False) -> list[Outcome]:
    """Every case of every path answered by serq-ref (``command`` None) or by
    ``command``; ``report(outcome)`` is called for each, in the cases' order.
    ``workers`` processes or a Ray cluster (``ray``) answer the cases
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
    outcomes = []
    journal = None
    if resume is not None:
        key = fingerprint("oracle check", command, older_rule, [(c.label, c.recorded, c.variants) for c in cases])
        journal = Journal(resume, key, len(cases), encode=lambda o: [o.label, o.lines, o.variant],
                          decode=lambda j: Outcome(*j))
    with tempfile.TemporaryDirectory(prefix="serq-ref-check-") as workdir, \
            CaseProgress(len(cases), "oracle check", draw=progress) as bar:
        engine = SerqRef(older_rule) if command is None else Command(command, timeout, workdir)
        pool = None
        if command is not None and jobs > 1:
            pool = ThreadPoolExecutor(max_workers=jobs)
            results = pool.map(functools.partial(answer_and_judge, engine), cases)
        else:
            results = run_cases(functools.partial(answer_and_judge, engine), cases, workers=workers, ray=ray,
                                progress=bar, journal=journal, labels=[case.label for case in cases])
        try:
            for outcome in results:
                outcomes.append(outcome)
                if pool is not None:
                    bar.advance()
                if report is not None:
                    report(outcome)
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
            if journal is not None:
                journal.close()
    return outcomes


def answer_and_judge(engine, case: Case) -> Outcome:
    """A case answered by ``engine`` and judged: a case of ``semantics.workers.run_cases``."""
    return judge(case, *engine.answer(case), engine.name)


def variant_line(outcome: Outcome) -> str:
    return (f"{outcome.label}: passed as the documented variant `{outcome.variant}` "
            f"(its recorded answer), not as the recorded answer")

