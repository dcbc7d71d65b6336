"""The report's formats: text, JSON, the dump files and the progress bar
(semantics/report.py, semantics/progress.py; SERQ-FACTS.md "CLI and reports",
seed 002 section 3 "Statistics" and "Gauges"). Built from synthetic
RunResults, so that every expected number is computed by hand."""

from __future__ import annotations

import csv
import io
import json
import math
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semantics import SERQ_VERSION
from semantics.errors import UsageError
from semantics.progress import CaseProgress, ProgressBar
from semantics.report import build_report, dumps_json, format_compact, format_text, to_json, write_dump
from semantics.results import GaugeRecord, ObserveRecord, PoolRecord, RunResult, StageRecord, StepStageRecord


def make_result(**changes) -> RunResult:
    """A small run: an observation of 1, 2, 3 (mean 2, sample variance 1, cv2
    1/4, p99 3), a gauge 1 on [0, 10) and 3 on [10, 20] (mean 2), a fifo
    stage and a pool."""
    fields = dict(
        horizon=20.0,
        end=20.0,
        warmup=0.0,
        seed=1,
        events=10,
        arrivals=3,
        ended=3,
        turns=3,
        mean_live=0.5,
        observes=(ObserveRecord("wait", False, ((1.0, 0, 1, 1.0), (2.0, 1, 1, 2.0), (3.0, 2, 1, 3.0))),),
        gauges=(GaugeRecord("busy", ((0.0, 1.0), (10.0, 3.0))),),
        stages=(StageRecord("cpu", None, "fifo", 0.25, 0.25, 3, 0.15, 1 / 3, 2.0),),
        pools=(PoolRecord("kv", None, 12.5, 0.0, 0.0, 0.75, 0.0, 3, 0, 0.0, 0, 0, 0, 0),),
    )
    fields.update(changes)
    return RunResult(**fields)


STEP_STAGE = StepStageRecord(
    "gpu", 1, "step", 3.5, 0.9, 80, 0.0889, math.nan, 10.0,
    iterations=1200, prefill_only=100, decode_only=900, mixed=200, mean_decodes=7.25, empty=0, tokens=51200.0,
    decodes=8700, itl_gaps=(0.025,) * 98 + (0.0625, 0.0625), scheduled=9600, offered=1200 * 512.0, preemptions=5,
    served=("reqs",), memory="kv",
)  # fmt: skip

# --- text --------------------------------------------------------------------

EXPECTED_TEXT = """\
run: horizon 20 end 20 warmup 0 seed 1 events 10 arrivals 3 ended 3 turns 3 mean live 0.500

observe  count    mean  95% CI    cv2     p99
-------  -----  ------  ------  -----  ------
wait         3  2.0000    ±inf  0.250  3.0000

gauge    mean   95% CI     min     max
-----  ------  -------  ------  ------
busy   2.0000  ±0.4802  1.0000  3.0000

stage  number   util  done    thru    wait  service
-----  ------  -----  ----  ------  ------  -------
cpu     0.250  0.250     3  0.1500  0.3333   2.0000

pool  used  cached  queue  holders    wait  admits  evict(n)  evict(u)  preempt  spill  rej  stuck
----  ----  ------  -----  -------  ------  ------  --------  --------  -------  -----  ---  -----
kv    12.5     0.0  0.000    0.750  0.0000       3         0         0        0      0    0      0
"""


def test_text_report_of_a_small_run():
    """The gauge's CI: window means ten 1s and ten 3s, sample variance 20/19,
    half-width t(19) * sqrt(1/19) = 0.48017; fewer than 40 samples: ±inf."""
    assert format_text(build_report(make_result())) == EXPECTED_TEXT


