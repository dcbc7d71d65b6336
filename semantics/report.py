"""The report of a run: its summaries (``build_report``), printed as text
(``format_text``) or JSON (``to_json``, ``dumps_json``), and the raw samples
and change points written as CSV files (``write_dump``).

The formats follow the reference implementation's (SERQ-FACTS.md, "CLI and
reports"); docs/reports.md describes every column and the decimals each one
is printed with. The report keeps the order of the RunResult it is built
from (observations, gauges, stages and pools in the order the driver lists
them), and the same RunResult always gives the same bytes.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass
from typing import Sequence

from semantics import SERQ_VERSION
from semantics.errors import UsageError
from semantics.results import PoolRecord, RunResult, StageRecord, StepStageRecord
from semantics.statistics import (P99, GaugeSummary, ObserveSummary, calculate_mean, calculate_quantile,
                                  summarize_gauge, summarize_observe)

#: Floats that are whole numbers below this magnitude print without ``.0``
#: in the first line (beyond it, not every integer is a float).
EXACT_INTEGERS = 2.0**53


@dataclass(frozen=True)
class Report:
    """What ``serq-ref run`` reports: the run's counts, the observations and
    gauges summarised, and the driver's stage and pool figures as they are."""

    #: The configured deadline.
    horizon: float
    #: When the run ended; time averages and rates use ``end - warmup``.
    end: float
    warmup: float
    seed: int
    #: Events the run processed.
    events: int
    #: Sessions that arrived.
    arrivals: int
    #: Sessions that ended.
    ended: int
    #: ``turn`` statements executed after warm-up.
    turns: int
    #: Time-average live sessions.
    mean_live: float
    observes: tuple[ObserveSummary, ...]
    gauges: tuple[GaugeSummary, ...]
    stages: tuple[StageRecord, ...]
    pools: tuple[PoolRecord, ...]


def build_report(result: RunResult) -> Report:
    """Summarise a run: each observation's samples and each gauge's change
    points over ``[warmup, end]``; stages and pools are already averaged."""
    return Report(
        horizon=result.horizon,
        end=result.end,
        warmup=result.warmup,
        seed=result.seed,
        events=result.events,
        arrivals=result.arrivals,
        ended=result.ended,
        turns=result.turns,
        mean_live=result.mean_live,
        observes=tuple(summarize_observe(record) for record in result.observes),
        gauges=tuple(summarize_gauge(record, result.warmup, result.end) for record in result.gauges),
        stages=tuple(summarize_stage(stage) for stage in result.stages),
        pools=result.pools,
    )


def summarize_stage(stage: StageRecord) -> StageRecord:
    """A stage's record with a step stage's inter-token latency summarised
    from its gaps: the mean, and the median and 99th percentile by nearest
    rank (as an observation's p99); None without a gap."""
    if not stage.itl_gaps:
        return stage
    gaps = stage.itl_gaps
    return dataclasses.replace(stage, mean_itl=calculate_mean(gaps), itl_p50=calculate_quantile(gaps, 0.5),
                               itl_p99=calculate_quantile(gaps, P99))


# --------------------------------------------------------------------------
# Text


def format_text(report: Report) -> str:
    """The text report: the run line, then a table per kind of figure that
    has any rows, each after a blank line; ends with a newline."""
    settings = (f"run: horizon {format_compact(report.horizon)} end {format_compact(report.end)}"
                f" warmup {format_compact(report.warmup)} seed {report.seed}")
    whole = f"events {report.events} arrivals {report.arrivals}"
    measured = f"ended {report.ended} turns {report.turns} mean live {format_fixed(report.mean_live, 3)}"
    if report.warmup > 0:  # the two windows differ: each figure is labelled with its own (docs/reports.md)
        lines = [f"{settings} | whole run: {whole} | after warm-up: {measured}"]
    else:
        lines = [f"{settings} {whole} {measured}"]
    if report.observes:
        lines += format_observe_table(report.observes)
    if report.gauges:
        lines += format_gauge_table(report.gauges)
    if report.stages:
        lines += format_stage_table(report.stages)
    step_stages = [stage for stage in report.stages if stage.kind == "step"]
    if step_stages:
        lines += format_step_table(step_stages)
        engines = [stage for stage in step_stages if isinstance(stage, StepStageRecord)]
        if engines:
            lines += format_engine_table(engines, report)
    if report.pools:
        lines += format_pool_table(report.pools)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# The engine's figures (docs/reports.md, "The engine and saturation")


