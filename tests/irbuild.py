"""Terse construction of IR programs for the small-step tests.

    b = Builder(attrs=("t0",))
    kv = b.pool("kv", cap=64, block=16)
    svc = b.fifo("svc", servers=1)
    b.session(b.run(svc, 2.0), b.end())
    program = b.build(arrival=ir.Batch(1), horizon=10)

Numbers may be given as Python numbers wherever an expression goes; an
attribute is read with ``b.attr("name")`` (built-ins by name too).
"""

from __future__ import annotations

import math

from semantics import ir


def expr(x) -> ir.Expr:
    if isinstance(x, (int, float)):
        return ir.Num(float(x))
    return x


def binary(op: str, a, b) -> ir.Binary:
    return ir.Binary(op, expr(a), expr(b))


def add(a, b):
    return binary("Add", a, b)


def sub(a, b):
    return binary("Sub", a, b)


def mul(a, b):
    return binary("Mul", a, b)


def lt(a, b):
    return binary("Lt", a, b)


def eq(a, b):
    return binary("Eq", a, b)


def now() -> ir.Ctx:
    return ir.Ctx("Now")


def context(var: str) -> ir.Ctx:
    return ir.Ctx(var)


def sample(dist: str, *args) -> ir.Sample:
    return ir.Sample(dist, tuple(expr(a) for a in args))


def call(fun: str, *args) -> ir.Call:
    out = []
    for a in args:
        if isinstance(a, tuple) and a[0] in ("pool", "stage"):
            ref = ir.Ref(a[1], 1, None)
            out.append(ir.PoolArg(ref) if a[0] == "pool" else ir.StageArg(ref))
        else:
            out.append(ir.ExprArg(expr(a)))
    return ir.Call(fun, tuple(out))


def pool_cost(pool: int, x) -> ir.Cost:
    """``x`` measured in pool ``pool``'s units (the reference compiler's Cost wrapper)."""
    return ir.Cost(ir.CostTarget("Pool", pool, 1), expr(x))


def family_cost(ref: ir.Ref, x) -> ir.Cost:
    return ir.Cost(ir.CostTarget("Pool", ref.base, ref.count), expr(x))


def joint_cost(pools, counts=None) -> ir.CostTarget | ir.JointTarget:
    counts = counts or [1] * len(pools)
    targets = tuple(ir.CostTarget("Pool", p, n) for p, n in sorted(set(zip(pools, counts))))
    return targets[0] if len(targets) == 1 else ir.JointTarget(targets)


