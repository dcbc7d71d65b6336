"""The online estimates (semantics/smallstep/estimates.py) against pyserq 0.1.6.

Seed 002 §2: "price(s, s_hit, ds) (the online price of a miss, missPrice with
the stage's measured λ̂, ρ̂, Ŵ), est_lambda(s), est_rho(s), est_wait(s)"; §7:
"the priced orders use price(stage, …) with the stage's online estimates, as
libqueuingsim does". The seed gives no formulas: pyserq's answers on the probe
programs of tests/data/estimates_pyserq.json are the evidence, and each read
there must equal, bit for bit, the module's reading after the completions
before it. ``run_on_pyserq`` runs a probe's text on pyserq again, so that the
recorded answers stay pyserq's (and the lead can run the same texts on our
engine once it reads the estimates).
"""

from __future__ import annotations

import json
import math
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oracle.peer import run_on_pyserq as run_program_on_pyserq
from semantics.compiler import compile_source
from semantics.smallstep.estimates import (
    RHO_CAP,
    Estimator,
    note_completion,
    price,
    read_lambda,
    read_rho,
    read_wait,
)

DATA = os.path.join(os.path.dirname(__file__), "data", "estimates_pyserq.json")
def run_on_pyserq(text: str) -> dict[str, list[list[float]]]:
    """pyserq's samples of each observation of the serQ program ``text``, as
    ``[time, session, value]`` in sample order (IR version 14: a run over
    several stages names the program's share)."""
    program, _ = compile_source(text, "<probe>")
    report = run_program_on_pyserq(program)
    return {name: [[time, session, value] for time, session, value in zip(o.times, o.sessions, o.samples)]
            for name, o in report.observes.items()}


def start_times(enter: dict, leave: dict, servers: int | None) -> dict:
    """Each job's start: when it entered, or at a fifo(servers) stage when a
    server took it (jobs taken in entry order, then session serial)."""
    if servers is None:
        return dict(enter)
    in_service, start = [], {}
    for serial in sorted(enter, key=lambda s: (enter[s], s)):
        in_service = [j for j in in_service if leave[j] > enter[serial]]
        if len(in_service) < servers:
            start[serial] = enter[serial]
        else:
            freed = min(in_service, key=lambda j: (leave[j], j))
            start[serial] = leave[freed]
            in_service.remove(freed)
        in_service.append(serial)
    return start


def derive_completions(observed: dict, servers: int | None, zero_work=()) -> list[list[float]]:
    """``[started, waited, served, completed]`` of the jobs that the ``enter``
    and ``leave`` observations show, in completion order (then start, serial);
    a session in ``zero_work`` ran no job, one that never left none either."""
    enter = {serial: time for time, serial, _ in observed["enter"]}
    leave = {serial: time for time, serial, _ in observed["leave"]}
    jobs = {serial: time for serial, time in enter.items() if serial in leave and serial not in zero_work}
    start = start_times(jobs, leave, servers)
    order = sorted(jobs, key=lambda s: (leave[s], start[s], s))
    return [[start[s], start[s] - jobs[s], leave[s] - start[s], leave[s]] for s in order]


with open(DATA, encoding="utf-8") as handle:
    RECORDED = json.load(handle)
PROBES = {probe["name"]: probe for probe in RECORDED["probes"]}


def fold(completions) -> Estimator:
    """The estimator after ``[started, waited, served, completed]`` completions."""
    est = Estimator()
    for started, waited, served, _ in completions:
        est = note_completion(est, started, waited, served)
    return est


@pytest.mark.parametrize("name", sorted(PROBES))
def test_reads_equal_pyserqs(name):
    """Each read pyserq gave equals the module's after the completions before it."""
    probe = PROBES[name]
    assert probe["reads"], name
    for row in probe["reads"]:
        est = fold(probe["completions"][:row["completions_before"]])
        assert read_lambda(est) == row["est_lambda"], (name, row)
        assert read_rho(est) == row["est_rho"], (name, row)
        assert read_wait(est) == row["est_wait"], (name, row)
        for hit, extra, value in row["price"]:
            assert price(est, hit, extra) == value, (name, row, hit, extra)


@pytest.mark.parametrize("name", sorted(PROBES))
def test_recorded_answers_are_pyserqs(name):
    """The recorded reads, job times and completions are what pyserq's run of
    the probe's text gives today."""
    probe = PROBES[name]
    observed = run_on_pyserq(probe["text"])
    reads = [[row["time"], row["est_lambda"], row["est_rho"], row["est_wait"]] for row in probe["reads"]]
    assert [[t, lam, rho, wait] for (t, _, lam), (_, _, rho), (_, _, wait)
            in zip(observed["lam"], observed["rho"], observed["wait"])] == reads
    for k, row in enumerate(probe["reads"]):
        assert [observed[f"price{j}"][k][2] for j in range(len(row["price"]))] == [v for _, _, v in row["price"]]
    for key, samples in probe["observes"].items():
        assert observed[key] == samples, (name, key)
    if probe["completions_source"] == "derived":
        assert derive_completions(observed, probe["servers"], probe["zero_work"]) == probe["completions"], name


# --------------------------------------------------------------------------
# The definitions, one fact each (hand-computed from the probes' programs)
# --------------------------------------------------------------------------


