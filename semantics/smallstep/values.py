"""Expression evaluation (seed 002 §2, Expressions).

An IR expression is compiled once, per program, into a Python closure
``f(env) -> float``; ``Env`` carries what a reading needs: the configuration,
the session's attributes, the context variables of the moment (FORMAT.md,
Moments) and the stream a draw advances. An Env is scratch space local to one
rule: the rule writes the stream's final position into the configuration it
returns, so evaluation is a function of the configuration.

Values: comparisons, ``&&``, ``||`` and ``!`` give 0 or 1 (a non-zero operand
is true; ``&&`` and ``||`` short-circuit); ``c ? a : b`` evaluates one arm.
"""

from __future__ import annotations

import math
import operator
from typing import Callable

from .. import arithmetic, ir
from ..errors import RunError
from .estimates import price, read_lambda, read_rho, read_wait
from .rng import sample_distribution, sample_exp

#: The estimate readers of the IR's functions (Price reads two more arguments).
ESTIMATE_READERS = {"EstLambda": read_lambda, "EstRho": read_rho, "EstWait": read_wait, "Price": price}


class Env:
    """What one evaluation reads; ``draws`` advances with every draw. The
    class attributes are the defaults of the context variables, so that a
    rule sets only what its moment reads (an instance keeps what was set)."""

    config = None
    attrs = None
    serial = -1
    stream = 0
    draws = 0
    stmt = None
    waited = 0.0
    size = 0.0
    age = 0.0
    last = 0.0
    queued = 0.0
    present = 0.0
    residents = 0.0
    decoders = 0.0
    kv_decode = 0.0
    kv_prefill = 0.0
    tokens = 0.0
    prefilled = 0.0
    attention = 0.0
    decoding = 0.0
    admission = 0.0
    remaining = 0.0
    #: (step stage, its budget left) while that stage admits: what budget_left(stage) reads then
    budget = None

    def __init__(self, config, attrs=None, serial=-1, stream=0, draws=0, stmt=None):
        self.config = config
        self.attrs = attrs
        self.serial = serial
        self.stream = stream
        self.draws = draws
        self.stmt = stmt


Compiled = Callable[[Env], float]


#: The operators and functions are semantics/arithmetic.py's (one
#: definition for the fold, the linker and the run); the names below are what
#: the closures (and the fast engine's written-out source) call.
_truth = arithmetic.truth
_divide = arithmetic.divide
_power = arithmetic.power

#: The binary operators, by IR name (the closures short-circuit && and || before reading it).
_BINARY = arithmetic.BINARY

#: The one-argument pure functions, by IR name.
_MATH = {fun: arithmetic.FUNCTIONS[fun] for fun in ("Abs", "Floor", "Ceil", "Sqrt", "Exp", "Ln")}

describe_draw_problem = arithmetic.describe_draw_problem
_INF = math.inf


def raise_run_error(env: Env, message: str):
    raise RunError(message, stmt=env.stmt, time=env.config.time)


#: the most phases one ``~erlang(k, mean)`` draws: each phase is a uniform
#: number of the stream, so k phases take k steps of the generator
MAX_ERLANG_PHASES = 10_000_000


def check_erlang_phases(env: Env, phases: float) -> None:
    """A RunError for an Erlang phase count the run cannot draw: NaN, inf, or
    more than MAX_ERLANG_PHASES (a k below 1 or a fraction is arithmetic.describe_draw_problem's error)."""
    if not phases <= MAX_ERLANG_PHASES:
        raise_run_error(env, f"~erlang's phase count k is {phases:g}: the draw is a sum of k exponentials, and k "
                             f"must be a finite number of at most {MAX_ERLANG_PHASES:,} phases")


def resolve_index(ref: ir.Ref, compiled_index: Compiled | None, env: Env, what: str) -> int:
    """The member a reference selects: ``base + index``; an index that is
    not an integer in [0, count) is a RunError."""
    if compiled_index is None:
        return ref.base
    i = compiled_index(env)
    if not (0 <= i < ref.count) or i != math.floor(i):
        raise_run_error(env, f"{what} index {i:g} is out of range: the family has {ref.count} member(s), 0 to {ref.count - 1}")
    return ref.base + int(i)


#: Every context variable an evaluation reads (seed 002 §2, "context
#: variables ..."; FORMAT.md Moments say where each exists), by IR name -> the
#: field of the Env that holds it at that moment (``now``: the configuration's
#: time). The closures and the fast engine's written-out source are derived from this one table.
CONTEXT_FIELDS = {"Now": "config.time", "Waited": "waited", "Size": "size", "Age": "age", "Last": "last",
                  "Queued": "queued", "N": "present",
                  # a step stage's: the residents before the iteration (budget, chunk, cost, serve keys) ...
                  "Nres": "residents", "Ndec": "decoders", "Kvb": "kv_decode", "Kvp": "kv_prefill",
                  # ... what the iteration scheduled (cost) ...
                  "Ntok": "tokens", "Npre": "prefilled", "Attn": "attention",
                  # ... and one resident's (serve keys)
                  "Decoding": "decoding", "Admission": "admission", "Remaining": "remaining"}