def engine_figures(stage: StageRecord, span: float) -> dict[str, float | int | None]:
    """A step stage's engine figures over [warmup, end] (``span`` its length), None on another stage:
    tokens per iteration, the mean batch (residents served per iteration), the fraction of the budget
    the iterations used (tokens given over the budgets they were given), the preemptions and their rate."""
    names = ("tokens_per_iteration", "mean_batch", "budget_used", "preemptions", "preemption_rate")
    if not isinstance(stage, StepStageRecord):
        return dict.fromkeys(names)
    n = stage.iterations
    return dict(zip(names, (
        stage.tokens / n if n else math.nan,
        stage.scheduled / n if n else math.nan,
        stage.tokens / stage.offered if stage.offered > 0 else math.nan,
        stage.preemptions,
        stage.preemptions / span if span > 0 else math.nan)))


def format_engine_table(stages: Sequence[StepStageRecord], report: Report) -> list[str]:
    """Per step stage, its engine figures with their units (a units row under the header), then a note
    per step stage saying what its util and wait do not show and where its saturation is read."""
    span = report.end - report.warmup
    header = ["engine", "tokens/iter", "batch", "budget used", "preempt", "preempt/s", "util", "admits from",
              "queue", "wait"]
    units = ["", "(tokens)", "(seqs/iter)", "(fraction)", "(count)", "(per time)", "(fraction)", "(pool)",
             "(sessions)", "(time)"]
    pools = {format_label(pool.name, pool.index): pool for pool in report.pools}
    rows, notes = [], []
    for stage in stages:
        f = engine_figures(stage, span)
        served = [pools[name] for name in stage.served if name in pools]
        queue = math.fsum(pool.mean_queue for pool in served) if served else math.nan
        waits = [pool for pool in served if pool.admissions and not math.isnan(pool.mean_wait)]
        wait = (math.fsum(pool.mean_wait * pool.admissions for pool in waits) / sum(pool.admissions for pool in waits)
                if waits else math.nan)
        label = format_label(stage.name, stage.index)
        rows.append([label, format_fixed(f["tokens_per_iteration"], 1), format_fixed(f["mean_batch"], 2),
                     format_fixed(f["budget_used"], 3), str(f["preemptions"]), format_fixed(f["preemption_rate"], 4),
                     format_fixed(stage.utilization, 3), ",".join(stage.served) or "-",
                     format_fixed(queue, 3) if served else "-", format_fixed(wait, 4) if served else "-"])
        if stage.utilization >= SATURATED_UTIL:
            notes.append(
                f"note: step {label}: util {format_fixed(stage.utilization, 3)} is the fraction of the time an "
                "iteration was in flight, near 1 at any load that keeps one request running, so it does not show "
                f"saturation; nor does the stage's wait ({format_fixed(stage.mean_wait, 4)}): requests queue in "
                + (f"the pools it admits from ({', '.join(stage.served)}: queue {format_fixed(queue, 3)}, wait "
                   f"{format_fixed(wait, 4)} per admission)" if served else "pools, before they reach the stage")
                + ". Saturation is a queue that grows with the horizon, budget used near 1, a batch at the "
                "sequence limit, or preemptions (docs/reports.md, \"The engine and saturation\")")
    return format_table(header, [units] + rows, units=True) + notes


#: a step stage's util at or above this gets the note that util does not show saturation
SATURATED_UTIL = 0.9


