"""The two compilations of an expression agree: the definition's
(semantics/smallstep/values.ExpressionCompiler), a closure per node, and the
fast engine's (semantics/fast/values.WrittenCompiler), whose ``compile``
writes numbers, attributes, context variables, operators and
conditionals out as one Python function. Over random expressions and
evaluation environments they give the same value bit for bit (NaN's sign
included), leave the stream at the same position, and fail with the same
error.

Seed 002, section 2 (Expressions): "comparisons give 0 or 1; && and ||
short-circuit"; "c ? a : b evaluates one arm" (FORMAT.md).
"""

from __future__ import annotations

import math
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from semantics import ir
from semantics.errors import RunError
from semantics.fast.values import MAX_WRITTEN_DEPTH
from semantics.fast.values import WrittenCompiler as ExpressionCompiler
from semantics.smallstep.values import Env


class _Config:
    """The part of a configuration these expressions read: the time."""

    def __init__(self, time: float):
        self.time = time


NUMBERS = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, 3.0, 1e308, -1e-300, math.inf, -math.inf, math.nan,
                           -math.nan, 0.5, 7.0, 1, 0])
LEAVES = st.one_of(
    NUMBERS.map(ir.Num),
    st.integers(0, 2).map(ir.Attr),
    st.sampled_from(["Now", "Waited", "Size", "Age", "Last", "Queued", "N", "Ntok"]).map(ir.Ctx),
)
BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Lt", "Le", "Gt", "Ge", "Eq", "Ne", "And", "Or"]


def _extend(inner):
    return st.one_of(
        st.tuples(st.sampled_from(["Neg", "Not"]), inner).map(lambda t: ir.Unary(*t)),
        st.tuples(st.sampled_from(BINARY), inner, inner).map(lambda t: ir.Binary(*t)),
        st.tuples(inner, inner, inner).map(lambda t: ir.Cond(*t)),
        st.tuples(st.sampled_from(["Exp", "Uniform", "Bernoulli", "Det"]), inner, inner).map(
            lambda t: ir.Sample(t[0], (t[1],) if t[0] in ("Exp", "Det", "Bernoulli") else (t[1], t[2]))),
        inner.map(lambda x: ir.Sample("Exp", (x,))),
        st.tuples(st.sampled_from(["Min", "Max", "Pow"]), inner, inner).map(
            lambda t: ir.Call(t[0], (ir.ExprArg(t[1]), ir.ExprArg(t[2])))),
        st.tuples(st.sampled_from(["Abs", "Floor", "Ceil", "Sqrt", "Exp", "Ln"]), inner).map(
            lambda t: ir.Call(t[0], (ir.ExprArg(t[1]),))),
    )


EXPRESSIONS = st.recursive(LEAVES, _extend, max_leaves=12)


def environments():
    attrs = st.one_of(st.none(), st.tuples(NUMBERS, NUMBERS, NUMBERS))
    return st.tuples(attrs, NUMBERS, st.integers(0, 2**64 - 1), st.integers(0, 5), NUMBERS, NUMBERS)


def _env(drawn) -> Env:
    attrs, now, stream, draws, waited, size = drawn
    env = Env(_Config(now), attrs, 3, stream, draws)
    env.waited, env.size, env.age, env.last, env.queued, env.present = waited, size, 1.5, -2.0, 4.0, 2.0
    return env


def _outcome(f, env: Env):
    """What an evaluation gives: ("value", its bits or int, the stream's position) or ("error", message)."""
    try:
        value = f(env)
    except RunError as e:
        return "error", e.message
    if isinstance(value, float) and math.isnan(value):
        # A NaN's sign bit is not a value any output shows (every NaN prints as nan, and IEEE 754 leaves
        # the sign of an operation's NaN unspecified: floor(-nan) may come back +nan), so NaNs compare as one.
        return "value", "nan", env.draws
    bits = struct.pack("<d", value) if isinstance(value, float) else ("int", value)
    return "value", bits, env.draws


@settings(max_examples=400, deadline=None)
@given(EXPRESSIONS, environments())
def test_written_out_expressions_are_the_closures(expression, drawn):
    compiler = ExpressionCompiler(None, {})
    written, closure = compiler.compile(expression), compiler.interpret(expression)
    assert _outcome(written, _env(drawn)) == _outcome(closure, _env(drawn))


def test_an_expression_too_deep_to_write_out_is_its_closure():
    """Past MAX_WRITTEN_DEPTH nested operators the run evaluates by closures, with the same value."""
    deep = ir.Num(1.0)
    for k in range(3 * MAX_WRITTEN_DEPTH):
        deep = ir.Binary("Add" if k % 2 else "Mul", deep, ir.Attr(k % 3))
    compiler = ExpressionCompiler(None, {})
    env = Env(_Config(0.0), (0.5, 2.0, -1.0))
    assert compiler.compile(deep)(env) == compiler.interpret(deep)(env)


def test_short_circuit_and_one_arm():
    """&& and || do not evaluate their right operand when the left decides; c ? a : b evaluates one arm:
    the draw in the untaken part leaves the stream where it was."""
    draw = ir.Sample("Exp", (ir.Num(1.0),))
    compiler = ExpressionCompiler(None, {})
    for expression, draws in ((ir.Binary("And", ir.Num(0.0), draw), 0), (ir.Binary("Or", ir.Num(2.0), draw), 0),
                              (ir.Binary("And", ir.Num(1.0), draw), 1),
                              (ir.Cond(ir.Num(1.0), ir.Num(5.0), draw), 0), (ir.Cond(ir.Num(0.0), ir.Num(5.0), draw), 1)):
        env = Env(_Config(0.0), (), 1, 12345, 0)
        compiler.compile(expression)(env)
        assert env.draws == draws, expression
