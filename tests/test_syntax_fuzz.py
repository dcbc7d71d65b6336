"""Property: whatever text the front end is given, it either compiles or
raises ProgramError (a located message), never anything else (the brief:
"Errors a user can cause are ProgramError ... never a Python traceback")."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from semantics.compiler import compile_source
from semantics.errors import ProgramError

WORDS = (
    "let use def pool stage workload session server queue run share gauge pull cap block evict lru by preempt none "
    "lifo fifo admit via spill when ps delay step budget cost chunk serve admission decode first exclusive prefill "
    "memory arrive poisson renewal closed batch trace ordered init turn hidden request set observe hold reserve "
    "reuse at cache lease grow drop release load growing branch with else loop choose in end mark transfer tool on "
    "from to horizon warmup seed arrivals maxmin bottleneck nic latency kv reqs E s x y n o prompt now inf max min "
    "sum used free queued budget_left cachedin serial cached computed present self"
).split()
SYMBOLS = list("{}()[];,.=:+-*/^<>!?~") + ["==", "!=", "<=", ">=", "&&", "||", "//", "\n", '"f.sq"']
NUMBERS = ["0", "1", "2", "0.5", "1e3", "16"]

tokens = st.lists(st.sampled_from(WORDS + SYMBOLS + NUMBERS), max_size=60).map(" ".join)
EXAMPLE = (Path(__file__).resolve().parent.parent / "examples" / "oracle" / "vllm_request.sq").read_text()


def compiles_or_explains(text: str) -> None:
    try:
        compile_source(text, "fuzz.sq")
    except ProgramError as error:
        assert error.message
        assert error.span is None or error.span.line >= 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tokens)
def test_token_soup_is_a_program_or_a_program_error(text: str) -> None:
    compiles_or_explains(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(EXAMPLE)), st.integers(0, 40), st.text(max_size=8))
def test_a_mutated_program_is_a_program_or_a_program_error(start: int, length: int, insert: str) -> None:
    compiles_or_explains(EXAMPLE[:start] + insert + EXAMPLE[start + length:])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=80))
def test_any_text_is_a_program_or_a_program_error(text: str) -> None:
    compiles_or_explains(text)


CONSTANT_LEAVES = st.sampled_from(["0", "1", "2.5", "inf", "1e308", "-1", "B"])


def combine_constants(children):
    binary = st.tuples(children, st.sampled_from(["+", "-", "*", "/", "^", "<", "==", "&&", "||"]), children).map(
        lambda t: f"({t[0]} {t[1]} {t[2]})")
    unary = st.tuples(st.sampled_from(["floor", "ceil", "sqrt", "exp", "ln", "abs", "-", "!"]), children).map(
        lambda t: f"{t[0]}({t[1]})")
    pair = st.tuples(st.sampled_from(["min", "max", "pow"]), children, children).map(
        lambda t: f"{t[0]}({t[1]}, {t[2]})")
    condition = st.tuples(children, children, children).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})")
    aggregate = st.tuples(st.sampled_from(["max", "min", "sum"]), children).map(
        lambda t: f"{t[0]} k in 3 (k * {t[1]})")
    return binary | unary | pair | condition | aggregate


constant_expressions = st.recursive(CONSTANT_LEAVES, combine_constants, max_leaves=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(constant_expressions)
def test_any_constant_folds_to_a_number_or_a_program_error(text: str) -> None:
    """Seed 002: "Every constant ... is a number or inf; one that evaluates to NaN ... does not link"."""
    source = f"let B = 2;\nlet x = {text};\npool kv {{ cap x; }}\nrun {{ horizon 1; }}"
    try:
        program, _ = compile_source(source, "const.sq")
    except ProgramError as error:
        assert "NaN" in error.message or "negative" in error.message or "must" in error.message, error.message
        return
    assert program.pools[0].cap == program.pools[0].cap  # never NaN


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(constant_expressions, st.sampled_from(["pool", "stage", "queue", "count"]))
def test_any_constant_index_or_count_is_checked(text: str, place: str) -> None:
    """A constant index out of range, or a count that is not a whole number, is a ProgramError."""
    body = {
        "pool": f"session {{ hold kv[{text}] (1) {{ end; }} }}",
        "stage": f"session {{ run s[{text}] (1); }}",
        "queue": f"session {{ Q[{text}].prefill (1); }}",
        "count": f"gauge g = sum k in ({text}) (used(kv[0]));",
    }[place]
    source = ("let B = 2;\npool kv[3] { }\nstage s[3] : fifo;\nqueue Q[2] : prefill { serve fifo; prefill (w) { run (w); } }\n"
              + body + "\nrun { horizon 1; }")
    compiles_or_explains(source)
