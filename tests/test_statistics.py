"""The statistics of a report, checked on examples computed by hand
(semantics/statistics.py; seed 002, section 3, "Statistics" and "Gauges")."""

from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semantics.results import GaugeRecord, ObserveRecord
from semantics.statistics import (
    batch_means_ci,
    calculate_cv2,
    calculate_quantile,
    calculate_student_t_quantile,
    summarize_gauge,
    summarize_observe,
)

#: Student's t 97.5 % quantiles from published tables (6 decimals and more).
T_975 = {1: 12.706205, 2: 4.302653, 5: 2.570582, 10: 2.228139, 19: 2.093024, 30: 2.042272, 120: 1.979930}


def make_observe(values, is_test=False, name="x"):
    return ObserveRecord(name, is_test, tuple((float(k), k, 1, float(v)) for k, v in enumerate(values)))


# --- Student's t -----------------------------------------------------------


@pytest.mark.parametrize("freedom", sorted(T_975))
def test_student_t_quantile_matches_the_table(freedom):
    assert calculate_student_t_quantile(0.975, freedom) == pytest.approx(T_975[freedom], abs=1e-6)


def test_student_t_quantile_tends_to_the_normal():
    assert calculate_student_t_quantile(0.975, 10**6) == pytest.approx(1.959964, abs=1e-5)


# --- mean, cv2, p99 ----------------------------------------------------------


def test_p99_of_1_to_100_is_99_by_nearest_rank():
    """Nearest rank: the ceil(0.99 * 100) = 99th smallest value."""
    values = [float(k) for k in range(1, 101)]
    assert calculate_quantile(values, 0.99) == 99.0
    shuffled = values[:]
    random.Random(3).shuffle(shuffled)
    assert calculate_quantile(shuffled, 0.99) == 99.0


def test_p99_of_few_samples_is_the_largest():
    assert calculate_quantile([5.0, 1.0, 3.0], 0.99) == 5.0
    assert calculate_quantile([2.0], 0.99) == 2.0
    assert math.isnan(calculate_quantile([], 0.99))


def test_p99_ranks_nan_last():
    assert calculate_quantile([math.nan] + [float(k) for k in range(1, 100)], 0.99) == 99.0


def test_cv2_is_the_sample_variance_over_the_squared_mean():
    """1, 2, 3, 4: mean 2.5, sample variance 5/3, cv2 = (5/3) / 6.25."""
    assert calculate_cv2([1.0, 2.0, 3.0, 4.0]) == pytest.approx((5 / 3) / 6.25, rel=1e-15)
    assert calculate_cv2([2.0, 2.0, 2.0]) == 0.0


def test_cv2_is_nan_at_mean_zero_or_below_two_samples():
    """seed 002, Statistics: a test that never held has cv2 NaN (its mean is 0)."""
    assert math.isnan(calculate_cv2([-1.0, 1.0]))
    assert math.isnan(calculate_cv2([0.0] * 50))
    assert math.isnan(calculate_cv2([3.0]))
    assert math.isnan(calculate_cv2([]))


def test_mean_does_not_depend_on_the_order_of_samples():
    values = [0.1] * 10 + [1e16, -1e16]
    forward = summarize_observe(make_observe(values)).mean
    backward = summarize_observe(make_observe(values[::-1])).mean
    assert forward == backward == pytest.approx(1.0 / 12, rel=1e-15)


# --- batch means -------------------------------------------------------------


def test_batch_means_is_infinite_below_40_samples():
    assert batch_means_ci([1.0, 2.0] * 19 + [1.0]) == math.inf
    assert batch_means_ci([]) == math.inf


def test_batch_means_of_a_known_sequence():
    """0..39 in 20 batches of 2: batch means 0.5, 2.5, ..., 38.5, whose sample
    variance is 2**2 * 20 * 21 / 12 = 140; half-width t(19) * sqrt(140 / 20)."""
    values = [float(k) for k in range(40)]
    assert batch_means_ci(values) == pytest.approx(2.093024054 * math.sqrt(7.0), rel=1e-9)


def test_batch_means_leaves_the_remainder_out_of_the_batches():
    """45 values in 20 batches of 2: the last 5 are in no batch."""
    values = [float(k) for k in range(40)]
    assert batch_means_ci(values + [1e9] * 5) == batch_means_ci(values)


