"""Properties over random small pool programs (Hypothesis):

- the invariants of every reachable configuration, checked after every
  applied rule (seed 000: "The invariant allocated + cached ≤ cap holds in
  every reachable configuration");
- settle is idempotent: settle(settle(c)) == settle(c) (seed 002 §3: settle
  runs "until nothing changes");
- the same program and seed give the same run.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from irbuild import Builder, binary, sample
from semantics import fast, ir
from semantics.compiler import compile_source
from semantics.errors import RunStop
from semantics.smallstep.driver import build_machine, configurations, machine_for, run, walk
from semantics.smallstep.invariants import check_invariants
from semantics.smallstep.measure import take_first_event
from semantics.smallstep.settle import settle


@st.composite
def pool_programs(draw):
    b = Builder(attrs=("who",))
    caps = []
    pools = []
    for k in range(draw(st.integers(1, 2))):
        cap = draw(st.sampled_from([8.0, 16.0, 24.0, 64.0]))
        block = draw(st.sampled_from([None, 4.0, 8.0]))
        evict = draw(st.sampled_from([None, (ir.Ctx("Size"),), (ir.Unary("Neg", ir.Ctx("Last")), ir.Attr(1)),
                                      # keys NaN for every entry, or for an entry once it has shrunk to 4 units
                                      # (pools.make_room_by leaves its heap for evict_one's scan)
                                      (binary("Mul", ir.Ctx("Size"), math.nan),),
                                      (binary("Div", 0.0, binary("Sub", ir.Ctx("Size"), 4.0)), ir.Ctx("Age"))]))
        queue = draw(st.sampled_from([None, (ir.Attr(1),), (ir.Ctx("Waited"),)]))
        pools.append(b.pool(f"p{k}", cap=cap, block=block, evict=evict, lifo=draw(st.booleans()), queue=queue))
        caps.append(cap)
    d = b.delay("d")
    svc = b.fifo("svc", servers=draw(st.integers(1, 2)))
    units = st.sampled_from([1.0, 3.0, 4.0, 8.0, 12.0])
    shapes = []
    for _ in range(draw(st.integers(1, 3))):
        p = draw(st.sampled_from(pools))
        body = [b.run(draw(st.sampled_from([d, svc])), sample("Exp", draw(st.sampled_from([0.5, 1.0, 2.0]))))]
        if draw(st.booleans()):
            body.append(b.grow(p, draw(units)))
            body.append(b.run(d, 1.0))
        if draw(st.booleans()):
            body.append(b.load(p, 0.0))
        parts = [(p, draw(units))]
        other = [q for q in pools if q != p]
        if other and draw(st.booleans()):
            parts.append((other[0], draw(units)))
        cache = draw(st.sampled_from([None, 0.0, 4.0, 100.0]))
        reuse = draw(st.sampled_from([None, 4.0])) if cache is not None else None
        lease = (p, draw(st.sampled_from([0.5, math.inf]))) if cache is not None and draw(st.booleans()) else None
        hold = b.hold(parts, *body, cache=cache, reuse=reuse, lease=lease)
        tail = [b.release(p)] if lease is not None and draw(st.booleans()) else []
        shapes.append([hold] + tail)
    stmts = [s for shape in shapes for s in shape]
    if draw(st.booleans()):
        stmts = [b.loop(*stmts, b.branch(binary("Gt", ir.Ctx("Now"), 6.0), [b.end()]))]
    b.session(*stmts)
    arrival = draw(st.sampled_from([ir.Poisson(1.5), ir.Batch(4), ir.Closed(3)]))
    return b.build(arrival=arrival, horizon=8.0, seed=draw(st.integers(0, 5)))


common = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@common
@given(pool_programs())
def test_invariants_hold_after_every_rule(program):
    try:
        for rule, c in configurations(program):
            try:
                check_invariants(c)
            except AssertionError as e:
                raise AssertionError(f"after {rule} at {c.time}: {e}") from None
    except RunStop as e:
        assert "at one instant" in e.message  # a self-preemption livelock: the backstop, not a crash


@common
@given(pool_programs())
def test_settle_is_idempotent(program):
    m = machine_for(program)
    try:
        for c in walk(m):
            assert settle(m, c) == c
    except RunStop as e:
        assert "at one instant" in e.message


def events_seen(program, observed: bool) -> list:
    """The configuration after each event and its settle: the definition's with a step-trace observer attached
    (``observed``), or the fast engine's."""
    m = build_machine(program, observer=lambda rule, c, fields: None) if observed else fast.build_machine(program)
    try:
        return list(walk(m))
    except RunStop as e:
        return [e.message]


