"""What the verdicts ask of a program, and the answers (check 8).

Per site, a property a run would trip on:

(a) a family index outside [0, count-1], or not a whole number;
(b) a branch (or while) guard other than 0 or 1 (seed 002 §3 Branching: a
    run-time error when evaluated);
(c) an amount that is negative: a run's work, a hold's units or reserve, a
    grow, a load;
(d) a hold's units or reserve above its pool's cap (seed 002 §3 Pools: such a
    session "is rejected: the session ends").

Each is a ``Question``; its answer is a ``Verdict``: the property holds for
every admissible value (ALWAYS), for some (SOMETIMES) or for none (NEVER).
Below both ``solver``, which answers a question with Z3, and ``verdicts``,
which settles what it can by the attribute ranges and asks the solver the
rest.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .. import ir
from ..sourcemap import SourceMap
from .names import Site, locate_pool, locate_stage, locate_statement, show_pool_ref, show_ref, show_stage_ref
from .paths import Path, find_parents, find_path
from .structure import list_pool_expressions, list_stage_expressions
from .walk import list_parts, list_statement_refs, list_subexpressions, visit_session

ALWAYS = "always"
SOMETIMES = "sometimes"
NEVER = "never"


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a bad property holds for every, some or no admissible value
    (NEVER also when Z3 could not tell); a witness when it can hold."""

    answer: str
    witness: str


# --------------------------------------------------------------------------
# The sites
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Question:
    """One fault a site's expression may have: ``what`` names the expression
    in messages; ``limit`` is the family's last index or the pool's cap."""

    site: Site
    what: str
    expr: ir.Expr
    fault: str  # "index", "guard", "negative", "cap"
    limit: float
    #: the way a session comes to a statement's site (paths.py); None for a pool's or stage's
    path: Path | None = None
    #: whether some bad values (not all) are worth a warning: not when the semantics defines
    #: what they do and the run reports it (``list_statement_questions``)
    warns: bool = True


def list_index_questions(program: ir.Program, site: Site, refs: Iterable[tuple[str, ir.Ref]]) -> Iterator[Question]:
    for kind, ref in refs:
        if ref.index is None:
            continue
        shown = show_ref(program, ref, program.pools if kind == "p" else program.stages)
        yield Question(site, f"the index of `{shown}`", ref.index, "index", float(ref.count - 1))


def list_expression_refs(expressions: list[ir.Expr]) -> Iterator[tuple[str, ir.Ref]]:
    for e in expressions:
        for sub in list_subexpressions(e):
            if isinstance(sub, ir.Call):
                for arg in sub.args:
                    if isinstance(arg, (ir.PoolArg, ir.StageArg)):
                        yield ("p" if isinstance(arg, ir.PoolArg) else "s", arg.ref)


def list_statement_questions(program: ir.Program, site: Site, stmt: ir.Stmt) -> Iterator[Question]:
    yield from list_index_questions(program, site, list_statement_refs(stmt))
    yield from list_index_questions(program, site, list_expression_refs([p.expr for p in list_parts(stmt)]))
    if isinstance(stmt, (ir.Branch, ir.While)):
        word = "branch" if isinstance(stmt, ir.Branch) else "while"
        yield Question(site, f"the guard of this {word}", stmt.guard, "guard", 1.0)
    if isinstance(stmt, ir.Run):
        # a run of zero work or less completes at once (seed 002 §3 Stages): only "every value" is a finding
        yield Question(site, f"the work of `run {show_stage_ref(program, stmt.stage)}`", stmt.work, "negative", 0.0,
                       warns=False)
    if isinstance(stmt, (ir.Grow, ir.Load)):
        word = "grow" if isinstance(stmt, ir.Grow) else "load"
        yield Question(site, f"the amount of `{word} {show_pool_ref(program, stmt.ref)}`", stmt.amount, "negative", 0.0)
    if isinstance(stmt, ir.Hold):
        for held in stmt.pools:
            cap = max(p.cap for p in program.pools[held.ref.base : held.ref.base + held.ref.count])
            name = show_pool_ref(program, held.ref)
            clauses = [("units", held.units)] + ([("reserve", held.reserve)] if held.reserve is not None else [])
            for word, e in clauses:
                yield Question(site, f"the {word} of the hold on `{name}`", e, "negative", 0.0)
                if math.isfinite(cap):
                    # such a session is rejected (seed 002 §3 Pools), counted and named in the run's report
                    yield Question(site, f"the {word} of the hold on `{name}`", e, "cap", cap, warns=False)


def list_questions(program: ir.Program, smap: SourceMap) -> Iterator[Question]:
    parents = find_parents(program)
    for visit in visit_session(program):
        site = locate_statement(program, smap, visit.block, visit.index)
        path = find_path(program, parents, visit.block, visit.index)
        for question in list_statement_questions(program, site, visit.stmt):
            yield dataclasses.replace(question, path=path)
    for i, pool in enumerate(program.pools):
        yield from list_index_questions(program, locate_pool(program, smap, i), list_expression_refs(list_pool_expressions(pool)))
    for i, stage in enumerate(program.stages):
        site = locate_stage(program, smap, i)
        yield from list_index_questions(program, site, list_expression_refs(list_stage_expressions(stage)))
