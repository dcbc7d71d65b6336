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
    id: str
    title: str
    has: Callable[[ir.Program], bool]
    neutralise: Callable[[ir.Program], ir.Program]


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
)


def attribute(program: ir.Program, agree: Callable[[ir.Program], bool]) -> Known | None:
    """The first known divergence whose feature ``program`` has and whose
    neutralised program ``agree`` holds for; None when none does."""
    for known in KNOWN:
        if known.has(program):
            try:
                if agree(known.neutralise(program)):
                    return known
            except (SerqError, ValueError):  # the neutralised program fails in an engine: no attribution
                continue
    return None
