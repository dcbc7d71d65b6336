"""Statistics of a run: what the report says of an observation's samples and
of a gauge's change points (seed 002, section 3, "Statistics" and "Gauges").

Every rule here is written out so that another implementation can reproduce
the numbers exactly (docs/reports.md repeats them):

- mean: the correctly rounded mean, ``math.fsum(values) / n`` (NaN without
  samples), so the order of the samples does not change a digit; every sum
  here is ``sum_exactly`` (fsum over the whole double range: NaN where it meets
  both infinities, ±inf where the exact sum is beyond the largest double), and
  a mean of finite values whose sum is beyond it is ``fsum(v / n)``;
- cv2: the sample variance (denominator ``n - 1``) over the squared mean, NaN
  with fewer than 2 samples or a mean of 0;
- p99: nearest rank, the ``ceil(0.99 n)``-th smallest sample (1-based), in the
  total order of ``order_floats`` (NaN without samples);
- an observation's 95 % confidence interval: batch means over 20 batches of
  ``n // 20`` consecutive samples each (the last ``n mod 20`` samples are left
  out of the batches, not out of the mean), half-width ``t * s / sqrt(k)``
  with ``s`` the sample standard deviation of the ``k`` batch means and ``t``
  the 97.5 % quantile of Student's t with ``k - 1`` degrees of freedom;
  infinite below 40 samples;
- a gauge: the time average of its step function over ``[warmup, end]``; the
  same half-width over the time averages of 20 equal windows of that span;
  the least and greatest value held for a positive time within it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from semantics.results import GaugeRecord, ObserveRecord

#: Below this many samples an observation's confidence interval is infinite,
#: and a test that was always 0 is not noted (seed 002, Statistics: "0 over 40
#: or more samples").
MINIMUM_SAMPLES = 40

#: Batches of an observation's batch means, and windows of a gauge's span
#: (seed 002, Gauges: "a batch-means 95% CI over 20 windows").
BATCHES = 20

#: The two-sided confidence level of every interval.
CONFIDENCE = 0.95

#: The quantile the report prints.
P99 = 0.99


@dataclass(frozen=True)
class ObserveSummary:
    """What the report says of one observation."""

    #: The observation's name in the program.
    name: str
    #: Samples taken after warm-up.
    count: int
    #: Their mean; NaN without samples.
    mean: float
    #: Half-width of the 95 % batch-means interval; inf below 40 samples.
    ci: float
    #: Sample variance over the squared mean; NaN below 2 samples or at mean 0.
    cv2: float
    #: The nearest-rank 99th percentile; NaN without samples.
    p99: float
    #: A test (0/1 by construction) that was 0 in all of 40 or more samples:
    #: the report notes it under the table.
    constant_zero: bool
    #: Samples that are inf, -inf or NaN (``observe x = 1 / 0``): the
    #: figures above include them, and the report says how many (issue 23).
    not_finite: int = 0


@dataclass(frozen=True)
class GaugeSummary:
    """What the report says of one gauge, over ``[warmup, end]``."""

    #: The gauge's name in the program.
    name: str
    #: Time average of the gauge's step function; NaN over an empty span.
    mean: float
    #: Half-width of the 95 % batch-means interval over 20 windows.
    ci: float
    #: Least value held for a positive time; NaN over an empty span.
    min: float
    #: Greatest value held for a positive time; NaN over an empty span.
    max: float


# --------------------------------------------------------------------------
# Observations


def summarize_observe(rec: ObserveRecord) -> ObserveSummary:
    """Summarise an observation's samples: count, mean, CI, cv2, p99."""
    values = [sample[3] for sample in rec.samples]
    count = len(values)
    mean = calculate_mean(values)
    constant_zero = rec.is_test and count >= MINIMUM_SAMPLES and all(value == 0.0 for value in values)
    return ObserveSummary(
        name=rec.name,
        count=count,
        mean=mean,
        ci=batch_means_ci(values, BATCHES),
        cv2=calculate_cv2(values),
        p99=calculate_quantile(values, P99),
        constant_zero=constant_zero,
        not_finite=sum(1 for value in values if not math.isfinite(value)),
    )