def format_observe_table(observes: Sequence[ObserveSummary]) -> list[str]:
    """Count, mean, CI, cv2, p99 per observation, then a note for each test
    that was 0 in all of 40 or more samples (seed 002, Statistics)."""
    rows = [
        [
            observe.name,
            str(observe.count),
            format_fixed(observe.mean, 4),
            "±" + format_fixed(observe.ci, 4),
            format_fixed(observe.cv2, 3),
            format_fixed(observe.p99, 4),
        ]
        for observe in observes
    ]
    lines = format_table(["observe", "count", "mean", "95% CI", "cv2", "p99"], rows)
    lines += [
        f"note: observe {observe.name} is constant 0 over {observe.count} samples"
        for observe in observes
        if observe.constant_zero
    ]
    lines += [
        f"note: observe {observe.name}: {observe.not_finite:,} of its {observe.count:,} samples are not finite "
        "(inf, -inf or nan), and its figures include them"
        for observe in observes
        if observe.not_finite
    ]
    return lines


def format_gauge_table(gauges: Sequence[GaugeSummary]) -> list[str]:
    """Time average, CI, least and greatest value held, per gauge."""
    rows = [
        [
            gauge.name,
            format_fixed(gauge.mean, 4),
            "±" + format_fixed(gauge.ci, 4),
            format_fixed(gauge.min, 4),
            format_fixed(gauge.max, 4),
        ]
        for gauge in gauges
    ]
    return format_table(["gauge", "mean", "95% CI", "min", "max"], rows)


def format_stage_table(stages: Sequence[StageRecord]) -> list[str]:
    """Number present, utilisation, completions, throughput, wait and
    service per stage; ``iters`` too when any stage is a step stage."""
    with_iterations = any(stage.kind == "step" for stage in stages)
    header = ["stage", "number", "util", "done", "thru", "wait", "service"] + (["iters"] if with_iterations else [])
    rows = []
    for stage in stages:
        row = [
            format_label(stage.name, stage.index),
            format_fixed(stage.mean_number, 3),
            format_fixed(stage.utilization, 3),
            str(stage.completed),
            format_fixed(stage.throughput, 4),
            format_fixed(stage.mean_wait, 4),
            format_fixed(stage.mean_service, 4),
        ]
        if with_iterations:
            row.append(format_count(stage.iterations))
        rows.append(row)
    return format_table(header, rows)


def format_step_table(stages: Sequence[StageRecord]) -> list[str]:
    """Per step stage: iterations by kind (prefill only, decode only, mixed,
    and the empty ones that only preempted), the tokens given, mean decodes
    per iteration, inter-token latency mean, p50 and p99."""
    rows = [
        [
            format_label(stage.name, stage.index),
            format_count(stage.prefill_only),
            format_count(stage.decode_only),
            format_count(stage.mixed),
            format_count(stage.empty),
            format_optional(stage.tokens, 0),
            format_optional(stage.mean_decodes, 3),
            format_optional(stage.mean_itl, 6),
            format_optional(stage.itl_p50, 6),
            format_optional(stage.itl_p99, 6),
        ]
        for stage in stages
    ]
    return format_table(["step", "prefill only", "decode only", "mixed", "empty", "tokens", "decodes", "itl mean",
                         "itl p50", "itl p99"], rows)