def test_text_columns_are_as_wide_as_their_widest_cell():
    """A first column left-aligned, the others right-aligned, two spaces
    between columns, a rule of '-' as wide as each column."""
    long_name = ObserveRecord("prefill_tokens", False, tuple((float(k), k, 1, 1234567.0) for k in range(3)))
    text = format_text(build_report(make_result(observes=(long_name,))))
    lines = text.split("\n")
    header = lines.index("observe         count          mean  95% CI    cv2           p99")
    assert lines[header + 1] == "--------------  -----  ------------  ------  -----  ------------"
    assert lines[header + 2] == "prefill_tokens      3  1234567.0000    ±inf  0.000  1234567.0000"


def test_first_line_prints_times_compactly():
    assert format_compact(1000.0) == "1000"
    assert format_compact(12.5) == "12.5"
    assert format_compact(0.0) == "0"
    assert format_compact(0.1) == "0.1"
    assert format_compact(math.inf) == "inf"
    text = format_text(build_report(make_result(horizon=1000.0, end=412.25, warmup=12.5)))
    assert text.startswith("run: horizon 1000 end 412.25 warmup 12.5 seed 1 ")


def test_note_for_a_test_that_never_held():
    """seed 002, Statistics: "An observe whose expression is a test ... and that
    was 0 over 40 or more samples gets a line under the table, note: observe
    hit is constant 0 over 5357 samples"."""
    hit = ObserveRecord("hit", True, tuple((float(k), k, 1, 0.0) for k in range(41)))
    ok = ObserveRecord("ok", True, tuple((float(k), k, 1, 1.0) for k in range(41)))
    lines = format_text(build_report(make_result(observes=(hit, ok)))).split("\n")
    at = lines.index("note: observe hit is constant 0 over 41 samples")
    assert lines[at - 2].startswith("hit ") and lines[at - 1].startswith("ok ") and lines[at + 1] == ""
    assert "note: observe ok" not in "\n".join(lines)
    assert lines[at - 2].split()[4] == "nan"  # cv2 of a constant 0


def test_empty_tables_are_left_out():
    text = format_text(build_report(make_result(observes=(), gauges=(), stages=(), pools=())))
    assert text == "run: horizon 20 end 20 warmup 0 seed 1 events 10 arrivals 3 ended 3 turns 3 mean live 0.500\n"


def test_step_stages_add_the_iters_column_and_a_step_table():
    text = format_text(build_report(make_result(stages=make_result().stages + (STEP_STAGE,))))
    lines = text.split("\n")
    assert "stage   number   util  done    thru    wait  service  iters" in lines
    assert "cpu      0.250  0.250     3  0.1500  0.3333   2.0000      -" in lines
    assert "gpu[1]   3.500  0.900    80  0.0889     nan  10.0000   1200" in lines
    step = lines.index("step    prefill only  decode only  mixed  empty  tokens  decodes  itl mean   itl p50   itl p99")
    # the inter-token latency from the gaps: mean 0.02575, p50 0.025, p99 (the 99th of 100 by nearest rank) 0.0625
    assert lines[step + 2] == "gpu[1]           100          900    200      0   51200    7.250  0.025750  0.025000  0.062500"
    assert lines[step - 1] == ""
    # the engine's figures over the run's 20 time units: 51200 / 1200 tokens an iteration, 9600 / 1200 sequences,
    # 51200 of 1200 x 512 budget tokens used, 5 preemptions in 20; util 0.900 gets the saturation note (reqs is no pool
    # of this result: its queue and wait are -)
    engine = lines.index("engine  tokens/iter        batch  budget used  preempt   preempt/s        util  admits from"
                         "       queue    wait")
    assert lines[engine + 1] == "           (tokens)  (seqs/iter)   (fraction)  (count)  (per time)  (fraction)" \
                                "       (pool)  (sessions)  (time)"
    assert lines[engine + 3] == "gpu[1]         42.7         8.00        0.083        5      0.2500       0.900" \
                                "         reqs           -       -"
    assert any(line.startswith("note: step gpu[1]: util 0.900 is the fraction") for line in lines)


def test_without_step_stages_there_is_no_step_table():
    assert "iters" not in format_text(build_report(make_result()))
    assert "prefill only" not in format_text(build_report(make_result()))


