"""Constant folding over the AST: ``let`` values, family sizes, cap, block,
counts and the run block (seed 002, section 2: "Every constant ... is a
number or inf; one that evaluates to NaN ... does not link").

A constant expression reads numbers, ``inf``, earlier ``let`` constants, the
arithmetic and comparison operators, ``c ? a : b``, the pure functions
(min max abs floor ceil sqrt exp ln pow) and aggregates over constants.
Anything else (an attribute, a draw, an observable) is not a constant, and
``evaluate_constant`` says which name or call made it one. The operators and
functions are the run's own (semantics/arithmetic.py), so a constant folds
to the value the run would compute.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

from .. import arithmetic
from ..errors import ProgramError, Span
from . import ast


#: The pure functions a constant may call, by source name: arity and
#: definition (semantics/arithmetic.py, the run's own).
PURE_FUNCTIONS: dict[str, tuple[int, Callable[..., float]]] = {
    "min": (2, arithmetic.minimum),
    "max": (2, arithmetic.maximum),
    "abs": (1, arithmetic.absolute),
    "floor": (1, arithmetic.floor),
    "ceil": (1, arithmetic.ceil),
    "sqrt": (1, arithmetic.sqrt),
    "exp": (1, arithmetic.exp),
    "ln": (1, arithmetic.ln),
    "pow": (2, arithmetic.power),
}

#: How ``sum``, ``max`` and ``min j in n (e)`` combine their terms, left to
#: right, as the lowered IR does (``max(max(t0, t1), t2)``).
AGGREGATES: dict[str, Callable[[float, float], float]] = {
    "sum": arithmetic.add,
    "max": arithmetic.maximum,
    "min": arithmetic.minimum,
}


class NotConstant(Exception):
    """Raised inside folding: ``what`` names what made the expression vary."""

    def __init__(self, what: str, span: Span):
        super().__init__(what)
        self.what = what
        self.span = span


def fold(expr: ast.Expr, lets: Mapping[str, float], bound: Mapping[str, float] | None = None) -> float:
    """The value of a constant expression; NotConstant when it is not one."""
    bound = bound or {}
    if isinstance(expr, ast.Num):
        return expr.value
    if isinstance(expr, ast.Name):
        name = expr.path.simple
        if name is not None:
            if name in bound:
                return bound[name]
            if name in lets:
                return lets[name]
            if name == "inf":
                return math.inf
        raise NotConstant(f"`{expr.path.dotted}`", expr.span)
    if isinstance(expr, ast.Unary):
        return arithmetic.UNARY[expr.op](fold(expr.operand, lets, bound))
    if isinstance(expr, ast.Binary):
        return arithmetic.BINARY[expr.op](fold(expr.left, lets, bound), fold(expr.right, lets, bound))
    if isinstance(expr, ast.Cond):
        test = fold(expr.test, lets, bound)
        return fold(expr.then if arithmetic.is_true(test) else expr.otherwise, lets, bound)
    if isinstance(expr, ast.FunctionCall):
        if expr.function in PURE_FUNCTIONS:
            arity, function = PURE_FUNCTIONS[expr.function]
            if len(expr.args) != arity:
                raise ProgramError(f"`{expr.function}` takes {arity} argument(s), got {len(expr.args)}", expr.span)
            return float(function(*(fold(a, lets, bound) for a in expr.args)))
        raise NotConstant(f"`{expr.function}(…)`", expr.span)
    if isinstance(expr, ast.Sample):
        raise NotConstant(f"the draw `~{expr.distribution}(…)`", expr.span)
    if isinstance(expr, ast.Over):
        count = fold(expr.count, lets, bound)
        if not is_whole(count) or count < 1:
            raise ProgramError(f"`{expr.aggregate} {expr.variable} in`'s count must be a positive whole number, "
                               f"found {format_number(count)}", expr.count.span)
        values = [fold(expr.body, lets, {**bound, expr.variable: float(k)}) for k in range(int(count))]
        combine = AGGREGATES[expr.aggregate]
        total = values[0]
        for value in values[1:]:
            total = combine(total, value)
        return total
    raise AssertionError(f"unknown expression {expr!r}")


def evaluate_constant(expr: ast.Expr, lets: Mapping[str, float], what: str) -> float:
    """``what`` (``pool `kv`: cap``, ``let B``) as a number or inf, or a ProgramError."""
    try:
        value = fold(expr, lets)
    except NotConstant as reason:
        raise ProgramError(f"{what} must be a constant (a number, inf or a let), but it reads {reason.what}",
                           reason.span) from None
    if math.isnan(value):
        raise ProgramError(f"{what} is NaN: a constant is a number or inf (0/0 and inf - inf are not)", expr.span)
    return value


def evaluate_count(expr: ast.Expr, lets: Mapping[str, float], what: str, least: int) -> int:
    """A constant that counts (a family's size, a population): a whole number, at least ``least``."""
    value = evaluate_constant(expr, lets, what)
    if not is_whole(value) or value < least:
        raise ProgramError(f"{what} is {format_number(value)}: it counts, so it is a whole number of {least} or more",
                           expr.span)
    return int(value)


def evaluate_seed(expr: ast.Expr, lets: Mapping[str, float]) -> int:
    """The run block's seed, a whole number of 0 or more. A literal written
    in digits is read exactly (``seed 9007199254740993;`` is that number, as
    ``--seed`` reads it, not the float nearest to it, 9007199254740992);
    anything else (a let, an expression, 1e3) is folded like every constant,
    and must then be a whole number a float holds exactly (at most 2^53)."""
    if isinstance(expr, ast.Num) and expr.text is not None and expr.text.isdigit():
        return int(expr.text)
    value = evaluate_count(expr, lets, "the seed", 0)
    if value > 2**53:
        raise ProgramError(f"the seed is computed as {format_number(float(value))}, beyond 2^53, where a float "
                           "no longer holds every whole number: write the seed in digits", expr.span)
    return value


def is_whole(value: float) -> bool:
    """A finite whole number (an infinity or NaN is not)."""
    return math.isfinite(value) and value == math.floor(value)


def format_number(value: float) -> str:
    """A number as the messages print it: 3, 2.5, inf."""
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if is_whole(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)