def test_batch_means_of_a_constant_is_zero():
    assert batch_means_ci([4.0] * 100) == 0.0


def test_batch_means_with_other_batch_counts():
    """0..39 in 10 batches of 4: means 1.5, 5.5, ..., 37.5, variance
    4**2 * 10 * 11 / 12; half-width t(9) * sqrt(variance / 10)."""
    values = [float(k) for k in range(40)]
    t9 = 2.262157163
    assert batch_means_ci(values, 10) == pytest.approx(t9 * math.sqrt(16 * 11 / 12), rel=1e-9)
    assert batch_means_ci(values, 1) == math.inf


# --- observations ------------------------------------------------------------


def test_summarize_observe_gathers_the_figures():
    summary = summarize_observe(make_observe(range(1, 101), name="lat"))
    assert (summary.name, summary.count, summary.mean, summary.p99) == ("lat", 100, 50.5, 99.0)
    assert summary.cv2 == pytest.approx((100 * 101 / 12) / 50.5**2, rel=1e-12)
    assert math.isfinite(summary.ci) and summary.ci > 0


def test_summarize_observe_without_samples():
    summary = summarize_observe(make_observe([]))
    assert summary.count == 0 and math.isnan(summary.mean) and summary.ci == math.inf
    assert math.isnan(summary.cv2) and math.isnan(summary.p99) and not summary.constant_zero


def test_constant_zero_needs_a_test_and_40_zeros():
    """seed 002, Statistics: "An observe whose expression is a test ... and that
    was 0 over 40 or more samples gets a line under the table"; "A test that
    always held is not noted"."""
    assert summarize_observe(make_observe([0.0] * 40, is_test=True)).constant_zero
    assert not summarize_observe(make_observe([0.0] * 39, is_test=True)).constant_zero
    assert not summarize_observe(make_observe([0.0] * 40, is_test=False)).constant_zero
    assert not summarize_observe(make_observe([0.0] * 39 + [1.0], is_test=True)).constant_zero
    assert not summarize_observe(make_observe([1.0] * 40, is_test=True)).constant_zero


# --- gauges ------------------------------------------------------------------


def test_gauge_time_average_of_a_step_function():
    """0 on [0, 1), 2 on [1, 3), 5 from 3, measured on [1, 4]: (2*2 + 5*1) / 3 = 3;
    the least and greatest values held in the span are 2 and 5."""
    summary = summarize_gauge(GaugeRecord("g", ((0.0, 0.0), (1.0, 2.0), (3.0, 5.0))), 1.0, 4.0)
    assert summary.mean == pytest.approx(3.0, rel=1e-15)
    assert (summary.min, summary.max) == (2.0, 5.0)


def test_gauge_value_before_warmup_holds_into_the_span():
    """4 from 0, 6 from 10, measured on [5, 15]: (4*5 + 6*5) / 10 = 5."""
    summary = summarize_gauge(GaugeRecord("g", ((0.0, 4.0), (10.0, 6.0))), 5.0, 15.0)
    assert summary.mean == 5.0 and (summary.min, summary.max) == (4.0, 6.0)


def test_gauge_extremes_ignore_a_value_held_for_no_time():
    """seed 002, Gauges: "the least and greatest value held for a positive time"."""
    summary = summarize_gauge(GaugeRecord("g", ((0.0, 1.0), (2.0, 9.0), (2.0, 1.0))), 0.0, 4.0)
    assert (summary.min, summary.max, summary.mean) == (1.0, 1.0, 1.0)


def test_gauge_extremes_ignore_values_outside_the_span():
    summary = summarize_gauge(GaugeRecord("g", ((0.0, -7.0), (1.0, 3.0), (5.0, 8.0))), 2.0, 5.0)
    assert (summary.min, summary.max, summary.mean) == (3.0, 3.0, 3.0)


def test_gauge_ci_is_batch_means_over_20_windows():
    """seed 002, Gauges: "a batch-means 95% CI over 20 windows". Value k on
    [k, k+1) for k = 0..19, measured on [0, 20]: window means 0..19, sample
    variance 20 * 21 / 12 = 35, half-width t(19) * sqrt(35 / 20); mean 9.5."""
    points = tuple((float(k), float(k)) for k in range(20))
    summary = summarize_gauge(GaugeRecord("g", points), 0.0, 20.0)
    assert summary.mean == 9.5
    assert summary.ci == pytest.approx(2.093024054 * math.sqrt(35 / 20), rel=1e-9)
    assert (summary.min, summary.max) == (0.0, 19.0)