#: Programs whose sessions end right after an observe (the two rules are one
#: update when unobserved), in open and closed workloads, with and without a
#: hold or a lease still held at the end.
OBSERVE_LAST = {
    "open": """stage s : fifo(2);
workload { arrive poisson(1.5); }
session { set t0 = now; run s (~exp(1)); observe w = now - t0; }
run { horizon 40; warmup 3; seed 2; }""",
    "closed": """stage s : ps(1);
stage think : delay;
workload { arrive closed(4); }
session { run think (~exp(2)); run s (~exp(0.5)); observe done = now; }
run { horizon 40; seed 3; }""",
    "end statement": """stage s : fifo(1);
gauge n = queue(s);
workload { arrive poisson(0.7); }
session { set t0 = now; run s (~exp(1)); branch (now - t0 > 2) { observe slow = now - t0; end; } observe fast = now - t0; end; }
run { horizon 40; warmup 2; seed 5; }""",
    "end inside a hold": """pool p { cap 10; }
stage s : fifo;
workload { arrive poisson(1); }
session { hold p (2) { run s (~exp(0.5)); branch (now > 10) { observe late = now; end; } } observe early = now; }
run { horizon 40; seed 1; }""",
    "lease": """pool p { cap 20; block 2; }
stage s : fifo;
workload { arrive poisson(1); }
session { hold p (3) { run s (~exp(0.5)); } cache (3) lease p (1.5); observe leased = used(p); }
run { horizon 40; seed 4; }""",
}


@pytest.mark.parametrize("name", sorted(OBSERVE_LAST))
def test_an_observer_sees_the_same_run(name):
    """The rules fold into one update what a step trace shows as several rules
    (a fifo completion and the next start; an arrival and the next one's
    scheduling; an observe and the session's end): with or without an
    observer, every event leaves the same configuration."""
    program = compile_source(OBSERVE_LAST[name], f"<{name}>")[0]
    unobserved = events_seen(program, observed=False)
    assert len(unobserved) > 20
    assert events_seen(program, observed=True) == unobserved


@common
@given(pool_programs())
def test_an_observer_sees_the_same_pool_run(program):
    assert events_seen(program, observed=True) == events_seen(program, observed=False)


@settings(max_examples=15, deadline=None)
@given(pool_programs())
def test_same_seed_same_run(program):
    try:
        first = repr(run(program))
    except RunStop as e:
        first = e.message
    try:
        again = repr(run(program))
    except RunStop as e:
        again = e.message
    assert first == again


def assert_event_taker_is_the_definition(m, c, dt: float) -> None:
    """m.take_first_event (written out) equals measure.take_first_event (the
    definition) bit for bit on ``c``, and on ``c`` with an event ``dt`` after
    its time put first; and so do the areas m.areas_at writes out."""
    early = (c.time + dt, -1, "arrive", 0, 0)
    for case in ([c] if c.events else []) + [c._replace(events=(early,) + c.events)]:
        taken = take_first_event(m, case)
        assert m.take_first_event(case) == taken
        # the areas the fast forms of a whole event step integrate (measure.make_areas_at) are the definition's too
        assert m.areas_at(case, case.events[0][0]) == taken.areas


@common
@given(pool_programs(), st.sampled_from([0.0, 0.5, 2.75]), st.sampled_from([0.0, 1.5, 4.0]))
def test_the_written_out_event_taker_is_the_definition(program, dt, warmup):
    """measure.make_event_taker writes measure.take_first_event (time/advance
    with the areas integrated, the event taken off and counted) out for the
    program's pools and stages: the same configuration, bit for bit, in every
    reachable configuration, with the time before the warm-up, at it, and after."""
    m = fast.machine_for(dataclasses.replace(program, warmup=warmup))
    try:
        for c in walk(m):
            assert_event_taker_is_the_definition(m, c, dt)
    except RunStop as e:
        assert "at one instant" in e.message


def test_the_written_out_event_taker_with_flows():
    """A program with flows integrates by ``levels`` inside the written-out function: still the definition."""
    text = """stage a : ps(1);
stage b : ps(2);
stage c : fifo(2);
share bottleneck;
workload { arrive poisson(1.5); }
session { run a, b (~exp(0.8)); run c (~exp(0.5)); }
run { horizon 30; warmup 5; seed 4; }"""
    m = fast.machine_for(compile_source(text, "<flows>")[0])
    assert m.flow_stages
    for c in walk(m):
        assert_event_taker_is_the_definition(m, c, 0.25)
