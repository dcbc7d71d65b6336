"""The Z3 side of the verdicts (check 8): expressions as Z3 terms over the
attribute ranges, and the decision of a property for every, some or no
admissible value.

Imported only when a question is left that the attribute ranges alone do not
settle (``verdicts.settle_by_ranges``): z3 takes a tenth of a second to
import, and most programs' questions are settled without it.

Each query has a deterministic resource limit (``rlimit``) and a time limit;
an unknown answer is no finding, so a verdict never depends on the machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import z3

from .. import ir
from .names import name_attribute, show_expr
from .ranges import Interval
from .verdicts import ALWAYS, NEVER, SOMETIMES, Verdict

if TYPE_CHECKING:
    from .verdicts import Question

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
        if e.op == "Div":
            # a float division by 0 is ±inf or NaN, not a real: Z3's a / 0 is any value, which gave
            # witnesses no run reaches ("the work can be negative: -1 when `z` = 0"); the admissible
            # values divide by a non-zero number, and an infinite work is the run's to refuse
            self.constraints.append(b != 0)
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


def formulate(question: Question, encoder: Encoder, term: z3.ArithRef) -> z3.BoolRef:
    if question.fault == "index":
        return z3.Or(term < 0, term > encoder.make_constant(question.limit), z3.Not(z3.IsInt(term)))
    if question.fault == "guard":
        return z3.And(term != 0, term != 1)
    if question.fault == "negative":
        return term < 0
    return term > encoder.make_constant(question.limit)
