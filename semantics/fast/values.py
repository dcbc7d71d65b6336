"""The fast engine's expression compiler: an expression's arithmetic and
logic (numbers, attributes, context variables, operators, conditionals)
written out as one Python function, its draws and calls evaluated by the
definition's closures (semantics/smallstep/values.py; a closure per node
made the expressions of a statement several calls each).
tests/test_smallstep_expressions.py checks the two agree bit for bit."""

from __future__ import annotations

import math

from .. import arithmetic, ir
from ..smallstep.values import CONTEXT_FIELDS, Compiled, ExpressionCompiler, _divide, _power, _truth

#: Binary operators written as Python: operator -> a format of the two operands' source. Each is
#: arithmetic's definition or its inline form (+ - * and the comparisons as Python's float
#: operators, && and || short-circuiting; semantics/arithmetic.py lists why each is equal).
_BINARY_SOURCE = {
    "Add": "({} + {})", "Sub": "({} - {})", "Mul": "({} * {})", "Div": "_divide({}, {})", "Pow": "_power({}, {})",
    "Lt": "(1.0 if {} < {} else 0.0)", "Le": "(1.0 if {} <= {} else 0.0)", "Gt": "(1.0 if {} > {} else 0.0)",
    "Ge": "(1.0 if {} >= {} else 0.0)", "Eq": "(1.0 if {} == {} else 0.0)", "Ne": "(1.0 if {} != {} else 0.0)",
    "And": "(_truth({1}) if {0} != 0.0 else 0.0)", "Or": "(1.0 if {0} != 0.0 else _truth({1}))",
}

#: Expression trees deeper than this are evaluated by closures (``interpret``):
#: Python's own compiler limits how deeply written expressions may nest.
MAX_WRITTEN_DEPTH = 40


class WrittenCompiler(ExpressionCompiler):
    """ExpressionCompiler whose ``compile`` writes an expression out as
    Python source (``interpret`` stays the closures)."""

    def compile(self, e: ir.Expr) -> Compiled:
        key = id(e)
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = self._write(e)
        return found

    def _write(self, e: ir.Expr) -> Compiled:
        """``e`` as one Python function of ``env``; a draw or a call inside it
        is a call of its closure. An expression that is itself a draw or a
        call is its closure."""
        if not _writable(e) or _nests_deeper_than(e, MAX_WRITTEN_DEPTH):
            return self._closure(e, self.compile)
        namespace = {"nan": math.nan, "_truth": _truth, "_divide": _divide, "_power": _power}
        reads_attrs = []

        def name(value) -> str:
            key = f"_k{len(namespace)}"
            namespace[key] = value
            return key

        def source(x: ir.Expr) -> str:
            kind = type(x)
            if kind is ir.Cost:
                return source(x.expr)
            if kind is ir.Num:
                v = x.value
                return f"({v!r})" if isinstance(v, (int, float)) and math.isfinite(v) else name(v)
            if kind is ir.Attr:
                reads_attrs.append(True)
                return f"(attrs[{x.slot}] if attrs is not None else nan)"
            if kind is ir.Ctx and x.var in CONTEXT_FIELDS:
                return f"env.{CONTEXT_FIELDS[x.var]}"
            if kind is ir.Unary:
                operand = source(x.operand)
                return f"(-{operand})" if x.op == "Neg" else f"(0.0 if {operand} != 0.0 else 1.0)"
            if kind is ir.Binary:
                return _BINARY_SOURCE[x.op].format(source(x.left), source(x.right))
            if kind is ir.Cond:
                return f"({source(x.then)} if {source(x.test)} != 0.0 else {source(x.otherwise)})"
            if kind is ir.Call and x.fun in _PURE_CALLS:  # arithmetic's function called on the arguments, in order
                arity = 2 if x.fun in ("Min", "Max", "Pow") else 1
                return f"{name(arithmetic.FUNCTIONS[x.fun])}({', '.join(source(a.expr) for a in x.args[:arity])})"
            return f"{name(self.compile(x))}(env)"  # a draw, a query of the state, a step stage's variable

        body = source(e)
        lines = ["def expression(env):"] + (["    attrs = env.attrs"] if reads_attrs else []) + [f"    return {body}"]
        exec("\n".join(lines) + "\n", namespace)
        return namespace["expression"]


#: the calls of numbers alone, written out as a call of arithmetic's function (the closures call the same
#: function on the arguments' values, left to right: values.ExpressionCompiler._compile_call)
_PURE_CALLS = frozenset({"Min", "Max", "Pow", "Abs", "Floor", "Ceil", "Sqrt", "Exp", "Ln"})


def _writable(e: ir.Expr) -> bool:
    """Whether ``e``'s own node is written out (a draw or a query of the state is its closure)."""
    kind = type(e)
    if kind is ir.Cost:
        return _writable(e.expr)
    return kind in (ir.Num, ir.Attr, ir.Unary, ir.Binary, ir.Cond) or (kind is ir.Ctx and e.var in CONTEXT_FIELDS) \
        or (kind is ir.Call and e.fun in _PURE_CALLS and all(isinstance(a, ir.ExprArg) for a in e.args))


def _nests_deeper_than(e: ir.Expr, n: int) -> bool:
    """Whether ``e``'s written-out operators nest more than ``n`` deep (a
    number, an attribute, a draw or a call is 1 deep); looks no deeper than that."""
    kind = type(e)
    if kind is ir.Cost:
        return _nests_deeper_than(e.expr, n)
    if kind is ir.Unary:
        return _nests_deeper_than(e.operand, n - 1)
    if kind is ir.Binary:
        return _nests_deeper_than(e.left, n - 1) or _nests_deeper_than(e.right, n - 1)
    if kind is ir.Cond:
        return any(_nests_deeper_than(x, n - 1) for x in (e.test, e.then, e.otherwise))
    if kind is ir.Call and e.fun in _PURE_CALLS:
        return any(_nests_deeper_than(a.expr, n - 1) for a in e.args if isinstance(a, ir.ExprArg))
    return n < 1
