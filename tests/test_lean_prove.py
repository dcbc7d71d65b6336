"""`serq-ref lean prove`: the fragment's invariants, proved by Z3 on the
mirror's own rules, and a broken rule caught with a counterexample.

Issue 11: "prove, for every rule of the fragment and for all values (bounded
only in the number of sessions, holders and cache entries, at least four of
each): the memory invariant … is inductive; an iteration never schedules more
tokens than its budget, and a resident never more than its run has left; a
preempted session re-enters at the head of its queue with computed at the
position it had reached … in under a minute; a test mutates a rule … and
checks that the proof then fails with a counterexample."
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from lean_bridge import prove
from lean_bridge.mirror import engine, sessions
from semantics.cli import main

RULE_NAMES = {
    "workload/arrive", "session/set", "session/observe", "session/turn", "session/branch", "session/block-exit",
    "session/hold-enter (pool/reject)", "stage/step-enter", "stage/ps-enter (delay)", "stage/ps-complete (delay)",
    "session/hold-exit (pool/release)", "session/end (pool/release)", "step/iteration-start", "step/schedule",
    "step/grow (pool/grow, pool/evict-*)", "step/grow, self preemption continue", "step/withdraw (pool/preempt)",
    "step/admit (pool/admit, pool/consume, pool/evict-*)", "step/iteration-end (stage/step-complete)", "step/idle",
    # serq-ref's extensions: schedule ahead, preempt by, requeue by key
    "step/park (schedule ahead)", "step/apply (session/hold-exit)", "step/grow, a parked holder (step/preempt-parked)",
    "step/withdraw, its decode in flight (pool/preempt)", "step/grow, preempt by and requeue by key",
}


@pytest.fixture(scope="module")
def results():
    start = time.process_time()  # the proofs' own time, whatever else shares the cores
    out = prove.prove_all(4)
    return out, time.process_time() - start


def test_every_rule_and_property_is_proved(results) -> None:
    out, _ = results
    assert {r.rule for r in out} == RULE_NAMES
    assert all(r.proved for r in out), [r.line() for r in out if not r.proved]
    assert all(r.shapes > 0 and r.paths >= r.shapes for r in out)
    by = {(r.rule, r.property) for r in out}
    for rule in RULE_NAMES:
        assert (rule, prove.MEMORY) in by
    for rule in ("step/iteration-start", "step/schedule", "step/grow (pool/grow, pool/evict-*)",
                 "step/grow, self preemption continue", "step/withdraw (pool/preempt)",
                 "step/admit (pool/admit, pool/consume, pool/evict-*)"):
        assert (rule, prove.BUDGET) in by and (rule, prove.RUN) in by
    # the invariants hold under both self-preemption rules (D1)
    for rule in ("step/grow (pool/grow, pool/evict-*)", "step/grow, self preemption continue",
                 "step/withdraw (pool/preempt)", "step/withdraw, its decode in flight (pool/preempt)"):
        assert (rule, prove.REENTRY) in by
    # the extensions' own properties: a parked session keeps its blocks until step/apply or
    # step/preempt-parked exits its hold; the victim under preempt by has the greatest keys (vLLM 0.33.0's
    # max (priority, arrival_time)), and re-enters its queue by key
    assert ("step/park (schedule ahead)", prove.PARKED) in by
    assert ("step/apply (session/hold-exit)", prove.EXITED) in by
    assert {("step/grow, a parked holder (step/preempt-parked)", p) for p in (prove.PARKED, prove.EXITED,
                                                                              prove.BUDGET)} <= by
    assert {("step/grow, preempt by and requeue by key", p) for p in (prove.VICTIM, prove.REQUEUE)} <= by


def test_the_structure_reaches_the_bound(results) -> None:
    """Four sessions (so four holders), and four cache entries in a pool."""
    shapes = [s for rule in prove.RULES for s in rule.shapes(4)]
    assert max(s.sessions() for s in shapes) == 4
    assert max(max(s.entries) for s in shapes) == 4
    assert any(s.after == 3 for s in shapes)  # three victims before the grower itself


def test_the_proofs_take_under_a_minute(results) -> None:
    _, seconds = results
    assert seconds < 60, seconds


def prove_one(name: str, bound: int = 4) -> list[prove.Result]:
    rule = next(r for r in prove.RULES if r.name == name)
    return prove.prove_rule(rule, bound)


def test_admission_without_eviction_is_caught(monkeypatch) -> None:
    """The mutation of the issue: admission that does not evict to make room."""
    monkeypatch.setattr(engine, "evict", lambda held, need, cap, entries: entries)
    results = {r.property: r for r in prove_one("step/admit (pool/admit, pool/consume, pool/evict-*)")}
    broken = results[prove.MEMORY]
    assert not broken.proved
    assert broken.counterexample.startswith("[subject queued-head")
    assert "cached [" in broken.counterexample and "cap " in broken.counterexample
    assert results[prove.BUDGET].proved  # the other properties do not depend on eviction


def test_a_victim_whose_tokens_are_kept_is_caught(monkeypatch) -> None:
    def no_refund(p, m, it, victim, q):
        it = dataclasses.replace(it, assigned=tuple(a for a in it.assigned if a.serial != victim), preempted=True)
        return sessions.preempt(p, m, victim, q), it

    monkeypatch.setattr(engine, "withdraw", no_refund)
    results = {r.property: r for r in prove_one("step/withdraw (pool/preempt)", bound=2)}
    assert not results[prove.BUDGET].proved and "iteration: budget" in results[prove.BUDGET].counterexample
    assert results[prove.MEMORY].proved


def test_a_preemption_that_forgets_the_position_is_caught(monkeypatch) -> None:
    original = sessions.enter_hold

    def restart(p, m, s, stmt, head):
        s = dataclasses.replace(s, attrs=s.attrs[:4] + (0,) + s.attrs[5:])  # computed := 0
        return original(p, m, s, stmt, head)

    monkeypatch.setattr(sessions, "enter_hold", restart)
    results = {r.property: r for r in prove_one("step/withdraw (pool/preempt)", bound=2)}
    assert not results[prove.REENTRY].proved


def test_a_victim_chosen_without_its_keys_is_caught(monkeypatch) -> None:
    """preempt by: a victim chosen by lifo alone (the keys ignored) is not the
    one with the greatest keys."""
    monkeypatch.setattr(engine, "better_victim",
                        lambda p, m, q, a, b: m.sessions[b].admission < m.sessions[a].admission)
    results = {r.property: r for r in prove_one("step/grow, preempt by and requeue by key", bound=3)}
    assert not results[prove.VICTIM].proved and "[subject grower" in results[prove.VICTIM].counterexample
    assert results[prove.MEMORY].proved


def test_a_park_that_frees_the_blocks_is_caught(monkeypatch) -> None:
    """step/park: a parked session that gave its blocks back (as if its hold
    exited before the next iteration is formed) is caught."""
    original = sessions.park

    def freeing(m, s):
        m = original(m, s)
        return dataclasses.replace(m, pools=tuple(dataclasses.replace(ps, holders=tuple(
            h for h in ps.holders if h.serial != s.serial)) for ps in m.pools))

    monkeypatch.setattr(sessions, "park", freeing)
    results = {r.property: r for r in prove_one("step/park (schedule ahead)", bound=2)}
    assert not results[prove.PARKED].proved


def test_lean_prove_prints_a_line_per_rule_and_property(monkeypatch, capsys) -> None:
    small = tuple(r for r in prove.RULES if r.name in ("session/set", "step/schedule"))
    monkeypatch.setattr(prove, "RULES", small)
    assert main(["lean", "prove"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("session/set: memory invariant: proved (")
    assert len(lines) == 5 and lines[-1] == "4 proved, 0 not proved"