def test_gauge_ci_splits_a_segment_across_windows():
    """1 on [0, 10), 3 on [10, 20], measured on [0, 20]: windows 0-9 average 1,
    10-19 average 3; the window means' sample variance is 20/19, so the
    half-width is t(19) * sqrt(1/19); mean 2."""
    summary = summarize_gauge(GaugeRecord("g", ((0.0, 1.0), (10.0, 3.0))), 0.0, 20.0)
    assert summary.mean == 2.0
    assert summary.ci == pytest.approx(2.093024054 * math.sqrt(1 / 19), rel=1e-9)


def test_gauge_constant_over_a_span_the_windows_do_not_divide_has_ci_zero():
    summary = summarize_gauge(GaugeRecord("g", ((0.0, 3.0),)), 0.0, 7.0)
    assert summary.mean == 3.0 and summary.ci == pytest.approx(0.0, abs=1e-12)


def test_gauge_over_an_empty_span_has_no_figures():
    summary = summarize_gauge(GaugeRecord("g", ((0.0, 3.0),)), 5.0, 5.0)
    assert math.isnan(summary.mean) and summary.ci == math.inf
    assert math.isnan(summary.min) and math.isnan(summary.max)


# --- against the reference implementation ------------------------------------

#: The reference rounds t(19) to 2.093; ours is computed to the last bit, so its
#: half-widths are larger by exactly this ratio.
T19_RATIO = 2.0930240544083074 / 2.093


def make_queue_ir(seed: float, horizon: float) -> dict:
    """An M/M/1 queue at load 0.8 in IR v14 (pyserq's): a response-time
    observation, a test that never holds, a gauge of the jobs present."""
    stage = {"base": 0, "count": 1, "index": None}
    response = {"Binary": ["Sub", {"Ctx": "Now"}, {"Attr": 9}]}
    return {
        "version": 14,
        "attrs": ["cached", "serial", "turn_no", "new", "out", "think", "more", "forced", "computed", "t0"],
        "attr_types": ["Value", "Size", "Size", "Size", "Size", "Size", "Size", "Size", "Value", "Size"],
        "sides": [[], [], ["Workload"] * 5],
        "observes": ["resp", "slow"],
        "pools": [],
        "stages": [{"name": "svc", "kind": {"Fifo": 1}}],
        "arrival": {"Poisson": 0.8},
        "trace": None,
        "trace_ordered": False,
        "init": 0,
        "turn": 1,
        "session": 2,
        "blocks": [
            [],
            [],
            [
                {"Set": [9, {"Ctx": "Now"}]},
                {
                    "Run": {
                        "stage": stage,
                        "mode": "Plain",
                        "work": {"Cost": [{"Stage": {"base": 0, "count": 1}}, {"Sample": ["Exp", [{"Num": 1.0}]]}]},
                        "growing": None,
                    }
                },
                {"Observe": [0, response]},
                {"Observe": [1, {"Binary": ["Gt", response, {"Num": 1e9}]}]},
                "End",
            ],
        ],
        "horizon": horizon,
        "warmup": 100.0,
        "seed": seed,
        "slot_cached": 0,
        "slot_serial": 1,
        "slot_turn": 2,
        "slot_new": 3,
        "slot_out": 4,
        "slot_think": 5,
        "slot_more": 6,
        "slot_forced": 7,
        "slot_computed": 8,
        "hidden": [],
        "gauges": [{"name": "busy", "expr": {"Call": ["Queue", [{"Stage": stage}]]}}],
    }


