"""The known divergences between serq-ref and pyserq (docs/divergences.md,
"serq-ref against pyserq"), and how a disagreement is attributed to one.

Each known divergence names a feature of the IR and a way to take that
feature out (``neutralise``). A disagreement is attributed to the first
divergence whose feature the program has and whose neutralised program both
engines run alike: the difference goes when that feature goes. That is
attribution, not proof; docs/divergences.md has, for each, the minimal
program and the seed sentence that decides it. A disagreement no
neutralisation removes is unexplained (``serq-ref peer`` fails on it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from semantics import ir
from semantics.errors import SerqError


@dataclass(frozen=True)
class Known:
    """A known divergence: ``has`` the feature; ``neutralise`` takes it out.
    A divergence of one figure's definition has ``figures`` instead: it is
    attributed when every differing figure is one ``figures`` accepts."""

    id: str
    title: str
    has: Callable[[ir.Program], bool]
    neutralise: Callable[[ir.Program], ir.Program] | None = None
    figures: Callable[[ir.Program, str], bool] | None = None


def _pools(program: ir.Program, **changes) -> ir.Program:
    return dataclasses.replace(program, pools=tuple(dataclasses.replace(p, **changes) for p in program.pools))


#: What pyserq reads after the iteration's admissions where the seed reads
#: the residents before the iteration (docs/semantics.md, "The step engine").
RESIDENT_READINGS = frozenset({"Nres", "Ndec", "Kvb", "Kvp", "Attn"})


def _reads_residents(e) -> bool:
    from oracle.peer import _walk

    return any(isinstance(n, ir.Ctx) and n.var in RESIDENT_READINGS for n in _walk(e))


def _zero_residents(e):
    """``e`` with every resident reading replaced by 0."""
    if isinstance(e, ir.Ctx) and e.var in RESIDENT_READINGS:
        return ir.Num(0.0)
    if dataclasses.is_dataclass(e):
        return dataclasses.replace(e, **{f.name: _zero_residents(getattr(e, f.name)) for f in dataclasses.fields(e)})
    if isinstance(e, tuple):
        return tuple(_zero_residents(x) for x in e)
    return e


def _no_spill(program: ir.Program) -> ir.Program:
    """Every spill's predicate false: nothing spills (the spill, and the use
    of its link stage, stay: pyserq refuses a stage that nothing runs)."""
    pools = tuple(dataclasses.replace(p, spill=dataclasses.replace(p.spill, when=ir.Num(0.0)))
                  if p.spill is not None else p for p in program.pools)
    return dataclasses.replace(program, pools=pools)


#: the least work a run is given when zero-work runs are taken out: a binary
#: fraction, so that times stay exact sums
EPSILON = 2.0 ** -10


def _some_work(e):
    return ir.Call("Max", (ir.ExprArg(e), ir.ExprArg(ir.Num(EPSILON))))


def _no_zero_work(program: ir.Program) -> ir.Program:
    """Every run on a fifo, ps or delay stage takes at least EPSILON."""
    step = {k for k, s in enumerate(program.stages) if isinstance(s.kind, ir.Step)}

    def fix(s):
        if not isinstance(s, ir.Run) or s.stage.base in step:
            return s
        work = s.work
        work = ir.Cost(work.target, _some_work(work.expr)) if isinstance(work, ir.Cost) else _some_work(work)
        return dataclasses.replace(s, work=work)

    return dataclasses.replace(program, blocks=tuple(tuple(fix(s) for s in block) for block in program.blocks))


def _delay_stage(program: ir.Program) -> int | None:
    """A delay stage of the program (``Ps(Ctx N)``, a family of one), if any."""
    for k, s in enumerate(program.stages):
        if isinstance(s.kind, ir.Ps) and s.kind.capacity == ir.Ctx("N") and s.index is None:
            return k
    return None


def _pause_after_holds(program: ir.Program) -> ir.Program:
    """After every hold and every release, a run of EPSILON on a delay
    stage: a session that gives units back goes on only after the instant
    it gave them."""
    k = _delay_stage(program)
    pause = ir.Run(ir.Ref(k, 1, None), "Plain", ir.Cost(ir.CostTarget("Stage", k, 1), ir.Num(EPSILON)), None)
    blocks, sides = [], []
    for block, side in zip(program.blocks, program.sides):
        new_block, new_side = [], []
        for statement, where in zip(block, side):
            new_block.append(statement)
            new_side.append(where)
            if isinstance(statement, (ir.Hold, ir.Release)):
                new_block.append(pause)
                new_side.append(where)
        blocks.append(tuple(new_block))
        sides.append(tuple(new_side))
    return dataclasses.replace(program, blocks=tuple(blocks), sides=tuple(sides))


def _has_hold_and_delay(program: ir.Program) -> bool:
    return _delay_stage(program) is not None and any(isinstance(s, ir.Hold) for b in program.blocks for s in b)


def _has_ps(program: ir.Program) -> bool:
    return any(isinstance(s.kind, ir.Ps) and s.kind.capacity != ir.Ctx("N") for s in program.stages)


def _ps_as_delay(program: ir.Program) -> ir.Program:
    """Every ps stage a delay (each job its own completion event)."""
    stages = tuple(dataclasses.replace(s, kind=ir.Ps(ir.Ctx("N"))) if isinstance(s.kind, ir.Ps) else s
                   for s in program.stages)
    return dataclasses.replace(program, stages=stages)


def _has_plain_run(program: ir.Program) -> bool:
    step = {k for k, s in enumerate(program.stages) if isinstance(s.kind, ir.Step)}
    return any(isinstance(s, ir.Run) and s.stage.base not in step for block in program.blocks for s in block)


def _is_step_utilisation(program: ir.Program, line: str) -> bool:
    names = {s.name if s.index is None else f"{s.name}[{s.index}]" for s in _steps(program)}
    return any(line.startswith(f"stage {n} utilization:") for n in names)


def _steps(program: ir.Program):
    return [s for s in program.stages if isinstance(s.kind, ir.Step)]


def _replace_costs(program: ir.Program) -> ir.Program:
    stages = tuple(dataclasses.replace(s, kind=dataclasses.replace(s.kind, cost=_zero_residents(s.kind.cost)))
                   if isinstance(s.kind, ir.Step) else s for s in program.stages)
    return dataclasses.replace(program, stages=stages)


def _admission_serve(program: ir.Program) -> ir.Program:
    stages = tuple(dataclasses.replace(s, kind=dataclasses.replace(s.kind, serve=()))
                   if isinstance(s.kind, ir.Step) and s.kind.serve is None else s for s in program.stages)
    return dataclasses.replace(program, stages=stages)


KNOWN: tuple[Known, ...] = (
    Known("P9", "a step stage's utilisation: serq-ref the time an iteration is in flight, pyserq the time it "
                "has a resident (one waiting to grow included)",
          lambda p: bool(_steps(p)), figures=_is_step_utilisation),
    Known("P1", "spill timing: pyserq caches a spilled piece in the tier at eviction, serq-ref when its write completes",
          lambda p: any(pool.spill is not None for pool in p.pools), lambda p: _no_spill(p)),
    Known("P2", "a step cost reads the residents: serq-ref before the iteration (seed 002 §2), pyserq after its "
                "admissions",
          lambda p: any(_reads_residents(s.kind.cost) for s in _steps(p)), _replace_costs),
    Known("P3", "queue by: the order of a pool's queue after a release (settle order, seed 002 §3)",
          lambda p: any(pool.queue is not None for pool in p.pools), lambda p: _pools(p, queue=None)),
    Known("P4", "preempt lifo with several preemptions",
          lambda p: any(pool.preempt is not None for pool in p.pools), lambda p: _pools(p, preempt=None)),
    Known("P5", "serve exclusive prefill: a resident prefill waiting to grow under preempt none",
          lambda p: any(s.kind.serve is None for s in _steps(p)), _admission_serve),
    Known("P6", "settle order: when a hold ends (or a lease is released), serq-ref runs the releasing session on "
                "first (seed 002 §3), pyserq admits the holds waiting for the pool first",
          _has_hold_and_delay, _pause_after_holds),
    Known("P10", "jobs of a ps stage that finish at one instant: serq-ref completes them before a step stage "
                 "starts an iteration at that instant (seed 002 §3: no other event pending), pyserq one by one, "
                 "the next after the iteration started",
          _has_ps, _ps_as_delay),
    Known("P8", "a run of zero work: serq-ref completes it at once, within the session's turn; pyserq by an "
                "event at the same instant, after the sessions already ready",
          _has_plain_run, _no_zero_work),
)


def by_id(known_id: str) -> Known:
    return next(known for known in KNOWN if known.id == known_id)


def _neutralised(program: ir.Program, knowns) -> ir.Program:
    for known in knowns:
        program = known.neutralise(program)
    return program


def _explained(program: ir.Program, knowns, figured, differ: Callable[[ir.Program], tuple[str, ...]]) -> bool:
    """With ``knowns`` taken out, ``program`` runs alike, or differs only in
    figures one of ``figured`` (the figure-defined divergences) accepts."""
    try:
        lines = differ(_neutralised(program, knowns))
    except (SerqError, ValueError):  # the neutralised program fails in an engine: no attribution
        return False
    return all(any(known.figures(program, line) for known in figured) for line in lines)


def attribute(program: ir.Program, differ: Callable[[ir.Program], tuple[str, ...]],
              differences: tuple[str, ...] = ()) -> Known | None:
    """The known divergence a disagreement of ``program`` is attributed to
    (``differ`` runs a program on both engines and gives its difference
    lines; ``differences`` are ``program``'s own): the first whose feature
    the program has and that either accepts every one of ``differences`` or
    whose neutralised program runs alike; failing one, the smallest
    combination found (every present feature taken out, the figure-defined
    ones accepting what is left, then each put back that is not needed),
    as a Known named by its members' ids joined by ``+``; None when even all
    of them together leave a difference."""
    present = [known for known in KNOWN if known.has(program)]
    figured = [known for known in present if known.figures is not None]
    for known in present:
        if known.figures is not None:
            if differences and all(known.figures(program, line) for line in differences):
                return known
        elif _explained(program, (known,), (), differ):
            return known
    together = [known for known in present if known.neutralise is not None]
    if not together or not _explained(program, together, figured, differ):
        return None
    for known in list(together):
        rest = [k for k in together if k is not known]
        if rest and _explained(program, rest, figured, differ):
            together = rest
    used = [k for k in figured if not _explained(program, together, [f for f in figured if f is not k], differ)]
    members = together + used
    if len(members) == 1:
        return members[0]
    return Known("+".join(k.id for k in members), "; ".join(k.title for k in members), lambda p: True,
                 lambda p: _neutralised(p, together))
