"""``serq-ref sweep FILE --set NAME=V1,V2,... | NAME=START:STOP:STEP ...``: a
program run at every point of the cross product of the settings' values,
``--seeds K`` runs a point, every report figure per point with its mean and a
95 % Student t confidence interval over the seeds (docs/sweep.md).

- Values: a list ``V1,V2,...`` is taken as written, in the order given; a
  range ``START:STOP:STEP`` is START, START + STEP, ... up to STOP inclusive
  when the steps land on it, counted in exact decimal arithmetic (so
  ``0.1:0.3:0.1`` is 0.1, 0.2, 0.3, never 0.30000000000000004), each value
  printed with as many decimals as START or STEP has (``2.5:5:0.5`` is 2.5,
  3.0, ..., 5.0) and run as the float nearest that decimal.
- Points: the cross product in the order of the ``--set`` options, the last
  varying fastest.
- Seeds: the program's seed (``run { seed N; }`` or ``--seed``), and the
  ``K - 1`` seeds after it, for every point.
- A figure of a run is a number of its JSON report (docs/reports.md): an
  observation ``NAME`` (its mean) and ``NAME.count|ci|cv2|p99``, a gauge
  ``NAME`` and ``NAME.ci|min|max``, ``run.FIELD``, ``stage.NAME.FIELD``,
  ``pool.NAME.FIELD``. Over the seeds: the mean (``fsum / K``) and the
  half-width ``t(0.975, K - 1) * s / sqrt(K)`` (none with one seed); a
  figure a run does not have (NaN, inf, or not applicable) makes the point's
  mean none.
- A cliff: between two neighbouring points of a line (the values of the
  first swept setting, the others held), a figure whose means are all within
  [0, 1] (a fraction) that moves by at least 0.25, or a positive figure that
  moves by a factor of at least 10; the largest such jump of each line is
  the cliff, printed after the table and marked on the plot.

The runs are cases of ``semantics.workers.run_cases``: in this process, on
``--workers N`` processes, or on a Ray cluster (``--ray``), the results in
point order, so the output is the same bytes in every case.
"""

from __future__ import annotations

import argparse
import csv
import functools
import io
import json
import math
import os
import sys
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Sequence

from .arguments import positive
from .errors import SerqError, UsageError

#: The most values of one setting, and the most runs (points × seeds) of a sweep.
MAX_VALUES = 10_000
MAX_RUNS = 100_000
#: A cliff (module docstring): a fraction moving by this much, or a positive figure by this factor.
CLIFF_FRACTION = 0.25
CLIFF_FACTOR = 10.0
#: Student t's level of the intervals over seeds.
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Value:
    text: str  # as printed
    value: float  # as run


@dataclass(frozen=True)
class Setting:
    name: str
    values: tuple[Value, ...]


def _decimal(text: str, what: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"{what} is not a number: {text!r}") from None
    if not value.is_finite():
        raise argparse.ArgumentTypeError(f"{what} must be a finite number: {text!r}")
    return value


