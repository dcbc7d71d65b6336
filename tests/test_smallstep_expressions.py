"""The two compilations of an expression agree: the definition's
(semantics/smallstep/values.ExpressionCompiler), a closure per node, and the
fast engine's (semantics/fast/values.WrittenCompiler), whose ``compile``
writes numbers, attributes, context variables, operators and
conditionals out as one Python function. Over random expressions and
evaluation environments they give the same value bit for bit (NaN's sign
included), leave the stream at the same position, and fail with the same
error. The expressions read the state (pool and stage queries, estimates) and
repeat subtrees (one object in several places, as the front end substitutes a
hold header's bindings, and equal copies), so the written function's own
simplifications are held to the definition too: a pure subexpression it
evaluates once where it repeats, a conditional it folds. Its queries are a
subsequence of the closures': it reads nothing the definition does not. The
queries that may raise it first reads where the definition first reads them,
in the same order, so that an error is raised where the definition raises it;
a query that cannot raise (it reads a record) it may read later than the
definition first does, or not at all (the test of a conditional folded to its
one arm), since nothing changes the state while an expression is evaluated.

Seed 002, section 2 (Expressions): "comparisons give 0 or 1; && and ||
short-circuit"; "c ? a : b evaluates one arm" (FORMAT.md).
"""

from __future__ import annotations

import copy
import functools
import math
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from semantics import ir
from semantics.errors import RunError
from semantics.fast.values import MAX_WRITTEN_DEPTH, constant
from semantics.fast.values import WrittenCompiler as ExpressionCompiler
from semantics.smallstep.estimates import Estimator
from semantics.smallstep.values import Env, raise_run_error


class _Config:
    """The part of a configuration these expressions read: the time, the queries' answers (None: the query
    raises a RunError), the stages' estimators; ``log`` is every query read, in order."""

    def __init__(self, time: float, values=(1.0,), estimates=()):
        self.time = time
        self.values = values
        self.estimates = estimates
        self.log = []


#: The queries of the state, which of them name a pool, and which only read a record and so cannot raise
#: (smallstep/observables.py: cachedin and budget_left evaluate the program's expressions, which may; work,
#: which may not, is left among those that may, to keep more raising queries in the draws).
QUERIES = ("Used", "Free", "CachedIn", "Holders", "Queued", "Queue", "Busy", "Work", "BudgetLeft")
POOL_QUERIES = frozenset({"Used", "Free", "CachedIn", "Holders", "Queued"})
QUERIES_THAT_CANNOT_RAISE = frozenset({"Used", "Free", "Holders", "Queued", "Queue", "Busy"})


def _query(fun: str):
    def query(env: Env, i: int) -> float:
        config = env.config
        config.log.append((fun, i))
        value = config.values[(2 * QUERIES.index(fun) + i) % len(config.values)]
        if value is None and fun in QUERIES_THAT_CANNOT_RAISE:
            value = 0.25
        elif value is None:
            raise_run_error(env, f"{fun}({i}) cannot be read")
        # cachedin reads the stream's position, as a hold's reuse that draws does (blocks.reuse_limit)
        return value + env.draws if fun == "CachedIn" else value

    return query


#: The observables these expressions' queries read (machine.make_observables' shape: name -> f(env, index)).
OBSERVABLES = {fun: _query(fun) for fun in QUERIES}


def _compiler() -> ExpressionCompiler:
    return ExpressionCompiler(None, OBSERVABLES)


def query(fun: str, base: int = 0, index=None) -> ir.Call:
    """``fun`` of member ``base`` (+ ``index``) of a family of two pools or stages."""
    return ir.Call(fun, ((ir.PoolArg if fun in POOL_QUERIES else ir.StageArg)(ir.Ref(base, 2, index)),))


def estimate(fun: str, base: int = 0, index=None, *operands) -> ir.Call:
    return ir.Call(fun, (ir.StageArg(ir.Ref(base, 2, index)),) + tuple(ir.ExprArg(x) for x in operands))


NUMBERS = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, 3.0, 1e308, -1e-300, math.inf, -math.inf, math.nan,
                           -math.nan, 0.5, 7.0, 1, 0])