def format_pool_table(pools: Sequence[PoolRecord]) -> list[str]:
    """Time averages, wait and counters per pool, then the lines explaining
    stuck or rejected sessions, pool by pool."""
    rows = [
        [
            format_label(pool.name, pool.index),
            format_fixed(pool.mean_used, 1),
            format_fixed(pool.mean_cached, 1),
            format_fixed(pool.mean_queue, 3),
            format_fixed(pool.mean_holders, 3),
            format_fixed(pool.mean_wait, 4),
            str(pool.admissions),
            str(pool.evicted_entries),
            format_fixed(pool.evicted_units, 0),
            str(pool.preemptions),
            str(pool.spills),
            str(pool.rejected),
            str(pool.stuck),
        ]
        for pool in pools
    ]
    header = ["pool", "used", "cached", "queue", "holders", "wait", "admits"]
    header += ["evict(n)", "evict(u)", "preempt", "spill", "rej", "stuck"]
    lines = format_table(header, rows)
    lines += [line for pool in pools for line in pool.explanations]
    lines += [f"note: pool {format_label(pool.name, pool.index)}: {pool.stuck - pool.stuck_unfinished} of its "
              f"{pool.stuck} stuck session(s) got past their position and ended, {pool.stuck_unfinished} had not "
              "ended when the run did (stuck counts, as seed 002 §3 defines it, every session preempted again "
              "without passing its previous position)"
              for pool in pools if pool.stuck > pool.stuck_unfinished]
    lines += [f"note: pool {format_label(pool.name, pool.index)}'s wait is nan: its {pool.admissions} admission(s) "
              "were of holds that waited in another pool's queue (a hold on several pools waits in its first "
              "pool's, seed 002 §3 Ties)"
              for pool in pools if pool.admissions > 0 and math.isnan(pool.mean_wait)]
    return lines


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]], units: bool = False) -> list[str]:
    """A blank line, the header, a rule of ``-`` as wide as each column, the
    rows: the first column left-aligned, the others right-aligned, two
    spaces between columns, no trailing spaces. A column is as wide as its
    widest cell, in characters (``±`` is one). With ``units``, the first row
    is the columns' units, printed under the header, above the rule."""
    widths = [max(len(cell) for cell in [title] + [row[column] for row in rows]) for column, title in enumerate(header)]

    def format_row(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = "".join("  " + cell.rjust(width) for cell, width in zip(cells[1:], widths[1:]))
        return (first + rest).rstrip()

    if units:
        return (["", format_row(header), format_row(rows[0]), format_row(["-" * width for width in widths])]
                + [format_row(row) for row in rows[1:]])
    return ["", format_row(header), format_row(["-" * width for width in widths])] + [format_row(row) for row in rows]


def format_label(name: str, index: int | None) -> str:
    """A row's name: ``kv[0]`` for a member of a family, ``kv`` otherwise."""
    return name if index is None else f"{name}[{index}]"


def format_fixed(value: float, decimals: int) -> str:
    """``value`` with ``decimals`` decimals; ``nan``, ``inf``, ``-inf``."""
    return f"{value:.{decimals}f}"


def format_optional(value: float | None, decimals: int) -> str:
    """``format_fixed``, or ``-`` where the figure does not apply."""
    return "-" if value is None else format_fixed(value, decimals)


def format_count(value: int | None) -> str:
    """A count, or ``-`` where it does not apply (a stage that is not a step stage)."""
    return "-" if value is None else str(value)


def format_compact(value: float) -> str:
    """A time in the run line: a whole number without ``.0`` (``1000``),
    anything else as the shortest repr of the float (``12.5``, ``inf``)."""
    if math.isfinite(value) and float(value).is_integer() and abs(value) < EXACT_INTEGERS:
        return str(int(value))
    return repr(float(value))


# --------------------------------------------------------------------------
# JSON


def to_json(report: Report) -> dict:
    """The JSON report as a dict, fields in the documented order; a number
    that is not finite (NaN, inf) or a figure that does not apply is None."""
    return {
        "serq_version": SERQ_VERSION,
        "horizon": number(report.horizon),
        "end": number(report.end),
        "warmup": number(report.warmup),
        "seed": report.seed,
        "events": report.events,
        "arrivals": report.arrivals,
        "ended": report.ended,
        "turns": report.turns,
        "mean_live": number(report.mean_live),
        "observes": {
            observe.name: {
                "count": observe.count,
                "mean": number(observe.mean),
                "ci": number(observe.ci),
                "cv2": number(observe.cv2),
                "p99": number(observe.p99),
                "not_finite": observe.not_finite,
            }
            for observe in report.observes
        },
        "gauges": {
            gauge.name: {
                "mean": number(gauge.mean),
                "ci": number(gauge.ci),
                "min": number(gauge.min),
                "max": number(gauge.max),
            }
            for gauge in report.gauges
        },
        "stages": [convert_stage(stage, report.end - report.warmup) for stage in report.stages],
        "pools": [convert_pool(pool) for pool in report.pools],
    }


def convert_stage(stage: StageRecord, span: float = math.nan) -> dict:
    """A stage's JSON object; the step figures are None on other stages."""
    engine = {name: (value if isinstance(value, int) or value is None else number(value))
              for name, value in engine_figures(stage, span).items()}
    return {
        "name": stage.name,
        "index": stage.index,
        "mean_number": number(stage.mean_number),
        "utilization": number(stage.utilization),
        "completed": stage.completed,
        "throughput": number(stage.throughput),
        "mean_wait": number(stage.mean_wait),
        "mean_service": number(stage.mean_service),
        "iterations": stage.iterations,
        "prefill_only": stage.prefill_only,
        "decode_only": stage.decode_only,
        "mixed": stage.mixed,
        "mean_decodes": number(stage.mean_decodes),
        "itl_p50": number(stage.itl_p50),
        "itl_p99": number(stage.itl_p99),
        "empty": stage.empty,
        "tokens": number(stage.tokens) if stage.tokens is not None else None,
        "decodes": stage.decodes,
        "mean_itl": number(stage.mean_itl) if stage.mean_itl is not None else None,
        **engine,
    }


def convert_pool(pool: PoolRecord) -> dict:
    """A pool's JSON object (the explanation lines are text-only)."""
    return {
        "name": pool.name,
        "index": pool.index,
        "mean_used": number(pool.mean_used),
        "mean_cached": number(pool.mean_cached),
        "mean_queue": number(pool.mean_queue),
        "mean_holders": number(pool.mean_holders),
        "mean_wait": number(pool.mean_wait),
        "admissions": pool.admissions,
        "evicted_entries": pool.evicted_entries,
        "evicted_units": number(pool.evicted_units),
        "preemptions": pool.preemptions,
        "spills": pool.spills,
        "rejected": pool.rejected,
        "stuck": pool.stuck,
        "stuck_unfinished": pool.stuck_unfinished,
    }


def number(value: float | None) -> float | None:
    """A float for JSON: None when it is None, NaN or infinite."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def dumps_json(report: Report) -> str:
    """The JSON report as text: two-space indentation, a final newline."""
    return json.dumps(to_json(report), indent=2, allow_nan=False) + "\n"


# --------------------------------------------------------------------------
# Dump


def check_dump(directory: str, observes: tuple[str, ...], gauges: tuple[str, ...]) -> None:
    """Refuse ``--dump DIRECTORY`` before the run when a file ``write_dump``
    will write cannot be written (a usage error naming the option and the
    file), rather than after a long run: the directories are created, and
    each file is opened for appending (and removed again when this made
    it), which is what writing it will need."""
    paths = [os.path.join(directory, f"{name}.csv") for name in observes]
    paths += [os.path.join(directory, "gauge", f"{name}.csv") for name in gauges]
    try:
        os.makedirs(directory, exist_ok=True)
        if gauges:
            os.makedirs(os.path.join(directory, "gauge"), exist_ok=True)
        for path in paths:
            existed = os.path.exists(path)
            with open(path, "a", encoding="utf-8"):
                pass
            if not existed:
                os.remove(path)
    except OSError as error:
        where = error.filename or directory
        raise UsageError(f"--dump {directory}: cannot write {where}: {error.strerror or error}") from None


def write_dump(result: RunResult, directory: str) -> None:
    """Write ``DIRECTORY/NAME.csv`` per observation (``time,session,turn,value``,
    one row per sample after warm-up, in the order taken) and
    ``DIRECTORY/gauge/NAME.csv`` per gauge (``time,value``, its change points
    from time 0), creating the directories. Floats are written with repr(),
    so they read back exactly."""
    files = [
        (
            os.path.join(directory, f"{observe.name}.csv"),
            ["time,session,turn,value"]
            + [
                f"{repr(float(time))},{int(session)},{int(turn)},{repr(float(value))}"
                for time, session, turn, value in observe.samples
            ],
        )
        for observe in result.observes
    ]
    files += [
        (
            os.path.join(directory, "gauge", f"{gauge.name}.csv"),
            ["time,value"] + [f"{repr(float(time))},{repr(float(value))}" for time, value in gauge.points],
        )
        for gauge in result.gauges
    ]
    try:
        os.makedirs(directory, exist_ok=True)
        if result.gauges:
            os.makedirs(os.path.join(directory, "gauge"), exist_ok=True)
        for path, lines in files:
            with open(path, "w", encoding="utf-8", newline="\n") as stream:
                stream.write("\n".join(lines) + "\n")
    except OSError as error:
        where = error.filename or directory
        raise UsageError(f"--dump {directory}: cannot write {where}: {error.strerror or error}") from None