class Builder:
    def __init__(self, attrs=()):
        self.attrs = list(ir.BUILTIN_ATTRS) + list(attrs)
        self.pools: list[ir.Pool] = []
        self.stages: list[ir.Stage] = []
        self.blocks: list[tuple] = [(), ()]  # 0: init, 1: turn
        self.observes: list[str] = []
        self.session_block = None
        self.gauges: list[ir.Gauge] = []

    # -- names --------------------------------------------------------------
    def slot(self, name: str) -> int:
        if name not in self.attrs:
            self.attrs.append(name)
        return self.attrs.index(name)

    def attr(self, name: str) -> ir.Attr:
        return ir.Attr(self.slot(name))

    # -- declarations -------------------------------------------------------
    def pool(self, name, cap=math.inf, block=None, evict=None, lifo=False, queue=None, spill=None, index=None) -> int:
        preempt = (ir.Unary("Neg", ir.Ctx("Admission")),) if lifo else None
        self.pools.append(ir.Pool(name, index, float(cap), None if block is None else float(block),
                                  None if evict is None else tuple(expr(k) for k in evict), preempt,
                                  None if queue is None else tuple(expr(k) for k in queue), spill, None))
        return len(self.pools) - 1

    def pool_family(self, name, count, **options) -> int:
        """``pool name[count]``: the base index of its members."""
        base = len(self.pools)
        for i in range(count):
            self.pool(name, index=i, **options)
        return base

    def fifo_family(self, name, count, servers=1) -> int:
        base = len(self.stages)
        for i in range(count):
            self.fifo(name, servers=servers, index=i)
        return base

    def fifo(self, name, servers=1, index=None) -> int:
        self.stages.append(ir.Stage(name, index, ir.Fifo(servers)))
        return len(self.stages) - 1

    def ps(self, name, capacity, index=None) -> int:
        self.stages.append(ir.Stage(name, index, ir.Ps(expr(capacity))))
        return len(self.stages) - 1

    def delay(self, name) -> int:
        return self.ps(name, ir.Ctx("N"))

    def block(self, *stmts) -> int:
        self.blocks.append(tuple(stmts))
        return len(self.blocks) - 1

    def init(self, *stmts):
        self.blocks[0] = tuple(stmts)

    def turn_block(self, *stmts):
        self.blocks[1] = tuple(stmts)

    def session(self, *stmts):
        self.session_block = self.block(*stmts)

    def gauge(self, name, e):
        self.gauges.append(ir.Gauge(name, expr(e)))

    # -- statements ---------------------------------------------------------
    def set(self, name, e) -> ir.Set:
        return ir.Set(self.slot(name), expr(e))

    def observe(self, name, e) -> ir.Observe:
        if name not in self.observes:
            self.observes.append(name)
        return ir.Observe(self.observes.index(name), expr(e))

    def run(self, stage, work, *also) -> ir.Run:
        targets = tuple(ir.CostTarget("Stage", s, 1) for s in sorted({stage, *also}))
        target = targets[0] if len(targets) == 1 else ir.JointTarget(targets)
        return ir.Run(ir.Ref(stage, 1, None), "Plain", ir.Cost(target, expr(work)), None,
                      tuple(ir.Ref(s, 1, None) for s in also) if also else None)

    def run_ref(self, ref: ir.Ref, work) -> ir.Run:
        return ir.Run(ref, "Plain", ir.Cost(ir.CostTarget("Stage", ref.base, ref.count), expr(work)), None, None)

    def hold(self, pools, *body, cache=None, reuse=None, lease=None) -> ir.Hold:
        """``pools``: (pool, units) or (pool, units, reserve) tuples, a pool an index or an ir.Ref;
        ``lease``: (pool, seconds)."""
        refs = [p[0] if isinstance(p[0], ir.Ref) else ir.Ref(p[0], 1, None) for p in pools]
        parts = tuple(ir.HoldPool(r, family_cost(r, p[1]), family_cost(r, p[2]) if len(p) > 2 else None)
                      for r, p in zip(refs, pools))
        joint = joint_cost([r.base for r in refs], [r.count for r in refs])
        return ir.Hold(parts, None if reuse is None else ir.Cost(joint, expr(reuse)), self.block(*body),
                       None if cache is None else ir.Cost(joint, expr(cache)),
                       None if lease is None else ir.Lease(ir.Ref(lease[0], 1, None), expr(lease[1])))

    def grow(self, pool, units) -> ir.Grow:
        return ir.Grow(ir.Ref(pool, 1, None), pool_cost(pool, units))

    def release(self, pool) -> ir.Release:
        return ir.Release(ir.Ref(pool, 1, None))

    def drop(self, pool) -> ir.Drop:
        return ir.Drop(ir.Ref(pool, 1, None))

    def load(self, pool, units) -> ir.Load:
        return ir.Load(ir.Ref(pool, 1, None), pool_cost(pool, units))

    def branch(self, guard, then, otherwise=()) -> ir.Branch:
        return ir.Branch(expr(guard), self.block(*then), self.block(*otherwise))

    def loop(self, *body) -> ir.Loop:
        return ir.Loop(self.block(*body))

    def while_(self, guard, *body) -> ir.While:
        return ir.While(expr(guard), self.block(*body))

    def choose(self, name, count, *keys) -> ir.Choose:
        return ir.Choose(self.slot(name), count, tuple(expr(k) for k in keys))

    def end(self) -> ir.End:
        return ir.End()

    def turn(self) -> ir.Turn:
        return ir.Turn()

    # -- the program --------------------------------------------------------
    def build(self, arrival=None, horizon=100.0, warmup=0.0, seed=1, arrivals=None, share=None,
              trace=None, trace_ordered=False) -> ir.Program:
        assert self.session_block is not None, "call session(...) first"
        builtin_types = ("Value", "Size", "Size", "Size", "Size", "Size", "Size", "Size", "Value")
        types = builtin_types + ("Size",) * (len(self.attrs) - len(builtin_types))
        return ir.Program(
            version=ir.IR_VERSION, attrs=tuple(self.attrs), attr_types=types,
            sides=tuple(("Workload",) * len(b) for b in self.blocks), observes=tuple(self.observes),
            pools=tuple(self.pools), stages=tuple(self.stages), arrival=arrival or ir.Batch(1), trace=trace,
            trace_ordered=trace_ordered, init=0, turn=1, session=self.session_block, blocks=tuple(self.blocks),
            horizon=float(horizon), warmup=float(warmup), seed=seed, arrivals=arrivals,
            **ir.BUILTIN_SLOTS, hidden=(), share=share, gauges=tuple(self.gauges))


def explicit(*rows) -> ir.Sessions:
    """Explicit sessions, all at time 0: each row a dict slot -> value."""
    return ir.Sessions(tuple(ir.SessionSpec(tuple(sorted(r.items())), None) for r in rows))


def build_lifo_grower_program(victim_body, horizon=30) -> ir.Program:
    """Two sessions on a pool of 10 under preempt lifo: session 0 holds 4,
    runs 1 s, grows by 4 and runs 2 s; session 1 (admitted after it) holds 4
    and runs ``victim_body(builder, pool, delay_stage)``, a list of statements,
    so session 0's grow preempts it. Slot 9 is ``who``."""
    b = Builder(attrs=("who",))
    p = b.pool("p", cap=10, lifo=True)
    d = b.delay("d")
    b.session(b.branch(binary("Eq", b.attr("who"), 0),
                       [b.hold([(p, 4)], b.run(d, 1), b.grow(p, 4), b.run(d, 2))],
                       victim_body(b, p, d)))
    return b.build(arrival=explicit({9: 0.0}, {9: 1.0}), horizon=horizon)
