"""The arithmetic of serQ expressions: every operator and pure function of
seed 002 §2 (Expressions) on Python floats, defined once.

A serQ number is an IEEE 754 binary64 value (a Python float, the reference
implementation's Rust f64). Three parts of serq-ref evaluate expressions and
all three call this module: the front end's constant folding of the AST
(``syntax/constants.py``), the linker's folding of IR constants
(``link/constants.py``) and the run (``smallstep/values.py``, both of its
compilations). It imports nothing of the project, so every layer may.

Each edge case is decided here once, by IEEE 754-2019 first and by the
reference implementation (pyserq 0.1.6) where IEEE leaves a choice;
``docs/arithmetic.md`` is the table of decisions with their sources, and
tests/test_arithmetic.py checks that the fold, the linker and the run agree
bit for bit.

Results of operators that test (comparisons, ``&&``, ``||``, ``!``) are 0.0
or 1.0; an operand is true when it is not zero (NaN is true: NaN != 0).

Inline forms. Where speed matters the run writes an operator as a Python
expression instead of calling its function here; each such form is equal to
the definition, value for value, for float operands:

=====================================  ========================================
written form                           definition
=====================================  ========================================
``a + b``, ``a - b``, ``a * b``        ``add``, ``subtract``, ``multiply``:
                                       Python's float operators are IEEE 754
                                       binary64, rounding to nearest, and never
                                       raise (overflow is ±inf, inf - inf and
                                       0 * inf are NaN)
``-a``                                 ``negate``
``(1.0 if a < b else 0.0)`` and the    ``less``, ``less_or_equal``,
same with ``<= > >= == !=``            ``greater``, ``greater_or_equal``,
                                       ``equal``, ``not_equal`` (Python's float
                                       comparisons are IEEE 754's)
``a != 0.0`` (a guard, ``c ? x : y``)  ``is_true``
``(0.0 if a != 0.0 else 1.0)``         ``logical_not``
``(truth(b) if a != 0.0 else 0.0)``    ``logical_and(a, b)``, evaluating ``b``
                                       only when ``a`` is true
``(1.0 if a != 0.0 else truth(b))``    ``logical_or(a, b)``, evaluating ``b``
                                       only when ``a`` is false
=====================================  ========================================

Division, ``^`` and every function are always calls of this module: Python's
own ``/``, ``**``, ``math.pow``, ``math.exp``, ``math.log``, ``math.sqrt``
raise where IEEE 754 gives a value, and ``math.floor``/``math.ceil`` return
an integer, which loses -0.0.
"""

from __future__ import annotations

import math

# --------------------------------------------------------------------------
# Truth
# --------------------------------------------------------------------------


def is_true(x: float) -> bool:
    """A number as a truth value: anything but ±0 is true, NaN included (seed
    002 §2: "a non-zero operand is true")."""
    return x != 0.0


def truth(x: float) -> float:
    """``x`` as a test's value: 1.0 when true, 0.0 when not."""
    return 1.0 if x != 0.0 else 0.0


def logical_not(x: float) -> float:
    """``!x``: 1.0 when ``x`` is ±0, else 0.0 (``!NaN`` is 0)."""
    return 0.0 if x != 0.0 else 1.0


def logical_and(x: float, y: float) -> float:
    """``x && y``: 1.0 when both are true. (Evaluation short-circuits; the
    value does not depend on it.)"""
    return 1.0 if x != 0.0 and y != 0.0 else 0.0


def logical_or(x: float, y: float) -> float:
    """``x || y``: 1.0 when either is true."""
    return 1.0 if x != 0.0 or y != 0.0 else 0.0


# --------------------------------------------------------------------------
# Comparisons (IEEE 754 §5.11: NaN is unordered, so every comparison with it
# is false except !=; -0 == +0)
# --------------------------------------------------------------------------


def less(x: float, y: float) -> float:
    """``x < y`` as 0 or 1."""
    return 1.0 if x < y else 0.0


def less_or_equal(x: float, y: float) -> float:
    """``x <= y`` as 0 or 1."""
    return 1.0 if x <= y else 0.0


def greater(x: float, y: float) -> float:
    """``x > y`` as 0 or 1."""
    return 1.0 if x > y else 0.0


def greater_or_equal(x: float, y: float) -> float:
    """``x >= y`` as 0 or 1."""
    return 1.0 if x >= y else 0.0


def equal(x: float, y: float) -> float:
    """``x == y`` as 0 or 1 (NaN == NaN is 0; -0 == 0 is 1)."""
    return 1.0 if x == y else 0.0


def not_equal(x: float, y: float) -> float:
    """``x != y`` as 0 or 1 (NaN != NaN is 1)."""
    return 1.0 if x != y else 0.0


# --------------------------------------------------------------------------
# Arithmetic (IEEE 754 §5.4.1, rounding to nearest)
# --------------------------------------------------------------------------


def negate(x: float) -> float:
    """``-x``: the sign flipped (``-0`` is -0.0)."""
    return -x


