"""Lowering to IR version 13: slots, attribute types, Cost wrappers,
references, families, constants and the defaults, as the reference
implementation writes them (FORMAT.md; the oracle IR files)."""

from __future__ import annotations

import math

import pytest

from semantics import ir
from semantics.compiler import compile_source


def compile_text(text: str) -> ir.Program:
    program, _ = compile_source(text, "t.sq")
    return program


PROGRAM = """
let B = 8;
let bs = 4;
pool reqs[2] { cap 2; admit via E; }
pool kv { cap 10 * bs; block bs; evict by (age, -size); queue by (serial); }
stage E[2] : step { budget B; cost 1 + 0 * tokens; chunk 4; memory kv; }
stage link : ps(1);
stage tool : fifo;
workload {
  arrive renewal(2 * 1);
  hidden o;
  init { set K = 0; }
  turn { set o = 3; }
  session { turn; request; set K = K + o; end; }
}
server {
  choose j in 2 by (queued(reqs[j]));
  hold reqs[j] (1), kv (K + 1) reserve (K + 2) reuse (K) {
    run E[j] prefill (K + 1) growing kv;
    grow kv (bs);
    run link, tool (1);
    load kv (2);
  } cache (K + o);
  observe w = now;
}
gauge g = used(reqs[0]) + used(reqs[1]);
run { horizon 50; }
"""


@pytest.fixture(scope="module")
def program() -> ir.Program:
    return compile_text(PROGRAM)


def test_slots_builtins_first_then_first_appearance(program: ir.Program) -> None:
    """FORMAT.md: "The built-in attributes take slots 0 to 8 ... the program's own follow"."""
    assert program.attrs == ir.BUILTIN_ATTRS + ("K", "o", "j")
    assert (program.slot_cached, program.slot_computed) == (0, 8)
    assert program.hidden == (10,)


def test_attribute_types(program: ir.Program) -> None:
    types = dict(zip(program.attrs, program.attr_types))
    # set on the workload side (init, turn, the session): sizes; chosen by the server: a value
    assert (types["K"], types["o"], types["j"]) == ("Size", "Size", "Value")


def test_cost_wrappers(program: ir.Program) -> None:
    """A run's work is measured in its stages, a hold's units and reserve in
    their pool, reuse and cache in the hold's pools jointly, grow and load in
    their pool (the oracle IR files: Cost(Stage), Cost(Pool), Cost(Joint))."""
    server = program.blocks[program.session]
    hold = next(s for s in server if isinstance(s, ir.Hold))
    reqs, kv = ir.CostTarget("Pool", 0, 2), ir.CostTarget("Pool", 2, 1)
    assert hold.pools[0].units.target == reqs and hold.pools[1].reserve.target == kv
    assert hold.reuse.target == ir.JointTarget((reqs, kv)) and hold.cache.target == ir.JointTarget((reqs, kv))
    body = program.blocks[hold.body]
    assert body[0].work.target == ir.CostTarget("Stage", 0, 2)
    assert body[1].amount.target == kv and body[3].amount.target == kv
    assert body[2].work.target == ir.JointTarget((ir.CostTarget("Stage", 2, 1), ir.CostTarget("Stage", 3, 1)))
    assert body[2].also == (ir.Ref(3, 1, None),)


def test_references_and_families(program: ir.Program) -> None:
    assert [(p.name, p.index, p.admit_via) for p in program.pools] == [("reqs", 0, 0), ("reqs", 1, 1),
                                                                      ("kv", None, None)]
    assert [(s.name, s.index) for s in program.stages] == [("E", 0), ("E", 1), ("link", None), ("tool", None)]
    assert program.stages[1].kind.memory == 2
    hold = next(s for s in program.blocks[program.session] if isinstance(s, ir.Hold))
    assert hold.pools[0].ref == ir.Ref(0, 2, ir.Attr(11))
    # a constant index is a number in the IR
    gauge = program.gauges[0].expr
    assert gauge.left.args[0].ref == ir.Ref(0, 2, ir.Num(0.0))


def test_constants_are_folded_where_they_stand(program: ir.Program) -> None:
    """A let is its number wherever it is read; the rest of an expression is kept."""
    kv = program.pools[2]
    assert (kv.cap, kv.block) == (40.0, 4.0)
    step = program.stages[0].kind
    assert step.budget == ir.Num(8.0) and step.chunk == ir.Num(4.0)
    assert step.cost == ir.Binary("Add", ir.Num(1.0), ir.Binary("Mul", ir.Num(0.0), ir.Ctx("Ntok")))
    assert program.arrival == ir.Renewal(ir.Num(2.0))
    assert kv.evict == (ir.Ctx("Age"), ir.Unary("Neg", ir.Ctx("Size"))) and kv.queue == (ir.Attr(1),)


def test_observations_blocks_and_sides(program: ir.Program) -> None:
    assert (program.init, program.turn, program.session) == (0, 1, 2)
    assert program.observes == ("w",)
    assert program.sides[program.session] == ("Workload", "Server", "Server", "Server", "Workload", "Workload")