class ExpressionCompiler:
    """Compiles IR expressions of one program into closures, a closure per
    node (the definition); ``observables`` answers the pool and stage
    queries (``used(p)``, ``queue(s)``, ...). The fast engine's compiler
    (semantics/fast/values.py) writes an expression's arithmetic out as
    Python source instead; tests/test_smallstep_expressions.py checks the
    two agree bit for bit."""

    def __init__(self, program: ir.Program, observables):
        self.program = program
        self.observables = observables
        self.cache: dict[int, Compiled] = {}
        self.closures: dict[int, Compiled] = {}

    def compile(self, e: ir.Expr) -> Compiled:
        """``e`` as a closure, its operands compiled by ``compile`` (a subclass's, if it overrides it)."""
        key = id(e)
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = self._closure(e, self.compile)
        return found

    def interpret(self, e: ir.Expr) -> Compiled:
        """``e`` as a closure per node, whatever ``compile`` is."""
        key = id(e)
        found = self.closures.get(key)
        if found is None:
            found = self.closures[key] = self._closure(e, self.interpret)
        return found

    def compile_ref_index(self, ref: ir.Ref) -> Compiled | None:
        return None if ref.index is None else self.compile(ref.index)

    # -- closures (the definition) --------------------------------------------

    def _closure(self, e: ir.Expr, sub) -> Compiled:
        """``e`` as a closure; ``sub`` compiles its operands."""
        if isinstance(e, ir.Num):
            v = e.value
            return lambda env: v
        if isinstance(e, ir.Attr):
            slot = e.slot
            return lambda env: env.attrs[slot] if env.attrs is not None else math.nan
        if isinstance(e, ir.Cost):
            return sub(e.expr)
        if isinstance(e, ir.Ctx):
            return self._compile_context(e.var)
        if isinstance(e, ir.Unary):
            f = sub(e.operand)
            if e.op == "Neg":
                return lambda env: -f(env)
            return lambda env: 0.0 if f(env) != 0.0 else 1.0
        if isinstance(e, ir.Binary):
            a, b = sub(e.left), sub(e.right)
            if e.op == "And":
                return lambda env: _truth(b(env)) if a(env) != 0.0 else 0.0
            if e.op == "Or":
                return lambda env: 1.0 if a(env) != 0.0 else _truth(b(env))
            op = _BINARY[e.op]
            return lambda env: op(a(env), b(env))
        if isinstance(e, ir.Cond):
            t, x, y = sub(e.test), sub(e.then), sub(e.otherwise)
            return lambda env: x(env) if t(env) != 0.0 else y(env)
        if isinstance(e, ir.Sample):
            return self._compile_sample(e, sub)
        if isinstance(e, ir.Call):
            return self._compile_call(e, sub)
        raise TypeError(f"not an IR expression: {e!r}")

    def _compile_context(self, var: str) -> Compiled:
        if var in CONTEXT_FIELDS:
            return operator.attrgetter(CONTEXT_FIELDS[var])  # a closure of env that reads its field
        raise ValueError(f"unknown context variable {var}")

    def _compile_sample(self, e: ir.Sample, sub) -> Compiled:
        dist = e.dist
        if dist == "Empirical":  # its arguments are the column's numbers (the linker's structure check)
            column = [a.value for a in e.args]

            def sample_empirical(env: Env) -> float:
                value, env.draws = sample_distribution(dist, column, env.stream, env.draws)
                return value

            return sample_empirical
        args = [sub(a) for a in e.args]
        if dist == "Exp" and type(e.args[0]) is ir.Num:  # the commonest draw: ~exp of a number
            mean_value = e.args[0].value

            def sample_exponential_of(env: Env) -> float:
                value = sample_exp(mean_value, env.stream, env.draws)
                env.draws += 1
                return value

            return sample_exponential_of
        if dist == "Exp":  # without building an argument list
            mean = args[0]

            def sample_exponential(env: Env) -> float:
                m = mean(env)
                if not 0.0 <= m < _INF:  # a mean the link could not check (it checks a constant one)
                    raise_run_error(env, arithmetic.describe_draw_problem("Exp", [m]))
                value = sample_exp(m, env.stream, env.draws)
                env.draws += 1
                return value

            return sample_exponential

        def sample(env: Env) -> float:
            values = [f(env) for f in args]
            if dist == "Erlang":
                check_erlang_phases(env, values[0])
            problem = describe_draw_problem(dist, values)  # the arguments the link could not check (issue 23)
            if problem is not None:
                raise_run_error(env, problem)
            value, env.draws = sample_distribution(dist, values, env.stream, env.draws)
            return value

        return sample

    def _compile_estimate(self, e: ir.Call, sub) -> Compiled:
        """est_lambda(s), est_rho(s), est_wait(s), price(s, s_hit, ds): read
        from stage s's estimator (estimates.py), which its completions feed."""
        ref = e.args[0].ref
        index = None if ref.index is None else sub(ref.index)
        if e.fun == "Price":
            hit, extra = sub(e.args[1].expr), sub(e.args[2].expr)

            def read_price(env: Env) -> float:
                return price(env.config.estimates[resolve_index(ref, index, env, "stage")], hit(env), extra(env))

            return read_price
        reader = ESTIMATE_READERS[e.fun]

        def read_estimate(env: Env) -> float:
            return reader(env.config.estimates[resolve_index(ref, index, env, "stage")])

        return read_estimate

    def _compile_call(self, e: ir.Call, sub) -> Compiled:
        fun = e.fun
        if fun in ("Min", "Max", "Pow"):
            a, b = sub(e.args[0].expr), sub(e.args[1].expr)
            f = arithmetic.FUNCTIONS[fun]
            return lambda env: f(a(env), b(env))
        if fun in _MATH:
            f, g = _MATH[fun], sub(e.args[0].expr)
            return lambda env: f(g(env))
        if fun in ESTIMATE_READERS:
            return self._compile_estimate(e, sub)
        ref = e.args[0].ref
        index = None if ref.index is None else sub(ref.index)
        query = self.observables[fun]
        what = "pool" if isinstance(e.args[0], ir.PoolArg) else "stage"

        def observe(env: Env) -> float:
            return query(env, resolve_index(ref, index, env, what))

        return observe