def add(x: float, y: float) -> float:
    """``x + y``: overflow is ±inf; inf + -inf is NaN; -0 + +0 is +0."""
    return x + y


def subtract(x: float, y: float) -> float:
    """``x - y``: inf - inf is NaN; 0 - 0 is +0."""
    return x - y


def multiply(x: float, y: float) -> float:
    """``x * y``: 0 * inf is NaN; the sign of a zero product is the xor of
    the signs (``0 * -1`` is -0.0)."""
    return x * y


def divide(x: float, y: float) -> float:
    """``x / y``: a non-zero ``x`` over ±0 is ±inf, the sign the xor of the
    signs (IEEE 754 §7.3, division by zero); 0/0 and NaN/0 are NaN (§7.2);
    inf / inf is NaN."""
    if y == 0.0:
        if x == 0.0 or x != x:
            return math.nan
        return math.copysign(math.inf, x) * math.copysign(1.0, y)
    return x / y


def is_odd_integer(y: float) -> bool:
    """Whether ``y`` is a finite odd integer (every double of magnitude 2^53
    or more is even)."""
    return math.isfinite(y) and y == math.floor(y) and math.fmod(y, 2.0) != 0.0


def power(x: float, y: float) -> float:
    """``x ^ y`` and ``pow(x, y)``: IEEE 754 §9.2.1 pow (C99 Annex F pow,
    which Rust's ``f64::powf`` calls). Overflow is ±inf, negative when ``x``
    is negative and ``y`` an odd integer (``(-2)^5001`` is -inf); underflow
    is ±0; ``(±0)^y`` for ``y < 0`` is +inf, or ±inf for an odd integer ``y``;
    a negative finite ``x`` to a finite non-integer ``y`` is NaN;
    ``x^0`` is 1 and ``1^y`` is 1, NaN included."""
    try:
        return math.pow(x, y)
    except OverflowError:  # a finite x and y whose power is beyond the largest double
        return -math.inf if x < 0.0 and is_odd_integer(y) else math.inf
    except ValueError:  # a pole (x = ±0, y < 0) or no real result (x < 0, y not an integer)
        if x == 0.0:
            return -math.inf if math.copysign(1.0, x) < 0.0 and is_odd_integer(y) else math.inf
        return math.nan


# --------------------------------------------------------------------------
# Functions
# --------------------------------------------------------------------------


def minimum(x: float, y: float) -> float:
    """``min(x, y)``: IEEE 754-2019 §9.6 minimumNumber. A NaN operand gives
    the other (as Rust's ``f64::min``); -0 is below +0, so the result does
    not depend on the order of the operands."""
    if x != x:
        return y
    if y != y:
        return x
    if x == y:  # equal: only the sign of a zero can tell them apart
        return x if math.copysign(1.0, x) < 0.0 else y
    return x if x < y else y


def maximum(x: float, y: float) -> float:
    """``max(x, y)``: IEEE 754-2019 §9.6 maximumNumber. A NaN operand gives
    the other (as Rust's ``f64::max``); +0 is above -0."""
    if x != x:
        return y
    if y != y:
        return x
    if x == y:
        return x if math.copysign(1.0, x) > 0.0 else y
    return x if x > y else y


def absolute(x: float) -> float:
    """``abs(x)``: IEEE 754 §5.5.1 abs, the sign cleared (``abs(-0)`` is +0,
    ``abs(-inf)`` is inf, ``abs(NaN)`` is NaN)."""
    return math.fabs(x)


def floor(x: float) -> float:
    """``floor(x)``: IEEE 754 §5.9 roundToIntegralTowardNegative. ±inf and
    NaN are themselves; the result has the sign of ``x`` (``floor(-0)`` is
    -0.0)."""
    if not math.isfinite(x):
        return x
    return math.copysign(float(math.floor(x)), x)


def ceil(x: float) -> float:
    """``ceil(x)``: IEEE 754 §5.9 roundToIntegralTowardPositive. ±inf and
    NaN are themselves; the result has the sign of ``x`` (``ceil(-0.5)`` is
    -0.0)."""
    if not math.isfinite(x):
        return x
    return math.copysign(float(math.ceil(x)), x)


def sqrt(x: float) -> float:
    """``sqrt(x)``: IEEE 754 §5.4.1 squareRoot. ``sqrt(-0)`` is -0.0; a
    negative ``x`` (-inf included) is NaN; ``sqrt(inf)`` is inf."""
    return math.sqrt(x) if x >= 0.0 else math.nan


