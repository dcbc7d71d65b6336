"""Constant expressions: the value of an expression that reads nothing.

A ps capacity held by a run over several stages must be a constant above 0,
and a branch guard that is a constant must be 0 or 1 (seed 002 §3, Stages and
Branching). The front end folds lets into numbers; this folds what is left
(``1 / 2``, ``min(4, 8)``) with IEEE arithmetic, as a run would evaluate it.
"""

from __future__ import annotations

import math

from .. import ir

#: Functions of numbers alone, with IEEE results (NaN where the run gets NaN).
PURE_FUNCTIONS = {
    "Min": min,
    "Max": max,
    "Abs": abs,
    "Floor": math.floor,
    "Ceil": math.ceil,
}


def divide(a: float, b: float) -> float:
    """``a / b`` as IEEE divides: x / 0 is ±inf, 0 / 0 is NaN."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def apply_binary(op: str, a: float, b: float) -> float:
    if op == "Add":
        return a + b
    if op == "Sub":
        return a - b if not (math.isinf(a) and math.isinf(b) and a == b) else math.nan
    if op == "Mul":
        return math.nan if (math.isinf(a) and b == 0) or (math.isinf(b) and a == 0) else a * b
    if op == "Div":
        return divide(a, b)
    if op == "Pow":
        try:
            return math.pow(a, b)
        except (OverflowError, ValueError):
            return math.nan
    tests = {
        "Lt": a < b,
        "Le": a <= b,
        "Gt": a > b,
        "Ge": a >= b,
        "Eq": a == b,
        "Ne": a != b,
        "And": a != 0 and b != 0,
        "Or": a != 0 or b != 0,
    }
    return 1.0 if tests[op] else 0.0


def evaluate_constant(e: ir.Expr) -> float | None:
    """The value of ``e`` if it reads no attribute, context variable,
    observable or draw; None otherwise."""
    if isinstance(e, ir.Num):
        return e.value
    if isinstance(e, ir.Cost):
        return evaluate_constant(e.expr)
    if isinstance(e, ir.Unary):
        x = evaluate_constant(e.operand)
        if x is None:
            return None
        return -x if e.op == "Neg" else (1.0 if x == 0 else 0.0)
    if isinstance(e, ir.Binary):
        a, b = evaluate_constant(e.left), evaluate_constant(e.right)
        if a is None or b is None:
            return None
        return apply_binary(e.op, a, b)
    if isinstance(e, ir.Cond):
        c = evaluate_constant(e.test)
        if c is None:
            return None
        return evaluate_constant(e.then if c != 0 else e.otherwise)
    if isinstance(e, ir.Call) and e.fun in PURE_FUNCTIONS:
        values = [evaluate_constant(a.expr) if isinstance(a, ir.ExprArg) else None for a in e.args]
        if any(v is None for v in values) or any(math.isnan(v) for v in values):
            return None if any(v is None for v in values) else math.nan
        if e.fun in ("Floor", "Ceil") and math.isinf(values[0]):
            return values[0]
        return float(PURE_FUNCTIONS[e.fun](*values))
    return None
