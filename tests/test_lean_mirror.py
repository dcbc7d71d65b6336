"""The executable mirror of the Lean fragment (lean_bridge/mirror): the
recorded vLLM answers, its independence from the small-step interpreter, and
the three-way agreement that waits for the step engine.

Issue 11: "A Python transcription of the Lean definitions … that imports
nothing from semantics/smallstep/: an independent second implementation."
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from lean_bridge import scenario
from lean_bridge.check import mirror_answer
from lean_bridge.interpreter import InterpreterUnavailable, interpreter_answer
from lean_bridge.mirror import engine
from lean_bridge.mirror.exec import initial, outcome, tick, ticks_to_halt
from shared_paths import SHARED

ROOT = Path(__file__).resolve().parent.parent
VLLM = ("alone", "chunked", "hol", "longchunk", "mixed", "preempt", "seqcap")
SERVE = ("admission", "newest_first", "newest_first_preempt", "prefill_first")
SCENARIOS = [("vllm", n) for n in VLLM] + [("serve", n) for n in SERVE]


def load(group: str, name: str) -> scenario.Scenario:
    return scenario.load(str(SHARED / "oracle" / group / f"{name}.json"))


@pytest.mark.parametrize("group,name", SCENARIOS)
def test_mirror_reproduces_the_recorded_answer(group: str, name: str) -> None:
    sc = load(group, name)
    assert sc.answer is not None
    assert mirror_answer(sc.translation.program) == sc.answer


@pytest.mark.parametrize("group,name", SCENARIOS)
def test_the_run_takes_one_tick_per_scheduler_step(group: str, name: str) -> None:
    """out.json's `steps` is one more than the last iteration that did work:
    the mirror halts after that many ticks (the last one idle)."""
    import json

    sc = load(group, name)
    steps = json.loads((SHARED / "oracle" / group / f"{name}.out.json").read_text())["steps"]
    assert ticks_to_halt(sc.translation.program) == steps


def test_the_scenario_and_its_ir_file_are_one_program() -> None:
    """The scenario's translation and the reference compiler's IR file's are equal."""
    for group, name in SCENARIOS:
        from_scenario = load(group, name).translation.program
        from_ir = scenario.load(str(SHARED / "oracle" / group / f"{name}.ir.json")).translation.program
        assert from_scenario == from_ir, (group, name)


def test_the_answer_is_the_same_for_any_fuel_past_halting() -> None:
    p = load("vllm", "preempt").translation.program
    n = ticks_to_halt(p)
    assert outcome(p, n) == outcome(p, n + 50)
    assert outcome(p, n - 10) != outcome(p, n)  # too little fuel is visible


def test_halting_is_absorbing() -> None:
    p = load("vllm", "chunked").translation.program
    m = initial(p)
    while not m.halted:
        m = tick(p, m)
    assert tick(p, m) is m


def test_the_oracle_discriminates_the_self_preemption_rule(monkeypatch) -> None:
    """Design doc section 5: without "a grower that preempts itself ends the
    pass" serve/newest_first_preempt comes out differently. The mirror's rule
    is what makes it agree."""
    original = engine.grow_turn

    def without_the_stop(p, m, it, serial, q, tokens):
        m, it = original(p, m, it, serial, q, tokens)
        return m, dataclasses.replace(it, stopped=False)

    monkeypatch.setattr(engine, "grow_turn", without_the_stop)
    sc = load("serve", "newest_first_preempt")
    assert mirror_answer(sc.translation.program) != sc.answer


# -- independence ------------------------------------------------------------------------


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            out.add(base)
    return out


def test_the_mirror_imports_nothing_from_semantics() -> None:
    """The mirror, its syntax and its arithmetic import neither the
    small-step interpreter nor anything else of `semantics`."""
    files = sorted((ROOT / "lean_bridge" / "mirror").glob("*.py")) + [ROOT / "lean_bridge" / "syntax.py",
                                                                      ROOT / "lean_bridge" / "arith.py"]
    assert len(files) >= 8
    allowed_relative = {".", "..", ".state", ".expr", ".pools", ".sessions", ".engine", ".exec", "..arith",
                        "..syntax"}
    for path in files:
        for name in _imports(path):
            assert not name.startswith("semantics"), (path.name, name)
            if name.startswith("."):
                assert name in allowed_relative, (path.name, name)
            else:
                assert name in {"__future__", "dataclasses", "enum", "typing", "z3"}, (path.name, name)


# -- the third column ---------------------------------------------------------------------


@pytest.mark.parametrize("group,name", SCENARIOS)
def test_interpreter_mirror_and_recorded_answer_agree(group: str, name: str) -> None:
    sc = load(group, name)
    answer = interpreter_answer(sc.program)
    assert answer == sc.answer
    assert mirror_answer(sc.translation.program) == answer


