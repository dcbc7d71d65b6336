"""Soundness of the ranges and of the Z3 encoding, as properties.

A link error from check 8 claims a fact about every value a run can produce,
so the two abstractions under it must over-approximate: for random
expressions and random attribute values inside their ranges, the value a run
would compute lies in the expression's range, and is a value the Z3 encoding
admits.
"""

from __future__ import annotations

import math

import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from link_programs import make_program, slot
from semantics import arithmetic, ir
from semantics.link.ranges import Interval, RangeEvaluator
from semantics.link.solver import Encoder

NAMES = ("prompt", "o", "x")
SLOTS = tuple(slot(n) for n in NAMES)
PROGRAM = make_program()


class ThroughNaN(Exception):
    """An evaluation passed through a NaN: the ranges and the Z3 encoding
    model real numbers, and a value computed from a NaN (min(NaN, 2) is 2) is
    outside what they claim (docs/arithmetic.md, "The link-time checks")."""


def evaluate(e: ir.Expr, values: dict[int, float]) -> float:
    """The value a run computes (semantics/arithmetic.py); ThroughNaN when
    any step of it is NaN."""
    if isinstance(e, ir.Num):
        value = e.value
    elif isinstance(e, ir.Attr):
        value = values[e.slot]
    elif isinstance(e, ir.Unary):
        value = arithmetic.UNARY[e.op](evaluate(e.operand, values))
    elif isinstance(e, ir.Binary):
        value = arithmetic.BINARY[e.op](evaluate(e.left, values), evaluate(e.right, values))
    elif isinstance(e, ir.Cond):
        value = evaluate(e.then if arithmetic.is_true(evaluate(e.test, values)) else e.otherwise, values)
    else:
        assert isinstance(e, ir.Call)
        value = arithmetic.FUNCTIONS[e.fun](*(evaluate(a.expr, values) for a in e.args))
    if math.isnan(value):
        raise ThroughNaN
    return value


numbers = st.sampled_from([-3.0, -1.0, -0.5, 0.0, 0.25, 1.0, 2.0, 7.5, 16.0])
leaves = st.one_of(numbers.map(ir.Num), st.sampled_from(SLOTS).map(ir.Attr))


def make_extend(operators: list[str]):
    def extend(children):
        return combine(st.sampled_from(operators), children)

    return extend


def combine(binary_ops, children):
    return st.one_of(
        st.builds(ir.Binary, binary_ops, children, children),
        st.builds(ir.Unary, st.sampled_from(["Neg", "Not"]), children),
        st.builds(ir.Cond, children, children, children),
        st.builds(lambda f, a, b: ir.Call(f, (ir.ExprArg(a), ir.ExprArg(b))), st.sampled_from(["Min", "Max"]), children, children),
        st.builds(lambda f, a: ir.Call(f, (ir.ExprArg(a),)), st.sampled_from(["Floor", "Ceil", "Abs"]), children),
    )


ARITHMETIC = ["Add", "Sub", "Mul", "Lt", "Ge", "Eq", "And"]
expressions = st.recursive(leaves, make_extend(ARITHMETIC + ["Div"]), max_leaves=8)
#: Without division, values that are multiples of 1/8 keep every operation
#: exact in floating point, so a run's value and the exact real one agree
#: (Z3 reasons over the reals; rounding is outside what the encoding models).
exact_expressions = st.recursive(leaves, make_extend(ARITHMETIC), max_leaves=8)


@st.composite
def ranged_values(draw):
    """A range per attribute, and a value of each inside its range."""
    ranges, values = {}, {}
    for s in SLOTS:
        whole = draw(st.booleans())
        low = draw(st.integers(-5, 5))
        high = low + draw(st.integers(0, 6))
        ranges[s] = Interval(float(low), float(high), whole)
        eighths = draw(st.integers(8 * low, 8 * high))
        values[s] = float(eighths // 8) if whole else eighths / 8
    return ranges, values


def attribute_ranges(ranges: dict[int, Interval]) -> list[Interval]:
    everything = Interval(-math.inf, math.inf, False)
    return [ranges.get(s, everything) for s in range(len(PROGRAM.attrs))]


@settings(max_examples=300, deadline=None)
@given(expressions, ranged_values())
def test_a_value_a_run_computes_lies_in_the_expression_range(e, ranged):
    ranges, values = ranged
    try:
        value = evaluate(e, values)
    except ThroughNaN:
        return  # the ranges do not model NaN (docs/linking.md, docs/arithmetic.md)
    interval = RangeEvaluator(PROGRAM, attribute_ranges(ranges)).evaluate(e)
    assert interval.low <= value <= interval.high
    if interval.whole:
        assert math.isinf(value) or value == int(value)


@settings(max_examples=150, deadline=None)
@given(exact_expressions, ranged_values())
def test_a_value_a_run_computes_is_admitted_by_the_encoding(e, ranged):
    ranges, values = ranged
    try:
        value = evaluate(e, values)
    except ThroughNaN:
        return  # Z3 models no NaN
    if not math.isfinite(value):
        return  # Z3's x / 0 is any value; a run's is infinite
    encoder = Encoder(PROGRAM, tuple(attribute_ranges(ranges)))
    term = encoder.encode(e)
    solver = z3.Solver(ctx=encoder.context)
    solver.add(*encoder.constraints)
    for s, v in values.items():
        if ir.Attr(s) in encoder.observables:
            solver.add(encoder.observables[ir.Attr(s)] == encoder.make_constant(v))
    solver.add(term == encoder.make_constant(value))
    assert solver.check() == z3.sat
