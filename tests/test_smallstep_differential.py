"""The small-step semantics against the reference implementation (pyserq,
the Rust engine, which reads IR version 14): deterministic pool and stage
programs must give the same report, figure for figure.

Known, documented differences (docs/semantics.md, "Against the reference
implementation") are left out of the comparison: the events count (the
reference also counts its warm-up marker and stale rescheduled completions),
fifo utilisation (the reference reports 1 while any job is present; the brief
asks busy servers / c), and spill timing (the reference caches a spilled
piece in the tier at eviction; here it lands when the write completes).
"""

from __future__ import annotations

import math

import pytest

from irbuild import Builder, binary, build_lifo_grower_program, explicit, now
from oracle.peer import report_of
from semantics.compiler import compile_source
from semantics import ir
from semantics.smallstep.driver import run


def assert_same(program: ir.Program) -> None:
    theirs = report_of(program)
    mine = run(program)
    for key in ("end", "arrivals", "ended", "turns", "mean_live"):
        assert getattr(mine, key) == pytest.approx(theirs[key]), key
    for record in mine.observes:
        summary = theirs["observes"][record.name]
        assert len(record.samples) == summary["count"], record.name
        if record.samples:
            assert sum(s[3] for s in record.samples) / len(record.samples) == pytest.approx(summary["mean"]), record.name
    for pool, other in zip(mine.pools, theirs["pools"]):
        for key in ("mean_used", "mean_cached", "mean_queue", "mean_holders", "mean_wait", "admissions",
                    "evicted_entries", "evicted_units", "preemptions", "spills", "rejected", "stuck"):
            value, expected = getattr(pool, key), other[key]
            if expected is None:
                assert math.isnan(value), (pool.name, key)
            else:
                assert value == pytest.approx(expected), (pool.name, key)
    for stage, other in zip(mine.stages, theirs["stages"]):
        keys = ("mean_number", "completed", "mean_wait", "mean_service") + (() if stage.kind == "fifo" else ("utilization",))
        for key in keys:
            value, expected = getattr(stage, key), other[key]
            if expected is None:
                assert math.isnan(value), (stage.name, key)
            else:
                assert value == pytest.approx(expected), (stage.name, key)


def test_preempt_lifo_and_waiting():
    assert_same(build_lifo_grower_program(lambda b, p, d: [
        b.hold([(p, 4)], b.load(p, 3), b.observe("computed", b.attr("computed")), b.run(d, 10))]))


def test_eviction_orders_and_dead_entries():
    for evict in (None, (ir.Unary("Neg", ir.Ctx("Last")),), (ir.Ctx("Size"), ir.Attr(1))):
        b = Builder(attrs=("who",))
        kv = b.pool("kv", cap=48, block=16, evict=evict)
        d = b.delay("d")
        who = b.attr("who")
        b.session(b.branch(binary("Lt", who, 3),
                           [b.run(d, who), b.hold([(kv, add_one(who))], b.run(d, 1), cache=32),
                            b.hold([(kv, 16)], b.observe("cached", b.attr("cached")), b.run(d, 2), cache=16, reuse=16)],
                           [b.run(d, 5), b.hold([(kv, 40)], b.run(d, 1))]))
        assert_same(b.build(arrival=explicit({9: 0.0}, {9: 1.0}, {9: 2.0}, {9: 3.0}), horizon=20))


def add_one(x):
    return binary("Add", binary("Mul", x, 8), 8)


def test_queue_by_waited_and_grow_none():
    b = Builder(attrs=("who", "prio"))
    p = b.pool("p", cap=4, queue=(ir.Cond(binary("Ge", ir.Ctx("Waited"), 2), ir.Num(0.0), ir.Num(1.0)), b.attr("prio")))
    d = b.delay("d")
    b.session(b.run(d, b.attr("prio")),
              b.hold([(p, 2)], b.observe("in", now()), b.run(d, 3), b.grow(p, 1), b.run(d, 1)))
    rows = [{9: float(k), 10: float((k * 7) % 5)} for k in range(5)]
    assert_same(b.build(arrival=explicit(*rows), horizon=40))


