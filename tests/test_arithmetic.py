"""One arithmetic (semantics/arithmetic.py, docs/arithmetic.md): the front
end's fold, the linker's fold and the run (both compilations, and the
sample a run observes) give every expression the same value, bit for bit.

The three paths are reached as a program reaches them:

- the fold: ``let x = EXPR;`` compiled, its value the number the lowered
  ``observe v = x;`` reads (a NaN constant does not link: the error says so);
- the linker: ``observe v = EXPR;`` compiled (the front end leaves a session's
  expressions as they are), its IR folded by ``link.constants.evaluate_constant``;
- the run: the same IR by ``ExpressionCompiler.interpret`` (the closures, the
  definition) and ``compile`` (the written-out source), and the value the
  observe records when the program runs.

Values are compared by their bits (struct-packed, so -0.0 is not 0.0); every
NaN is one value. docs/arithmetic.md's table is data here: each row is
checked on every path, and against pyserq (the reference implementation).
"""

from __future__ import annotations

import ast as python_ast
import math
import re
import struct
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from oracle.peer import run_on_pyserq
from semantics import arithmetic, ir
from semantics.compiler import compile_source
from semantics.errors import ProgramError
from semantics.link.constants import evaluate_constant
from semantics.smallstep.driver import run
from semantics.smallstep.values import Env, ExpressionCompiler

ROOT = Path(__file__).resolve().parent.parent

#: A one-session program: one arrival at time 0 observes ``body``'s values.
PROGRAM = """workload {{ arrive poisson(1); }}
session {{
{body}
  end;
}}
run {{ horizon 0.001; }}
"""


def bits(value: float) -> str:
    """A value as the property compares it: NaN, or the double's bytes."""
    return "NaN" if math.isnan(value) else struct.pack("<d", value).hex()


def compile_observes(*expressions: str) -> ir.Program:
    body = "\n".join(f"  observe v{i} = {e};" for i, e in enumerate(expressions))
    program, _ = compile_source(PROGRAM.format(body=body), "arithmetic.sq")
    return program


def evaluate_by_folding(expression: str) -> float:
    """The front end's value of ``expression`` as a ``let``."""
    text = f"let x = {expression};\n" + PROGRAM.format(body="  observe v = x;")
    try:
        program, _ = compile_source(text, "fold.sq")
    except ProgramError as error:
        assert error.message.startswith("let `x` is NaN"), error.message
        return math.nan
    observed = program.blocks[program.session][0].expr
    assert isinstance(observed, ir.Num), observed
    return observed.value


def evaluate_every_way(expression: str) -> dict[str, float]:
    """``expression``'s value on each path, by the path's name."""
    program = compile_observes(expression)
    lowered = program.blocks[program.session][0].expr
    linked = evaluate_constant(lowered)
    assert linked is not None, f"the linker does not fold {expression}"
    compiler = ExpressionCompiler(program, {})
    (sample,) = run(program).observes[0].samples
    return {
        "fold": evaluate_by_folding(expression),
        "link": linked,
        "run, closures": compiler.interpret(lowered)(Env(None)),
        "run, written out": compiler.compile(lowered)(Env(None)),
        "run, observed": sample[3],
    }


def assert_every_path_gives(expression: str, expected: float) -> None:
    values = evaluate_every_way(expression)
    wrong = {path: value for path, value in values.items() if bits(value) != bits(expected)}
    assert not wrong, f"{expression}: expected {expected!r}, got {wrong}"


# --------------------------------------------------------------------------
# The four disagreements issue 8 measured
# --------------------------------------------------------------------------


def test_min_of_nan_and_one_is_one_on_every_path():
    """Was 1 folded, NaN at link and at run (IEEE 754-2019 minimumNumber)."""
    assert_every_path_gives("min(0/0, 1)", 1.0)


def test_min_of_one_and_nan_is_one_on_every_path():
    """Was 1 folded, NaN at link, 1 at run: Python's min depends on the order."""
    assert_every_path_gives("min(1, 0/0)", 1.0)