def test_nothing_before_the_second_completion():
    """Before any completion every estimate is 0 and the price is ds alone;
    after one, λ̂ and ρ̂ are still 0 (no gap yet) and Ŵ is that job's wait
    (probe fifo_basic, reads at 0.25 and 2.75)."""
    assert (read_lambda(Estimator()), read_rho(Estimator()), read_wait(Estimator())) == (0.0, 0.0, 0.0)
    assert price(Estimator(), 2.0, 1.0) == 1.0
    one = note_completion(Estimator(), 0.5, 0.25, 2.0)
    assert (read_lambda(one), read_rho(one), read_wait(one)) == (0.0, 0.0, 0.25)


def test_lambda_is_one_over_the_gap_between_starts():
    """fifo_basic: jobs enter at 0.5 and 0.75 but start at 0.5 and 2.5: λ̂ = 1/2,
    not 1/0.25; the second wait 1.75 enters Ŵ with weight 0.01."""
    est = note_completion(note_completion(Estimator(), 0.5, 0.0, 2.0), 2.5, 1.75, 2.0)
    assert read_lambda(est) == 0.5
    assert read_wait(est) == pytest.approx(0.0175)
    assert read_rho(est) == RHO_CAP  # 0.5 * 2 = 1, capped


def test_weights_and_price_formula():
    """fifo_basic's third read: gap 2, service 0.99*2 + 0.01*1, wait
    0.99*0.0175 + 0.01*3.5; price = ds + λ̂(s_m² − s_hit²)/(2(1−ρ̂)) + λ̂Ŵds/(1−ρ̂)."""
    est = fold([[0.5, 0.0, 2.0, 2.5], [2.5, 1.75, 2.0, 4.5], [4.5, 3.5, 1.0, 5.5]])
    assert est.gap == 2.0 and est.service == pytest.approx(1.99) and read_wait(est) == pytest.approx(0.052325)
    lam, rho, wait = 0.5, 0.99, 0.052325
    assert price(est, 2.0, 1.0) == pytest.approx(1.0 + lam * (9.0 - 4.0) / (2 * (1 - rho)) + lam * wait / (1 - rho))
    assert price(est, 2.0, 0.0) == 0.0


def test_rho_is_not_per_server():
    """fifo2_not_per_server: a start every 2 s, 1.5 s of service on fifo(2): ρ̂ = 0.75."""
    assert PROBES["fifo2_not_per_server"]["reads"][-1]["est_rho"] == pytest.approx(0.75)
    est = fold([[0.5, 0.0, 1.5, 2.0], [2.5, 0.0, 1.5, 4.0]])
    assert read_rho(est) == pytest.approx(0.75)


def test_gap_in_completion_order_can_be_zero_or_negative():
    """fifo2_zero_gap: two completions started at 1 give gap 0, so λ̂ = 0; the
    next start at 4 averages to 0.03 (λ̂ 33.3). fifo2_out_of_order: a job started
    at 1 completing after one started at 3 adds a gap of -2."""
    zero = fold([[1.0, 0.0, 1.0, 2.0], [1.0, 0.0, 1.0, 2.0]])
    assert (read_lambda(zero), read_rho(zero)) == (0.0, 0.0)
    assert read_lambda(note_completion(zero, 4.0, 0.0, 1.0)) == pytest.approx(1 / 0.03)
    back = fold([[1.0, 0.0, 1.0, 2.0], [2.0, 0.5, 1.0, 3.0], [3.0, 0.75, 0.5, 3.5], [1.0, 0.0, 5.0, 6.0]])
    assert back.gap == pytest.approx(0.99 * 1.0 - 0.02)


def test_a_gap_at_or_below_zero_reads_zero():
    """fifo2_negative_gap: starts 2 then 1 in completion order, gap -1: λ̂ and
    ρ̂ are 0, Ŵ is still read; a later start at 10 averages the gap to -0.9."""
    est = fold([[2.0, 0.0, 1.0, 3.0], [1.0, 0.0, 5.0, 6.0]])
    assert est.gap == -1.0 and (read_lambda(est), read_rho(est)) == (0.0, 0.0)
    est = note_completion(est, 10.0, 0.5, 1.0)
    assert est.gap == pytest.approx(-0.9) and read_lambda(est) == 0.0 and read_wait(est) == pytest.approx(0.005)


#: start times on a grid of a millisecond (gaps of 0 or at least 0.001): a
#: gap a denormal wide makes λ̂ overflow (test_a_vanishing_gap_overflows_the_price)
STARTS = st.integers(0, 100_000).map(lambda k: k / 1000)


@given(st.lists(st.tuples(STARTS, st.floats(0, 10), st.floats(0, 10)), max_size=30),
       st.floats(0, 10), st.floats(0, 10))
def test_price_is_finite_and_at_least_ds(jobs, hit, extra):
    """ρ̂ ≤ 0.99 keeps the price finite; every term is non-negative for
    non-negative arguments, so the price is at least ds."""
    est = Estimator()
    for started, waited, served in sorted(jobs):
        est = note_completion(est, started, waited, served)
    assert 0.0 <= read_rho(est) <= RHO_CAP
    value = price(est, hit, extra)
    assert math.isfinite(value) and value >= extra


def test_a_vanishing_gap_overflows_the_price():
    """The limit of the finiteness above (docs/estimates.md): two starts a
    denormal apart make λ̂ about 4.5e307, λ̂·Ŵ overflows to inf, and times a ds
    of 0 the price is NaN, as the reference's arithmetic in its order gives."""
    est = note_completion(note_completion(Estimator(), 0.0, 5.0, 0.0), 2.2250738585072014e-308, 0.0, 0.0)
    assert read_lambda(est) == pytest.approx(4.49423283715579e307)
    assert math.isnan(price(est, 0.0, 0.0))