BASE_LEAVES = st.one_of(
    NUMBERS.map(ir.Num),
    st.integers(0, 2).map(ir.Attr),
    st.sampled_from(["Now", "Waited", "Size", "Age", "Last", "Queued", "N", "Ntok"]).map(ir.Ctx),
    st.tuples(st.sampled_from(QUERIES), st.integers(0, 1)).map(lambda t: query(*t)),
    st.tuples(st.sampled_from(["EstLambda", "EstRho", "EstWait"]), st.integers(0, 1)).map(lambda t: estimate(*t)),
)
BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Lt", "Le", "Gt", "Ge", "Eq", "Ne", "And", "Or"]


def _extend(inner, draws: bool = True):
    """Expressions of ``inner``: operators, conditionals, calls, queries (``draws``: draws too)."""
    return st.one_of(
        st.tuples(st.sampled_from(["Neg", "Not"]), inner).map(lambda t: ir.Unary(*t)),
        st.tuples(st.sampled_from(BINARY), inner, inner).map(lambda t: ir.Binary(*t)),
        st.tuples(inner, inner, inner).map(lambda t: ir.Cond(*t)),
        st.tuples(inner, inner).map(lambda t: ir.Cond(t[0], t[1], t[1])),  # one arm twice: folded when t is safe
        st.tuples(st.sampled_from(["Min", "Max", "Pow"]), inner, inner).map(
            lambda t: ir.Call(t[0], (ir.ExprArg(t[1]), ir.ExprArg(t[2])))),
        st.tuples(st.sampled_from(["Abs", "Floor", "Ceil", "Sqrt", "Exp", "Ln"]), inner).map(
            lambda t: ir.Call(t[0], (ir.ExprArg(t[1]),))),
        st.tuples(st.sampled_from(QUERIES), st.integers(0, 1), inner).map(lambda t: query(*t)),  # an index
        st.tuples(st.integers(0, 1), st.one_of(st.none(), inner), inner, inner).map(
            lambda t: estimate("Price", *t)),
        *([st.tuples(st.sampled_from(["Exp", "Uniform", "Bernoulli", "Det"]), inner, inner).map(
            lambda t: ir.Sample(t[0], (t[1],) if t[0] in ("Exp", "Det", "Bernoulli") else (t[1], t[2]))),
           inner.map(lambda x: ir.Sample("Exp", (x,)))] if draws else []),
    )


def _expressions(draws: bool):
    """Expressions of up to 12 leaves, among them subtrees drawn once per example and put in several places
    (the same object, or an equal copy), each an operator or a call (a number, an attribute or a context
    variable is not worth a name)."""
    extend = functools.partial(_extend, draws=draws)
    subtrees = extend(st.recursive(BASE_LEAVES, extend, max_leaves=3))
    repeated = st.one_of(*(st.shared(subtrees, key=f"{k} {draws}") for k in ("a", "b"))).flatmap(
        lambda x: st.sampled_from([x, copy.deepcopy(x)]))
    return st.recursive(st.one_of(BASE_LEAVES, repeated, repeated, repeated), extend, max_leaves=12)


#: with draws (a query of the state is then never named: cachedin may read the stream) and without
EXPRESSIONS = st.one_of(_expressions(True), _expressions(False))


#: the stages' estimators the estimate readers read (a family of two from 0 or 1: three stages)
ESTIMATORS = st.tuples(st.one_of(st.none(), NUMBERS), NUMBERS, NUMBERS).map(
    lambda t: Estimator(0.0, t[0], t[1], t[2], 2))


def environments():
    attrs = st.one_of(st.none(), st.tuples(NUMBERS, NUMBERS, NUMBERS))
    values = st.lists(st.one_of(NUMBERS, NUMBERS, st.none()), min_size=1, max_size=6).map(tuple)
    return st.tuples(attrs, NUMBERS, st.integers(0, 2**64 - 1), st.integers(0, 5), NUMBERS, NUMBERS, values,
                     st.tuples(ESTIMATORS, ESTIMATORS, ESTIMATORS))


def _env(drawn) -> Env:
    attrs, now, stream, draws, waited, size, values, estimates = drawn
    env = Env(_Config(now, values, estimates), attrs, 3, stream, draws)
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


