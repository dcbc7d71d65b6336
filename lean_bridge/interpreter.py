"""The third column of ``lean check``: the small-step interpreter's answer.

``interpreter_answer`` runs the scenario's IR with ``semantics.smallstep.driver.run``
and reads off it what the oracle compares: per request the time of
the first token (observation ``ttft``, else 0) and of the finish (``done``,
else 1), the preemptions of the step engine's memory pool, and the code of
every refusal (``refused``). On the step clock (iteration
cost 1) those times are whole steps.

Until the step engine is built, a run of a program with a step stage stops
with the RunError "… step stages are not implemented yet": that is reported
as ``InterpreterUnavailable`` with its message, never as an answer.
"""

from __future__ import annotations

from semantics import ir
from semantics.errors import RunError

from .scenario import OBSERVES, Answer

#: The part of the interpreter's message that says a construct is not built yet.
NOT_IMPLEMENTED = "not implemented yet"


class InterpreterUnavailable(Exception):
    """The interpreter cannot run the program yet; ``reason`` is its message."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def engine_memory(program: ir.Program) -> int:
    """The memory pool of the program's step engine."""
    for stage in program.stages:
        if isinstance(stage.kind, ir.Step) and stage.kind.memory is not None:
            return stage.kind.memory
    raise ValueError("the program has no step engine with a memory pool")


def _steps(samples, index: int) -> tuple[tuple[int, int], ...]:
    out = []
    for time, serial, _turn, _value in samples:
        if time != int(time):
            raise AssertionError(f"observation {index} of session {serial} at time {time!r}, not a step")
        out.append((serial, int(time)))
    return tuple(sorted(out))


def interpreter_answer(program: ir.Program) -> Answer:
    """The small-step interpreter's outcome of ``program`` (raises
    ``InterpreterUnavailable`` while step stages are not built)."""
    from semantics.smallstep.driver import run

    try:
        result = run(program)
    except RunError as e:
        if NOT_IMPLEMENTED in e.message:
            raise InterpreterUnavailable(e.message) from None
        raise
    observes = result.observes
    by_name = {o.name: o for o in observes}
    first = by_name.get(OBSERVES[0], observes[0] if len(observes) > 0 else None)
    done = by_name.get(OBSERVES[1], observes[1] if len(observes) > 1 else None)
    firsts = _steps(first.samples, 0) if first is not None else ()
    dones = _steps(done.samples, 1) if done is not None else ()
    refused = tuple(sorted((serial, int(value)) for _time, serial, _turn, value in by_name[OBSERVES[2]].samples)) \
        if OBSERVES[2] in by_name else ()
    return Answer(firsts, dones, result.pools[engine_memory(program)].preemptions, refused)