def test_two_to_the_5000_overflows_to_inf_on_every_path():
    """Was inf folded and at run, NaN at link."""
    assert_every_path_gives("2 ^ 5000", math.inf)


def test_minus_two_to_an_odd_5001_overflows_to_minus_inf_on_every_path():
    """Was inf folded, NaN at link and at run; IEEE pow keeps the sign of an odd power."""
    assert_every_path_gives("(-2) ^ 5001", -math.inf)
    assert_every_path_gives("pow(-2, 5001)", -math.inf)


# --------------------------------------------------------------------------
# The decision table of docs/arithmetic.md, as data
# --------------------------------------------------------------------------


def read_value(text: str) -> float:
    """A value as the table writes it: NaN, inf, -inf, -0 or a number."""
    return math.nan if text == "NaN" else float(text)


def read_decisions() -> list[tuple[str, float, float | None]]:
    """The rows of docs/arithmetic.md's decision table: the expression, its
    value, and pyserq's value (None where pyserq cannot read the row)."""
    rows = []
    text = (ROOT / "docs" / "arithmetic.md").read_text(encoding="utf-8")
    table = text[text.index("## The decisions"):text.index("Decisions that are not values")]
    for line in table.splitlines():
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) != 5 or not cells[1].startswith("`"):
            continue
        expression, value, reference = cells[1].strip("`"), read_value(cells[2].strip("`")), cells[4]
        if reference == "same":
            rows.append((expression, value, value))
        elif reference == "not run":
            rows.append((expression, value, None))
        else:
            rows.append((expression, value, read_value(reference.strip("`"))))
    return rows


DECISIONS = read_decisions()


def test_the_table_has_a_row_for_every_operator_and_function():
    written = " ".join(expression for expression, _, _ in DECISIONS)
    for spelling in ("+", "-", "*", "/", "^", "<", ">=", "==", "!=", "&&", "||", "!", "?", "pow(",
                     "min(", "max(", "abs(", "floor(", "ceil(", "sqrt(", "exp(", "ln("):
        assert spelling in written, spelling
    assert len(DECISIONS) >= 80


def test_every_path_gives_the_documented_value():
    for expression, value, _ in DECISIONS:
        assert_every_path_gives(expression, value)


def test_the_module_gives_the_documented_value():
    """The module alone, on the rows that are one operator or one call of numbers."""
    for expression, value, _ in DECISIONS:
        program = compile_observes(expression)
        assert bits(evaluate_ir(program.blocks[program.session][0].expr)) == bits(value), expression


def evaluate_ir(e: ir.Expr) -> float:
    """An IR expression of numbers, with arithmetic's tables alone."""
    if isinstance(e, ir.Num):
        return e.value
    if isinstance(e, ir.Unary):
        return arithmetic.UNARY[e.op](evaluate_ir(e.operand))
    if isinstance(e, ir.Binary):
        return arithmetic.BINARY[e.op](evaluate_ir(e.left), evaluate_ir(e.right))
    if isinstance(e, ir.Cond):
        return evaluate_ir(e.then if arithmetic.is_true(evaluate_ir(e.test)) else e.otherwise)
    assert isinstance(e, ir.Call), e
    return arithmetic.FUNCTIONS[e.fun](*(evaluate_ir(a.expr) for a in e.args))


def test_the_reference_gives_the_documented_values():
    """pyserq 0.1.6 runs every row it can read; where it differs from the
    decision the table says what it gives (min/max of opposite zeros)."""
    rows = [(expression, theirs) for expression, _, theirs in DECISIONS if theirs is not None]
    report = run_on_pyserq(compile_observes(*(expression for expression, _ in rows)))
    for i, (expression, theirs) in enumerate(rows):
        (value,) = report.observes[f"v{i}"].samples
        assert bits(value) == bits(theirs), f"{expression}: pyserq gives {value!r}, the table says {theirs!r}"


# --------------------------------------------------------------------------
# The property: random expressions, every path, bit for bit
# --------------------------------------------------------------------------