def test_pool_explanations_follow_the_pool_table():
    """seed 002, Statistics: the report "names the livelock"."""
    first = ("session 3 rejected: reserve 200 above cap 160", "session 5 stuck")
    stuck = PoolRecord("kv", 0, 10.0, 0.0, 1.0, 1.0, math.nan, 0, 0, 0.0, 4, 0, 1, 1, first, stuck_unfinished=1)
    second = ("session 9 rejected: reserve 300 above cap 160",)
    other = PoolRecord("kv", 1, 10.0, 0.0, 1.0, 1.0, 0.5, 1, 0, 0.0, 0, 0, 0, 0, second)
    lines = format_text(build_report(make_result(pools=(stuck, other)))).rstrip("\n").split("\n")
    assert lines[-3:] == [
        "session 3 rejected: reserve 200 above cap 160",
        "session 5 stuck",
        "session 9 rejected: reserve 300 above cap 160",
    ]
    assert lines[-5].startswith("kv[0]  10.0") and lines[-4].startswith("kv[1]  10.0")


def test_text_is_the_same_bytes_every_time():
    first = format_text(build_report(make_result(stages=(STEP_STAGE,))))
    assert first == format_text(build_report(make_result(stages=(STEP_STAGE,))))
    assert first.endswith("\n")


# --- JSON --------------------------------------------------------------------


def test_json_fields_in_order():
    data = to_json(build_report(make_result(stages=(STEP_STAGE,))))
    assert list(data) == [
        "serq_version", "horizon", "end", "warmup", "seed", "events", "arrivals", "ended", "turns",
        "mean_live", "observes", "gauges", "stages", "pools",
    ]  # fmt: skip
    assert data["serq_version"] == SERQ_VERSION
    assert list(data["observes"]["wait"]) == ["count", "mean", "ci", "cv2", "p99", "not_finite"]
    assert list(data["gauges"]["busy"]) == ["mean", "ci", "min", "max"]
    assert list(data["stages"][0]) == [
        "name", "index", "mean_number", "utilization", "completed", "throughput", "mean_wait",
        "mean_service", "iterations", "prefill_only", "decode_only", "mixed", "mean_decodes",
        "itl_p50", "itl_p99", "empty", "tokens", "decodes", "mean_itl", "tokens_per_iteration", "mean_batch",
        "budget_used", "preemptions", "preemption_rate",
    ]  # fmt: skip
    assert list(data["pools"][0]) == [
        "name", "index", "mean_used", "mean_cached", "mean_queue", "mean_holders", "mean_wait",
        "admissions", "evicted_entries", "evicted_units", "preemptions", "spills", "rejected", "stuck",
        "stuck_unfinished",
    ]  # fmt: skip


def test_json_writes_non_finite_numbers_as_null():
    data = json.loads(dumps_json(build_report(make_result(stages=(STEP_STAGE,)))))
    assert data["observes"]["wait"] == {"count": 3, "mean": 2.0, "ci": None, "cv2": 0.25, "p99": 3.0, "not_finite": 0}
    assert data["stages"][0]["mean_wait"] is None
    assert data["stages"][0]["index"] == 1 and data["stages"][0]["iterations"] == 1200
    assert data["pools"][0]["index"] is None


def test_json_step_figures_are_null_on_other_stages():
    stage = json.loads(dumps_json(build_report(make_result())))["stages"][0]
    assert [stage[key] for key in ("iterations", "prefill_only", "decode_only", "mixed", "itl_p99")] == [None] * 5


def test_json_text_is_indented_and_ends_with_a_newline():
    text = dumps_json(build_report(make_result()))
    assert text.startswith('{\n  "serq_version": ') and text.endswith("}\n")
    assert "NaN" not in text and "Infinity" not in text


# --- dump --------------------------------------------------------------------


