"""The fast engine's trace reader (semantics/fast/trace.py) against the
definition's (semantics/smallstep/workload.read_trace): on generated trace
files, right ones and wrong ones (shuffled rows, blank lines, spaces, quoted
cells, CRLF line endings, a value out of its range or not a number, a column
missing, a turn twice or missing, an empty file), both give the same sessions
or the same RunError (message, place); and the plain right ones are read
without the definition's reader."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from semantics.errors import RunError
from semantics.fast import trace
from semantics.smallstep import workload

HEADER = "session,turn,new,out,think,forced"


def outcome(read, path: str) -> str:
    try:
        return repr(read(path))
    except RunError as e:
        return f"RunError {e.message!r} span={e.span!r} in_trace={e.in_trace!r}"


@st.composite
def trace_texts(draw):
    """A trace file's text: sessions of turns 1..n, mostly right, sometimes with one of the faults above."""
    rows = []
    for session in range(draw(st.integers(1, 4))):
        for turn in range(1, draw(st.integers(1, 4)) + 1):
            cells = [str(session), str(turn), str(draw(st.integers(0, 3000))), str(draw(st.integers(0, 50))),
                     draw(st.sampled_from(["0", "1.5", "17.86", "0.001", "3"])), draw(st.sampled_from(["0", "1"]))]
            rows.append(cells)
    rows = draw(st.permutations(rows))
    header = HEADER.split(",")
    fault = draw(st.sampled_from([None] * 6 + ["value", "nan", "missing", "twice", "gap", "column", "blank", "space",
                                              "quote", "crlf", "empty", "header-order", "extra"]))
    if fault == "value":
        row, k = draw(st.sampled_from(range(len(rows)))), draw(st.integers(0, 5))
        rows[row][k] = draw(st.sampled_from(["-1", "2.5", "inf", "x", "1e400"]))
    elif fault == "nan":
        rows[0][draw(st.integers(0, 5))] = "nan"
    elif fault == "missing":
        rows[0][draw(st.integers(0, 5))] = " "
    elif fault == "twice":
        rows.append(list(rows[0]))
    elif fault == "gap":
        rows = [r for r in rows if r[1] != "1"] or [["0", "2", "1", "1", "0", "0"]]
    elif fault == "column":
        header = header[:-1]
    elif fault == "space":
        rows[0] = [f" {cell} " for cell in rows[0]]
    elif fault == "quote":
        rows[0] = [f'"{cell}"' for cell in rows[0]]
    elif fault == "header-order":
        order = draw(st.permutations(range(6)))
        header = [header[k] for k in order]
        rows = [[r[k] for k in order] for r in rows]
    elif fault == "extra":
        header = header + ["note"]
        rows = [r + ["x"] for r in rows]
    lines = [",".join(header)] + [",".join(r) for r in rows]
    if fault == "blank":
        lines.insert(draw(st.integers(1, len(lines))), draw(st.sampled_from(["", ",,,,,", "  "])))
    if fault == "empty":
        lines = [",".join(header)]
    ending = "\r\n" if fault == "crlf" else "\n"
    return ending.join(lines) + draw(st.sampled_from([ending, ""])), fault


@settings(max_examples=150, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace_texts())
def test_the_fast_reader_reads_as_the_definition(tmp_path_factory, text_fault):
    text, fault = text_fault
    path = tmp_path_factory.mktemp("trace") / "t.csv"
    path.write_text(text, encoding="utf-8", newline="")
    assert outcome(trace.read, str(path)) == outcome(workload.read_trace, str(path))
    if fault in (None, "header-order", "extra"):  # plain and right: read without the definition's reader
        assert trace._read_plain(str(path)) is not None


def test_the_shared_trace_is_read_plain_and_as_the_definition_reads_it():
    from oracle.replay import ROOT

    path = ROOT.parent / "shared" / "traces" / "short_base.csv"
    if not path.exists():
        pytest.skip("the shared traces are not beside the repository")
    plain = trace._read_plain(str(path))
    assert plain is not None and repr(plain) == repr(workload.read_trace(str(path)))


def test_a_file_that_cannot_be_read_is_the_definitions_error(tmp_path):
    assert outcome(trace.read, str(tmp_path / "none.csv")) == outcome(workload.read_trace, str(tmp_path / "none.csv"))
    bad = tmp_path / "bad.csv"
    bad.write_bytes(HEADER.encode() + b"\n0,1,\xff,1,0,0\n")
    assert outcome(trace.read, str(bad)).startswith("RunError")
    assert outcome(trace.read, str(bad)) == outcome(workload.read_trace, str(bad))
