"""The fast engine's expression compiler: an expression's arithmetic and
logic (numbers, attributes, context variables, operators, conditionals)
written out as one Python function, its draws and calls evaluated by the
definition's closures (semantics/smallstep/values.py; a closure per node
made the expressions of a statement several calls each), a query of a
member named without an index by its observable directly. Written once per
expression, it evaluates a pure subexpression that repeats (a hold header's
``at admission`` binding the front end substituted twice) once where the
closures would evaluate it again, and leaves out what cannot change the
value (a conditional on a number, or whose two arms are one expression and
whose test can neither raise nor draw): ``WrittenCompiler._write``.
tests/test_smallstep_expressions.py checks the two agree bit for bit, and
that the written function reads no query the closures do not read, a query
that may raise first where they first read it."""

from __future__ import annotations

import itertools
import math
import re
import struct

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

#: The comparisons, as Python's float comparison (a conditional's test: the arm the comparison's 1 or 0 takes)
_COMPARISONS = {"Lt": "<", "Le": "<=", "Gt": ">", "Ge": ">=", "Eq": "==", "Ne": "!="}

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

    def _direct_query(self, e: ir.Call) -> bool:
        """Whether call ``e`` is a query of a pool or stage named without an index: written as its function
        called on that member (the definition's observe closure resolves the index to the same member)."""
        return e.fun in self.observables and type(e.args[0]) is not ir.ExprArg and e.args[0].ref.index is None

    def _write(self, e: ir.Expr) -> Compiled:
        """``e`` as one Python function of ``env``; a draw or a call inside it
        is a call of its closure (a query named without an index, of its
        function on that member). An expression that is itself such a query
        is its function called on the member; itself another draw or call, its
        closure.

        Before it is written, ``e`` is simplified (_Plan.simplify: operators of
        numbers alone folded to their value, a conditional on a number to its
        arm, a conditional whose arms are one pure expression and whose test
        can neither raise nor draw to that arm). Then a pure subexpression (no
        draw under it; _Plan.key) that occurs again where its earlier occurrence
        has surely been evaluated, earlier in evaluation order and not inside a
        conditional arm or a short-circuited operand the later one is not also
        inside, is not evaluated again: the earlier occurrence is written
        ``(_cN := ...)`` and the later one reads ``_cN``. So every evaluation
        happens where the definition's closures make it, in their order (the
        first to raise raises at the same place), and what is skipped would
        have given the value already computed, the state being unchanged
        while one expression is evaluated."""
        if type(e) is ir.Call and self._direct_query(e):  # the query alone: its function on the member
            query, member = self.observables[e.fun], e.args[0].ref.base
            return lambda env: query(env, member)
        if not _writable(e) or _nests_deeper_than(e, MAX_WRITTEN_DEPTH):
            return self._closure(e, self.compile)
        written = self.source(e)
        if written is None:  # a conditional folded to its arm, a draw or a query: that arm's closure
            return self.compile(_Plan(_draws(e)).simplify(e))
        body, namespace, reads_attrs = written
        # no attributes (a moment without a session): every one reads NaN, from a tuple of NaNs as long as needed
        header = ["    attrs = env.attrs", f"    if attrs is None: attrs = {_name(namespace, (math.nan,) * (max(reads_attrs) + 1))}"] \
            if reads_attrs else []
        lines = ["def expression(env):"] + header + [f"    return {body}"]
        exec("\n".join(lines) + "\n", namespace)
        return namespace["expression"]

    def source(self, e: ir.Expr, prefix: str = ""):
        """``e`` written out as ``_write`` writes it: (the source of its value, which reads ``attrs`` (the
        attributes, indexed by slot) and ``env``; the namespace it reads, each name of its own beginning
        ``_k`` + ``prefix`` (its pure subexpressions' variables ``_c`` + ``prefix``); the slots it reads).
        None where ``_write`` does not write ``e`` out as a whole (a query alone, a draw, an expression too
        deep, one that simplifies to a draw or a query): its compiled function is then not source."""
        if type(e) is ir.Call and self._direct_query(e):
            return None
        if not _writable(e) or _nests_deeper_than(e, MAX_WRITTEN_DEPTH):
            return None
        plan = _Plan(_draws(e))
        e = plan.simplify(e)
        if not _writable(e):
            return None
        namespace = {"nan": math.nan, "_truth": _truth, "_divide": _divide, "_power": _power}
        reads_attrs = []
        #: per key of a pure subexpression, its occurrences written out so far: (guard path, _Written)
        written: dict[int, list] = {}
        variables: dict[int, str] = {}
        occurrences: list[_Written] = []
        guards = itertools.count()

        def name(value) -> str:
            return _name(namespace, value, prefix)

        temporaries = itertools.count()

        def temporary() -> str:
            """A new local variable of the written function."""
            return f"_t{prefix}{next(temporaries)}"

        def evaluated(x: ir.Expr, path: tuple) -> bool:
            """Whether ``x`` is a pure subexpression written already where it is surely evaluated before
            this place (``source`` reads it from its variable)."""
            key = plan.key(x)
            return key is not None and any(path[:len(guarded)] == guarded for guarded, _ in written.get(key, ()))

        def source(x: ir.Expr, path: tuple) -> str:
            """``x`` written out, evaluated under the guards ``path`` (a conditional's arm, the right
            operand of && or ||: the ones it is evaluated under, in nesting order)."""
            kind = type(x)
            if kind is ir.Cost:
                return source(x.expr, path)
            if kind is ir.Num:
                v = x.value
                return f"({v!r})" if isinstance(v, (int, float)) and math.isfinite(v) else name(v)
            if kind is ir.Attr:
                reads_attrs.append(x.slot)
                return f"attrs[{x.slot}]"
            if kind is ir.Ctx and x.var in CONTEXT_FIELDS:
                return f"env.{CONTEXT_FIELDS[x.var]}"
            key = plan.key(x)
            if key is None:  # a draw under it, or the query of an expression that draws
                return operation(x, path)
            for guarded, earlier in written.get(key, ()):
                if path[:len(guarded)] == guarded:  # evaluated whenever this one is, and before it
                    earlier.used = True
                    return earlier.variable
            variable = variables.setdefault(key, f"_c{prefix}{len(variables)}")
            occurrence = _Written(variable)
            written.setdefault(key, []).append((path, occurrence))
            occurrence.source = operation(x, path)
            occurrences.append(occurrence)
            return f"\x00{len(occurrences) - 1}\x00"

        def operation(x: ir.Expr, path: tuple) -> str:
            """``x``'s own node written out, its operands by ``source`` in the order they are evaluated."""
            kind = type(x)
            if kind is ir.Unary:
                operand = source(x.operand, path)
                return f"(-{operand})" if x.op == "Neg" else f"(0.0 if {operand} != 0.0 else 1.0)"
            if kind is ir.Binary:
                left = source(x.left, path)
                right = source(x.right, path + (next(guards),) if x.op in ("And", "Or") else path)
                if x.op == "Div" and type(x.right) is ir.Num and type(x.right.value) in (int, float) \
                        and math.isfinite(x.right.value) and x.right.value != 0:
                    return f"({left} / {right})"  # (divide by a number not zero: its x / y)
                return _BINARY_SOURCE[x.op].format(left, right)
            if kind is ir.Cond:
                test = x.test
                if type(test) is ir.Binary and test.op in _COMPARISONS and not evaluated(test, path):
                    # a comparison's value is 1 or 0: the arm taken is the one its Python comparison picks
                    left = source(test.left, path)
                    condition = f"({left} {_COMPARISONS[test.op]} {source(test.right, path)})"
                else:
                    condition = f"{source(test, path)} != 0.0"
                then = source(x.then, path + (next(guards),))
                otherwise = source(x.otherwise, path + (next(guards),))
                return f"({then} if {condition} else {otherwise})"
            if kind is ir.Call and x.fun in ("Min", "Max"):  # minimum/maximum, the order of two numbers written out
                a, b = temporary(), temporary()
                left, right = source(x.args[0].expr, path), source(x.args[1].expr, path)
                op = "<" if x.fun == "Min" else ">"
                # (equal and not zero: the first if it is below 0 (minimum) or above 0 (maximum), else the second)
                return (f"({a} if ({a} := {left}) {op} ({b} := {right}) else {b} if {b} {op} {a} "
                        f"else ({a} if {a} {op} 0.0 else {b}) if {a} == {b} != 0.0 "
                        f"else {name(arithmetic.FUNCTIONS[x.fun])}({a}, {b}))")
            if kind is ir.Call and x.fun == "Floor":  # floor of a finite number written out
                a = temporary()
                operand = source(x.args[0].expr, path)
                return (f"({name(math.copysign)}(float({name(math.floor)}({a})), {a}) "
                        f"if {name(-math.inf)} < ({a} := {operand}) < {name(math.inf)} else {a})")
            if kind is ir.Call and x.fun in _PURE_CALLS:  # arithmetic's function called on the arguments, in order
                arity = 2 if x.fun in ("Min", "Max", "Pow") else 1
                return f"{name(arithmetic.FUNCTIONS[x.fun])}({', '.join(source(a.expr, path) for a in x.args[:arity])})"
            if kind is ir.Call and self._direct_query(x):  # a query of a member named without an index: its function
                return f"{name(self.observables[x.fun])}(env, {x.args[0].ref.base!r})"  # (observe's, index resolved)
            return f"{name(self.compile(x))}(env)"  # a draw, a query with an index, an estimate

        def render(text: str) -> str:
            """The source with each occurrence in place: ``(_cN := ...)`` where a later one reads it."""
            return _OCCURRENCE.sub(lambda m: occurrences[int(m.group(1))].render(render), text)

        return render(source(e, ())), namespace, reads_attrs


