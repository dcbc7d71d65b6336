"""Constant expressions: the value of an expression that reads nothing.

A ps capacity held by a run over several stages must be a constant above 0,
and a branch guard that is a constant must be 0 or 1 (seed 002 §3, Stages and
Branching). The front end folds lets into numbers; this folds what is left
(``1 / 2``, ``min(4, 8)``, ``sqrt(2)``) with the run's own arithmetic
(semantics/arithmetic.py), so a constant is the value a run would compute.
"""

from __future__ import annotations

from .. import arithmetic, ir


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
        return arithmetic.UNARY[e.op](x)
    if isinstance(e, ir.Binary):
        a, b = evaluate_constant(e.left), evaluate_constant(e.right)
        if a is None or b is None:
            return None
        return arithmetic.BINARY[e.op](a, b)
    if isinstance(e, ir.Cond):
        c = evaluate_constant(e.test)
        if c is None:
            return None
        return evaluate_constant(e.then if arithmetic.is_true(c) else e.otherwise)
    if isinstance(e, ir.Call) and e.fun in arithmetic.FUNCTIONS:
        values = [evaluate_constant(a.expr) if isinstance(a, ir.ExprArg) else None for a in e.args]
        if any(v is None for v in values):
            return None
        return arithmetic.FUNCTIONS[e.fun](*values)
    return None
