"""What a run produces, before it is summarised: the contract between the
small-step driver (``semantics.smallstep.driver``), which fills it, and the
statistics and reports (``semantics.statistics``, ``semantics.report``), which
summarise and print it.

Stage and pool figures are time averages and counts the driver's
accumulators already hold; observations and gauges are kept raw (samples and
change points) because their confidence intervals need them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


class _Record:
    """The repr, comparison and hash of the records below, those the dataclass
    decorator would give each of them (``repr=False, eq=False`` there), written
    once: the decorator compiles every method it writes on its own, six per
    frozen class, and three of them were a third of this module's import
    (13 M instructions of 42 M; tests/test_results.py checks they are the
    decorator's own, value for value)."""

    __slots__ = ()

    def __repr__(self):
        return f"{self.__class__.__qualname__}({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in fields(self))})"

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return _values(self) == _values(other)
        return NotImplemented

    def __hash__(self):
        return hash(_values(self))


def _values(record: _Record) -> tuple:
    """The record's fields' values, in their order (what the decorator's __eq__ and __hash__ compare)."""
    return tuple(getattr(record, f.name) for f in fields(record))


@dataclass(frozen=True, repr=False, eq=False)
class ObserveRecord(_Record):
    name: str
    #: True when the expression is a test (outermost operator a comparison,
    #: &&, || or !): the "constant 0" note applies (seed 002, Statistics)
    is_test: bool
    #: (time, session serial, turn number, value), after warm-up, in the order taken
    samples: tuple[tuple[float, int, int, float], ...]


@dataclass(frozen=True, repr=False, eq=False)
class GaugeRecord(_Record):
    name: str
    #: (time, value) change points over the whole run, in time order; the
    #: first is at time 0; the value holds until the next point (or end)
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True, repr=False, eq=False)
class StageRecord(_Record):
    name: str
    index: int | None
    kind: str  # "fifo", "ps", "step"
    mean_number: float  # time-average jobs present over [warmup, end]
    utilization: float
    completed: int  # completions after warm-up
    throughput: float  # completed / (end - warmup)
    mean_wait: float  # NaN when no job completed
    mean_service: float
    #: step stages only (None elsewhere), at or after the warm-up: iterations, and
    #: iteration counts by kind (the empty ones only preempted), tokens and decode tokens given
    iterations: int | None = None
    prefill_only: int | None = None
    decode_only: int | None = None
    mixed: int | None = None
    mean_decodes: float | None = None  # decode tokens per iteration
    itl_p50: float | None = None  # inter-token latency: set by the report from itl_gaps
    itl_p99: float | None = None
    empty: int | None = None
    tokens: float | None = None
    decodes: int | None = None
    mean_itl: float | None = None
    #: every inter-token gap (the time from a session's token here to its next decode token), in time order
    itl_gaps: tuple[float, ...] | None = None


@dataclass(frozen=True, repr=False, eq=False)
class StepStageRecord(StageRecord):
    """A step stage's record: a stage record and the counts the engine's
    figures are computed from (docs/reports.md, "The engine and
    saturation"), at or after the warm-up. A record of its own so that a
    program without a step stage produces the same RunResult as before they
    were counted."""

    #: the residents the iterations served, summed (a batch's size: the sequences it ran)
    scheduled: int = 0
    #: the budgets the iterations were given, summed (tokens)
    offered: float = 0.0
    #: the residents preempted while an iteration formed (the engine's preemptions)
    preemptions: int = 0
    #: the pools whose queues the stage admits from (admit via), and its memory pool (None without one)
    served: tuple[str, ...] = ()
    memory: str | None = None


@dataclass(frozen=True, repr=False, eq=False)
class PoolRecord(_Record):
    name: str
    index: int | None
    mean_used: float
    mean_cached: float
    mean_queue: float
    mean_holders: float
    mean_wait: float  # NaN when nobody was admitted after warm-up
    admissions: int
    evicted_entries: int
    evicted_units: float
    preemptions: int
    spills: int
    rejected: int
    stuck: int
    #: lines explaining stuck or rejected sessions, e.g.
    #: "session 3 rejected: reserve 200 above cap 160"
    explanations: tuple[str, ...] = ()
    #: of the stuck sessions, those that had not ended when the run did (the livelocks; the others got past)
    stuck_unfinished: int = 0


@dataclass(frozen=True, repr=False, eq=False)
class RunResult(_Record):
    horizon: float
    end: float
    warmup: float
    seed: int
    events: int
    arrivals: int
    ended: int
    turns: int
    mean_live: float
    observes: tuple[ObserveRecord, ...]
    gauges: tuple[GaugeRecord, ...]
    stages: tuple[StageRecord, ...]
    pools: tuple[PoolRecord, ...]