def _float(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if math.isnan(value):
        raise argparse.ArgumentTypeError(f"NaN is not a value here ({what})")
    if math.isinf(value) and text.strip().lstrip("+-").lower() not in ("inf", "infinity"):
        raise argparse.ArgumentTypeError(f"{text} overflows a float (at most about 1.8e308) ({what})")
    return value


def parse_setting(text: str) -> Setting:
    """``NAME=V1,V2,...`` or ``NAME=START:STOP:STEP`` (argparse ``type=``)."""
    name, sep, rest = text.partition("=")
    name, rest = name.strip(), rest.strip()
    if not sep or not name or not rest:
        raise argparse.ArgumentTypeError(f"expected NAME=V1,V2,... or NAME=START:STOP:STEP, found {text!r}")
    if ":" in rest:
        parts = [part.strip() for part in rest.split(":")]
        if len(parts) != 3 or not all(parts):
            raise argparse.ArgumentTypeError(f"{name}: a range is START:STOP:STEP, found {rest!r}")
        start, stop, step = (_decimal(p, w) for p, w in zip(parts, ("START", "STOP", "STEP")))
        for part in parts:
            _float(part, name)
        if step == 0:
            raise argparse.ArgumentTypeError(f"{name}={rest}: STEP must not be 0")
        if (stop - start) * step < 0:
            raise argparse.ArgumentTypeError(f"{name}={rest}: STEP {parts[2]} goes away from STOP {parts[1]}, so "
                                             "the range is empty (a negative STEP counts down)")
        count = int((stop - start) / step) + 1
        if count > MAX_VALUES:
            raise argparse.ArgumentTypeError(f"{name}={rest}: {count:,} values; a sweep takes at most "
                                             f"{MAX_VALUES:,} of one setting")
        exponent = min(start.as_tuple().exponent, step.as_tuple().exponent, 0)
        quantum = Decimal(1).scaleb(exponent)
        values = []
        for k in range(count):
            decimal = (start + k * step).quantize(quantum)
            shown = format(decimal, "f")
            values.append(Value(shown, _float(shown, name)))
    else:
        parts = [part.strip() for part in rest.split(",")]
        if not all(parts):
            raise argparse.ArgumentTypeError(f"{name}: an empty value in {rest!r}")
        values = [Value(part, _float(part, name)) for part in parts]
        if len(values) > MAX_VALUES:
            raise argparse.ArgumentTypeError(f"{name}: {len(values):,} values; at most {MAX_VALUES:,}")
    seen: dict[float, str] = {}
    for v in values:
        if v.value in seen:
            raise argparse.ArgumentTypeError(f"{name}: the value {v.text} is given twice (as {seen[v.value]})")
        seen[v.value] = v.text
    return Setting(name, tuple(values))


# --------------------------------------------------------------------------
# one run: a case of the sweep
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """A case: the program, a point's values, the run settings, a seed."""

    path: str
    sets: tuple[tuple[str, float], ...]
    horizon: float | None
    warmup: float | None
    arrivals: int | None
    seed: int
    warn: bool  # return the link warnings (the point's first seed)
    engine: str = "fast"  # cli_common.ENGINES: the results are the same bytes on either


@functools.lru_cache(maxsize=8)
def _load(path: str, sets, horizon, warmup, arrivals):
    from .pipeline import Overrides, load

    return load(path, Overrides(horizon=horizon, warmup=warmup, arrivals=arrivals, sets=sets), "run")


def run_point(case: Run) -> dict:
    """The run's figures (``flatten``) and, when asked, its warnings as printed."""
    import dataclasses

    from .cli_common import source_of, with_statement_span
    from .errors import format_diagnostic
    from .cli_common import engine_run
    from .report import build_report, to_json

    run = engine_run(case.engine)
    loaded = _load(case.path, case.sets, case.horizon, case.warmup, case.arrivals)
    program = dataclasses.replace(loaded.program, seed=case.seed)
    result = with_statement_span(loaded, lambda: run(program, base_dir=loaded.base_dir))
    warnings = []
    if case.warn:
        warnings = [format_diagnostic("warning", w.message, w.span, w.file, source_of(w.span.file) if w.span else None)
                    for w in loaded.warnings]
    return {"figures": flatten(to_json(build_report(result))), "warnings": warnings,
            "tests": [record.name for record in result.observes if record.is_test]}


def flatten(report: dict) -> dict[str, float | None]:
    """The figures of a JSON report by name (module docstring), in the report's order."""
    out: dict[str, float | None] = {}
    for name, figures in report["observes"].items():
        out[name] = figures["mean"]
        for key in ("count", "ci", "cv2", "p99"):
            out[f"{name}.{key}"] = figures[key]
    for name, figures in report["gauges"].items():
        out[name] = figures["mean"]
        for key in ("ci", "min", "max"):
            out[f"{name}.{key}"] = figures[key]
    for key in ("end", "events", "arrivals", "ended", "turns", "mean_live"):
        out[f"run.{key}"] = report[key]
    for kind in ("stages", "pools"):
        for entry in report[kind]:
            label = entry["name"] if entry["index"] is None else f"{entry['name']}[{entry['index']}]"
            for key, value in entry.items():
                if key not in ("name", "index") and value is not None:
                    out[f"{kind[:-1]}.{label}.{key}"] = value
    return {name: (None if value is None else float(value) if isinstance(value, float) else value)
            for name, value in out.items()}


# --------------------------------------------------------------------------
# the sweep
# --------------------------------------------------------------------------


@dataclass
class Sweep:
    path: str
    settings: tuple[Setting, ...]
    seeds: tuple[int, ...]
    points: list[tuple[Value, ...]]
    results: list[list[dict]]  # per point, per seed: the figures

    @property
    def swept(self) -> list[int]:
        """The settings with more than one value (the table's first columns)."""
        return [i for i, s in enumerate(self.settings) if len(s.values) > 1]

    def figure_names(self) -> list[str]:
        names: dict[str, None] = {}
        for runs in self.results:
            for figures in runs:
                names.update(dict.fromkeys(figures))
        return list(names)

    def summary(self, point: int, name: str) -> tuple[float | None, float | None, list]:
        """The figure's mean and half-width over the point's seeds, and its values."""
        values = [figures.get(name) for figures in self.results[point]]
        if any(v is None or not math.isfinite(v) for v in values):
            return None, None, values
        return mean_and_half_width(values) + (values,)


def mean_and_half_width(values: Sequence[float]) -> tuple[float, float | None]:
    """``fsum / K`` and ``t(0.975, K - 1) * s / sqrt(K)`` (None with one value)."""
    from .statistics import calculate_sample_variance, calculate_student_t_quantile

    mean = math.fsum(values) / len(values)
    if len(values) < 2:
        return mean, None
    t = calculate_student_t_quantile(0.5 + CONFIDENCE / 2, len(values) - 1)
    return mean, t * math.sqrt(calculate_sample_variance(values) / len(values))


def plan(path: str, settings: Sequence[Setting], seeds: Sequence[int], horizon, warmup, arrivals,
         engine: str = "fast") -> tuple[list, list]:
    """The points (cross product, the last setting fastest) and the runs (each point's seeds in order), on ``engine``."""
    import itertools

    points = list(itertools.product(*(s.values for s in settings)))
    runs = [Run(path, tuple((s.name, v.value) for s, v in zip(settings, point)), horizon, warmup, arrivals, seed,
                warn=(k == 0), engine=engine)
            for point in points for k, seed in enumerate(seeds)]
    return points, runs


def cliffs(sweep: Sweep, names: Sequence[str]) -> list[dict]:
    """The cliff of each line and figure (module docstring), in line then figure order."""
    swept = sweep.swept
    if not swept:
        return []
    x = swept[0]
    lines: dict[tuple, list[int]] = {}
    for i, point in enumerate(sweep.points):
        key = tuple(v.text for j, v in enumerate(point) if j != x)
        lines.setdefault(key, []).append(i)
    out = []
    for key, members in lines.items():
        members = sorted(members, key=lambda i: sweep.points[i][x].value)
        for name in names:
            means = [sweep.summary(i, name)[0] for i in members]
            known = [m for m in means if m is not None]
            fraction = bool(known) and all(0.0 <= m <= 1.0 for m in known)
            best = None
            for a, b, ma, mb in zip(members, members[1:], means, means[1:]):
                if ma is None or mb is None:
                    continue
                if fraction:
                    size = abs(mb - ma)
                    if size >= CLIFF_FRACTION and (best is None or size > best[0]):
                        best = (size, a, b, ma, mb)
                elif ma > 0 and mb > 0:
                    size = max(ma, mb) / min(ma, mb)
                    if size >= CLIFF_FACTOR and (best is None or size > best[0]):
                        best = (size, a, b, ma, mb)
            if best is not None:
                size, a, b, ma, mb = best
                others = {sweep.settings[j].name: sweep.points[a][j].text for j in swept if j != x}
                out.append({"figure": name, "setting": sweep.settings[x].name, "from": sweep.points[a][x].text,
                            "to": sweep.points[b][x].text, "from_mean": ma, "to_mean": mb,
                            "rule": "fraction" if fraction else "factor",
                            "size": size, "others": others})
    return out


def describe_cliff(cliff: dict) -> str:
    held = "".join(f", {name}={text}" for name, text in cliff["others"].items())
    how = (f"moves by {cliff['size']:.4g}" if cliff["rule"] == "fraction"
           else f"changes by a factor of {cliff['size']:.4g}")
    return (f"cliff: {cliff['figure']} {how} between {cliff['setting']}={cliff['from']} ({_g(cliff['from_mean'])}) "
            f"and {cliff['setting']}={cliff['to']} ({_g(cliff['to_mean'])}){held}")


def _g(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


# --------------------------------------------------------------------------
# units and output
# --------------------------------------------------------------------------

#: The unit of a figure by its last part (docs/sweep.md): times are in the
#: program's own time unit, a count is a number of things.
TIME = ("ci_time", "end", "mean_wait", "mean_service", "itl_p50", "itl_p99", "mean_itl")
COUNT = ("count", "events", "arrivals", "ended", "turns", "completed", "iterations", "prefill_only", "decode_only",
         "mixed", "empty", "decodes", "admissions", "evicted_entries", "preemptions", "spills", "rejected", "stuck",
         "stuck_unfinished")


def unit(name: str, tests: set[str]) -> str:
    """A short unit for the table's second header line."""
    base, _, field = name.rpartition(".")
    if not base:
        return "fraction" if name in tests else "mean"
    if base in tests and field in ("ci", "p99"):
        return "fraction"
    if field in COUNT:
        return "count"
    if field in TIME:
        return "time"
    if field in ("throughput", "preemption_rate"):
        return "per time"
    if field in ("utilization", "budget_used"):
        return "fraction"
    if field == "tokens_per_iteration":
        return "tokens/iter"
    if field == "mean_batch":
        return "seqs/iter"
    if field == "cv2":
        return "ratio"
    if field == "tokens":
        return "tokens"
    return "mean"


def default_figures(sweep: Sweep, observes: Sequence[str], gauges: Sequence[str]) -> list[str]:
    return [name for name in list(observes) + list(gauges) if name in sweep.figure_names()]


def format_table(sweep: Sweep, names: Sequence[str], tests: set[str]) -> str:
    from .report import format_table as table

    swept = sweep.swept
    fixed = [s for i, s in enumerate(sweep.settings) if i not in swept]
    seeds = sweep.seeds
    seed_text = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}-{seeds[-1]}"
    lines = [f"sweep: {sweep.path}, {len(sweep.points)} point{'s' * (len(sweep.points) != 1)} x {len(seeds)} "
             f"seed{'s' * (len(seeds) != 1)} ({seed_text})"
             + (", " + " ".join(f"{s.name}={s.values[0].text}" for s in fixed) if fixed else "")]
    if len(seeds) > 1:
        lines.append("each figure: the mean over the seeds ± the 95 % Student t half-width")
    header = [sweep.settings[i].name for i in swept] + list(names)
    units = ["" for _ in swept] + [f"({unit(name, tests)})" for name in names]
    if not swept:
        header, units = ["point"] + header, [""] + units
    rows = [units]
    for p, point in enumerate(sweep.points):
        cells = [point[i].text for i in swept] if swept else [str(p + 1)]
        for name in names:
            mean, half, _ = sweep.summary(p, name)
            cells.append("-" if mean is None else f"{mean:.4g}" if half is None else f"{mean:.4g} ± {half:.2g}")
        rows.append(cells)
    drawn = table(header, rows)[1:]
    lines += [drawn[0], drawn[2], drawn[1]] + drawn[3:]  # the units under the names, then the rule
    found = cliffs(sweep, names)
    if found:
        lines.append("")
        lines += [describe_cliff(c) for c in found]
    return "\n".join(lines) + "\n"


def to_json(sweep: Sweep, names: Sequence[str]) -> dict:
    def number(value):
        return None if value is None or not math.isfinite(value) else value

    points = []
    for p, point in enumerate(sweep.points):
        figures = {}
        for name in sweep.figure_names():
            mean, half, values = sweep.summary(p, name)
            figures[name] = {"mean": number(mean), "ci": number(half), "values": [number(v) for v in values]}
        points.append({"set": {s.name: v.text for s, v in zip(sweep.settings, point)}, "figures": figures})
    return {
        "program": sweep.path,
        "settings": {s.name: [v.text for v in s.values] for s in sweep.settings},
        "seeds": list(sweep.seeds),
        "confidence": CONFIDENCE,
        "points": points,
        "cliffs": cliffs(sweep, names),
    }


def write_csv(sweep: Sweep, path: str) -> None:
    names = sweep.figure_names()
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([s.name for s in sweep.settings] + [column for name in names for column in (name, f"{name}:ci")])
    for p, point in enumerate(sweep.points):
        row = [v.text for v in point]
        for name in names:
            mean, half, _ = sweep.summary(p, name)
            row += ["" if mean is None else repr(mean), "" if half is None else repr(half)]
        writer.writerow(row)
    _write(path, out.getvalue(), "--csv")


def _write(path: str, text: str, option: str) -> None:
    try:
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    except OSError as e:
        raise UsageError(f"{option} {path}: cannot write it: {e.strerror}") from None


def check_plot(path: str) -> None:
    """Before the runs: a .png or .svg name and matplotlib installed."""
    if os.path.splitext(path)[1].lower() not in (".png", ".svg"):
        raise UsageError(f"--plot {path}: the picture is a .png or an .svg file")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("--plot needs matplotlib, an optional extra: python3 -m pip install -e '.[plot]'") from None


def plot(sweep: Sweep, names: Sequence[str], path: str) -> None:
    """Each figure against the first swept setting, one line per value of the
    others, the intervals as error bars, a cliff as a shaded band."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "serq-ref sweep"
    matplotlib.rcParams["path.simplify"] = False
    import matplotlib.pyplot as plt

    swept = sweep.swept
    x = swept[0]
    xname = sweep.settings[x].name
    lines: dict[tuple, list[int]] = {}
    for i, point in enumerate(sweep.points):
        lines.setdefault(tuple((sweep.settings[j].name, point[j].text) for j in swept if j != x), []).append(i)
    found = cliffs(sweep, names)
    fig, axes = plt.subplots(len(names), 1, figsize=(7, 2.6 * len(names) + 0.6), sharex=True, squeeze=False)
    fixed = [s for i, s in enumerate(sweep.settings) if i not in swept]
    title = os.path.basename(sweep.path) + "".join(f", {s.name}={s.values[0].text}" for s in fixed)
    if len(sweep.seeds) > 1:
        title += f"; mean of {len(sweep.seeds)} seeds, 95 % interval"
    fig.suptitle(title, fontsize=10)
    for axis, name in zip(axes[:, 0], names):
        positive = []
        for key, members in lines.items():
            members = sorted(members, key=lambda i: sweep.points[i][x].value)
            xs, ys, errs = [], [], []
            for i in members:
                mean, half, _ = sweep.summary(i, name)
                if mean is None:
                    continue
                xs.append(sweep.points[i][x].value)
                ys.append(mean)
                errs.append(0.0 if half is None else half)
            positive += ys
            label = ", ".join(f"{n}={t}" for n, t in key) or None
            axis.errorbar(xs, ys, yerr=errs if any(errs) else None, marker="o", capsize=3, label=label)
        if positive and min(positive) > 0 and max(positive) / min(positive) > 100:
            axis.set_yscale("log")
        for cliff in (c for c in found if c["figure"] == name):
            a, b = sorted((float(cliff["from"]), float(cliff["to"])))
            axis.axvspan(a, b, color="tab:red", alpha=0.15)
            axis.annotate("cliff", xy=((a + b) / 2, 0.92), xycoords=("data", "axes fraction"), ha="center",
                          color="tab:red", fontsize=9)
        axis.set_ylabel(name)
        axis.grid(True, alpha=0.3)
        if len(lines) > 1:
            axis.legend(fontsize=8)
    axes[-1, 0].set_xlabel(xname)
    fig.tight_layout()
    try:
        if path.lower().endswith(".svg"):
            fig.savefig(path, metadata={"Date": None, "Creator": None})
        else:
            fig.savefig(path, dpi=110, metadata={"Software": None})
    except OSError as e:
        raise UsageError(f"--plot {path}: cannot write it: {e.strerror}") from None
    finally:
        plt.close(fig)


# --------------------------------------------------------------------------
# the command
# --------------------------------------------------------------------------


def add_parser(commands) -> None:
    from .arguments import arrival_count, horizon, warmup, whole

    p = commands.add_parser("sweep", help="run a program at every point of a cross product of settings, K seeds "
                                          "each: every figure's mean and interval per point (docs/sweep.md)")
    p.add_argument("file", metavar="FILE", help="the program: a .sq source")
    p.add_argument("--set", dest="sets", action="append", type=parse_setting, default=[],
                   metavar="NAME=V1,V2,...|NAME=START:STOP:STEP",
                   help="the values of the constant `let NAME = …;`: a list, or a range with STOP included when "
                        "the steps land on it (exact decimals); repeatable, the points are the cross product, the "
                        "last --set varying fastest. A single value holds NAME there")
    p.add_argument("--seeds", type=positive, default=1, metavar="K",
                   help="runs per point: the program's seed (or --seed) and the K - 1 after it. Default: 1")
    p.add_argument("--seed", type=whole, metavar="N", help="the first seed. Default: the file's, else 1")
    p.add_argument("--horizon", type=horizon, metavar="T", help="overrides `run { horizon T; }`. Default: the file's")
    p.add_argument("--warmup", type=warmup, metavar="T", help="overrides `run { warmup T; }`. Default: the file's")
    p.add_argument("--arrivals", type=arrival_count, metavar="N",
                   help="overrides `run { arrivals N; }`. Default: the file's")
    p.add_argument("--y", metavar="FIG,FIG,...",
                   help="the figures the table and the plot show (docs/sweep.md names them: an observation's "
                        "NAME is its mean, NAME.p99 ...). Default: every observation's and gauge's mean")
    p.add_argument("--json", action="store_true",
                   help="print every figure of every point as JSON instead of the table")
    p.add_argument("--csv", metavar="OUT", help="also write every figure's mean and half-width per point to OUT")
    p.add_argument("--plot", metavar="OUT.png|OUT.svg",
                   help="also draw the --y figures against the first swept setting, with their intervals and the "
                        "cliffs (needs the optional extra plot: matplotlib)")
    from .cli_common import engine_argument
    from .workers import add_arguments

    engine_argument(p)
    add_arguments(p)


USAGE = ("usage: serq-ref sweep FILE --set NAME=V1,V2,...|NAME=START:STOP:STEP [--set ...] [--seeds K] "
         "[--y FIG,...] [--json] [--csv OUT] [--plot OUT.png|.svg] [--workers N | --ray ADDRESS|auto] "
         "[--resume FILE]")


def command(args: argparse.Namespace) -> int:
    from .pipeline import Overrides, load
    from .progress import CaseProgress
    from .workers import Journal, fingerprint, run_cases

    if not args.file.endswith(".sq"):
        raise UsageError(f"{args.file}: sweep takes a .sq program (its `let` constants are what --set sweeps)")
    if not args.sets:
        raise UsageError(f"sweep needs at least one --set NAME=V1,V2,... (or NAME=START:STOP:STEP)\n{USAGE}")
    names = [s.name for s in args.sets]
    for name in names:
        if names.count(name) > 1:
            raise UsageError(f"--set {name}=...: given twice; give every value of {name} in one --set")
    points = math.prod(len(s.values) for s in args.sets)
    if points * args.seeds > MAX_RUNS:
        raise UsageError(f"--set and --seeds ask for {points:,} points x {args.seeds} seeds = {points * args.seeds:,} "
                         f"runs; a sweep runs at most {MAX_RUNS:,}")
    if args.plot is not None:
        check_plot(args.plot)
        if not any(len(s.values) > 1 for s in args.sets):
            raise UsageError("--plot draws figures against a swept setting: give one --set two values or more")
    # the first point, loaded here: a bad program or a NAME the program does not declare stops the sweep at once
    first = Overrides(seed=args.seed, horizon=args.horizon, warmup=args.warmup, arrivals=args.arrivals,
                      sets=tuple((s.name, s.values[0].value) for s in args.sets))
    loaded = load(args.file, first, "run")  # an undeclared NAME is a usage error of its own (syntax.desugar)
    base_seed = loaded.program.seed
    seeds = tuple(range(base_seed, base_seed + args.seeds))
    observes = list(loaded.program.observes)
    gauges = [g.name for g in loaded.program.gauges]
    tests: set[str] = set()
    y = None
    if args.y is not None:
        y = [name.strip() for name in args.y.split(",") if name.strip()]
        if not y:
            raise UsageError("--y: no figure named")
        unknown = [name for name in y if not known_figure(name, loaded.program)]
        if unknown:
            raise UsageError(f"--y {','.join(unknown)}: no such figure of this program (an observation or gauge "
                             f"NAME, NAME.p99 ..., run.FIELD, stage.NAME.FIELD, pool.NAME.FIELD: docs/sweep.md; "
                             f"its observations and gauges: {', '.join(observes + gauges) or 'none'})")
    point_list, runs = plan(args.file, args.sets, seeds, args.horizon, args.warmup, args.arrivals, args.engine)
    journal = None
    if args.resume is not None:
        key = fingerprint("sweep", os.path.abspath(args.file), _file_text(args.file),
                          [(s.name, [v.text for v in s.values]) for s in args.sets], seeds,
                          args.horizon, args.warmup, args.arrivals)
        journal = Journal(args.resume, key, len(runs))
    results: list[dict] = []
    with CaseProgress(len(runs), "sweep", unit="run") as progress:
        try:
            outcomes = run_cases(run_point, runs, workers=args.workers, ray=args.ray, progress=progress,
                                 journal=journal)
        except UsageError as e:
            if journal is not None:
                journal.close()
            raise UsageError(f"{e.message}\n{USAGE}") from None
        try:
            warned: set[str] = set()
            for case, result in zip(runs, outcomes):
                for line in result["warnings"]:  # each warning once, however many points it holds at
                    if line not in warned:
                        warned.add(line)
                        progress.write(line)
                results.append(result["figures"])
                tests.update(result["tests"])
        except SerqError as e:
            at = len(results)
            point = point_list[at // len(seeds)]
            where = " ".join(f"{s.name}={v.text}" for s, v in zip(args.sets, point))
            progress.write(f"serq-ref: sweep stopped at the point {where}, seed {seeds[at % len(seeds)]}:")
            raise e
        finally:
            if journal is not None:
                journal.close()
    sweep = Sweep(args.file, tuple(args.sets), seeds, point_list,
                  [results[p * len(seeds):(p + 1) * len(seeds)] for p in range(len(point_list))])
    known = sweep.figure_names()
    names = y if y is not None else default_figures(sweep, observes, gauges)
    missing = [name for name in names if name not in known]
    if missing:  # a step figure of a stage that is not a step stage: the runs have none
        raise UsageError(f"--y {','.join(missing)}: the runs have no such figure (docs/sweep.md)")
    if not names:
        names = [name for name in known if name.startswith("run.")][:3]
    if args.csv is not None:
        write_csv(sweep, args.csv)
    if args.plot is not None:
        plot(sweep, names, args.plot)
    if args.json:
        sys.stdout.write(json.dumps(to_json(sweep, names), indent=1, allow_nan=False) + "\n")
    else:
        sys.stdout.write(format_table(sweep, names, tests))
    return 0


OBSERVE_FIELDS = ("count", "ci", "cv2", "p99")
GAUGE_FIELDS = ("ci", "min", "max")
RUN_FIELDS = ("end", "events", "arrivals", "ended", "turns", "mean_live")
STAGE_FIELDS = ("mean_number", "utilization", "completed", "throughput", "mean_wait", "mean_service", "iterations",
                "prefill_only", "decode_only", "mixed", "mean_decodes", "itl_p50", "itl_p99", "empty", "tokens",
                "decodes", "mean_itl", "tokens_per_iteration", "mean_batch", "budget_used", "preemptions",
                "preemption_rate")
POOL_FIELDS = ("mean_used", "mean_cached", "mean_queue", "mean_holders", "mean_wait", "admissions", "evicted_entries",
               "evicted_units", "preemptions", "spills", "rejected", "stuck", "stuck_unfinished")


def known_figure(name: str, program) -> bool:
    """Whether ``name`` names a figure the program's runs report (``flatten``), before they run."""
    observes, gauges = set(program.observes), {g.name for g in program.gauges}
    if name in observes or name in gauges:
        return True
    base, _, field = name.rpartition(".")
    if base in observes:
        return field in OBSERVE_FIELDS
    if base in gauges:
        return field in GAUGE_FIELDS
    if base == "run":
        return field in RUN_FIELDS
    kind, _, label = base.partition(".")
    declared = {"stage": program.stages, "pool": program.pools}.get(kind)
    if declared is None:
        return False
    labels = {d.name if d.index is None else f"{d.name}[{d.index}]" for d in declared}
    return label in labels and field in (STAGE_FIELDS if kind == "stage" else POOL_FIELDS)


def _file_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""