def _name(namespace: dict, value, prefix: str = "") -> str:
    """A new name in ``namespace`` for ``value``."""
    key = f"_k{prefix}{len(namespace)}"
    namespace[key] = value
    return key


class _Written:
    """One occurrence of a pure subexpression written out: ``(_cN := source)`` if a later one reads it."""

    __slots__ = ("variable", "source", "used")

    def __init__(self, variable: str):
        self.variable = variable
        self.source = ""
        self.used = False

    def render(self, render) -> str:
        inner = render(self.source)
        return f"({self.variable} := {inner})" if self.used else inner


#: where ``source`` left an occurrence of a pure subexpression (a NUL never occurs in written source)
_OCCURRENCE = re.compile("\x00([0-9]+)\x00")

#: the queries of the state that read a record and cannot raise (a pool's or a stage's, at a member named without
#: an index): a conditional on them may be skipped. budget_left and cachedin evaluate the program's
#: expressions (a stage's budget and chunk, a hold's content and reuse), which may raise.
_QUERIES_THAT_CANNOT_RAISE = frozenset({"Used", "Free", "Holders", "Queued", "Queue", "Busy"})

#: the pure functions that never raise on a float (arithmetic.py: min, max, abs, floor, ceil, sqrt and exp give a
#: value for every float, inf and NaN included)
_CALLS_THAT_CANNOT_RAISE = frozenset({"Min", "Max", "Abs", "Floor", "Ceil", "Sqrt", "Exp"})


