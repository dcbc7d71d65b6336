"""The step trace (docs/step-trace.md) and the driver's interface."""

from __future__ import annotations

import json

from irbuild import Builder, now, sample
from semantics import ir
from semantics.smallstep.driver import run, trace


def _program():
    b = Builder()
    kv = b.pool("kv", cap=16, block=4)
    svc = b.fifo("svc")
    b.session(b.hold([(kv, 6)], b.run(svc, sample("Exp", 1.0)), cache=6), b.observe("t", now()))
    return b.build(arrival=ir.Poisson(1.0), horizon=20, seed=4)


def test_records_are_json_with_rule_and_time_first():
    records = list(trace(_program()))
    assert records and all(list(r)[:2] == ["rule", "time"] for r in records)
    json.dumps(records, allow_nan=False)
    times = [r["time"] for r in records]
    assert times == sorted(times)
    assert {"workload/arrive", "session/hold-enter", "pool/admit", "stage/fifo-enter", "pool/release"} <= {r["rule"] for r in records}


def test_steps_and_from_time_bound_the_records():
    everything = list(trace(_program()))
    assert list(trace(_program(), steps=5)) == everything[:5]
    late = [r for r in everything if r["time"] >= 10.0]
    assert list(trace(_program(), from_time=10.0, steps=7)) == late[:7]


def test_the_trace_is_the_same_every_time():
    assert list(trace(_program())) == list(trace(_program()))


def test_progress_is_called_up_to_one():
    calls = []
    run(_program(), progress=calls.append)
    assert calls and calls[-1] == 1.0 and all(0.0 <= x <= 1.0 for x in calls)


def _queue_trace():
    """Three sessions at time 0 through one fifo server, a second's work each."""
    b = Builder()
    svc = b.fifo("svc")
    b.session(b.run(svc, ir.Num(1.0)))
    return [(r["rule"], r["time"], r.get("session"), r.get("job"), r.get("jobs")) for r in
            trace(b.build(arrival=ir.Batch(3), horizon=10, seed=1))]


def test_a_completion_that_frees_the_server_is_followed_by_the_next_start():
    """docs/step-trace.md: stage/fifo-complete, then stage/fifo-start, in one
    update; seed 002 §3 Stages: "fifo(c): c servers, jobs in arrival order"."""
    rules = _queue_trace()
    completions = [k for k, r in enumerate(rules) if r[0] == "stage/fifo-complete"]
    assert [rules[k][1] for k in completions] == [1.0, 2.0, 3.0]
    for k in completions[:2]:  # the first two free the server for a waiting job
        assert rules[k + 1][0] == "stage/fifo-start" and rules[k + 1][1] == rules[k][1]
    assert completions[-1] + 1 == len(rules) or rules[completions[-1] + 1][0] != "stage/fifo-start"


def test_the_end_of_the_session_block_is_one_session_end():
    """docs/step-trace.md: no session/block-exit for the session's own block."""
    rules = _queue_trace()
    assert [r[2] for r in rules if r[0] == "session/end"] == [0, 1, 2]
    assert not [r for r in rules if r[0] == "session/block-exit"]