def _is_subsequence(short: list, long: list) -> bool:
    rest = iter(long)
    return all(any(x == y for y in rest) for x in short)


def _first_reads(log: list) -> list:
    return list(dict.fromkeys(log))


def _may_raise(log: list) -> list:
    return [r for r in log if r[0] not in QUERIES_THAT_CANNOT_RAISE]


@settings(max_examples=400, deadline=None)
@given(EXPRESSIONS, environments())
def test_written_out_expressions_are_the_closures(expression, drawn):
    compiler = _compiler()
    written, closure = compiler.compile(expression), compiler.interpret(expression)
    written_env, closure_env = _env(drawn), _env(drawn)
    assert _outcome(written, written_env) == _outcome(closure, closure_env)
    number = constant(expression)  # (the step loop reads such a budget or chunk once)
    if number is not None:
        bits = struct.pack("<d", number) if isinstance(number, float) else ("int", number)  # (as _outcome's)
        assert _outcome(closure, _env(drawn))[:2] == ("value", bits)
    reads, definition_reads = written_env.config.log, closure_env.config.log
    assert _is_subsequence(reads, definition_reads), (reads, definition_reads)
    assert _first_reads(_may_raise(reads)) == _first_reads(_may_raise(definition_reads))
    assert all(fun in QUERIES_THAT_CANNOT_RAISE for fun, _ in set(definition_reads) - set(reads))


def test_an_expression_too_deep_to_write_out_is_its_closure():
    """Past MAX_WRITTEN_DEPTH nested operators the run evaluates by closures, with the same value."""
    deep = ir.Num(1.0)
    for k in range(3 * MAX_WRITTEN_DEPTH):
        deep = ir.Binary("Add" if k % 2 else "Mul", deep, ir.Attr(k % 3))
    compiler = _compiler()
    env = Env(_Config(0.0), (0.5, 2.0, -1.0))
    assert compiler.compile(deep)(env) == compiler.interpret(deep)(env)


def test_short_circuit_and_one_arm():
    """&& and || do not evaluate their right operand when the left decides; c ? a : b evaluates one arm:
    the draw in the untaken part leaves the stream where it was."""
    draw = ir.Sample("Exp", (ir.Num(1.0),))
    compiler = _compiler()
    for expression, draws in ((ir.Binary("And", ir.Num(0.0), draw), 0), (ir.Binary("Or", ir.Num(2.0), draw), 0),
                              (ir.Binary("And", ir.Num(1.0), draw), 1),
                              (ir.Cond(ir.Num(1.0), ir.Num(5.0), draw), 0), (ir.Cond(ir.Num(0.0), ir.Num(5.0), draw), 1)):
        env = Env(_Config(0.0), (), 1, 12345, 0)
        compiler.compile(expression)(env)
        assert env.draws == draws, expression


# -- a repeated subexpression evaluated once, a conditional folded (semantics/fast/values.py, _Plan) -----------


def _both(expression, attrs=(1.0, 2.0, 3.0), values=(5.0,), draws=0):
    """(the written function's outcome and query reads, the closures' outcome and reads)."""
    compiler = _compiler()
    out = []
    for f in (compiler.compile(expression), compiler.interpret(expression)):
        env = Env(_Config(0.0, values), attrs, 3, 12345, draws)
        out.append((_outcome(f, env), env.config.log))
    return out


def _kv_units(hit_again):
    """lib/vllm.sq's KV hold units as the front end writes them, its header's bindings substituted: ``hit``
    twice (``hit_again``: the second time the same object or an equal copy), ``known`` three times (one object),
    ``chunk`` a conditional whose test is false (chunk_cap 0)."""
    computed, prompt, hitmax = ir.Attr(0), ir.Attr(1), ir.Attr(2)
    reuse = ir.Binary("Mul", ir.Num(1.0), ir.Call("Max", (ir.ExprArg(hitmax), ir.ExprArg(ir.Binary(
        "Mul", ir.Call("Floor", (ir.ExprArg(ir.Binary("Div", computed, ir.Num(16.0))),)), ir.Num(16.0))))))
    hit = ir.Call("Min", (ir.ExprArg(query("CachedIn", 1)), ir.ExprArg(reuse)))
    known = ir.Cond(ir.Binary("Lt", computed, prompt), prompt, ir.Binary("Add", computed, ir.Num(1.0)))
    crowded = ir.Binary("Gt", ir.Binary("Add", query("Holders"), query("Queued")), ir.Num(1.0))
    chunk = ir.Cond(ir.Binary("And", ir.Binary("Gt", ir.Num(0.0), ir.Num(0.0)), crowded), ir.Num(0.0), known)
    return ir.Binary("Add", hit, ir.Call("Min", (
        ir.ExprArg(ir.Binary("Sub", known, hit_again(hit))),
        ir.ExprArg(ir.Call("Min", (ir.ExprArg(query("BudgetLeft")), ir.ExprArg(chunk)))))))