class _Plan:
    """What ``_write`` knows of one expression: each subexpression's key (equal keys, equal values in one
    evaluation) and its simplified form. Keys are interned to small integers; the nodes are kept alive with
    their keys, since they are found by ``id`` (a node made by ``simplify`` and dropped again would
    otherwise leave its id to another)."""

    def __init__(self, draws: bool):
        #: whether the expression draws: then no query of the state is pure (cachedin reads a hold's reuse,
        #: which may draw from the stream where the evaluation is; the draws are undone, the value not)
        self.draws = draws
        self.keys: dict[int, tuple] = {}
        self.interned: dict[tuple, int] = {}
        self.simplified: dict[int, tuple] = {}

    def key(self, x: ir.Expr) -> int | None:
        """A number equal for two subexpressions exactly when they are the same expression of no draw,
        whose two evaluations in one evaluation of the expression give the same value or raise the same
        error; None for a subexpression that draws (a query too, in an expression that draws)."""
        found = self.keys.get(id(x))
        if found is not None:
            return found[1]
        key = self._key(x)
        self.keys[id(x)] = (x, key)
        return key

    def _key(self, x: ir.Expr) -> int | None:
        kind = type(x)
        if kind is ir.Cost:
            return self.key(x.expr)
        if kind is ir.Num:
            v = x.value  # by its type and bits: 1 and 1.0, 0.0 and -0.0 are different values here
            parts = ("Num", type(v), struct.pack("<d", v) if type(v) is float else v)
        elif kind is ir.Attr:
            parts = ("Attr", x.slot)
        elif kind is ir.Ctx:
            parts = ("Ctx", x.var)
        elif kind is ir.Unary:
            parts = ("Unary", x.op, self.key(x.operand))
        elif kind is ir.Binary:
            parts = ("Binary", x.op, self.key(x.left), self.key(x.right))
        elif kind is ir.Cond:
            parts = ("Cond", self.key(x.test), self.key(x.then), self.key(x.otherwise))
        elif kind is ir.Call:
            if x.fun not in _PURE_CALLS and self.draws:
                return None
            parts = ("Call", x.fun) + tuple(self.key(a.expr) if type(a) is ir.ExprArg else self._ref_key(a)
                                            for a in x.args)
        else:  # a draw
            return None
        if None in parts:
            return None
        return self.interned.setdefault(parts, len(self.interned))

    def _ref_key(self, arg) -> tuple | None:
        ref = arg.ref
        index = -1 if ref.index is None else self.key(ref.index)
        return None if index is None else (type(arg), ref.base, ref.count, index)

    def simplify(self, x: ir.Expr) -> ir.Expr:
        """``x`` simplified (_simplify), once per node (a node the front end substituted in several places is
        one object)."""
        found = self.simplified.get(id(x))
        if found is None:
            found = self.simplified[id(x)] = (x, self._simplify(x))
        return found[1]

    def _simplify(self, x: ir.Expr) -> ir.Expr:
        """``x`` with what the definition's closures evaluate the same without evaluating it: an operator
        of numbers alone is the number it gives (arithmetic's functions, as the closures call them);
        ``0 && b`` is 0 and ``1 || b`` is 1 (b is never evaluated); ``c ? a : b`` on a number is the arm it
        takes; ``t ? a : a`` is ``a`` when ``t`` neither draws nor can raise. The written-out nodes only:
        a draw's or a query's operands are their own expressions (simplified when written)."""
        kind = type(x)
        if kind is ir.Cost:
            return self.simplify(x.expr)
        if kind is ir.Unary:
            operand = self.simplify(x.operand)
            if type(operand) is ir.Num:
                v = operand.value
                return ir.Num(-v if x.op == "Neg" else (0.0 if v != 0.0 else 1.0))
            return x if operand is x.operand else ir.Unary(x.op, operand)
        if kind is ir.Binary:
            left = self.simplify(x.left)
            if type(left) is ir.Num and x.op in ("And", "Or") and (left.value != 0.0) == (x.op == "Or"):
                return ir.Num(1.0 if x.op == "Or" else 0.0)  # decided by its left operand
            right = self.simplify(x.right)
            if type(left) is ir.Num and type(right) is ir.Num:
                a, b = left.value, right.value
                if x.op in ("And", "Or"):  # not decided by a (above): b's truth
                    return ir.Num(_truth(b))
                folded = _fold(arithmetic.BINARY[x.op], a, b)
                if folded is not None:
                    return folded
            return x if left is x.left and right is x.right else ir.Binary(x.op, left, right)
        if kind is ir.Cond:
            test = self.simplify(x.test)
            if type(test) is ir.Num:
                return self.simplify(x.then if test.value != 0.0 else x.otherwise)
            then, otherwise = self.simplify(x.then), self.simplify(x.otherwise)
            key = self.key(then)
            if key is not None and key == self.key(otherwise) and _cannot_raise(test):
                return then
            if test is x.test and then is x.then and otherwise is x.otherwise:
                return x
            return ir.Cond(test, then, otherwise)
        if kind is ir.Call and x.fun in _PURE_CALLS and all(type(a) is ir.ExprArg for a in x.args):
            arity = 2 if x.fun in ("Min", "Max", "Pow") else 1
            args = tuple(self.simplify(a.expr) for a in x.args[:arity])
            if all(type(a) is ir.Num for a in args):
                folded = _fold(arithmetic.FUNCTIONS[x.fun], *(a.value for a in args))
                if folded is not None:
                    return folded
            if all(a is b.expr for a, b in zip(args, x.args)):
                return x
            return ir.Call(x.fun, tuple(ir.ExprArg(a) for a in args) + x.args[arity:])
        return x


