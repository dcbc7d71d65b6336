"""``serq-ref lean check DIR…``: three answers per recorded scenario.

For every scenario with a recorded answer (``NAME.json`` beside
``NAME.out.json``): the theorem's right-hand side (the recorded answer, as
emit.py writes it), the mirror's outcome (lean_bridge.mirror, the Python
transcription of the Lean definitions) and the small-step interpreter's
(lean_bridge.interpreter). A scenario passes when every available answer is
the recorded one; while the interpreter cannot run step stages its column is
reported as unavailable, with its reason, and is not counted as agreeing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from semantics.errors import SerqError

from .interpreter import InterpreterUnavailable, interpreter_answer
from .mirror.exec import outcome, ticks_to_halt
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

    @property
    def passed(self) -> bool:
        return (self.error is None and self.mirror == self.recorded
                and (self.interpreter is None or self.interpreter == self.recorded))


def describe(answer: Answer | None) -> str:
    if answer is None:
        return "none"
    return f"(firsts {list(answer.firsts)}, dones {list(answer.dones)}, preemptions {answer.preemptions})"


def mirror_answer(program) -> Answer:
    ticks = ticks_to_halt(program, TICK_LIMIT)
    if ticks is None:
        raise RuntimeError(f"the mirror does not halt within {TICK_LIMIT} ticks")
    firsts, dones, preemptions = outcome(program, ticks)
    return Answer(firsts, dones, preemptions)


def check_scenario(path: str, label: str) -> Checked:
    try:
        sc = load(path)
        mirror = mirror_answer(sc.translation.program)
    except (SerqError, RuntimeError) as e:
        message = e.message if isinstance(e, SerqError) else str(e)
        where = f"{e.span.file}:{e.span.line}:{e.span.col}: " if isinstance(e, SerqError) and e.span else ""
        return Checked(label, None, None, None, None, f"{where}{message}")
    try:
        interpreter, unavailable = interpreter_answer(sc.program), None
    except InterpreterUnavailable as e:
        interpreter, unavailable = None, e.reason
    except SerqError as e:
        return Checked(label, sc.answer, mirror, None, None, f"the interpreter failed: {e.message}")
    return Checked(label, sc.answer, mirror, interpreter, unavailable, None)


def check(directories: list[str]) -> list[Checked]:
    out = []
    for directory in directories:
        group = os.path.basename(os.path.normpath(directory))
        for path in scenarios_in(directory):
            out.append(check_scenario(path, f"{group}/{os.path.basename(path)[:-5]}"))
    return out


def report(rows: list[Checked], require_interpreter: bool = False) -> tuple[list[str], bool]:
    """The lines ``lean check`` prints, and whether it failed."""
    lines = []
    for row in rows:
        if row.error is not None:
            lines.append(f"{row.name}: not checked: {row.error}")
        elif not row.passed:
            lines.append(f"{row.name}: disagree: recorded {describe(row.recorded)}; mirror {describe(row.mirror)}; "
                         f"interpreter {describe(row.interpreter) if row.unavailable is None else 'unavailable'}")
    reasons: dict[str, list[str]] = {}
    for row in rows:
        if row.unavailable is not None:
            reasons.setdefault(row.unavailable, []).append(row.name)
    for reason, names in reasons.items():
        lines.append(f"interpreter unavailable on {len(names)} scenario(s) ({', '.join(names)}): {reason}")
    passed = sum(1 for r in rows if r.passed)
    failed = len(rows) - passed
    unavailable = sum(len(n) for n in reasons.values())
    lines.append(f"{passed} passed, {failed} failed")
    failing = failed > 0 or not rows or (require_interpreter and unavailable > 0)
    return lines, failing
