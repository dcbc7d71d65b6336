"""Rules as the step engine writes them (issue 22 §2): a rule's follow-up
work is data in the configuration (``Configuration.work``), which settle
drains (settle.drain), and no rule calls another family's rule.

- Read from the source: no registered rule's body calls, directly or through
  the helpers of the core it calls, a rule of another family (the families
  are the rule names' first parts: session, pool, stage, step, workload,
  time); each such piece of work is an item of ``Configuration.work``.
- In a run: every item a rule leaves names a rule of ``settle.FOLLOW_UPS``;
  the work is empty between events (the configurations ``walk`` yields),
  so that no follow-up is ever dropped; and it is drained depth first (a
  preemption's work, the victim's job leaving, its releases and its
  re-entry, is done before the growth that preempted goes on).
- The Machine holds facts only: no ``choices``, no scratch.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import textwrap

from semantics.pipeline import load
from semantics.smallstep import driver, sessions
from semantics.smallstep.machine import Machine
from semantics.smallstep.rules import REGISTRY
from semantics.smallstep.settle import FOLLOW_UPS, drain

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORE = "semantics.smallstep"


def rule_function(name: str):
    module, _, qualname = REGISTRY[name].function.rpartition(".")
    return getattr(importlib.import_module(module), qualname)


def family(rule_name: str) -> str:
    return rule_name.split("/")[0]


def called(function) -> list:
    """The functions of the core ``function``'s body calls by a name it can resolve (a global, or an
    attribute of a module it imported), in source order."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        target = None
        if isinstance(node.func, ast.Name):
            target = function.__globals__.get(node.func.id)
        elif isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            owner = function.__globals__.get(node.func.value.id)
            if inspect.ismodule(owner):
                target = getattr(owner, node.func.attr, None)
        if inspect.isfunction(target) and (target.__module__ or "").startswith(CORE):  # (a setter has none)
            found.append(target)
    return found


def other_families_reached(rule_name: str) -> list[str]:
    """The rules of another family than ``rule_name``'s that its body reaches by calls through the core's
    helpers and its own family's rules (a rule of another family is where the search stops)."""
    own = family(rule_name)
    seen, reached, todo = set(), [], [rule_function(rule_name)]
    while todo:
        function = todo.pop()
        for target in called(function):
            if target in seen:
                continue
            seen.add(target)
            other = getattr(target, "rule", None)
            if other is not None and family(other) != own:
                reached.append(other)
            else:
                todo.append(target)
    return sorted(set(reached))


def test_no_rule_calls_another_familys_rule():
    calls = {name: other_families_reached(name) for name in sorted(REGISTRY)}
    assert {name: found for name, found in calls.items() if found} == {}


def _reject_and_end(m, c, serial):
    """What pool/reject did: end the session by calling session/end."""
    return sessions.end_session(m, c, c.sessions[serial])


def test_the_check_sees_a_call_of_another_familys_rule():
    """The check can fail: a call of session/end (as pool/reject made) is seen, and is another family's."""
    assert called(_reject_and_end) == [sessions.end_session]
    assert sessions.end_session.rule == "session/end" and family("pool/reject") != family(sessions.end_session.rule)


def test_the_machine_holds_no_choices_and_no_scratch():
    """What decided a choice is returned by its premise (Admission.why, evict_one's, next_resident's, the
    victim's), and a session's run makes its own environment. (The fast form make_room_by's memo of
    eviction keys, Machine.evict_memo, is the fast engine's, and leaves the definition with it.)"""
    m = driver.machine_for(load(str(ROOT / "examples" / "pools" / "preempt.sq")).program)
    assert not hasattr(m, "choices") and not hasattr(m, "session_scratch")
    assert "choices" not in inspect.getsource(Machine) and "scratch" not in inspect.getsource(Machine)


def test_every_item_is_applied_and_none_outlives_its_event(monkeypatch):
    """Every item the programs' rules leave is applied by its rule (settle.FOLLOW_UPS: an unknown name
    would stop the run), traced or not, and between events no work is waiting: none is dropped."""
    applied = []
    for name, apply in list(FOLLOW_UPS.items()):
        def counted(m, c, *arguments, name=name, apply=apply):
            applied.append(name)
            return apply(m, c, *arguments)
        monkeypatch.setitem(FOLLOW_UPS, name, counted)
    expected = {"examples/pools/preempt.sq": {"stage/leave", "pool/release", "session/hold-enter", "pool/grow"},
                "examples/pools/spill.sq": {"enter-stage", "pool/spill-land", "pool/release"},
                "examples/oracle/vllm_request.sq": {"pool/admit", "step/admit", "run-session", "stage/step-complete",
                                                    "session/hold-exit"}}
    for path, items in expected.items():
        program = load(str(ROOT / path)).program
        for m in (driver.build_machine(program, observer=lambda rule, c, fields: None), driver.machine_for(program)):
            applied.clear()
            assert all(c.work == () for c in driver.walk(m)), path  # between events, nothing is waiting
            assert items <= set(applied), (path, items - set(applied))


def test_a_preemptions_work_is_done_before_the_growth_goes_on():
    """examples/pools/preempt.sq: session 0's grow preempts session 1; the victim's job leaves its stage,
    its hold is released and it re-enters the queue's head, each its own rule, before the growth's next
    attempt grows session 0's hold (pool/grow)."""
    records = list(driver.trace(load(str(ROOT / "examples" / "pools" / "preempt.sq")).program))
    k = next(i for i, r in enumerate(records) if r["rule"] == "pool/preempt")
    assert [(r["rule"], r.get("session")) for r in records[k:k + 5]] == [
        ("pool/preempt", 1), ("stage/leave", 1), ("pool/release", 1), ("session/hold-enter", 1), ("pool/grow", 0)]


def test_drain_is_depth_first():
    """An item's own items go before the items that waited after it, in the order it left them."""
    applied = []

    def leave(*children):
        def apply(m, c, name):
            applied.append(name)
            return c._replace(work=c.work + tuple(("test/leaf", child) for child in children))
        return apply

    program = load(str(ROOT / "examples" / "pools" / "preempt.sq")).program
    m = driver.machine_for(program)
    c = driver.initial_configuration(m)
    saved = dict(FOLLOW_UPS)
    try:
        FOLLOW_UPS["test/a"] = leave("a1", "a2")
        FOLLOW_UPS["test/leaf"] = leave()
        FOLLOW_UPS["test/b"] = leave("b1")
        c = drain(m, c._replace(work=(("test/a", "a"), ("test/b", "b"))))
    finally:
        FOLLOW_UPS.clear()
        FOLLOW_UPS.update(saved)
    assert applied == ["a", "a1", "a2", "b", "b1"] and c.work == ()