def constant(e: ir.Expr) -> float | None:
    """The finite number ``e``'s written function gives whatever the state (``e`` as _write simplifies it is
    that number: _Plan.simplify), else None."""
    e = _Plan(_draws(e)).simplify(e)
    return e.value if type(e) is ir.Num and math.isfinite(e.value) else None


def _fold(f, *values) -> ir.Num | None:
    """``f`` of the numbers as a number, or None where it raises (the run then raises as it does)."""
    try:
        return ir.Num(f(*values))
    except Exception:
        return None


def _cannot_raise(x: ir.Expr) -> bool:
    """Whether evaluating ``x`` neither draws nor can raise: numbers, attributes and context variables (the
    session's attribute tuple has every slot, the Env every field), the operators but / and ^, the functions
    that never raise, the queries that read a record, at a member named without an index."""
    kind = type(x)
    if kind is ir.Cost:
        return _cannot_raise(x.expr)
    if kind in (ir.Num, ir.Attr):
        return True
    if kind is ir.Ctx:
        return x.var in CONTEXT_FIELDS
    if kind is ir.Unary:
        return _cannot_raise(x.operand)
    if kind is ir.Binary:
        return x.op not in ("Div", "Pow") and _cannot_raise(x.left) and _cannot_raise(x.right)
    if kind is ir.Cond:
        return _cannot_raise(x.test) and _cannot_raise(x.then) and _cannot_raise(x.otherwise)
    if kind is ir.Call:
        if x.fun in _CALLS_THAT_CANNOT_RAISE:
            return all(type(a) is ir.ExprArg and _cannot_raise(a.expr) for a in x.args)
        return x.fun in _QUERIES_THAT_CANNOT_RAISE and all(type(a) is not ir.ExprArg and a.ref.index is None
                                                            for a in x.args)
    return False


def _draws(x: ir.Expr) -> bool:
    """Whether a draw occurs anywhere in ``x`` (a query's index and an estimate's operands included)."""
    kind = type(x)
    if kind is ir.Sample:
        return True
    if kind is ir.Cost:
        return _draws(x.expr)
    if kind is ir.Unary:
        return _draws(x.operand)
    if kind is ir.Binary:
        return _draws(x.left) or _draws(x.right)
    if kind is ir.Cond:
        return _draws(x.test) or _draws(x.then) or _draws(x.otherwise)
    if kind is ir.Call:
        return any(_draws(a.expr) if type(a) is ir.ExprArg else a.ref.index is not None and _draws(a.ref.index)
                   for a in x.args)
    return False


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