def test_dump_writes_samples_and_change_points(tmp_path):
    result = make_result(
        observes=(ObserveRecord("ttft", False, ((0.1 + 0.2, 0, 1, 1 / 3), (2.0, 4, 2, 5.0))),),
        gauges=(GaugeRecord("used", ((0.0, 0.0), (1.5, 16.0))),),
    )
    directory = tmp_path / "deep" / "dump"
    write_dump(result, str(directory))
    assert (directory / "ttft.csv").read_text() == (
        "time,session,turn,value\n0.30000000000000004,0,1,0.3333333333333333\n2.0,4,2,5.0\n"
    )
    assert (directory / "gauge" / "used.csv").read_text() == "time,value\n0.0,0.0\n1.5,16.0\n"
    with open(directory / "ttft.csv", newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert float(rows[0]["time"]) == 0.1 + 0.2 and float(rows[0]["value"]) == 1 / 3


def test_dump_without_gauges_makes_no_gauge_directory(tmp_path):
    write_dump(make_result(gauges=()), str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["wait.csv"]


def test_dump_into_a_file_is_a_usage_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UsageError, match="--dump"):
        write_dump(make_result(), str(blocker / "dump"))


# --- progress bar ------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_draws_nothing_off_a_terminal():
    stream = io.StringIO()
    bar = ProgressBar(stream)
    for step in range(11):
        bar(step / 10)
    bar.close()
    assert stream.getvalue() == ""


def test_progress_bar_draws_on_a_terminal_once_per_percent():
    stream = Terminal()
    bar = ProgressBar(stream)
    bar(0.421)
    bar(0.425)
    bar(2.0)
    assert stream.getvalue() == (
        "\r[################........................]  42%" + "\r[########################################] 100%"
    )
    bar.close()
    assert stream.getvalue().endswith("\r" + " " * 47 + "\r")
    bar(0.5)
    assert stream.getvalue().endswith(" " * 47 + "\r")


def test_case_progress_draws_nothing_off_a_terminal_but_counts():
    stream = io.StringIO()
    with CaseProgress(5000, "oracle check", stream) as bar:
        for _ in range(5000):
            bar.advance()
        assert bar.done == 5000
    assert stream.getvalue() == ""


def test_case_progress_on_a_terminal_shows_cases_done_and_the_time_left():
    stream = Terminal()
    bar = CaseProgress(10, "sweep", stream, unit="point")
    bar.advance(4)
    bar.bar.refresh()
    drawn = stream.getvalue()
    assert "sweep" in drawn and "4/10" in drawn and "point/s" in drawn
    assert "<" in drawn  # tqdm's elapsed<left
    bar.close()
    assert bar.bar is None


# --- properties --------------------------------------------------------------

names = st.from_regex(r"[a-z_][a-z0-9_]{0,14}", fullmatch=True)
figures = st.one_of(st.floats(min_value=-1e9, max_value=1e9), st.just(math.nan), st.just(math.inf))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(names, st.lists(figures, max_size=45)), min_size=1, max_size=4, unique_by=lambda pair: pair[0]),
    st.lists(st.tuples(names, figures, figures), max_size=3),
)
def test_every_table_line_is_as_wide_as_its_rule(observations, stages):
    """Right-aligned last columns: every header and row of a table ends where its rule does."""
    observes = tuple(
        ObserveRecord(name, True, tuple((float(k), k, 1, value) for k, value in enumerate(values)))
        for name, values in observations
    )
    records = tuple(
        StageRecord(name, None, "fifo", number, number, 1, wait, wait, wait) for name, number, wait in stages
    )
    text = format_text(build_report(make_result(observes=observes, stages=records)))
    blocks = text.rstrip("\n").split("\n\n")[1:]
    for block in blocks:
        lines = [line for line in block.split("\n") if not line.startswith("note: ")]
        rule = lines[1]
        assert set(rule) <= {"-", " "}
        assert all(len(line) == len(rule) for line in lines), block
    data = json.loads(dumps_json(build_report(make_result(observes=observes))))  # allow_nan=False: no NaN leaks
    assert list(data["observes"]) == [name for name, _ in observations]
