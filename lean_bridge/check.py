"""``serq-ref lean check PATH…``: three answers per recorded scenario.

For every scenario with a recorded answer (``NAME.json`` beside
``NAME.out.json``): the theorem's right-hand side (the recorded answer, as
emit.py writes it), the mirror's outcome (lean_bridge.mirror, the Python
transcription of the Lean definitions) and the small-step interpreter's
(lean_bridge.interpreter). A scenario passes when every available answer is
the recorded one; while the interpreter cannot run step stages its column is
reported as unavailable, with its reason, and is not counted as agreeing.

A PATH is a directory of scenarios or a campaign file (FILE.jsonl, one case
and its answer a line: oracle/data/campaign/scenarios.jsonl, serve.jsonl;
read by oracle.check.jsonl_cases), each case labelled ``DIR/FILE.jsonl#INDEX``.
A campaign case runs under the self-preemption rule of the vLLM its file
was recorded on (oracle/data: 0.33.0's, the pass continues) and is compared
with ``answer``; under ``older_rule`` with the older revision's rule and its
``answer_older_rule`` where it has one; its program is the one the oracle
harness runs (lean_bridge.scenario.harness_program), prefix caching
included. A case the oracle campaign lists as a documented divergence
(oracle.campaign.KNOWN: serve.jsonl#311 is D11) is not a failure: it is
reported on its own line with its verdict and its three answers when it
disagrees, and not counted. A case the translation refuses is a failure.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from semantics.errors import SerqError

from .interpreter import InterpreterUnavailable, interpreter_answer
from .mirror.exec import initial, outcome_of, refusals_of, tick
from .scenario import Answer, load, scenarios_in

#: The most ticks a check lets the mirror run (a scenario that does not halt by then fails).
TICK_LIMIT = 1_000_000


@dataclass(frozen=True)
class Checked:
    name: str
    recorded: Answer | None
    mirror: Answer | None
    interpreter: Answer | None
    unavailable: str | None   # why the interpreter has no answer
    error: str | None         # why the scenario could not be checked
    known: str | None = None  # the documented divergence of a campaign case (oracle.campaign.KNOWN)

    @property
    def agrees(self) -> bool:
        return (self.error is None and self.mirror == self.recorded
                and (self.interpreter is None or self.interpreter == self.recorded))

    @property
    def passed(self) -> bool:
        return self.agrees

    @property
    def counted(self) -> bool:
        """Counted in ``N passed, M failed``: not a documented divergence that shows."""
        return self.known is None or self.agrees


def describe(answer: Answer | None) -> str:
    if answer is None:
        return "none"
    refused = f", refused {list(answer.refused)}" if answer.refused else ""
    return f"(firsts {list(answer.firsts)}, dones {list(answer.dones)}, preemptions {answer.preemptions}{refused})"


def mirror_answer(program) -> Answer:
    """``outcome program fuel`` with the fuel the run takes to halt: the
    machine is run once, tick by tick until it halts (``Exec.run`` with that
    fuel is the same ticks), and the outcome read off it."""
    m = initial(program)
    for _ in range(TICK_LIMIT):
        if m.halted:
            break
        m = tick(program, m)
    else:
        if not m.halted:
            raise RuntimeError(f"the mirror does not halt within {TICK_LIMIT} ticks")
    firsts, dones, preemptions = outcome_of(program, m)
    return Answer(firsts, dones, preemptions, refusals_of(m))


def check_scenario(path: str, label: str, older_rule: bool | None = None) -> Checked:
    return _three(label, lambda: load(path, older_rule))


def _three(label: str, loader, known: str | None = None) -> Checked:
    """The three answers of the scenario ``loader()`` loads."""
    try:
        sc = loader()
        mirror = mirror_answer(sc.translation.program)
    except (SerqError, RuntimeError) as e:
        message = e.message if isinstance(e, SerqError) else str(e)
        where = f"{e.span.file}:{e.span.line}:{e.span.col}: " if isinstance(e, SerqError) and e.span else ""
        return Checked(label, None, None, None, None, f"{where}{message}", known=known)
    try:
        interpreter, unavailable = interpreter_answer(sc.program), None
    except InterpreterUnavailable as e:
        interpreter, unavailable = None, e.reason
    except SerqError as e:
        return Checked(label, sc.answer, mirror, None, None, f"the interpreter failed: {e.message}", known=known)
    return Checked(label, sc.answer, mirror, interpreter, unavailable, None, known=known)


@dataclass(frozen=True)
class Selection:
    """Which cases of a campaign file are checked: every ``every``-th by
    position (0, every, 2·every, …), plus the indices ``extra``, plus (when
    ``variants``) every case whose answers under the two self-preemption
    rules differ (D1's cases), plus every documented divergence; then the
    first ``limit`` of those. The default is every case."""

    every: int = 1
    extra: frozenset[int] = frozenset()
    variants: bool = False
    limit: int | None = None

    def choose(self, cases: list, known: set[int]) -> list:
        chosen = [c for k, c in enumerate(cases)
                  if k % self.every == 0 or _index(c) in self.extra or _index(c) in known
                  or (self.variants and any(_differ(c.recorded, v) for v in c.variants.values()))]
        return chosen if self.limit is None else chosen[:self.limit]


def _index(case) -> int:
    return int(case.label.rsplit("#", 1)[1])


def _differ(a: dict, b: dict) -> bool:
    return any(a.get(k) != b.get(k) for k in ("first", "done", "preemptions"))


def campaign_kind(path: str) -> str:
    """The kind oracle.campaign files a campaign file's cases under."""
    return "serve" if os.path.basename(path) == "serve.jsonl" else "scenario"


def check_campaign(path: str, older_rule: bool | None = None, selection: Selection = Selection()) -> list[Checked]:
    """The cases of the campaign file ``path`` that ``selection`` chooses."""
    return [job() for job in campaign_jobs(path, older_rule, selection)]


def campaign_jobs(path: str, older_rule: bool | None = None, selection: Selection = Selection()) -> list:
    """``check_campaign``'s checks, one function a chosen case, not yet run."""
    from oracle.campaign import KNOWN
    from oracle.check import jsonl_cases

    from .scenario import continues_for, load_case

    continues = continues_for(path, older_rule)
    rule = "0.33.0" if continues else "older rule"
    kind = campaign_kind(path)
    cases = jsonl_cases(path)
    known = {index: verdict for (k, _seed, index, r), verdict in KNOWN.items() if k == kind and r == rule}
    out = []
    for case in selection.choose(cases, set(known)):
        index = _index(case)
        answer = case.recorded if continues else case.variants.get("older-rule", case.recorded)
        verdict = known.get(index)
        seed = _seed_of(path, index) if verdict is not None else None
        if verdict is not None and (kind, seed, index, rule) not in KNOWN:
            verdict = None
        out.append(functools.partial(_three, case.label,
                                     functools.partial(load_case, case.label, case.scenario, answer, continues),
                                     known=verdict))
    return out


def _seed_of(path: str, index: int) -> int | None:
    """The seed of the case ``index`` of a campaign file (the line's ``seed``)."""
    import json

    with open(path, encoding="utf-8") as f:
        for line in f:
            if f'"index":{index},' in line.replace(" ", ""):
                return json.loads(line).get("seed")
    return None


def check(paths: list[str], older_rule: bool | None = None, selection: Selection = Selection(),
          progress=None, workers: int = 1, resume: str | None = None) -> list[Checked]:
    """Every scenario of ``paths`` (directories, campaign files) checked, in order; ``progress(total)``, when
    given, makes the bar (semantics.progress.CaseProgress) advanced as each check is done. ``workers``:
    the checks run on that many processes (semantics.workers: the rows are the same, in the same order,
    whatever the number); ``resume``: a journal FILE of the checks done (semantics.workers.Journal),
    those it records not run again."""
    from semantics.workers import Journal, fingerprint, run_cases

    jobs = []
    for path in paths:
        if path.endswith(".jsonl") and os.path.isfile(path):
            jobs.extend(campaign_jobs(path, older_rule, selection))
            continue
        group = os.path.basename(os.path.normpath(path))
        for scenario in scenarios_in(path):
            jobs.append(functools.partial(check_scenario, scenario, f"{group}/{os.path.basename(scenario)[:-5]}",
                                          older_rule))
    bar = progress(len(jobs)) if progress is not None else None
    journal = None
    if resume is not None:
        key = fingerprint("lean check", [os.path.abspath(p) for p in paths], older_rule, selection.every,
                          sorted(selection.extra), selection.variants, selection.limit, len(jobs))
        journal = Journal(resume, key, len(jobs), encode=_encode, decode=_decode)
    return list(run_cases(_run, jobs, workers=workers, progress=bar, journal=journal))


def _run(job) -> Checked:
    """One check (``run_cases``' task: a function of the module, picklable by reference)."""
    return job()


def _encode(row: Checked) -> list:
    return [row.name, *(None if a is None else [a.firsts, a.dones, a.preemptions, a.refused]
                        for a in (row.recorded, row.mirror, row.interpreter)), row.unavailable, row.error, row.known]


def _decode(value: list) -> Checked:
    def answer(a):
        if a is None:
            return None
        return Answer(tuple(map(tuple, a[0])), tuple(map(tuple, a[1])), a[2], tuple(map(tuple, a[3])))

    name, recorded, mirror, interpreter, unavailable, error, known = value
    return Checked(name, answer(recorded), answer(mirror), answer(interpreter), unavailable, error, known)


def report(rows: list[Checked], require_interpreter: bool = False) -> tuple[list[str], bool]:
    """The lines ``lean check`` prints, and whether it failed."""
    lines = []
    for row in rows:
        if row.error is not None:
            lines.append(f"{row.name}: not checked: {row.error}")
        elif not row.passed:
            what = f"documented divergence {row.known} (docs/divergences.md)" if row.known else "disagree"
            lines.append(f"{row.name}: {what}: recorded {describe(row.recorded)}; mirror {describe(row.mirror)}; "
                         f"interpreter {describe(row.interpreter) if row.unavailable is None else 'unavailable'}")
    reasons: dict[str, list[str]] = {}
    for row in rows:
        if row.unavailable is not None:
            reasons.setdefault(row.unavailable, []).append(row.name)
    for reason, names in reasons.items():
        lines.append(f"interpreter unavailable on {len(names)} scenario(s) ({', '.join(names)}): {reason}")
    counted = [r for r in rows if r.counted]
    passed = sum(1 for r in counted if r.passed)
    failed = len(counted) - passed
    unavailable = sum(len(n) for n in reasons.values())
    lines.append(f"{passed} passed, {failed} failed")
    failing = failed > 0 or not counted or (require_interpreter and unavailable > 0)
    return lines, failing