def test_lease_stages_and_holds_on_two_pools():
    b = Builder(attrs=("who",))
    kv = b.pool("kv", cap=32, block=8)
    reqs = b.pool("reqs", cap=2)
    d = b.delay("d")
    svc = b.fifo("svc", servers=2)
    cpu = b.ps("cpu", 2)
    who = b.attr("who")
    b.session(b.run(d, binary("Mul", who, 0.5)),
              b.hold([(reqs, 1), (kv, 12)], b.run(svc, 1.5), b.run(cpu, 2), cache=12, lease=(kv, 1.0)),
              b.run(d, 0.25), b.release(kv), b.observe("t", now()))
    assert_same(b.build(arrival=explicit(*[{9: float(k)} for k in range(6)]), horizon=40))


def test_families_and_choose():
    # 002 §2: "choose NAME in expr by ( expr , ... ) ; -- NAME := argmin over 0..n, keys in order"
    b = Builder(attrs=("j",))
    kv = b.pool_family("kv", 3, cap=8)
    svc = b.fifo_family("svc", 3)
    j = b.attr("j")
    used = ir.Call("Used", (ir.PoolArg(ir.Ref(kv, 3, j)),))
    queue = ir.Call("Queue", (ir.StageArg(ir.Ref(svc, 3, j)),))
    b.session(b.choose("j", 3, used, queue),
              b.hold([(ir.Ref(kv, 3, j), 4)], b.run_ref(ir.Ref(svc, 3, j), 1.5)),
              b.observe("j", j))
    assert_same(b.build(arrival=ir.Batch(7), horizon=5))


def test_a_preempted_hold_leaves_the_queue_it_waited_in():
    from test_smallstep_pools import _preempted_while_queued

    assert_same(_preempted_while_queued())


@pytest.mark.parametrize("share", ["MaxMin", "Bottleneck"])
def test_flows_under_both_shares(share):
    # 002 §3 Stages: flows under share maxmin (progressive filling) and bottleneck (min over s of φ_s / n_s)
    b = Builder(attrs=("who",))
    la = b.ps("a", 1)
    lb = b.ps("b", 3)
    lc = b.ps("c", 2)
    who = b.attr("who")
    b.session(b.run(b.delay("d"), binary("Mul", who, 0.3)),
              b.branch(binary("Lt", who, 2), [b.run(la, 2, lb)],
                       [b.branch(binary("Lt", who, 4), [b.run(lb, 1.5, lc)], [b.run(lc, 1)])]),
              b.observe("done", now()))
    assert_same(b.build(arrival=explicit(*[{9: float(k)} for k in range(6)]), horizon=20, share=share))



def test_a_completion_that_keeps_its_time_keeps_its_place():
    """Seed 002 §3, Ties: "events at one instant: the order they were
    scheduled". Session 0's run on the delay stage d ends at 1.0; sessions 2
    and 3 finish svc at 1.0 too, scheduled later. Session 1 joining d does
    not move session 0's completion, so it stays first: session 0 grows before
    sessions 2 and 3 take the rest of the pool, and every session ends (with
    the completion rescheduled behind theirs, all four waited to grow for ever)."""
    program, _ = compile_source("""
pool p0 { cap 16; }
stage d : delay;
stage svc : fifo(2);
workload { arrive batch(4); }
session {
  run svc (0.5);
  hold p0 (4) { run d (0.5 + serial * 0.25); grow p0 (2); run d (1); }
  hold p0 (2) { run d (0.5 + serial * 0.25); }
  observe t = now;
}
run { horizon 60; seed 1; }
""", "<ties>")
    assert run(program).ended == 4
    assert_same(program)
