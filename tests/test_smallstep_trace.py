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
