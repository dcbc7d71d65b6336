"""Facts about every admissible value, decided with Z3 (check 8).

Per site, a property a run would trip on:

(a) a family index outside [0, count-1], or not a whole number;
(b) a branch (or while) guard other than 0 or 1 (seed 002 §3 Branching: a
    run-time error when evaluated);
(c) an amount that is negative: a run's work, a hold's units or reserve, a
    grow, a load;
(d) a hold's units or reserve above its pool's cap (seed 002 §3 Pools: such a
    session "is rejected: the session ends").

The site's expression is encoded over the attribute ranges of ``ranges`` (one
variable per attribute, within its interval, whole when the range is), with
real arithmetic: a conditional and min/max as If, floor/ceil as an integer
within one of its argument, a draw as a fresh value in its support, and every
observable (used(p), cachedin(p), budget_left(s), a context variable) and
every function Z3 does not know (sqrt, exp, ln, pow) as a fresh value, non
negative where it cannot be negative (docs/arithmetic.md says where these
reals differ from a run's floats), at most the pool's cap where that is
known. If the property fails for no admissible value the site is fine; if it
holds for every one (the negation is unsatisfiable) the program is wrong and
linking fails; if only for some, a warning names a witness from the model.

Each query has a deterministic resource limit (``rlimit``) and a time limit;
an unknown answer is no finding, so a verdict never depends on the machine.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction

import z3

from .. import ir
from ..errors import Warning_
from ..sourcemap import SourceMap
from .names import (
    Site,
    format_number,
    locate_pool,
    locate_stage,
    locate_statement,
    make_error,
    make_warning,
    name_attribute,
    show_expr,
    show_pool_ref,
    show_ref,
    show_stage_ref,
)
from .ranges import Interval, compute_attribute_ranges
from .structure import list_pool_expressions, list_stage_expressions
from .walk import list_parts, list_statement_refs, list_subexpressions, strip_cost, visit_session

#: Z3's deterministic work limit per query, and a wall-clock backstop (ms).
RESOURCE_LIMIT = 2_000_000
TIME_LIMIT_MS = 2_000
#: An infinite constant is encoded as a value above every finite one the program writes.
BEYOND_FINITE = 10**18


def make_constant(x: float, context: z3.Context) -> z3.ArithRef:
    fraction = Fraction(x)
    return z3.Q(fraction.numerator, fraction.denominator, context)


class Encoder:
    """Z3 terms for expressions over the attribute ranges, with the side
    constraints the terms need; one encoder, with a Z3 context of its own,
    per query (Z3's answers depend on what its context saw before, so a
    shared one would let one query's witness depend on the queries before it)."""

    def __init__(self, program: ir.Program, ranges: tuple[Interval, ...]):
        self.program = program
        self.ranges = ranges
        self.context = z3.Context()
        self.constraints: list[z3.BoolRef] = []
        #: the quantities a witness names, in the order the expression reads them
        self.named: dict[str, z3.ArithRef] = {}
        self.observables: dict[ir.Expr, z3.ArithRef] = {}
        self.count = 0

    def make_fresh(self, stem: str) -> z3.ArithRef:
        self.count += 1
        return z3.Real(f"{stem}!{self.count}", self.context)

    def make_constant(self, x: float) -> z3.ArithRef:
        return make_constant(x, self.context)

    def bound(self, term: z3.ArithRef, interval: Interval) -> None:
        if math.isfinite(interval.low):
            self.constraints.append(term >= self.make_constant(interval.low))
        if math.isfinite(interval.high):
            self.constraints.append(term <= self.make_constant(interval.high))
        if interval.whole:
            self.constraints.append(z3.IsInt(term))

    def name_quantity(self, key: ir.Expr, shown: str, interval: Interval) -> z3.ArithRef:
        """The one variable of an attribute, context variable or observable in this query."""
        if key not in self.observables:
            term = z3.Real(shown, self.context)
            self.observables[key] = term
            self.named[shown] = term
            self.bound(term, interval)
        return self.observables[key]

    def encode(self, e: ir.Expr) -> z3.ArithRef:
        if isinstance(e, ir.Num):
            if math.isinf(e.value):
                beyond = self.make_fresh("inf")
                self.constraints.append(beyond > BEYOND_FINITE)
                return beyond if e.value > 0 else -beyond
            if math.isnan(e.value):
                return self.make_fresh("nan")
            return self.make_constant(e.value)
        if isinstance(e, ir.Attr):
            return self.name_quantity(e, f"`{name_attribute(self.program, e.slot)}`", self.ranges[e.slot])
        if isinstance(e, ir.Ctx):
            interval = Interval(0.0, 1.0, True) if e.var == "Decoding" else Interval(0.0, math.inf, False)
            return self.name_quantity(e, f"`{ir.CONTEXT_VARIABLES[e.var]}`", interval)
        if isinstance(e, ir.Cost):
            return self.encode(e.expr)
        if isinstance(e, ir.Sample):
            return self.encode_sample(e)
        if isinstance(e, ir.Call):
            return self.encode_call(e)
        if isinstance(e, ir.Unary):
            a = self.encode(e.operand)
            return -a if e.op == "Neg" else z3.If(a == 0, self.make_constant(1), self.make_constant(0))
        if isinstance(e, ir.Binary):
            return self.encode_binary(e)
        assert isinstance(e, ir.Cond)
        return z3.If(self.encode(e.test) != 0, self.encode(e.then), self.encode(e.otherwise))

    def encode_binary(self, e: ir.Binary) -> z3.ArithRef:
        if e.op == "Pow":
            return self.make_fresh("pow")
        a, b = self.encode(e.left), self.encode(e.right)
        arithmetic = {"Add": lambda: a + b, "Sub": lambda: a - b, "Mul": lambda: a * b, "Div": lambda: a / b}
        if e.op in arithmetic:
            return arithmetic[e.op]()
        tests = {
            "Lt": lambda: a < b,
            "Le": lambda: a <= b,
            "Gt": lambda: a > b,
            "Ge": lambda: a >= b,
            "Eq": lambda: a == b,
            "Ne": lambda: a != b,
            "And": lambda: z3.And(a != 0, b != 0),
            "Or": lambda: z3.Or(a != 0, b != 0),
        }
        return z3.If(tests[e.op](), self.make_constant(1), self.make_constant(0))

    def encode_sample(self, e: ir.Sample) -> z3.ArithRef:
        args = [self.encode(a) for a in e.args]
        draw = self.make_fresh(ir.DISTRIBUTIONS[e.dist][0])
        if e.dist == "Det":
            self.constraints.append(draw == args[0])
        elif e.dist == "Uniform":
            self.constraints.append(z3.Or(z3.And(args[0] <= draw, draw <= args[1]), z3.And(args[1] <= draw, draw <= args[0])))
        elif e.dist == "Bernoulli":
            self.constraints.append(z3.Or(draw == 0, draw == 1))
        else:
            self.constraints.append(draw >= 0)
        return draw

    def encode_call(self, e: ir.Call) -> z3.ArithRef:
        args = [self.encode(a.expr) for a in e.args if isinstance(a, ir.ExprArg)]
        if e.fun == "Min":
            return z3.If(args[0] <= args[1], args[0], args[1])
        if e.fun == "Max":
            return z3.If(args[0] >= args[1], args[0], args[1])
        if e.fun == "Abs":
            return z3.If(args[0] >= 0, args[0], -args[0])
        if e.fun in ("Floor", "Ceil"):
            self.count += 1
            whole = z3.ToReal(z3.Int(f"{e.fun.lower()}!{self.count}", self.context))
            if e.fun == "Floor":
                self.constraints += [whole <= args[0], args[0] < whole + 1]
            else:
                self.constraints += [whole - 1 < args[0], args[0] <= whole]
            return whole
        if e.fun == "Sqrt":
            root = self.make_fresh("sqrt")
            self.constraints.append(root >= 0)
            return root
        if e.fun == "Exp":  # at least 0, not above: a float's exp underflows to 0 below about -745
            power = self.make_fresh("exp")
            self.constraints.append(power >= 0)
            return power
        if e.fun in ("Ln", "Pow"):
            return self.make_fresh(e.fun.lower())
        return self.name_quantity(e, show_expr(self.program, e), self.observable_range(e))

    def observable_range(self, e: ir.Call) -> Interval:
        if e.fun in ("Used", "Free", "CachedIn"):
            ref = e.args[0].ref
            return Interval(0.0, max(p.cap for p in self.program.pools[ref.base : ref.base + ref.count]), False)
        if e.fun in ("Holders", "Queued", "Queue"):
            return Interval(0.0, math.inf, True)
        return Interval(0.0, math.inf, False)


# --------------------------------------------------------------------------
# Deciding a property
# --------------------------------------------------------------------------

ALWAYS = "always"
SOMETIMES = "sometimes"
NEVER = "never"


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a bad property holds for every, some or no admissible value
    (NEVER also when Z3 could not tell); a witness when it can hold."""

    answer: str
    witness: str


def format_model_value(value: z3.ExprRef) -> str:
    """A witness as a number the source could write: whole numbers exactly
    up to 10^15, others (and a model's 300-digit integers) to 12 digits."""
    if z3.is_algebraic_value(value):
        value = value.approx(12)
    if z3.is_int_value(value):
        return _format_whole(value.as_long())
    if z3.is_rational_value(value):
        fraction = value.as_fraction()
        return _format_whole(fraction.numerator) if fraction.denominator == 1 else f"{float(fraction):.12g}"
    return str(value)


def _format_whole(n: int) -> str:
    return str(n) if abs(n) < 10**15 else f"{float(n):.12g}"


def describe_witness(encoder: Encoder, model: z3.ModelRef, term: z3.ArithRef) -> str:
    """``-1 when `o` = 0, `prompt` = 2``: the site's value and what it read."""
    value = format_model_value(model.eval(term, model_completion=True))
    named = [f"{name} = {format_model_value(model.eval(q, model_completion=True))}" for name, q in encoder.named.items()]
    return value + (f" when {', '.join(named)}" if named else "")


def make_solver(encoder: Encoder) -> z3.Solver:
    solver = z3.Solver(ctx=encoder.context)
    solver.set("rlimit", RESOURCE_LIMIT)
    solver.set("timeout", TIME_LIMIT_MS)
    solver.add(*encoder.constraints)
    return solver


def decide(encoder: Encoder, term: z3.ArithRef, bad: z3.BoolRef) -> Verdict:
    """Does ``bad`` hold for every admissible value, some, or none?"""
    solver = make_solver(encoder)
    solver.add(bad)
    if solver.check() != z3.sat:
        return Verdict(NEVER, "")
    model = solver.model()
    # a witness in whole numbers reads better (`known` = 2, not 1.5), when there is one
    solver.add(*[z3.IsInt(quantity) for quantity in encoder.named.values()])
    if solver.check() == z3.sat:
        model = solver.model()
    witness = describe_witness(encoder, model, term)
    solver = make_solver(encoder)
    solver.add(z3.Not(bad))
    return Verdict(ALWAYS if solver.check() == z3.unsat else SOMETIMES, witness)


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
        yield Question(site, f"the work of `run {show_stage_ref(program, stmt.stage)}`", stmt.work, "negative", 0.0)
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
                    yield Question(site, f"the {word} of the hold on `{name}`", e, "cap", cap)


def list_questions(program: ir.Program, smap: SourceMap) -> Iterator[Question]:
    for visit in visit_session(program):
        site = locate_statement(program, smap, visit.block, visit.index)
        yield from list_statement_questions(program, site, visit.stmt)
    for i, pool in enumerate(program.pools):
        yield from list_index_questions(program, locate_pool(program, smap, i), list_expression_refs(list_pool_expressions(pool)))
    for i, stage in enumerate(program.stages):
        site = locate_stage(program, smap, i)
        yield from list_index_questions(program, site, list_expression_refs(list_stage_expressions(stage)))


def formulate(question: Question, encoder: Encoder, term: z3.ArithRef) -> z3.BoolRef:
    if question.fault == "index":
        return z3.Or(term < 0, term > encoder.make_constant(question.limit), z3.Not(z3.IsInt(term)))
    if question.fault == "guard":
        return z3.And(term != 0, term != 1)
    if question.fault == "negative":
        return term < 0
    return term > encoder.make_constant(question.limit)


def phrase_finding(question: Question, verdict: Verdict) -> str:
    """The message of a finding: ALWAYS is an error, SOMETIMES a warning."""
    what, witness, always = question.what, verdict.witness, verdict.answer == ALWAYS
    last = format_number(question.limit)
    if question.fault == "index":
        if always:
            return f"{what} is never a member index 0..{last} (e.g. {witness})"
        return f"{what} can be {witness}, which is not a member index 0..{last}"
    if question.fault == "guard":
        if always:
            return f"{what} is never 0 or 1 (e.g. {witness}); a guard is a test, and any other value is a run-time error"
        return f"{what} can be {witness}, which is neither 0 nor 1 (a run-time error); write `branch with (p)` for a draw"
    if question.fault == "negative":
        if always:
            return f"{what} is negative for every admissible value (e.g. {witness})"
        return f"{what} can be negative: {witness}"
    if always:
        return f"{what} can never fit in the pool, whose cap is {last} (e.g. {witness}): every session would be rejected"
    return f"{what} can be above the pool's cap {last}: {witness}; such a session is rejected"


def check_verdicts(program: ir.Program, smap: SourceMap) -> list[Warning_]:
    """Raise on the first property that holds for every admissible value;
    return a warning for each that holds for some."""
    ranges = compute_attribute_ranges(program)
    warnings: list[Warning_] = []
    for question in list_questions(program, smap):
        encoder = Encoder(program, ranges)
        term = encoder.encode(strip_cost(question.expr))
        verdict = decide(encoder, term, formulate(question, encoder, term))
        if verdict.answer == ALWAYS:
            raise make_error(smap, question.site, phrase_finding(question, verdict))
        if verdict.answer == SOMETIMES:
            warnings.append(make_warning(smap, question.site, phrase_finding(question, verdict)))
    return warnings