@pytest.mark.parametrize(("seed", "horizon"), [(1, 2000.0), (2, 333.3), (5, 5000.0)])
def test_summaries_agree_with_the_reference_implementation(seed, horizon):
    """The reference's samples and change points, summarised here, give its
    figures: count, mean, cv2 and p99 to rounding, the CI up to the t quantile."""
    import pyserq  # a test dependency (extra `test`): never skipped
    run = pyserq.run(pyserq.Program.from_json(json.dumps(make_queue_ir(seed, horizon))))
    for name, is_test in (("resp", False), ("slow", True)):
        theirs = run.observe(name)
        record = ObserveRecord(name, is_test, tuple(zip(theirs.times, theirs.sessions, theirs.turns, theirs.samples)))
        ours = summarize_observe(record)
        assert ours.count == theirs.count > 40
        assert ours.mean == pytest.approx(theirs.mean, rel=1e-12)
        assert ours.p99 == theirs.p99
        assert ours.ci == pytest.approx(theirs.ci * T19_RATIO, rel=1e-12, abs=1e-15)
        if is_test:
            assert math.isnan(ours.cv2)
            assert theirs.cv2 is None or math.isnan(theirs.cv2)
            assert ours.constant_zero
        else:
            assert ours.cv2 == pytest.approx(theirs.cv2, rel=1e-12)
    theirs = run.gauge("busy")
    ours = summarize_gauge(GaugeRecord("busy", tuple(zip(theirs.times, theirs.values))), run.warmup, run.end)
    assert ours.mean == pytest.approx(theirs.mean, rel=1e-12)
    assert ours.ci == pytest.approx(theirs.ci * T19_RATIO, rel=1e-12)
    assert (ours.min, ours.max) == (theirs.min, theirs.max)


def test_p99_ranks_negative_zero_before_zero():
    assert math.copysign(1.0, calculate_quantile([0.0, -0.0], 0.5)) == -1.0
    assert math.copysign(1.0, calculate_quantile([0.0, -0.0], 0.99)) == 1.0
    assert math.copysign(1.0, calculate_quantile([-0.0, 0.0, -1.0], 0.5)) == -1.0
    assert math.isnan(calculate_quantile([1.0, math.nan], 0.99))


# --- properties --------------------------------------------------------------

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(finite, min_size=40, max_size=200), finite, st.floats(min_value=0.01, max_value=100))
def test_batch_means_ci_moves_with_scale_not_shift(values, shift, scale):
    base = batch_means_ci(values)
    assert base >= 0.0
    assert batch_means_ci([value + shift for value in values]) == pytest.approx(base, rel=1e-6, abs=1e-3)
    assert batch_means_ci([value * scale for value in values]) == pytest.approx(base * scale, rel=1e-6, abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.floats(min_value=0.0, max_value=50.0), finite), min_size=1, max_size=30),
    st.floats(min_value=0.0, max_value=20.0),
    st.floats(min_value=0.001, max_value=40.0),
)
def test_gauge_mean_lies_between_its_extremes(changes, warmup, length):
    points = ((0.0, changes[0][1]),) + tuple(sorted(changes[1:], key=lambda change: change[0]))
    summary = summarize_gauge(GaugeRecord("g", points), warmup, warmup + length)
    slack = 1e-9 * max(abs(summary.min), abs(summary.max), 1.0)
    assert summary.min - slack <= summary.mean <= summary.max + slack
    assert summary.ci >= 0.0


@pytest.mark.campaign
def test_batch_means_interval_covers_the_mean_95_percent_of_the_time():
    """Independent normal samples make the batch means independent normals, so
    the interval is exact: 95 % of 20000 intervals cover the true mean (the
    standard error of the fraction is 0.0015). With 4 batches (t(3) = 3.182) a
    normal quantile in place of t would cover about 86 %."""
    rng = random.Random(20261129)
    for batches in (4, 20):
        covered = 0
        for _ in range(20000):
            values = [rng.gauss(10.0, 3.0) for _ in range(40)]
            covered += abs(math.fsum(values) / 40 - 10.0) <= batch_means_ci(values, batches)
        assert 0.944 <= covered / 20000 <= 0.956, (batches, covered)


def test_cv2_of_values_whose_mean_squared_underflows():
    # found by tests/test_report.py's table property: [0, 4.9e-213] has a mean whose square is 0.0 in doubles,
    # which divided the variance by zero; cv2 is scale-free, so the answer is the one of [0, 1]
    from semantics.statistics import calculate_cv2

    assert calculate_cv2([0.0, 4.9060113335248435e-213]) == calculate_cv2([0.0, 1.0]) == 2.0


def test_cv2_of_values_whose_mean_squared_overflows():
    from semantics.statistics import calculate_cv2

    assert calculate_cv2([0.0, 1e300]) == calculate_cv2([0.0, 1.0]) == 2.0