NUMBERS = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, 2.5, 0.1, 1e308, -1e308, 5e-324, -5e-324,
                     math.inf, -math.inf, math.nan, 709.8, -745.2, 5001.0, 1e-300]),
    st.floats(allow_nan=True, allow_infinity=True),
)
BINARY = ["+", "-", "*", "/", "^", "<", "<=", ">", ">=", "==", "!=", "&&", "||"]
UNARY = ["-", "!"]
CALLS_OF_TWO = ["min", "max", "pow"]
CALLS_OF_ONE = ["abs", "floor", "ceil", "sqrt", "exp", "ln"]
AGGREGATES = ["sum", "max", "min"]


def extend(inner):
    """An operator over smaller trees; a tree is a tuple (kind, ...)."""
    return st.one_of(
        st.tuples(st.just("binary"), st.sampled_from(BINARY), inner, inner),
        st.tuples(st.just("unary"), st.sampled_from(UNARY), inner),
        st.tuples(st.just("cond"), inner, inner, inner),
        st.tuples(st.just("call"), st.sampled_from(CALLS_OF_TWO), inner, inner),
        st.tuples(st.just("call"), st.sampled_from(CALLS_OF_ONE), inner),
        st.tuples(st.just("aggregate"), st.sampled_from(AGGREGATES), inner, inner),
    )


TREES = st.recursive(NUMBERS.map(lambda x: ("number", x)), extend, max_leaves=10)


def write_number(x: float) -> str:
    """A double as serQ text that reads back as exactly that double."""
    if math.isnan(x):
        return "(0/0)"
    if math.isinf(x):
        return "inf" if x > 0 else "(-inf)"
    if math.copysign(1.0, x) < 0:
        return f"(-{-x!r})"
    return repr(x)


def write(tree, names: list[int]) -> str:
    """``tree`` as serQ text; each aggregate's index gets a name of its own (j0, j1, ...)."""
    kind = tree[0]
    if kind == "number":
        return write_number(tree[1])
    if kind == "binary":
        return f"({write(tree[2], names)} {tree[1]} {write(tree[3], names)})"
    if kind == "unary":
        return f"({tree[1]}{write(tree[2], names)})"
    if kind == "cond":
        return f"({write(tree[1], names)} ? {write(tree[2], names)} : {write(tree[3], names)})"
    if kind == "call":
        return f"{tree[1]}({', '.join(write(t, names) for t in tree[2:])})"
    assert kind == "aggregate"
    names.append(len(names))
    j = f"j{names[-1]}"  # terms: the first operand at j = 0, the second at j = 1
    return f"({tree[1]} {j} in 2 (({j} == 0) ? {write(tree[2], names)} : {write(tree[3], names)}))"


@settings(max_examples=200, deadline=None)
@given(TREES)
def test_the_fold_the_linker_and_the_run_agree_bit_for_bit(tree):
    expression = write(tree, [])
    values = evaluate_every_way(expression)
    assert len({bits(v) for v in values.values()}) == 1, f"{expression}: {values}"


# --------------------------------------------------------------------------
# The module stands below everything
# --------------------------------------------------------------------------


def test_the_arithmetic_module_imports_nothing_of_the_project():
    tree = python_ast.parse((ROOT / "semantics" / "arithmetic.py").read_text(encoding="utf-8"))
    for node in python_ast.walk(tree):
        if isinstance(node, python_ast.ImportFrom):
            assert node.level == 0 and node.module in ("__future__", "math"), node.module
        if isinstance(node, python_ast.Import):
            assert all(alias.name == "math" for alias in node.names)


def test_min_and_max_do_not_depend_on_the_order_of_their_operands():
    values = [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan]
    for x in values:
        for y in values:
            assert bits(arithmetic.minimum(x, y)) == bits(arithmetic.minimum(y, x)), (x, y)
            assert bits(arithmetic.maximum(x, y)) == bits(arithmetic.maximum(y, x)), (x, y)