def test_a_repeated_query_is_read_once():
    """The KV hold's units read cachedin twice and budget_left once in the definition; written out, cachedin
    once (hit is named where it is first evaluated), with the same value."""
    for hit_again in (lambda hit: hit, copy.deepcopy):
        (written, reads), (closure, definition_reads) = _both(_kv_units(hit_again), values=(5.0, 40.0, 9.0))
        assert written == closure and written[0] == "value"
        assert definition_reads == [("CachedIn", 1), ("CachedIn", 1), ("BudgetLeft", 0)]
        assert reads == [("CachedIn", 1), ("BudgetLeft", 0)]


def test_a_repeat_is_evaluated_again_unless_its_first_occurrence_surely_was():
    """A repeat reads the name only where its earlier occurrence has been evaluated whenever it is: not after
    one inside a conditional's arm or the right side of && or ||; one in a conditional's test, or before
    the conditional, serves its arms."""
    q = query("Work")
    plus = lambda a, b: ir.Binary("Add", a, b)  # noqa: E731
    cases = [
        (plus(q, ir.Cond(ir.Attr(0), q, ir.Num(0.0))), (1.0, 0, 0), 1),
        (plus(ir.Cond(ir.Attr(0), q, ir.Num(0.0)), q), (1.0, 0, 0), 2),  # the arm's is not the sum's
        (plus(ir.Cond(ir.Attr(0), q, ir.Num(0.0)), q), (0.0, 0, 0), 1),
        (plus(ir.Cond(ir.Attr(0), q, plus(q, ir.Num(1.0))), q), (1.0, 0, 0), 2),  # in both arms: still again
        (ir.Cond(ir.Binary("Gt", q, ir.Num(0.0)), q, ir.Num(0.0)), (0, 0, 0), 1),  # the test's serves the arm
        (plus(ir.Binary("And", ir.Attr(0), q), q), (1.0, 0, 0), 2),
        (plus(ir.Binary("Or", ir.Attr(0), q), q), (0.0, 0, 0), 2),
        (plus(q, ir.Binary("Or", ir.Attr(0), q)), (0.0, 0, 0), 1),
        (ir.Cond(ir.Attr(0), plus(q, q), ir.Num(0.0)), (1.0, 0, 0), 1),  # both in one arm
    ]
    for expression, attrs, reads_written in cases:
        (written, reads), (closure, definition_reads) = _both(expression, attrs)
        assert written == closure, expression
        assert len(reads) == reads_written and set(reads) == set(definition_reads), (expression, reads)


def test_an_error_is_raised_where_the_definition_raises_it():
    """A repeated query that raises raises at its first occurrence, written out as in the definition; one in
    an arm not taken is not read."""
    q = query("BudgetLeft")  # reads values[(2 * 8 + 0) % 1]: None, it raises
    expression = ir.Binary("Add", ir.Cond(ir.Attr(0), q, ir.Num(0.0)), ir.Binary("Mul", q, q))
    for attrs in ((1.0, 0, 0), (0.0, 0, 0)):
        (written, reads), (closure, definition_reads) = _both(expression, attrs, values=(None,))
        assert written == closure == ("error", "BudgetLeft(0) cannot be read")
        assert reads == definition_reads == [("BudgetLeft", 0)]


