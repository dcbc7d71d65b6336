"""Stage rules: fifo(c), ps(φ), delay, flows under share maxmin and
bottleneck (seed 002 §3 Stages, Ties)."""

from __future__ import annotations

import pytest

from irbuild import Builder, binary, explicit, now
from semantics import ir
from semantics.errors import RunError
from semantics.smallstep.driver import run, trace


def done_times(result, name="done"):
    rec = next(o for o in result.observes if o.name == name)
    return [(serial, t) for t, serial, _, _ in rec.samples]


def test_fifo_with_two_servers():
    # 002 §3 Stages: "fifo(c): c servers, jobs in arrival order at rate 1"
    b = Builder()
    svc = b.fifo("svc", servers=2)
    b.session(b.run(svc, 1), b.observe("done", now()))
    result = run(b.build(arrival=ir.Batch(3), horizon=10))
    assert done_times(result) == [(0, 1.0), (1, 1.0), (2, 2.0)]
    stage = result.stages[0]
    assert stage.completed == 3 and stage.mean_wait == pytest.approx(1 / 3) and stage.mean_service == 1.0
    assert stage.utilization == pytest.approx((1 + 0.5) / 10)  # both servers busy for 1 s, one of two for 1 s


def test_ps_shares_its_capacity_equally():
    # 002 §3 Stages: "ps(φ): every job at once, each at φ(present)/present"
    b = Builder(attrs=("w",))
    s = b.ps("cpu", 1)
    b.session(b.run(s, b.attr("w")), b.observe("done", now()))
    result = run(b.build(arrival=explicit({9: 1.0}, {9: 2.0}), horizon=10))
    assert done_times(result) == [(0, 2.0), (1, 3.0)]
    assert result.stages[0].utilization == pytest.approx(0.3)  # busy while any job is present


def test_ps_capacity_reads_present():
    # 002 §2: ps ( expr ) -- "throughput phi(present) shared equally; expr reads present"
    b = Builder()
    s = b.ps("cpu", ir.Call("Min", (ir.ExprArg(ir.Ctx("N")), ir.ExprArg(ir.Num(2.0)))))
    b.session(b.run(s, 1), b.observe("done", now()))
    result = run(b.build(arrival=ir.Batch(4), horizon=10))
    # four jobs at min(4, 2)/4 = 0.5 each: all finish at 2, in start order
    assert done_times(result) == [(0, 2.0), (1, 2.0), (2, 2.0), (3, 2.0)]


def test_equal_finish_tags_finish_in_start_order():
    # 002 §3 Ties: "jobs of a ps stage with equal finish tags finish in the order they started"
    b = Builder()
    s = b.ps("cpu", 2)
    b.session(b.run(s, 3), b.observe("done", now()))
    program = b.build(arrival=ir.Batch(3), horizon=10)
    completed = [r["session"] for r in trace(program) if r["rule"] == "stage/ps-complete"]
    assert completed == [0, 1, 2]


def test_jobs_due_at_one_instant_leave_a_delay_stage_in_start_order():
    # 002 §3 Ties: "events at one instant: the order they were scheduled"; a delay job's event is scheduled when it starts
    b = Builder()
    s = b.delay("think")
    b.session(b.run(s, 3), b.observe("done", now()))
    program = b.build(arrival=ir.Batch(3), horizon=10)
    completed = [r["session"] for r in trace(program) if r["rule"] == "stage/delay-complete"]
    assert completed == [0, 1, 2]


def test_a_delay_job_completes_at_its_arrival_plus_its_work_to_the_last_bit():
    # docs/semantics.md, "delay is its own kind": 28.86 + 1.185 in doubles is 30.044999999999998, and so is
    # the time a job that starts at 28.86 with work 1.185 completes, whatever else is at the stage
    b = Builder(attrs=("w", "t"))
    s = b.delay("think")
    b.session(b.run(s, b.attr("t")), b.run(s, b.attr("w")), b.observe("done", now()))
    rows = [{9: 1.185, 10: 28.86}] + [{9: 0.1 * k + 0.3, 10: 0.7 * k} for k in range(1, 8)]
    result = run(b.build(arrival=explicit(*rows), horizon=100))
    assert dict((serial, t) for serial, t in done_times(result))[0] == 28.86 + 1.185 == 30.044999999999998


def test_delay_serves_every_job_at_rate_one():
    # 002 §3 Stages: "delay: every job on its own at rate 1"
    b = Builder(attrs=("w",))
    s = b.delay("think")
    b.session(b.run(s, b.attr("w")), b.observe("done", now()))
    result = run(b.build(arrival=explicit({9: 2.5}, {9: 1.0}), horizon=10))
    assert sorted(done_times(result)) == [(0, 2.5), (1, 1.0)]