def test_defaults() -> None:
    """Seed 000's pool defaults (cap inf, no block, lru, preempt none, fifo),
    fifo's one server, step's chunk 0 and admission order, warmup 0, seed 1."""
    program = compile_text("pool p { } stage f : fifo; stage e : step { budget 1; cost 1; }\n"
                           "session { end; }\nrun { horizon 5; }")
    pool = program.pools[0]
    assert (pool.cap, pool.block, pool.evict, pool.preempt, pool.queue, pool.spill, pool.admit_via) == (
        math.inf, None, None, None, None, None, None)
    assert program.stages[0].kind == ir.Fifo(1)
    step = program.stages[1].kind
    assert step.chunk == ir.Num(0.0) and step.serve == () and step.memory is None
    assert (program.horizon, program.warmup, program.seed, program.arrivals) == (5.0, 0.0, 1, None)
    assert program.arrival == ir.NoArrival() and program.share is None and program.gauges == ()


def test_workload_clauses_and_share() -> None:
    program = compile_text('stage a : ps(1); stage b : ps(2); share bottleneck;\n'
                           'workload { arrive poisson(1 / 4); trace "t.csv" ordered; session { request; } }\n'
                           'server { run a, b (1); }\nrun { horizon 9; warmup 1; seed 4; arrivals 3; }')
    assert program.arrival == ir.Poisson(0.25) and program.trace == "t.csv" and program.trace_ordered
    assert program.share == "Bottleneck"
    assert (program.horizon, program.warmup, program.seed, program.arrivals) == (9.0, 1.0, 4, 3)
    drawn = compile_text("workload { arrive renewal(~exp(2)); }\nrun { horizon 1; }")
    assert drawn.arrival == ir.Renewal(ir.Sample("Exp", (ir.Num(2.0),)))
    assert compile_text("workload { arrive closed(0); }\nrun { horizon 1; }").arrival == ir.Closed(0)


def test_exclusive_prefill_and_serve_by() -> None:
    program = compile_text("stage a : step { budget 1; cost 1; serve exclusive prefill; }\n"
                           "stage b : step { budget 1; cost 1; serve by (remaining, admission); }\n"
                           "run { horizon 1; }")
    assert program.stages[0].kind.serve is None
    assert program.stages[1].kind.serve == (ir.Ctx("Remaining"), ir.Ctx("Admission"))


def test_spill_is_lowered_with_its_stage_and_pool() -> None:
    program = compile_text("pool tier { } stage link : ps(1);\n"
                           "pool kv { spill tier via link (size / 2) when (size > 4); }\nrun { horizon 1; }")
    spill = program.pools[1].spill
    assert (spill.to, spill.via) == (0, 0)
    assert spill.work == ir.Binary("Div", ir.Ctx("Size"), ir.Num(2.0))


def test_the_source_map_points_at_forms_and_spliced_statements() -> None:
    """A desugared form's kernel statements have the form's span; a spliced
    server's statements their own (SourceMap: "for a desugared form, the form's span")."""
    text = ("pool a { cap 9; } pool b { cap 9; } stage link : ps(1);\nshare maxmin;\n"
            "workload { arrive batch(1); session { request; end; } }\n"
            "server {\n  hold a (1), b (1) {\n    transfer (1) from a to b (1);\n  }\n}\nrun { horizon 1; }")
    program, source_map = compile_source(text, "t.sq")
    hold = program.blocks[program.session][0]
    spans = [source_map.stmt(hold.body, k) for k in range(3)]
    assert [type(s).__name__ for s in program.blocks[hold.body]] == ["Run", "Load", "Release"]
    assert all((s.line, s.col) == (6, 5) for s in spans)
    assert (source_map.stmt(program.session, 0).line, source_map.stmt(program.session, 1).line) == (5, 3)
    assert source_map.share.line == 2 and source_map.arrival.line == 3 and source_map.run.line == 9


def test_the_pull_fixture_writes_the_relation_out() -> None:
    """tests/programs/pd_pull.sq: a transfer without `on` in D's entry called
    from P[i] is run D.nic.latency[j] (x0); run P.nic[i], D.nic[j] (…);
    load D.kv[j] (…); release P.kv[i]; (seed 002, Queues)."""
    from pathlib import Path

    from semantics.compiler import compile_file

    path = Path(__file__).resolve().parent / "programs" / "pd_pull.sq"
    program, source_map = compile_file(str(path))
    names = [(s.name, s.index) for s in program.stages]
    assert names == [("P", 0), ("P", 1), ("P.nic", 0), ("P.nic", 1), ("D", 0), ("D", 1), ("D.nic", 0), ("D.nic", 1),
                     ("D.nic.latency", 0), ("D.nic.latency", 1)]
    assert program.share == "MaxMin"
    i, j = program.attrs.index("i"), program.attrs.index("j")
    decode_hold = [s for s in program.blocks[program.session] if isinstance(s, ir.Hold)][1]
    latency, read, load, release, _ = program.blocks[decode_hold.body]
    assert latency.stage == ir.Ref(8, 2, ir.Attr(j)) and latency.work.expr == ir.Num(0.002)
    assert (read.stage, read.also) == (ir.Ref(2, 2, ir.Attr(i)), (ir.Ref(6, 2, ir.Attr(j)),))
    assert load.ref == ir.Ref(6, 2, ir.Attr(j)) and release.ref == ir.Ref(2, 2, ir.Attr(i))
    assert all(source_map.stages[k] == source_map.stages[8] for k in (8, 9))