def test_a_draw_between_two_reads_reads_again():
    """In an expression that draws no query is named: cachedin may read the stream's position (a hold's reuse
    that draws), so two reads around a draw may differ, and the written function reads both."""
    q = query("CachedIn")
    expression = ir.Binary("Add", ir.Binary("Add", q, ir.Sample("Exp", (ir.Num(1.0),))), q)
    (written, reads), (closure, definition_reads) = _both(expression)
    assert written == closure and len(reads) == len(definition_reads) == 2


def test_a_conditional_whose_arms_are_one_constant_is_the_constant():
    """The step stage's chunk with chunk_cap 0, ``residents + queued(reqs) > 1 ? 0 : 0``, is 0 without reading
    the queue: its test can neither raise nor draw. A test that may raise, or draws, is evaluated; arms of
    different values (0 and 0.0 differ in type) are not folded."""
    crowded = ir.Binary("Gt", ir.Binary("Add", ir.Ctx("N"), query("Queued")), ir.Num(1.0))
    (written, reads), (closure, definition_reads) = _both(ir.Cond(crowded, ir.Num(0.0), ir.Num(0.0)))
    assert written == closure == ("value", struct.pack("<d", 0.0), 0)
    assert reads == [] and definition_reads == [("Queued", 0)]
    compiler = _compiler()
    for test, arms in ((ir.Binary("Gt", query("BudgetLeft"), ir.Num(1.0)), (ir.Num(0.0), ir.Num(0.0))),
                       (ir.Binary("Gt", query("Queued", 0, ir.Attr(0)), ir.Num(1.0)), (ir.Num(0.0), ir.Num(0.0))),
                       (ir.Sample("Exp", (ir.Num(1.0),)), (ir.Num(2.0), ir.Num(2.0))),
                       (crowded, (ir.Num(0), ir.Num(0.0)))):
        expression = ir.Cond(test, *arms)
        for values in ((5.0,), (None,)):
            (written, reads), (closure, definition_reads) = _both(expression, (0.5, 0, 0), values)
            assert written == closure and reads == definition_reads, expression
    # a conditional on a number is its arm; an operator of numbers its value; 0 && q is 0 without q
    for expression, value in ((ir.Cond(ir.Num(0.0), query("Used"), ir.Num(3.0)), 3.0),
                              (ir.Binary("Add", ir.Binary("Div", ir.Num(1.0), ir.Num(-0.0)), ir.Num(2.0)), -math.inf),
                              (ir.Binary("And", ir.Binary("Gt", ir.Num(0.0), ir.Num(0.0)), query("BudgetLeft")), 0.0)):
        (written, reads), (closure, _) = _both(expression, values=(None,))
        assert written == closure == ("value", struct.pack("<d", value), 0) and reads == []
        assert compiler.compile(expression)(Env(_Config(0.0, (None,)), None)) == value
        assert constant(expression) == (value if math.isfinite(value) else None)
    # values.constant: the number the written function always gives, as the step loop reads a budget or chunk
    assert constant(ir.Cond(crowded, ir.Num(0.0), ir.Num(0.0))) == 0.0
    assert constant(ir.Cond(ir.Binary("Gt", query("BudgetLeft"), ir.Num(1.0)), ir.Num(0.0), ir.Num(0.0))) is None
    assert constant(crowded) is None and constant(ir.Num(math.nan)) is None


def test_names_nested_as_deep_as_an_expression_is_written():
    """Repeats nested MAX_WRITTEN_DEPTH deep, each named inside the one before (``(_c := ...)`` in the written
    source at every level), compile and give the closures' value."""
    chain = [ir.Binary("Add", ir.Attr(0), query("Used"))]
    for k in range(MAX_WRITTEN_DEPTH - 3):
        chain.append(ir.Binary("Mul" if k % 2 else "Add", chain[-1], ir.Num(1.0 + k % 3)))
    # chain[-1] first (it names every link inside it), then each link again, in a right spine as deep
    spine = chain[0]
    for link in chain[1:]:
        spine = ir.Binary("Sub", link, spine)
    compiler = _compiler()
    written = compiler.compile(spine)
    assert written.__name__ == "expression"  # written out, not the closures
    (value, reads), (expected, definition_reads) = _both(spine, (0.5, 0, 0))
    assert value == expected and reads == [("Used", 0)] and len(definition_reads) == len(chain)