def sum_exactly(values) -> float:
    """``math.fsum`` over the whole double range: fsum raises where the sum
    meets both infinities (here NaN, as plain addition gives) and where the
    exact sum leaves the double range (here ±inf, its sign)."""
    values = list(values)
    try:
        return math.fsum(values)
    except ValueError:  # inf + -inf
        return math.nan
    except OverflowError:  # finite values whose exact sum is beyond the largest double
        return math.copysign(math.inf, math.fsum(value * 2.0**-64 for value in values))


def calculate_mean(values: Sequence[float]) -> float:
    """The correctly rounded sum over the count; NaN when there are no values.
    Finite values whose sum is beyond the largest double are each divided
    by the count first (the mean itself is a double)."""
    if not values:
        return math.nan
    total = sum_exactly(values)
    if math.isinf(total) and all(math.isfinite(value) for value in values):
        return sum_exactly(value / len(values) for value in values)
    return total / len(values)


def calculate_sample_variance(values: Sequence[float]) -> float:
    """Sum of squared deviations from the mean over ``n - 1``; NaN below 2."""
    if len(values) < 2:
        return math.nan
    mean = calculate_mean(values)
    return sum_exactly((value - mean) * (value - mean) for value in values) / (len(values) - 1)


def calculate_cv2(values: Sequence[float]) -> float:
    """Squared coefficient of variation: sample variance over the squared
    mean; NaN with fewer than 2 values or a mean of 0."""
    if len(values) < 2:
        return math.nan
    mean = calculate_mean(values)
    if mean == 0.0:
        return math.nan
    if mean * mean == 0.0 or (math.isinf(mean * mean) and math.isfinite(mean)):
        # the mean's square underflows (values near 1e-200) or overflows (near 1e200): cv2 does not depend on
        # the scale, so the values are scaled by a power of two, which is exact, until it does not
        exponent = math.frexp(max(abs(value) for value in values))[1]
        values = [math.ldexp(value, -exponent) for value in values]
        mean = calculate_mean(values)
    return calculate_sample_variance(values) / (mean * mean)


def order_floats(value: float) -> tuple[int, float, float]:
    """The total order values are ranked in: numbers ascending (-0.0 before
    0.0), then NaN last, so a NaN cannot make a rank depend on the order the
    values came in."""
    if math.isnan(value):
        return (1, 0.0, 0.0)
    return (0, value, math.copysign(1.0, value))


def calculate_quantile(values: Sequence[float], level: float) -> float:
    """Nearest rank: the ``ceil(level * n)``-th smallest value (at least the
    first) in the order of ``order_floats``; NaN when there are no values.
    (The numbers are sorted natively, which is the same order but for the
    sign of zero, settled after.)"""
    if not values:
        return math.nan
    rank = min(max(math.ceil(level * len(values)), 1), len(values))
    numbers = sorted(value for value in values if not math.isnan(value))
    if rank > len(numbers):
        return math.nan
    value = numbers[rank - 1]
    if value == 0.0:
        below = sum(1 for number in numbers if order_floats(number) < (0, 0.0, 1.0))
        return -0.0 if rank <= below else 0.0
    return value


def batch_means_ci(values: Sequence[float], batches: int = BATCHES) -> float:
    """Half-width of the 95 % batch-means confidence interval of the mean of
    ``values``: ``batches`` batches of ``len(values) // batches`` consecutive
    values (the remainder at the end is left out). Infinite below 40 values,
    or with fewer than 2 batches."""
    if len(values) < MINIMUM_SAMPLES or batches < 2 or len(values) < batches:
        return math.inf
    size = len(values) // batches
    means = [calculate_mean(values[k * size : (k + 1) * size]) for k in range(batches)]
    return calculate_half_width(means)


def calculate_half_width(means: Sequence[float]) -> float:
    """The 95 % half-width of the mean of independent batch means:
    ``t(k - 1) * s / sqrt(k)``, ``s`` their sample standard deviation."""
    batches = len(means)
    assert batches >= 2, "a confidence interval needs two batches"
    variance = calculate_sample_variance(means)
    quantile = calculate_student_t_quantile(0.5 + CONFIDENCE / 2, batches - 1)
    return quantile * math.sqrt(variance / batches)


# --------------------------------------------------------------------------
# Student's t, computed here (scipy is not a dependency)


