"""The range of every session attribute: an interval its assignments allow.

An attribute's range is the union over everything that assigns it (brief B,
check 8): its ``set`` statements (the expression's range, computed from the
ranges of the attributes it reads), its ``choose`` statements ([0, count-1],
whole numbers), the explicit sessions' values, and for the built-ins what the
machine gives them (serial, turn_no >= 0, whole; cached, computed >= 0; the
trace columns new, out, think >= 0 and more, forced in {0, 1}).

A range is an interval with a flag for "whole numbers only". Ranges are the
least fixed point of the assignments, computed by Kleene iteration from
"no value yet", with widening (an endpoint still moving after a few rounds
goes to infinity) so that ``set k = k + 1`` ends; an attribute no assignment
gives a value ends unbounded. Every step over-approximates, so a fact proved
for every value in the range holds for every value the run can produce
(NaN aside: the ranges do not model it, nor a value computed from a NaN,
such as min(NaN, 2); docs/arithmetic.md). Monotone functions (floor, ceil,
sqrt, exp) are the run's own (semantics/arithmetic.py) applied to the bounds.

A draw's range is its support: exp, erlang and h2 [0, inf), det {x},
uniform [lo, hi], bernoulli {0, 1}; lognormal (0, inf) (read as [0, inf)), normal
(-inf, inf) (docs/design/draws.md).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from .. import arithmetic, ir
from .walk import list_child_blocks, visit_block, visit_session


@dataclass(frozen=True, slots=True)
class Interval:
    """The values from ``low`` to ``high`` (either may be infinite); whole
    numbers only when ``whole``."""

    low: float
    high: float
    whole: bool


EVERYTHING = Interval(-math.inf, math.inf, False)
NON_NEGATIVE = Interval(0.0, math.inf, False)
NON_NEGATIVE_WHOLE = Interval(0.0, math.inf, True)
TEST = Interval(0.0, 1.0, True)


def make_point(x: float) -> Interval:
    if math.isnan(x):
        return EVERYTHING
    return Interval(x, x, math.isfinite(x) and x == int(x))


def join(a: Interval | None, b: Interval | None) -> Interval | None:
    """The smallest interval holding both (None is "no value")."""
    if a is None:
        return b
    if b is None:
        return a
    return Interval(min(a.low, b.low), max(a.high, b.high), a.whole and b.whole)


def multiply_bounds(x: float, y: float) -> float:
    """A product of two bounds, with 0 * inf = 0 (a bound, not a value)."""
    if x == 0 or y == 0:
        return 0.0
    return x * y


def span(values: list[float], whole: bool) -> Interval:
    if any(math.isnan(v) for v in values):
        return EVERYTHING
    return Interval(min(values), max(values), whole)


def add(a: Interval, b: Interval) -> Interval:
    return span([a.low + b.low, a.high + b.high], a.whole and b.whole)


def negate(a: Interval) -> Interval:
    return Interval(-a.high, -a.low, a.whole)


def multiply(a: Interval, b: Interval) -> Interval:
    corners = [multiply_bounds(x, y) for x in (a.low, a.high) for y in (b.low, b.high)]
    return span(corners, a.whole and b.whole)


def divide_bounds(x: float, y: float) -> float:
    """A quotient of two bounds (``y`` is not 0); inf / inf has no bound."""
    if math.isinf(x) and math.isinf(y):
        return math.nan
    if math.isinf(y):
        return 0.0
    return x / y


def divide(a: Interval, b: Interval) -> Interval:
    if b.low <= 0 <= b.high:
        return EVERYTHING
    return span([divide_bounds(x, y) for x in (a.low, a.high) for y in (b.low, b.high)], False)


def apply_monotone(a: Interval, f, whole: bool) -> Interval:
    return Interval(f(a.low), f(a.high), whole)


def sqrt_bound(x: float) -> float:
    """sqrt at a bound, a negative one read as 0 (sqrt of a negative is NaN,
    which the ranges do not model)."""
    return arithmetic.sqrt(max(x, 0.0))


class RangeEvaluator:
    """Ranges of expressions, given the ranges of the attributes."""

    def __init__(self, program: ir.Program, attributes: list[Interval | None]):
        self.program = program
        self.attributes = attributes

    def pool_cap(self, ref: ir.Ref) -> float:
        return max(pool.cap for pool in self.program.pools[ref.base : ref.base + ref.count])

    def evaluate(self, e: ir.Expr) -> Interval | None:
        """The range of ``e``; None when it reads an attribute with no value yet."""
        if isinstance(e, ir.Num):
            return make_point(e.value)
        if isinstance(e, ir.Attr):
            return self.attributes[e.slot]
        if isinstance(e, ir.Ctx):
            return TEST if e.var == "Decoding" else NON_NEGATIVE
        if isinstance(e, ir.Cost):
            return self.evaluate(e.expr)
        if isinstance(e, ir.Sample):
            return self.evaluate_sample(e)
        if isinstance(e, ir.Call):
            return self.evaluate_call(e)
        if isinstance(e, ir.Unary):
            a = self.evaluate(e.operand)
            if a is None:
                return None
            return negate(a) if e.op == "Neg" else TEST
        if isinstance(e, ir.Binary):
            a, b = self.evaluate(e.left), self.evaluate(e.right)
            if a is None or b is None:
                return None
            return self.evaluate_binary(e.op, a, b)
        assert isinstance(e, ir.Cond)
        test, then, otherwise = self.evaluate(e.test), self.evaluate(e.then), self.evaluate(e.otherwise)
        if test is None or then is None or otherwise is None:
            return None
        if test.low == test.high:
            return then if test.low != 0 else otherwise
        return join(then, otherwise)

    def evaluate_binary(self, op: str, a: Interval, b: Interval) -> Interval:
        if op == "Add":
            return add(a, b)
        if op == "Sub":
            return add(a, negate(b))
        if op == "Mul":
            return multiply(a, b)
        if op == "Div":
            return divide(a, b)
        if op == "Pow":
            return evaluate_power(a, b)
        return TEST

    @staticmethod
    def evaluate_point(f, *args: Interval) -> Interval:
        """``f`` of operands that are each one number: that one value; anything otherwise."""
        if all(a.low == a.high for a in args):
            return make_point(f(*(a.low for a in args)))
        return EVERYTHING

    def evaluate_sample(self, e: ir.Sample) -> Interval | None:
        args = [self.evaluate(a) for a in e.args]
        if any(a is None for a in args):
            return None
        if e.dist == "Det":
            return args[0]
        if e.dist == "Uniform":
            low, high = args
            return Interval(min(low.low, high.low), max(low.high, high.high), False)
        if e.dist == "Bernoulli":
            return TEST
        if e.dist == "Normal":
            return EVERYTHING
        if e.dist == "Empirical":  # one of its values
            return Interval(min(a.low for a in args), max(a.high for a in args), all(a.whole for a in args))
        return NON_NEGATIVE

    def evaluate_call(self, e: ir.Call) -> Interval | None:
        args = [self.evaluate(a.expr) if isinstance(a, ir.ExprArg) else NON_NEGATIVE for a in e.args]
        if any(a is None for a in args):
            return None
        if e.fun == "Min":
            a, b = args
            return Interval(min(a.low, b.low), min(a.high, b.high), a.whole and b.whole)
        if e.fun == "Max":
            a, b = args
            return Interval(max(a.low, b.low), max(a.high, b.high), a.whole and b.whole)
        if e.fun == "Abs":
            a = args[0]
            if a.low >= 0:
                return a
            if a.high <= 0:
                return negate(a)
            return Interval(0.0, max(-a.low, a.high), a.whole)
        if e.fun == "Floor":
            return apply_monotone(args[0], arithmetic.floor, True)
        if e.fun == "Ceil":
            return apply_monotone(args[0], arithmetic.ceil, True)
        if e.fun == "Sqrt":
            return apply_monotone(args[0], sqrt_bound, False)
        if e.fun == "Exp":
            return apply_monotone(args[0], arithmetic.exp, False)
        if e.fun == "Ln":  # increasing; ln(0) = -inf (a negative operand's NaN is not modelled)
            return apply_monotone(args[0], lambda x: arithmetic.ln(max(x, 0.0)), False)
        if e.fun == "Pow":
            return evaluate_power(*args)
        if e.fun in ("Used", "Free", "CachedIn"):
            ref = e.args[0].ref
            return Interval(0.0, self.pool_cap(ref), False)
        if e.fun in ("Holders", "Queued", "Queue"):
            return NON_NEGATIVE_WHOLE
        return NON_NEGATIVE


def evaluate_power(a: Interval, b: Interval) -> Interval:
    """The range of ``a ^ b`` (``pow(a, b)``, IEEE 754 pow: arithmetic.power). Of two constants, its value
    (issue 23: pow(1, 2) was anything, and warned of); else at least 0 when no operands can make it negative
    (issue 23: the digest corpus's `set a = b ^ 2` was any number, and `hold mem (a + 1)` warned of -1):
    a base at least 0 to an exponent at least 0 (a zero base may be -0, whose power is ±0 then), a base
    above 0 to any exponent, or any base to an even whole exponent; anything otherwise. (A negative base to
    a fraction is NaN, which the ranges do not model.)"""
    if a.low == a.high and b.low == b.high:  # a base of 0 may be -0 (0 * -1): (-0)^-1 is -inf, 0^-1 inf
        bases = (a.low, -a.low) if a.low == 0 else (a.low,)
        return span([arithmetic.power(x, b.low) for x in bases], make_point(arithmetic.power(a.low, b.low)).whole)
    even = b.low == b.high and math.isfinite(b.low) and b.low % 2 == 0
    # a whole base to a whole exponent at least 0 is whole (exact below 2^53, every float above it is
    # whole): `pow(z, 2)` of a whole z is an index, whose question then needs no IsInt of Z3's (solver.formulate)
    whole = a.whole and b.whole and b.low >= 0
    if (a.low >= 0 and b.low >= 0) or a.low > 0 or even:
        return NON_NEGATIVE_WHOLE if whole else NON_NEGATIVE
    return Interval(-math.inf, math.inf, True) if whole else EVERYTHING


#: Rounds of plain iteration before an endpoint that still moves is widened.
ROUNDS_BEFORE_WIDENING = 3


def widen(old: Interval | None, new: Interval | None) -> Interval | None:
    if old is None or new is None:
        return new
    low = old.low if new.low >= old.low else -math.inf
    high = old.high if new.high <= old.high else math.inf
    return Interval(low, high, old.whole and new.whole)


def list_builtin_ranges(program: ir.Program) -> dict[int, Interval]:
    """What the machine gives the built-in attributes, whatever the program sets.

    ``cached`` (units consumed from a pool's cache) and ``computed`` (a
    position within a hold's allocation) are at most the largest cap, by the
    memory invariant allocated + cached <= cap (seed 002 §3, Pools)."""
    largest_cap = max((pool.cap for pool in program.pools), default=math.inf)
    within_a_pool = Interval(0.0, largest_cap, False)
    return {
        program.slot_cached: within_a_pool,
        program.slot_computed: within_a_pool if can_compute(program) else make_point(0.0),
        program.slot_serial: count_serials(program),
        program.slot_turn: NON_NEGATIVE_WHOLE,
        program.slot_new: NON_NEGATIVE,
        program.slot_out: NON_NEGATIVE,
        program.slot_think: NON_NEGATIVE,
        program.slot_more: TEST,
        program.slot_forced: TEST,
    }


def start_turn(program: ir.Program) -> Interval:
    """turn_no when a session arrives: 0, or what an explicit session gives it."""
    turn = make_point(0.0)
    if isinstance(program.arrival, ir.Sessions):
        for spec in program.arrival.sessions:
            for slot, value in spec.attrs:
                if slot == program.slot_turn:
                    turn = join(turn, make_point(value))
    return turn


def count_serials(program: ir.Program) -> Interval:
    """The serials a run gives: its sessions are numbered by arrival from 0 (workload/arrive), and a batch,
    the explicit sessions or an open workload's `arrivals N` start so many (issue 23: the digest corpus's
    `arrive batch(1)` with `run gpu[serial + 1]` on a family of 2 was warned that `k` can be 2); a closed
    workload replaces every session that ends, and an open one without a limit arrives for ever."""
    arrival = program.arrival
    count = None
    if isinstance(arrival, ir.Batch):
        count = arrival.n
    elif isinstance(arrival, ir.Sessions):
        count = len(arrival.sessions)
    elif isinstance(arrival, (ir.Poisson, ir.Renewal)) and program.arrivals is not None:
        count = program.arrivals
    if count is None or count < 1:
        return NON_NEGATIVE_WHOLE
    return Interval(0.0, float(count - 1), True)


def can_compute(program: ir.Program) -> bool:
    """Whether some run can set ``computed`` above 0 (seed 002 §3 Pools: a preemption sets it to the
    position the hold had computed). A position starts at the prefix the admission consumed and only a
    `load` (a transfer's too) or a growing run's tokens advance it; a preempted hold caches its position,
    so a session owns a positive prefix on a pool only once a hold with a cache clause has let its
    allocation go otherwise (its body's end, a `release`) and it consumes one only at a later admission of
    a hold with a cache clause. None of that can happen when the program has no load and no growing run,
    and at most one hold with a cache clause, with no `release` in its body, inside no loop and no other
    hold (once its body ends the session never comes back to it): then `computed` is always 0 (issue 23:
    the digest corpus's `hold mem (u - computed)` was warned of `computed` = 3 where every preemption is
    at position 0)."""
    caching = 0
    pending = [(root, False) for root in (program.init, program.turn, program.session)]
    seen: set[int] = set()
    while pending:
        block, enclosed = pending.pop()
        if block in seen or not 0 <= block < len(program.blocks):
            continue
        seen.add(block)
        for stmt in program.blocks[block]:
            if isinstance(stmt, ir.Load) or (isinstance(stmt, ir.Run) and stmt.growing is not None):
                return True
            if isinstance(stmt, ir.Hold) and stmt.cache is not None:
                caching += 1
                if enclosed or caching > 1 or any(isinstance(inner.stmt, ir.Release)
                                                 for inner in visit_block(program, stmt.body)):
                    return True
            inner = enclosed or isinstance(stmt, (ir.Hold, ir.Loop, ir.While))
            pending.extend((child, inner) for child in list_child_blocks(stmt))
    return False


def read_trace_columns(program: ir.Program, smap) -> dict[int, Interval]:
    """The range of each of the trace's columns new, out, think and forced, read
    from the file as a `turn;` will load it (issue 13: "the trace's `new` column
    is never 0"), by slot; none when the program has no trace or the file
    cannot be read here (the run says why; the ranges stay the built-ins')."""
    if program.trace is None:
        return {}
    path = program.trace
    if not os.path.isabs(path):
        path = os.path.join(os.path.dirname(os.path.abspath(smap.file)) if smap.file else os.getcwd(), path)
    from ..errors import RunError
    from ..smallstep.workload import read_trace  # the run's reader: every cell checked as the run checks it

    slots = {"new": program.slot_new, "out": program.slot_out, "think": program.slot_think,
             "forced": program.slot_forced}
    try:
        sessions = read_trace(path)
    except RunError:
        return {}  # the run says where the file is wrong
    rows = [row for session in sessions for row in session]
    values = {name: [row[k] for row in rows] for k, name in enumerate(slots)}
    return {slot: Interval(min(values[name]), max(values[name]), all(v == int(v) for v in values[name]
                                                                       if math.isfinite(v)))
            for name, slot in slots.items()}


def compute_attribute_ranges(program: ir.Program, columns: dict[int, Interval] | None = None) -> tuple[Interval, ...]:
    """Every attribute's range, by slot; ``columns``: the trace's columns as
    the file gives them (``read_trace_columns``), joined with 0, the value a
    column has before the session's first `turn;`."""
    n = len(program.attrs)
    fixed: list[Interval | None] = [None] * n
    builtins = list_builtin_ranges(program)
    for slot, interval in (columns or {}).items():
        builtins[slot] = join(interval, make_point(0.0))
    for slot, interval in builtins.items():
        fixed[slot] = join(fixed[slot], interval)
    if isinstance(program.arrival, ir.Sessions):
        for spec in program.arrival.sessions:
            for slot, value in spec.attrs + tuple(pair for turn in spec.turns or () for pair in turn):
                fixed[slot] = join(fixed[slot], make_point(value))
    assignments: list[list[ir.Expr]] = [[] for _ in range(n)]
    for visit in visit_session(program):
        if isinstance(visit.stmt, ir.Set):
            assignments[visit.stmt.slot].append(visit.stmt.expr)
        if isinstance(visit.stmt, ir.Choose):
            chosen = Interval(0.0, float(visit.stmt.count - 1), True)
            fixed[visit.stmt.var] = join(fixed[visit.stmt.var], chosen)

    ranges: list[Interval | None] = list(fixed)
    rounds = 0
    while True:
        evaluator = RangeEvaluator(program, ranges)
        new = list(fixed)
        for slot in range(n):
            for e in assignments[slot]:
                new[slot] = join(new[slot], evaluator.evaluate(e))
        if rounds >= ROUNDS_BEFORE_WIDENING:
            new = [widen(old, fresh) for old, fresh in zip(ranges, new)]
        if new == ranges:
            break
        ranges = new
        rounds += 1
    return tuple(EVERYTHING if r is None else r for r in ranges)
