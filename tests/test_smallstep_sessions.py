"""Session and workload rules (seed 002 §3 Branching, Workload; §2 arrivals;
FORMAT.md Arrival) and the run as a whole (determinism, arrivals N, the
end time)."""

from __future__ import annotations

import pathlib

import pytest

from irbuild import Builder, binary, now, sample, sub
from semantics import ir
from semantics.errors import RunError
from semantics.smallstep.driver import run


def values(result, name):
    rec = next(o for o in result.observes if o.name == name)
    return [s[3] for s in rec.samples]


def test_branch_guard_must_be_zero_or_one():
    # 002 §3 Branching: "any other value (a fraction, a count, a negative number, NaN) is a run-time error"
    b = Builder(attrs=("x",))
    b.session(b.set("x", 0.5), b.branch(b.attr("x"), [b.end()]))
    program = b.build(horizon=5)
    with pytest.raises(RunError) as err:
        run(program)
    assert err.value.stmt == (program.session, 1)
    assert "guard is 0.5, not 0 or 1" in err.value.message


def test_branch_takes_the_first_block_on_one():
    b = Builder()
    b.session(b.branch(1, [b.observe("took", 1)], [b.observe("took", 0)]),
              b.branch(0, [b.observe("took", 1)], [b.observe("took", 0)]))
    assert values(run(b.build(horizon=5)), "took") == [1.0, 0.0]


def test_choose_takes_least_keys_then_smallest_index():
    # 002 §3 Ties: "choose: the keys, in order, then the smallest index"
    b = Builder(attrs=("j",))
    j = b.attr("j")
    key = ir.Cond(binary("Eq", j, 0), ir.Num(5.0), ir.Num(1.0))  # 5, 1, 1, 1
    b.session(b.choose("j", 4, key), b.observe("j", j),
              b.choose("j", 3, ir.Num(0.0), ir.Unary("Neg", j)), b.observe("j", j))
    assert values(run(b.build(horizon=5)), "j") == [1.0, 2.0]


def test_loop_and_while():
    b = Builder(attrs=("k",))
    k = b.attr("k")
    b.session(b.while_(binary("Lt", k, 3), b.set("k", binary("Add", k, 1)), b.observe("k", k)),
              b.loop(b.observe("k", k), b.branch(binary("Ge", k, 5), [b.end()]), b.set("k", binary("Add", k, 1))))
    assert values(run(b.build(horizon=5)), "k") == [1.0, 2.0, 3.0, 3.0, 4.0, 5.0]


def test_explicit_sessions_with_turns():
    # FORMAT.md Arrival: "each runs init, then its listed attrs overwrite; with turns, each turn statement reads
    # the next entry, turn_no counts, and more is 1 while another turn remains"
    b = Builder(attrs=("x",))
    b.init(b.set("x", 7))
    x, new = b.attr("x"), b.attr("new")
    b.session(b.observe("x", x),
              b.loop(b.turn(), b.observe("new", new), b.observe("more", b.attr("more")),
                     b.observe("turn", b.attr("turn_no")), b.branch(b.attr("more"), [], [b.end()])))
    spec = ir.SessionSpec(((9, 5.0),), (((3, 10.0),), ((3, 20.0),), ((3, 30.0),)))
    plain = ir.SessionSpec((), None)
    result = run(b.build(arrival=ir.Sessions((spec, plain)), horizon=5))
    assert values(result, "x") == [5.0, 7.0]
    rec = next(o for o in result.observes if o.name == "new")
    assert [(s[1], s[2], s[3]) for s in rec.samples] == [(0, 1, 10.0), (0, 2, 20.0), (0, 3, 30.0), (1, 1, 0.0)]
    assert values(result, "more") == [1.0, 1.0, 0.0, 0.0]
    assert result.turns == 4 and result.ended == 2


