"""The online estimates of a stage: est_lambda, est_rho, est_wait and price.

Seed 002 §2 lists ``price(s, s_hit, ds)`` ("the online price of a miss,
missPrice with the stage's measured λ̂, ρ̂, Ŵ"), ``est_lambda(s)``,
``est_rho(s)`` and ``est_wait(s)``, and §7 says the priced orders use them
"as libqueuingsim does"; the seed gives no formulas. The definitions below
are what pyserq 0.1.6 (the reference implementation) computes, established by
running probe programs on it (tests/data/estimates_pyserq.json, docs/estimates.md):

One event feeds a stage's estimator: the completion of a job at the stage,
with the job's start time (when it began service: for a fifo stage when a
server took it, for ps, delay and step stages when it joined the stage), its
wait (start minus the time it joined the stage) and its service (completion
minus start). A run over several stages completes at each of them. A run of
zero work makes no job and no completion, a job taken off the stage
unfinished (a preemption) none either. Completions update, in the order they
happen:

- the mean service ŝ and the mean wait Ŵ: the first completion's values,
  then exponentially weighted averages ``(1 - WEIGHT) * old + WEIGHT * new``;
- the gap between starts: from the second completion on, the difference
  between this completion's start and the previous completion's start (so in
  completion order, which need not be start order: the gap can be 0 or
  negative), first as it is, then averaged with the same weight.

The readers (none depends on the time of reading, and nothing resets at the
end of the warmup):

- λ̂ = 1 / gap when there is a gap and it is positive, else 0;
- ρ̂ = min(λ̂ ŝ, RHO_CAP) (so 0 while λ̂ is 0): not divided by a fifo
  stage's servers, so a busy fifo(c) reads the cap;
- Ŵ = the weighted wait (0 before the first completion);
- price(s, s_hit, ds) = ds + λ̂ (s_m² − s_hit²) / (2 (1 − ρ̂)) + λ̂ Ŵ ds / (1 − ρ̂)
  with s_m = s_hit + ds, the estimates of the stage s: the extra wait a miss
  that lengthens a hit's service s_hit by ds causes at an M/G/1 queue, plus
  its own extra service. s_hit is a number (the hit's service time), not a
  stage. Since ρ̂ ≤ RHO_CAP the price is finite for finite arguments, unless
  a product overflows (a weighted gap below about 1e-300: docs/estimates.md).
"""

from __future__ import annotations

from typing import NamedTuple

#: The weight of a new value in the exponentially weighted averages.
WEIGHT = 0.01
#: The largest utilisation the estimator reports.
RHO_CAP = 0.99


class Estimator(NamedTuple):
    """The accumulators of one stage's estimates (the zero value before any
    completion)."""

    #: Start time of the job that completed last; None before any completion.
    last_start: float | None = None
    #: Weighted gap between the starts of successive completions; None
    #: before the second completion.
    gap: float | None = None
    #: Weighted service time (0 before any completion).
    service: float = 0.0
    #: Weighted wait (0 before any completion).
    wait: float = 0.0
    #: Completions seen.
    completions: int = 0


def average_in(old: float, new: float) -> float:
    """The weighted average after a new value (the operation order is the
    reference implementation's, for results equal to the last bit)."""
    return (1.0 - WEIGHT) * old + WEIGHT * new


def note_completion(est: Estimator, started: float, waited: float, served: float) -> Estimator:
    """The estimator after a job that started at ``started``, waited
    ``waited`` and was served ``served`` completed at the stage."""
    first = est.completions == 0
    service = served if first else average_in(est.service, served)
    wait = waited if first else average_in(est.wait, waited)
    gap = est.gap
    if est.last_start is not None:
        step = started - est.last_start
        gap = step if gap is None else average_in(gap, step)
    return Estimator(started, gap, service, wait, est.completions + 1)


def read_lambda(est: Estimator) -> float:
    """λ̂: one over the weighted gap between starts, 0 without a positive gap."""
    if est.gap is not None and est.gap > 0.0:
        return 1.0 / est.gap
    return 0.0


def read_rho(est: Estimator) -> float:
    """ρ̂: λ̂ times the weighted service, at most RHO_CAP (so 0 when λ̂ is)."""
    return min(read_lambda(est) * est.service, RHO_CAP)


def read_wait(est: Estimator) -> float:
    """Ŵ: the weighted wait."""
    return est.wait


def price(est: Estimator, hit: float, extra: float) -> float:
    """``price(s, hit, extra)`` read from stage s's estimator: a miss whose
    service is ``hit + extra`` where a hit's is ``hit``."""
    arrival_rate, utilisation, wait = read_lambda(est), read_rho(est), read_wait(est)
    miss = hit + extra
    return (extra + arrival_rate * (miss * miss - hit * hit) / (2.0 * (1.0 - utilisation))
            + arrival_rate * wait * extra / (1.0 - utilisation))
