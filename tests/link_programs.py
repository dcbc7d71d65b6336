"""Small IR programs for the linker's tests, built directly as ir values.

Every program has the nine built-in attributes and the same few of its own
(``EXTRA_ATTRS``), so a test names an attribute with ``attr("prompt")``. Block
0 is init, 1 turn, 2 the session; further blocks (a hold's body, a branch's
arms) are passed in ``blocks`` and numbered from 3.
"""

from __future__ import annotations

import math

from semantics import ir

EXTRA_ATTRS = ("prompt", "o", "hit", "x", "j", "known")
ATTRS = ir.BUILTIN_ATTRS + EXTRA_ATTRS
FIRST_EXTRA_BLOCK = 3


def attr(name: str) -> ir.Attr:
    return ir.Attr(ATTRS.index(name))


def slot(name: str) -> int:
    return ATTRS.index(name)


def num(x: float) -> ir.Num:
    return ir.Num(float(x))


def ctx(name: str) -> ir.Ctx:
    """A context variable by its source spelling (``tokens``)."""
    return ir.Ctx(next(k for k, v in ir.CONTEXT_VARIABLES.items() if v == name))


def ref(base: int, count: int = 1, index: ir.Expr | None = None) -> ir.Ref:
    return ir.Ref(base, count, index)


def call(fun: str, *args: ir.Expr | ir.Ref, kinds: str = "") -> ir.Call:
    """``Call``; a Ref argument is a pool, or a stage where ``kinds`` says "s" at its position."""
    out: list[ir.Arg] = []
    for i, a in enumerate(args):
        if isinstance(a, ir.Ref):
            out.append(ir.StageArg(a) if kinds[i : i + 1] == "s" else ir.PoolArg(a))
        else:
            out.append(ir.ExprArg(a))
    return ir.Call(fun, tuple(out))


def binary(op: str, a: ir.Expr, b: ir.Expr) -> ir.Binary:
    return ir.Binary(op, a, b)


def sample(dist: str, *args: ir.Expr) -> ir.Sample:
    return ir.Sample(dist, tuple(args))


def make_pool(name: str, cap: float = math.inf, **fields) -> ir.Pool:
    values = dict(index=None, block=None, evict=None, preempt=None, queue=None, spill=None, admit_via=None)
    values.update(fields)
    return ir.Pool(name=name, cap=float(cap), **values)


def make_fifo(name: str, servers: int = 1, index: int | None = None) -> ir.Stage:
    return ir.Stage(name, index, ir.Fifo(servers))


def make_ps(name: str, capacity: ir.Expr | float = 1.0, index: int | None = None) -> ir.Stage:
    capacity = capacity if not isinstance(capacity, (int, float)) else num(capacity)
    return ir.Stage(name, index, ir.Ps(capacity))


def make_step(name: str, memory: int | None = None, **fields) -> ir.Stage:
    values = dict(budget=num(100), cost=num(1), chunk=num(0), serve=())
    values.update(fields)
    return ir.Stage(name, None, ir.Step(memory=memory, **values))


def make_hold(
    pools: list[tuple[ir.Ref, ir.Expr, ir.Expr | None]],
    body: int,
    cache: ir.Expr | None = None,
    reuse: ir.Expr | None = None,
    lease: ir.Lease | None = None,
) -> ir.Hold:
    return ir.Hold(tuple(ir.HoldPool(r, u, res) for r, u, res in pools), reuse, body, cache, lease)


def make_run(stage: int | ir.Ref, work: ir.Expr, mode: str = "Plain", growing: ir.Ref | None = None, also=None) -> ir.Run:
    stage_ref = stage if isinstance(stage, ir.Ref) else ref(stage)
    return ir.Run(stage_ref, mode, work, growing, tuple(also) if also is not None else None)


def make_program(
    session: list[ir.Stmt] = (),
    blocks: list[list[ir.Stmt]] = (),
    *,
    init: list[ir.Stmt] = (),
    turn: list[ir.Stmt] = (),
    pools: list[ir.Pool] = (),
    stages: list[ir.Stage] = (),
    observes: tuple[str, ...] = ("t",),
    hidden: tuple[int, ...] = (),
    share: str | None = None,
    gauges: list[ir.Gauge] = (),
    arrival: ir.Arrival = ir.Poisson(1.0),
) -> ir.Program:
    all_blocks = (tuple(init), tuple(turn), tuple(session)) + tuple(tuple(b) for b in blocks)
    return ir.Program(
        version=ir.IR_VERSION,
        attrs=ATTRS,
        attr_types=("Value",) * len(ATTRS),
        sides=tuple(("Workload",) * len(b) for b in all_blocks),
        observes=observes,
        pools=tuple(pools),
        stages=tuple(stages),
        arrival=arrival,
        trace=None,
        trace_ordered=False,
        init=0,
        turn=1,
        session=2,
        blocks=all_blocks,
        horizon=100.0,
        warmup=0.0,
        seed=1,
        arrivals=None,
        **ir.BUILTIN_SLOTS,
        hidden=tuple(hidden),
        share=share,
        gauges=tuple(gauges),
    )
