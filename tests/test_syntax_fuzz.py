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