def test_turn_block_runs_per_turn():
    # 002 §3 Workload: "init runs at arrival, turn at every turn statement"
    b = Builder(attrs=("n",))
    n = b.attr("n")
    b.init(b.set("n", 100))
    b.turn_block(b.set("n", binary("Add", n, 1)))
    b.session(b.turn(), b.turn(), b.observe("n", n))
    assert values(run(b.build(horizon=5)), "n") == [102.0]


def test_trace_replay_loads_rows_per_turn(tmp_path):
    # 002 §3 Workload: "with a trace, turn loads the next turn's new, out, think, forced and sets more
    # (ordered: session i replays trace session i)"
    path = tmp_path / "t.csv"
    path.write_text("session,turn,new,out,think,forced\n1,1,30,3,0.5,0\n0,2,20,2,1.5,1\n0,1,10,1,2.5,0\n")
    b = Builder()
    d = b.delay("think")
    b.session(b.loop(b.turn(), b.observe("new", b.attr("new")), b.observe("forced", b.attr("forced")),
                     b.run(d, b.attr("think")), b.branch(b.attr("more"), [], [b.end()])))
    program = b.build(arrival=ir.Batch(2), horizon=20, trace="t.csv", trace_ordered=True)
    result = run(program, base_dir=str(tmp_path))
    rec = next(o for o in result.observes if o.name == "new")
    assert sorted((s[1], s[2], s[3]) for s in rec.samples) == [(0, 1, 10.0), (0, 2, 20.0), (1, 1, 30.0)]
    assert values(result, "forced") == [0.0, 0.0, 1.0]


def test_the_short_base_trace_replays():
    # the copy of ../shared/traces/short_base.csv that examples/replay ships
    trace_file = pathlib.Path(__file__).parent.parent / "examples" / "replay" / "short_base.csv"
    b = Builder()
    d = b.delay("think")
    b.session(b.loop(b.turn(), b.run(d, b.attr("think")), b.branch(b.attr("more"), [], [b.end()])))
    program = b.build(arrival=ir.Batch(5), horizon=1e6, trace=str(trace_file), trace_ordered=True)
    result = run(program)
    assert result.ended == 5 and result.turns > 5


def test_poisson_first_arrival_at_zero_and_renewal_after_a_gap():
    # 002 §2: "poisson(rate) starts with an arrival at time zero"; "The first renewal arrival occurs after one gap."
    b = Builder()
    b.session(b.observe("at", now()))
    assert values(run(b.build(arrival=ir.Poisson(1.0), horizon=0.0)), "at") == [0.0]
    renewal = run(b.build(arrival=ir.Renewal(ir.Num(2.0)), horizon=7))
    assert values(renewal, "at") == [2.0, 4.0, 6.0]


def test_renewal_gaps_must_be_positive_and_finite():
    # 002 §2: "Gaps must be positive and finite."
    b = Builder()
    b.session(b.end())
    with pytest.raises(RunError, match="positive and finite"):
        run(b.build(arrival=ir.Renewal(ir.Num(0.0)), horizon=7))


def test_closed_population_replaces_each_ended_session_at_once():
    b = Builder()
    d = b.delay("think")
    b.session(b.run(d, 1))
    result = run(b.build(arrival=ir.Closed(3), horizon=10.5))
    assert result.mean_live == pytest.approx(3.0)
    assert result.arrivals == 3 + 3 * 10


def test_arrivals_n_drains_and_ends_the_run():
    # 002 §2: "run { arrivals N; } requires exactly N open-workload arrivals and drains their sessions";
    # "expose the actual termination time as end"
    b = Builder()
    d = b.delay("d")
    b.session(b.run(d, 0.5))
    result = run(b.build(arrival=ir.Renewal(ir.Num(1.0)), horizon=100, arrivals=3))
    assert result.end == 3.5 and result.arrivals == 3 and result.horizon == 100.0
    with pytest.raises(RunError, match="only 2 of the 3 arrivals"):
        run(b.build(arrival=ir.Renewal(ir.Num(1.0)), horizon=2.5, arrivals=3))
    with pytest.raises(RunError, match="did not drain"):
        run(b.build(arrival=ir.Renewal(ir.Num(1.0)), horizon=3.2, arrivals=3))
    with pytest.raises(RunError, match="at or before the warmup"):
        run(b.build(arrival=ir.Renewal(ir.Num(1.0)), horizon=100, warmup=10, arrivals=3))