def exp(x: float) -> float:
    """``exp(x)``: IEEE 754 §9.2 exp. Overflow (``x`` above about 709.78) is
    inf; ``exp(-inf)`` is 0; ``exp(NaN)`` is NaN."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def ln(x: float) -> float:
    """``ln(x)``: IEEE 754 §9.2 log. ``ln(±0)`` is -inf; a negative ``x``
    (-inf included) is NaN; ``ln(inf)`` is inf; ``ln(NaN)`` is NaN."""
    if x > 0.0:
        return math.log(x)
    if x == 0.0:
        return -math.inf
    return math.nan


# --------------------------------------------------------------------------
# By the IR's names (FORMAT.md: Binary, Unary, Call)
# --------------------------------------------------------------------------

#: The binary operators, by the IR's operator name.
BINARY = {
    "Add": add,
    "Sub": subtract,
    "Mul": multiply,
    "Div": divide,
    "Pow": power,
    "Lt": less,
    "Le": less_or_equal,
    "Gt": greater,
    "Ge": greater_or_equal,
    "Eq": equal,
    "Ne": not_equal,
    "And": logical_and,
    "Or": logical_or,
}

#: The unary operators, by the IR's operator name.
UNARY = {"Neg": negate, "Not": logical_not}

#: The pure functions (functions of numbers alone), by the IR's function name.
FUNCTIONS = {
    "Min": minimum,
    "Max": maximum,
    "Pow": power,
    "Abs": absolute,
    "Floor": floor,
    "Ceil": ceil,
    "Sqrt": sqrt,
    "Exp": exp,
    "Ln": ln,
}


# -- the draws' arguments ----------------------------------------------------------------------


def describe_draw_problem(dist: str, args) -> str | None:
    """Why ``~dist(args)`` has no value, or None (issue 23: ``branch with
    (1.5)`` was always taken, ``~exp(-1)`` drew negative times, silently).
    Each argument has the values its distribution is defined for: a
    probability from 0 to 1 (bernoulli; ``branch with (p)`` draws it); a mean
    finite and 0 or more (exp, erlang, h2); an Erlang phase count a whole
    number, at least 1; an h2 squared coefficient of variation finite and at
    least 1 (a hyperexponential's); uniform bounds finite, lo at most hi. An
    argument None is not known (the linker checks the constant ones, the run
    every one as it draws). ``det`` takes any number. serq-ref's extension
    (docs/design/draws.md): a lognormal's mean finite and above 0, its cv
    finite and 0 or more; a normal's mean finite, its sd finite and 0 or
    more."""

    def known(i: int) -> bool:
        return len(args) > i and args[i] is not None

    def mean(i: int, name: str) -> str | None:
        if known(i) and not 0 <= args[i] < math.inf:
            return f"~{name}'s mean is {args[i]:g}: a mean is a finite number, 0 or more"
        return None

    if dist == "Bernoulli":
        if known(0) and not 0 <= args[0] <= 1:
            return f"~bernoulli's probability is {args[0]:g} (branch with (p) draws ~bernoulli(p)): a probability " \
                   "is from 0 to 1"
        return None
    if dist == "Exp":
        return mean(0, "exp")
    if dist == "Erlang":
        if known(0) and not (1 <= args[0] < math.inf and args[0] == math.floor(args[0])):
            return f"~erlang's phase count k is {args[0]:g}: a whole number, at least 1"
        return mean(1, "erlang")
    if dist == "H2":
        if known(1) and not 1 <= args[1] < math.inf:
            return f"~h2's squared coefficient of variation is {args[1]:g}: a hyperexponential's is finite and at " \
                   "least 1"
        return mean(0, "h2")
    if dist == "Lognormal":
        if known(0) and known(1) and not (0.0 < args[0] < math.inf and 0.0 <= args[1] < math.inf):
            return f"~lognormal(mean, cv) is ~lognormal({args[0]:g}, {args[1]:g}): the mean must be a finite number " \
                   "above 0 and the coefficient of variation cv a finite number at least 0"
        if known(0) and not 0.0 < args[0] < math.inf:
            return f"~lognormal's mean is {args[0]:g}: the mean must be a finite number above 0"
        if known(1) and not 0.0 <= args[1] < math.inf:
            return f"~lognormal's cv is {args[1]:g}: the coefficient of variation must be a finite number at least 0"
        return None
    if dist == "Normal":
        if known(0) and known(1) and not (math.isfinite(args[0]) and 0.0 <= args[1] < math.inf):
            return f"~normal(mean, sd) is ~normal({args[0]:g}, {args[1]:g}): the mean must be finite and the " \
                   "standard deviation sd a finite number at least 0"
        if known(0) and not math.isfinite(args[0]):
            return f"~normal's mean is {args[0]:g}: the mean must be finite"
        if known(1) and not 0.0 <= args[1] < math.inf:
            return f"~normal's sd is {args[1]:g}: the standard deviation must be a finite number at least 0"
        return None
    if dist == "Uniform":
        for i, name in ((0, "lower"), (1, "upper")):
            if known(i) and not math.isfinite(args[i]):
                return f"~uniform's {name} bound is {args[i]:g}: a bound is a finite number"
        if known(0) and known(1) and not args[0] <= args[1]:
            return f"~uniform's bounds are {args[0]:g} and {args[1]:g}: the lower is at most the upper"
        return None
    return None
