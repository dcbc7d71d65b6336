"""Machine's reads_estimates (whether any expression calls price or est_*,
semantics/smallstep/machine.py's _reads_estimates) gives the answer of the
plain search it replaced, a walk of every dataclass field, tuple and list of
the program, on generated programs (those whose expressions read the
estimates among them) and on the example programs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from semantics import ir, pipeline
from semantics.smallstep.machine import _reads_estimates
from semantics.smallstep.values import ESTIMATE_READERS
from strategies import loaded_programs

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").rglob("*.sq"))


def plain_search(node) -> bool:
    """The search as it was written before 2026-12-04 (dataclasses.fields at every record)."""
    if isinstance(node, ir.Call) and node.fun in ESTIMATE_READERS:
        return True
    if isinstance(node, (tuple, list)):
        return any(plain_search(item) for item in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return any(plain_search(getattr(node, f.name)) for f in dataclasses.fields(node))
    return False


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(loaded_programs())
def test_generated_programs(loaded):
    if loaded.program is not None:
        assert _reads_estimates(loaded.program) == plain_search(loaded.program)


def test_examples():
    seen = {True: 0, False: 0}
    for path in EXAMPLES:
        try:
            program = pipeline.load(str(path)).program
        except Exception:  # a library, or a program that needs settings: not a run's program
            continue
        answer = plain_search(program)
        assert _reads_estimates(program) == answer, path
        seen[answer] += 1
    assert seen[False] > 0 and seen[True] > 0, seen


def test_parts():
    call = ir.Call("EstWait", ())
    assert _reads_estimates((1, [ir.Unary("Neg", call)]))
    assert not _reads_estimates((1, "EstWait", ir.Num(2.0), ir.Call)), "a class or a name is no call"
