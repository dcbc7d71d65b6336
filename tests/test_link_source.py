"""The linker on programs written in serQ's own syntax: each check trips at the
statement's line, and the example programs link.

Compiled with ``semantics.compiler.compile_source`` (the front end), then
linked with the SourceMap it fills, as ``serq-ref check`` does.
"""

from __future__ import annotations

import glob
import os

import pytest

from semantics.errors import ProgramError, Span, render
from semantics.link import link

from semantics import compiler  # noqa: E402

HEAD = """pool kv { cap 100; block 16; }
stage gpu : fifo;
stage engine : step { budget 64; cost 1; memory kv; }
workload { arrive poisson(1); %s }
"""
TAIL = "\nrun { horizon 10; warmup 0; seed 1; }\n"


def compile_program(session: str, workload: str = "", pool_options: str = ""):
    text = (HEAD % workload).replace("block 16;", "block 16; " + pool_options) + session + TAIL
    return text, compiler.compile_source(text, "t.sq")


def link_error(session: str, workload: str = "", pool_options: str = "") -> tuple[str, ProgramError]:
    text, (program, smap) = compile_program(session, workload, pool_options)
    with pytest.raises(ProgramError) as caught:
        link(program, smap)
    return text, caught.value


def test_a_context_variable_in_a_session_set_is_an_error_at_its_line():
    # seed 002 §2: "set x = tokens; in a session ... does not link"
    text, error = link_error("session {\n  set x = tokens;\n  end;\n}")
    assert error.span.line == 6
    assert render(error, text).splitlines()[0] == (
        "t.sq:6:3: error: `tokens` is read in a session statement; it exists only in a step stage's cost"
    )


def test_a_context_variable_in_an_eviction_key_is_an_error_at_the_pool():
    # seed 002 §2: "or evict by (tokens), does not link"
    _, error = link_error("session {\n  run gpu (1);\n  end;\n}", pool_options="evict by (tokens);")
    assert error.span.line == 1
    assert error.message == "`tokens` is read in pool `kv`'s eviction keys; it exists only in a step stage's cost"


def test_a_hidden_output_length_in_a_hold_header_is_an_error():
    # seed 002 §3 hidden: "reserve (prompt + o) is a program vLLM cannot be"
    _, error = link_error("session {\n  set o = 3;\n  hold kv (o) {\n    run gpu (1);\n  }\n  end;\n}", workload="hidden o;")
    assert error.span.line == 7
    assert error.message.startswith("`o` is hidden, and the scheduler reads it here")


def test_cached_in_a_hold_without_cache_is_an_error_at_the_reading_statement():
    _, error = link_error("session {\n  hold kv (5) {\n    run gpu (cached);\n  }\n  end;\n}")
    assert error.span.line == 7
    assert "which has no `cache` clause" in error.message


def test_a_stale_lookup_is_an_error_at_the_set_naming_the_hold_line():
    session = "session {\n  set hit = cachedin(kv);\n  hold kv (hit + 1) {\n    run gpu (1);\n  } cache (8);\n  end;\n}"
    _, error = link_error(session)
    assert error.span.line == 6
    assert "in the header of a hold on `kv` (line 7)" in error.message


def test_a_constant_probability_guard_is_an_error():
    _, error = link_error("session {\n  branch (0.5) { run gpu (1); }\n  end;\n}")
    assert error.message.endswith("Write `branch with (0.5)` for a draw")


def test_a_plain_run_on_a_step_engine_is_an_error():
    _, error = link_error("session {\n  run engine (5);\n  end;\n}")
    assert error.span == Span("t.sq", 6, 3, error.span.end_col)
    assert error.message.startswith("`run engine` on a step stage needs a mode")


def test_a_guard_that_can_be_other_than_0_or_1_is_a_warning_at_the_branch():
    _, (program, smap) = compile_program("session {\n  set o = ~uniform(0, 4);\n  branch (o - 1) { run gpu (1); }\n"
                                         "  end;\n}")
    warnings = link(program, smap)
    assert [(w.span.line, w.message) for w in warnings] == [
        (7, "the guard of this branch can be -1 when `o` = 0, which is neither 0 nor 1 (a run-time error); write "
            "`branch with (p)` for a draw")]


@pytest.mark.parametrize("rate", ["0", "-1", "inf"])
def test_a_poisson_rate_that_is_not_positive_and_finite_is_an_error_at_the_arrival(rate):
    """Seed 002 §3 Workload: poisson(rate) draws exponential gaps of mean
    1/rate; a rate of 0 would divide by zero and a negative one run time backwards."""
    text = f"stage gpu : fifo;\nworkload {{ arrive poisson({rate}); }}\nsession {{ run gpu (1); }}" + TAIL
    program, smap = compiler.compile_source(text, "t.sq")
    with pytest.raises(ProgramError) as caught:
        link(program, smap)
    assert caught.value.span.line == 2 and caught.value.span.col == 12
    assert caught.value.message.startswith(f"arrive poisson: the rate is {rate}; a rate of arrivals is a positive")


EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")
#: example programs, not libraries (a library holds definitions only)
EXAMPLE_FILES = sorted(p for p in glob.glob(os.path.join(EXAMPLES, "*", "*.sq")) if os.sep + "lib" + os.sep not in p)


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=[os.path.basename(p) for p in EXAMPLE_FILES])
def test_an_example_program_links_without_error(path):
    program, smap = compiler.compile_file(path)
    link(program, smap)