def _two_link(share):
    """Flow 0 holds links a (φ 1) and b (φ 3); flow 1 holds b alone; work 2 each."""
    b = Builder(attrs=("who",))
    la = b.ps("a", 1)
    lb = b.ps("b", 3)
    who = b.attr("who")
    b.session(b.branch(binary("Eq", who, 0), [b.run(la, 2, lb)], [b.run(lb, 2)]), b.observe("done", now()))
    return b.build(arrival=explicit({9: 0.0}, {9: 1.0}), horizon=10, share=share)


def test_share_maxmin_fills_progressively():
    # 002 §3 Stages: "share maxmin is max-min fair: every flow's rate rises together until a stage fills, the
    # flows through it stop there, and the others go on"
    # flow 0 stops at 1 (link a is full), flow 1 takes the rest of b: 2; flow 1 ends at 1, flow 0 at 2
    result = run(_two_link("MaxMin"))
    assert done_times(result) == [(1, 1.0), (0, 2.0)]


def test_share_bottleneck_leaves_unused_capacity():
    # 002 §3 Stages: "share bottleneck gives each flow its equal share at the tightest of its stages,
    # min over s of φ_s / n_s, and leaves what that does not use at the other stages unused"
    # flow 0: min(1/1, 3/2) = 1; flow 1: 3/2; flow 1 ends at 4/3, flow 0 at 2
    result = run(_two_link("Bottleneck"))
    assert done_times(result) == [(1, pytest.approx(4 / 3)), (0, 2.0)]
    # utilisation of b: (1 + 1.5)/3 until 4/3, then 1/3 until 2, over the horizon 10
    assert result.stages[1].utilization == pytest.approx(((2.5 / 3) * (4 / 3) + (1 / 3) * (2 / 3)) / 10)


def test_a_run_of_zero_work_completes_at_once():
    # 002 §3 Stages: "A run of zero work completes at once."
    b = Builder()
    s = b.fifo("svc")
    b.session(b.run(s, 0), b.observe("done", now()))
    result = run(b.build(horizon=5))
    assert done_times(result) == [(0, 0.0)]
    assert result.stages[0].completed == 0 and result.events == 0


def test_a_prefill_on_a_step_stage_takes_iterations_of_its_budget():
    # 002 §3 Stages: "One token to a decoding job, up to chunk to a prefilling one, until the budget is spent";
    # the iteration advances the clock by its cost (1): a prefill of 20 under budget 8 takes 3 iterations
    b = Builder()
    b.stages.append(ir.Stage("engine", None, ir.Step(ir.Num(8.0), ir.Num(1.0), ir.Num(0.0), (), None)))
    b.session(ir.Run(ir.Ref(0, 1, None), "Prefill", ir.Num(20.0), None, None), b.observe("done", now()))
    result = run(b.build(horizon=10))
    assert done_times(result) == [(0, 3.0)]
    assert result.stages[0].iterations == 3 and result.stages[0].prefill_only == 3


def test_stage_observables():
    # 002 §2: observables queue(s), busy(s), work(s)
    b = Builder(attrs=("who",))
    svc = b.fifo("svc")
    d = b.delay("d")
    ref = ("stage", svc)
    from irbuild import call

    who = b.attr("who")
    b.session(b.branch(binary("Eq", who, 0), [b.run(svc, 4)],
                       [b.run(d, 1), b.observe("queue", call("Queue", ref)), b.observe("busy", call("Busy", ref)),
                        b.observe("work", call("Work", ref))]))
    result = run(b.build(arrival=explicit({9: 0.0}, {9: 1.0}), horizon=10))
    values = {o.name: [s[3] for s in o.samples] for o in result.observes}
    assert values == {"queue": [1.0], "busy": [1.0], "work": [3.0]}


def test_a_job_joining_a_delay_stage_leaves_the_pending_completion_in_its_place():
    """Seed 002 §3, Ties: "Events at one instant: the order they were
    scheduled." Session 0's run on the delay stage d (scheduled first) and
    session 1's on the fifo f both end at 1; session 2 joining d at 0 changes
    neither its rate nor its first job, so d's completion is not scheduled
    again and comes first."""
    from semantics.compiler import compile_source

    program, _ = compile_source("""
stage d : delay;
stage f : fifo;
workload { arrive batch(3); }
session {
  branch (serial == 1) { run f (1); } else { branch (serial == 0) { run d (1); } else { run d (5); } }
  observe done = serial;
}
run { horizon 10; seed 1; }""", "<ties>")
    completions = [(r["time"], r["session"]) for r in trace(program) if r["rule"].endswith("-complete")]
    assert completions == [(1.0, 0), (1.0, 1), (5.0, 2)]
