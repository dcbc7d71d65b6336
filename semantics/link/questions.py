"""What the verdicts ask of a program, and the answers (check 8).

Per site, a property a run would trip on:

(a) a family index outside [0, count-1], or not a whole number;
(b) a branch (or while) guard other than 0 or 1 (seed 002 §3 Branching: a
    run-time error when evaluated);
(c) an amount that is negative: a run's work, a hold's units or reserve, a
    grow, a load;
(d) a hold's units or reserve above its pool's cap (seed 002 §3 Pools: such a
    session "is rejected: the session ends");
(e) a draw's computed argument outside its distribution's domain (a
    probability outside [0, 1], a negative mean, ...; arithmetic.
    describe_draw_problem, which the run checks as it draws: a run-time error
    naming the statement). A constant argument is the structure check's
    error; a draw inside a conditional's arm or the right of `&&` / `||` is
    asked under the test that makes the run evaluate it (issue 23).

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
from .constants import evaluate_constant
from .walk import list_operands, list_parts, list_statement_refs, list_subexpressions, visit_session

ALWAYS = "always"
SOMETIMES = "sometimes"
NEVER = "never"


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a bad property holds for every, some or no admissible value
    (NEVER also when Z3 could not tell); a witness when it can hold."""

    answer: str
    witness: str


@dataclass(frozen=True, slots=True)
class Domain:
    """The values a draw's argument may take: from ``low`` (excluded when ``above``) to ``high``, a whole
    number when ``whole``; ``says`` it in words ("from 0 to 1")."""

    low: float
    above: bool
    high: float
    whole: bool
    says: str

    def holds(self, x: float) -> bool:
        return (x > self.low if self.above else x >= self.low) and x <= self.high and (not self.whole or x == int(x))


_MEAN = Domain(0.0, False, math.inf, False, "0 or more")
_AT_LEAST_ZERO = Domain(0.0, False, math.inf, False, "0 or more")

#: Each distribution's arguments with a domain (arithmetic.describe_draw_problem): (position, name, domain).
#: A position None is ~uniform's upper bound minus its lower bound (the lower is at most the upper).
DRAW_DOMAINS: dict[str, tuple[tuple[int | None, str, Domain], ...]] = {
    "Bernoulli": ((0, "~bernoulli's probability", Domain(0.0, False, 1.0, False, "from 0 to 1")),),
    "Exp": ((0, "~exp's mean", _MEAN),),
    "Erlang": ((0, "~erlang's phase count k", Domain(1.0, False, math.inf, True, "a whole number, at least 1")),
               (1, "~erlang's mean", _MEAN)),
    "H2": ((0, "~h2's mean", _MEAN),
           (1, "~h2's squared coefficient of variation", Domain(1.0, False, math.inf, False, "at least 1"))),
    "Lognormal": ((0, "~lognormal's mean", Domain(0.0, True, math.inf, False, "above 0")),
                  (1, "~lognormal's cv", _AT_LEAST_ZERO)),
    "Normal": ((1, "~normal's sd", _AT_LEAST_ZERO),),
    "Uniform": ((None, "~uniform's upper bound minus its lower bound", _AT_LEAST_ZERO),),
}


def list_draws(e: ir.Expr) -> Iterator[tuple[ir.Sample, tuple[tuple[ir.Expr, bool], ...]]]:
    """Every draw inside ``e``, with the tests under which a run evaluates it (a conditional evaluates one
    arm, `&&` and `||` their right only when the left does not settle them: smallstep/values.py), in
    pre-order, left to right (a stack of its own: an aggregate written out nests thousands deep)."""
    pending: list[tuple[ir.Expr, tuple[tuple[ir.Expr, bool], ...]]] = [(e, ())]
    while pending:
        current, conditions = pending.pop()
        if isinstance(current, ir.Sample):
            yield current, conditions
        if isinstance(current, ir.Cond):
            inner = [(current.test, conditions), (current.then, conditions + ((current.test, True),)),
                     (current.otherwise, conditions + ((current.test, False),))]
        elif isinstance(current, ir.Binary) and current.op in ("And", "Or"):
            inner = [(current.left, conditions), (current.right, conditions + ((current.left, current.op == "And"),))]
        else:
            inner = [(sub, conditions) for sub in list_operands(current)]
        pending.extend(reversed(inner))


def list_draw_questions(site: Site, expressions: Iterable[ir.Expr]) -> Iterator[Question]:
    """(e): a question per computed argument of every draw in ``expressions`` that has a domain."""
    for e in expressions:
        for draw, conditions in list_draws(e):
            for position, name, domain in DRAW_DOMAINS.get(draw.dist, ()):
                if position is None:
                    lower, upper = draw.args
                    if evaluate_constant(lower) is not None and evaluate_constant(upper) is not None:
                        continue
                    expr: ir.Expr = ir.Binary("Sub", upper, lower)
                else:
                    expr = draw.args[position]
                    if evaluate_constant(expr) is not None:
                        continue  # the structure check's error when outside the domain
                yield Question(site, name, expr, "domain", 0.0, domain=domain, conditions=conditions)


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
    fault: str  # "index", "guard", "negative", "cap", "domain"
    limit: float
    #: the way a session comes to a statement's site (paths.py); None for a pool's or stage's
    path: Path | None = None
    #: whether some bad values (not all) are worth a warning: not when the semantics defines
    #: what they do and the run reports it (``list_statement_questions``)
    warns: bool = True
    #: a draw's argument (fault "domain"): the values its distribution is defined for
    domain: Domain | None = None
    #: (expression, truth): the tests under which a run evaluates the expression (a conditional's arm, the
    #: right of `&&` or `||`); the question is asked where all of them hold
    conditions: tuple[tuple[ir.Expr, bool], ...] = ()


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
    yield from list_draw_questions(site, [p.expr for p in list_parts(stmt)])
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