def calculate_student_t_quantile(probability: float, freedom: int) -> float:
    """The ``probability`` quantile (above 0.5) of Student's t with
    ``freedom`` degrees of freedom, by bisection of its distribution function
    to the last bit a float can resolve."""
    assert 0.5 < probability < 1.0 and freedom >= 1
    low, high = 0.0, 1.0
    while calculate_student_t_cdf(high, freedom) < probability:
        low, high = high, 2.0 * high
    while True:
        middle = (low + high) / 2
        if middle in (low, high):
            return high
        if calculate_student_t_cdf(middle, freedom) < probability:
            low = middle
        else:
            high = middle


def calculate_student_t_cdf(t: float, freedom: int) -> float:
    """P(T <= t) for t >= 0: ``1 - I_x(freedom/2, 1/2) / 2`` with
    ``x = freedom / (freedom + t**2)``, I the regularized incomplete beta."""
    assert t >= 0.0
    x = freedom / (freedom + t * t)
    return 1.0 - calculate_incomplete_beta(x, freedom / 2, 0.5) / 2


def calculate_incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued
    fraction (evaluated with the modified Lentz method), using the symmetry
    I_x(a, b) = 1 - I_{1-x}(b, a) where the fraction converges slowly."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - calculate_incomplete_beta(1.0 - x, b, a)
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    return math.exp(log_front) * evaluate_beta_fraction(x, a, b) / a


def evaluate_beta_fraction(x: float, a: float, b: float) -> float:
    """The continued fraction 1 / (1 + d1 / (1 + d2 / (1 + ...))) of the
    incomplete beta function, d_{2m+1} = -(a+m)(a+b+m)x / ((a+2m)(a+2m+1)),
    d_{2m} = m(b-m)x / ((a+2m-1)(a+2m))."""
    tiny = 1e-300
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 1000):
        even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        for term in (even, odd):
            d = 1.0 + term * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + term / c
            c = c if abs(c) > tiny else tiny
            fraction *= c * d
        if abs(c * d - 1.0) < 1e-16:
            break
    return fraction


# --------------------------------------------------------------------------
# Gauges


def summarize_gauge(rec: GaugeRecord, warmup: float, end: float) -> GaugeSummary:
    """Summarise a gauge's step function over ``[warmup, end]``: its time
    average, the batch-means CI over 20 equal windows (each window's time
    average a batch), and the least and greatest value held for a positive
    time. A value set before warm-up holds into the span."""
    span = end - warmup
    if not span > 0.0 or not rec.points:
        return GaugeSummary(rec.name, math.nan, math.inf, math.nan, math.nan)
    assert rec.points[0][0] <= warmup, f"gauge {rec.name}: no value at the start of the measured span"
    bounds = [warmup + span * k / BATCHES for k in range(BATCHES)] + [end]
    areas: list[list[float]] = [[] for _ in range(BATCHES)]
    total: list[float] = []
    held: list[float] = []
    for position, (time, value) in enumerate(rec.points):
        following = rec.points[position + 1][0] if position + 1 < len(rec.points) else end
        start, stop = max(time, warmup), min(following, end)
        if not stop > start:
            continue
        held.append(value)
        total.append(value * (stop - start))
        for window in range(locate_window(bounds, start), BATCHES):
            low, high = bounds[window], bounds[window + 1]
            if low >= stop:
                break
            overlap = min(stop, high) - max(start, low)
            if overlap > 0.0:
                areas[window].append(value * overlap)
    # a window narrower than a float can resolve (a span tiny beside warm-up) has no average
    means = [sum_exactly(areas[k]) / (bounds[k + 1] - bounds[k]) for k in range(BATCHES) if bounds[k + 1] > bounds[k]]
    return GaugeSummary(
        name=rec.name,
        mean=sum_exactly(total) / span,
        ci=calculate_half_width(means) if len(means) >= 2 else math.inf,
        min=min(held, key=order_floats),
        max=max(held, key=order_floats),
    )


def locate_window(bounds: Sequence[float], time: float) -> int:
    """The window ``[bounds[k], bounds[k+1])`` that holds ``time`` (the last
    window for ``time`` at or past its start), by bisection of the bounds."""
    low, high = 0, len(bounds) - 2
    while low < high:
        middle = (low + high + 1) // 2
        if bounds[middle] <= time:
            low = middle
        else:
            high = middle - 1
    return low