def test_a_loop_without_time_hits_the_statement_backstop():
    # SERQ-FACTS.md: "an error after a million statements at one instant without anything blocking"
    b = Builder(attrs=("k",))
    b.session(b.loop(b.set("k", 1)))
    with pytest.raises(RunError, match="without anything blocking"):
        run(b.build(horizon=5))


def test_a_closed_workload_whose_sessions_end_at_once_hits_the_backstop():
    # 000 Pool: "A request that can never fit ... is rejected and its session ends"; under arrive closed the
    # session is replaced at once, so without a backstop the run would replace sessions forever at time 0
    # (a Hypothesis run of test_same_seed_same_run found this livelock).
    b = Builder()
    p = b.pool("p", cap=10)
    d = b.delay("d")
    b.session(b.hold([(p, 20)], b.run(d, 1)), b.end())
    with pytest.raises(RunError, match="arrive closed: 1000 sessions ended at one instant"):
        run(b.build(arrival=ir.Closed(2), horizon=5))


def test_observations_after_warmup_and_is_test():
    # 002 §3 Statistics: "observe x = e records a sample after warm-up with the time, session and turn";
    # a test is an expression whose outermost operator is a comparison, &&, || or !
    b = Builder()
    d = b.delay("d")
    b.session(b.run(d, 1), b.observe("hit", binary("Gt", now(), 100)), b.observe("t", now()))
    result = run(b.build(arrival=ir.Renewal(ir.Num(1.0)), horizon=10, warmup=5))
    hit = next(o for o in result.observes if o.name == "hit")
    t = next(o for o in result.observes if o.name == "t")
    assert hit.is_test and not t.is_test
    assert [s[0] for s in t.samples] == [5.0, 6.0, 7.0, 8.0, 9.0, 10.0]


def test_gauges_record_change_points():
    # 002 §3 Gauges: "read at the end of every instant"
    b = Builder()
    p = b.pool("p", cap=10)
    d = b.delay("d")
    b.gauge("used", ir.Call("Used", (ir.PoolArg(ir.Ref(p, 1, None)),)))
    b.session(b.run(d, 1), b.hold([(p, 3)], b.run(d, 2)))
    result = run(b.build(horizon=10))
    assert result.gauges[0].points == ((0.0, 0.0), (1.0, 3.0), (3.0, 0.0))


def test_same_seed_same_result_and_other_seed_differs():
    b = Builder()
    svc = b.fifo("svc")
    b.session(b.set("t0", now()), b.run(svc, sample("Exp", 1.0)), b.observe("sojourn", sub(now(), b.attr("t0"))))
    first = run(b.build(arrival=ir.Poisson(0.7), horizon=300, seed=11))
    again = run(b.build(arrival=ir.Poisson(0.7), horizon=300, seed=11))
    other = run(b.build(arrival=ir.Poisson(0.7), horizon=300, seed=12))
    assert repr(first) == repr(again)
    assert repr(first) != repr(other)


def test_mm1_mean_sojourn_is_near_the_closed_form():
    # M/M/1 at λ 0.5, μ 1: mean sojourn 1/(μ - λ) = 2 (a loose sanity bound; the campaign is elsewhere)
    b = Builder()
    svc = b.fifo("svc")
    b.session(b.set("t0", now()), b.run(svc, sample("Exp", 1.0)), b.observe("sojourn", sub(now(), b.attr("t0"))))
    result = run(b.build(arrival=ir.Poisson(0.5), horizon=6000, warmup=100, seed=5))
    sojourn = values(result, "sojourn")
    assert 1.6 < sum(sojourn) / len(sojourn) < 2.4
    assert 0.45 < result.stages[0].utilization < 0.55
