"""The differential peer: pyserq, the serQ reference implementation (Rust,
on the registry as ``pyserq``), run on our IR, and the comparison of its run
with serq-ref's (``serq-ref peer``; docs/peer.md).

pyserq reads IR version 14; ours is version 13. The two differ, for the
programs both run, in two places: a choose's count is an expression
(``{"Num": n}``, not a number), and a run over several stages names the
program's share on the run itself. ``encode_for_pyserq`` makes those changes
and one of its own: a relative trace path is made absolute against the
program's directory (pyserq reads an IR's trace against the current
directory, serq-ref against the program file's). Attribute types, sides and
``Cost`` conversions are written as version 13 writes them, and pyserq 0.1.6
reads them as they are (docs/peer.md, "What version 14 reads").

pyserq is a test-only dependency (the ``test`` extra): nothing under
``semantics/`` imports this module, and this module imports pyserq only
when a program runs on it (``PeerMissing`` when it is not installed).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass

from semantics import codec, ir
from semantics.errors import ProgramError

#: The IR version pyserq 0.1.6 reads.
PYSERQ_IR_VERSION = 14

#: How to install the peer, said when it is missing.
INSTALL_HINT = "pyserq is missing: it is a test dependency, python3 -m pip install -e '.[test]' (or pyserq==0.1.6)"


class PeerMissing(Exception):
    """pyserq is not installed."""


def encode_for_pyserq(program: ir.Program, base_dir: str | None = None) -> dict:
    """``program`` as the JSON object pyserq reads (IR version 14); a
    relative trace path is joined to ``base_dir`` when one is given."""
    for stage in program.stages:  # pyserq has the seed's rule only (docs/architecture.md, self_preemption)
        if isinstance(stage.kind, ir.Step) and stage.kind.self_preemption != "End":
            raise ProgramError(f"stage {stage.name} has `self preemption continue`, which pyserq does not have (its "
                               f"pass ends when a grower preempts itself): this program cannot be run on pyserq")
        if isinstance(stage.kind, ir.Step) and stage.kind.schedule_ahead:
            raise ProgramError(f"stage {stage.name} has `schedule ahead` (vLLM's asynchronous scheduling), which pyserq "
                               f"does not have: this program cannot be run on pyserq (--set async_scheduling=0 for "
                               f"lib/vllm.sq's synchronous engine)")
        if isinstance(stage.kind, ir.Step) and stage.kind.spec_tokens:
            raise ProgramError(f"stage {stage.name} has `speculate` (speculative decoding), which pyserq does not have: "
                               f"this program cannot be run on pyserq")
    extensions = sorted({n.dist for n in _walk((program.arrival, program.blocks, program.pools, program.stages,
                                                 program.gauges)) if isinstance(n, ir.Sample)
                         and n.dist in ir.EXTENSION_DISTRIBUTIONS})
    if extensions:
        names = ", ".join(f"~{ir.DISTRIBUTIONS[d][0]}" for d in extensions)
        raise ProgramError(f"the program draws {names}, serq-ref's extension of IR v13 (docs/design/draws.md), which "
                           f"pyserq does not have: this program cannot be run on pyserq")
    encoded = codec.encode_program(program)
    encoded["version"] = PYSERQ_IR_VERSION
    for block in encoded["blocks"]:
        for statement in block:
            if not isinstance(statement, dict):
                continue
            if "Choose" in statement:
                statement["Choose"]["count"] = {"Num": float(statement["Choose"]["count"])}
            if "Run" in statement and statement["Run"].get("also"):
                statement["Run"]["share"] = program.share
    trace = encoded.get("trace")
    if trace and base_dir is not None and not os.path.isabs(trace):
        encoded["trace"] = os.path.join(base_dir, trace)
    return encoded


def _pyserq():
    try:
        import pyserq
    except ImportError:
        raise PeerMissing(INSTALL_HINT) from None
    return pyserq


def run_on_pyserq(program: ir.Program, base_dir: str | None = None):
    """pyserq's run of ``program``: its report object (``.json()``, ``.observes``)."""
    try:
        pyserq = _pyserq()
    except PeerMissing as e:
        raise SystemExit(str(e)) from None
    return pyserq.run(pyserq.Program.from_json(json.dumps(encode_for_pyserq(program, base_dir))))


def report_of(program: ir.Program) -> dict:
    """pyserq's report of ``program`` as a JSON object."""
    return json.loads(run_on_pyserq(program).json())


# --------------------------------------------------------------------------
# which programs are deterministic
# --------------------------------------------------------------------------

def _walk(node):
    """Every IR node under ``node`` (dataclasses, tuples), depth first."""
    stack = [node]
    while stack:
        n = stack.pop()
        if dataclasses.is_dataclass(n) and not isinstance(n, type):
            yield n
            stack.extend(getattr(n, f.name) for f in dataclasses.fields(n))
        elif isinstance(n, (tuple, list)):
            stack.extend(n)


def draws(program: ir.Program) -> list[str]:
    """What in ``program`` draws a random number, one phrase per kind, in a
    fixed order; empty for a deterministic program. A draw is a Poisson
    arrival, a trace read in random order, or a ``Sample`` of any
    distribution but ``det`` (which is its argument; sessions, pool and
    stage expressions, gauges and the arrival gap alike)."""
    found: list[str] = []
    if isinstance(program.arrival, ir.Poisson):
        found.append("poisson arrivals")
    if program.trace is not None and not program.trace_ordered:
        found.append("a trace drawn in random order")
    dists = sorted({n.dist.lower() for n in _walk((program.arrival, program.blocks, program.pools, program.stages,
                                                   program.gauges)) if isinstance(n, ir.Sample) and n.dist != "Det"})
    found.extend(f"~{d} draws" for d in dists)
    return found


# --------------------------------------------------------------------------
# the figures compared
# --------------------------------------------------------------------------

#: The run's figures compared (both engines' report fields of that name).
RUN_FIELDS = ("end", "arrivals", "ended", "turns", "mean_live")
#: A pool's figures compared, serq-ref's PoolRecord field = pyserq's Pool field of the same name.
POOL_FIELDS = ("mean_used", "mean_cached", "mean_queue", "mean_holders", "mean_wait", "admissions",
               "evicted_entries", "evicted_units", "preemptions", "spills", "rejected", "stuck")
#: A stage's figures compared by the same name. Utilisation is left out for a
#: fifo stage (pyserq: 1 while any job is present; the seed: busy servers / c).
STAGE_FIELDS = ("mean_number", "utilization", "completed", "throughput", "mean_wait", "mean_service")
#: A step stage's figures besides: its iterations (a count in both); and,
#: when its cost is a constant c, the iterations of each kind and the decode
#: tokens: serq-ref counts them, pyserq reports the fraction of the measured
#: time such iterations were in flight (``prefill_only``, ``decode_only``,
#: ``mixed``) and the time-average decodes in flight (``mean_decodes``), which
#: are count x c / span when every iteration lasts c and lies within the
#: measured interval (iterations x c = the time in flight). With a cost that
#: varies, or an iteration cut by the horizon or the warm-up, serq-ref's
#: report has no durations by kind, and they are not compared.
#: Not compared: the inter-token latency (the two define a gap differently;
#: docs/peer.md).
STEP_FIELDS = ("iterations", "prefill_only", "decode_only", "mixed", "decodes")
#: Figures that are time averages or means of sums (floating sums whose
#: order of addition may differ between the engines): compared to a relative
#: 1e-9; every other figure (counts, and every observation's time and value)
#: exactly.
SUMMED = frozenset({"mean_live", "mean_used", "mean_cached", "mean_queue", "mean_holders", "mean_wait",
                    "mean_number", "utilization", "throughput", "mean_service", "prefill_only",
                    "decode_only", "mixed", "decodes", "mean_itl", "gauge mean"})
RELATIVE = 1e-9


@dataclass(frozen=True)
class Figures:
    """One engine's run of a program, as compared: every observation's
    samples by session serial (each a tuple of (turn, time, value) in the
    order taken), the run's, pools' and stages' figures by name."""

    observations: dict[str, dict[int, tuple[tuple[int, float, float], ...]]]
    run: dict[str, float]
    pools: tuple[tuple[str, dict[str, float]], ...]
    stages: tuple[tuple[str, dict[str, float]], ...]
    gauges: dict[str, float]


def _member(name: str, index) -> str:
    return name if index is None else f"{name}[{int(index)}]"


def _by_serial(rows) -> dict[int, tuple[tuple[int, float, float], ...]]:
    out: dict[int, list[tuple[int, float, float]]] = {}
    for serial, turn, time, value in rows:
        out.setdefault(int(serial), []).append((int(turn), float(time), float(value)))
    return {k: tuple(v) for k, v in sorted(out.items())}


def _constant_cost(program: ir.Program, name: str, index) -> float | None:
    """The cost of the step stage ``name[index]`` when it is a number."""
    for stage in program.stages:
        if stage.name == name and stage.index == index and isinstance(stage.kind, ir.Step):
            return stage.kind.cost.value if isinstance(stage.kind.cost, ir.Num) else None
    return None


def figures_here(program: ir.Program, base_dir: str | None = None) -> Figures:
    """serq-ref's run (semantics.fast.run, the fast engine) and its report
    (semantics.report.build_report: a step stage's inter-token latency)."""
    from semantics.report import build_report
    from semantics import fast

    result = fast.run(program, base_dir=base_dir or os.getcwd())
    report = build_report(result)
    span = result.end - result.warmup
    observations = {r.name: _by_serial((serial, turn, time, value) for time, serial, turn, value in r.samples)
                    for r in result.observes}
    pools = tuple((_member(p.name, p.index), {f: getattr(p, f) for f in POOL_FIELDS}) for p in report.pools)
    stages = []
    for s in report.stages:
        figures = {f: getattr(s, f) for f in STAGE_FIELDS if not (f == "utilization" and s.kind == "fifo")}
        if s.kind == "step":
            figures["iterations"] = s.iterations
            cost = _constant_cost(program, s.name, s.index)
            # count x c is the time only when every iteration lies in [warmup, end]: one cut by the
            # horizon (or the warm-up) counts whole here and in part in pyserq's time fractions
            whole = cost is not None and _same("utilization", s.iterations * cost, s.utilization * span)
            if whole:
                def rate(n: float) -> float:
                    return n * cost / span if span > 0 else math.nan
                figures.update(prefill_only=rate(s.prefill_only), decode_only=rate(s.decode_only),
                               mixed=rate(s.mixed), decodes=rate(s.decodes))
        stages.append((_member(s.name, s.index), figures))
    gauges = {g.name: g.mean for g in report.gauges}
    return Figures(observations, {f: getattr(result, f) for f in RUN_FIELDS}, pools, tuple(stages), gauges)


def figures_on_pyserq(program: ir.Program, base_dir: str | None = None) -> Figures:
    """pyserq's run of the same IR: each Observe's ``sessions``, ``turns``,
    ``times`` and ``samples`` (the values); its Pool and Stage objects."""
    pyserq = _pyserq()
    report = pyserq.run(pyserq.Program.from_json(json.dumps(encode_for_pyserq(program, base_dir))))
    observations = {}
    for name in program.observes:
        o = report.observes.get(name)
        rows = zip(o.sessions, o.turns, o.times, o.samples) if o is not None else ()
        observations[name] = _by_serial(rows)
    pools = tuple((_member(p.name, p.index), {f: getattr(p, f) for f in POOL_FIELDS}) for p in report.pools)
    stages = []
    for s, declared in zip(report.stages, program.stages):
        kind = "fifo" if isinstance(declared.kind, ir.Fifo) else "step" if isinstance(declared.kind, ir.Step) else "ps"
        figures = {f: getattr(s, f) for f in STAGE_FIELDS if not (f == "utilization" and kind == "fifo")}
        if kind == "step":
            figures["iterations"] = s.iterations
            if isinstance(declared.kind.cost, ir.Num):
                figures.update(prefill_only=s.prefill_only, decode_only=s.decode_only, mixed=s.mixed,
                               decodes=s.mean_decodes)
        stages.append((_member(s.name, s.index), figures))
    gauges = {name: g.mean for name, g in report.gauges.items()} if report.gauges else {}
    return Figures(observations, {f: getattr(report, f) for f in RUN_FIELDS}, pools, tuple(stages), gauges)


# --------------------------------------------------------------------------
# the comparison
# --------------------------------------------------------------------------

def _same(field: str, a: float | None, b: float | None) -> bool:
    """Two figures agree: both undefined (NaN here, None or NaN there), equal,
    or within RELATIVE of each other for a SUMMED figure."""
    a, b = (math.nan if x is None else float(x) for x in (a, b))
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if a == b:
        return True
    return field in SUMMED and math.isfinite(a) and math.isfinite(b) and abs(a - b) <= RELATIVE * max(abs(a), abs(b))


def _show(x) -> str:
    if x is None:
        return "none"
    if isinstance(x, float):
        return "nan" if math.isnan(x) else repr(x)
    return str(x)


def _samples(rows: tuple[tuple[int, float, float], ...]) -> str:
    if not rows:
        return "no sample"
    return ", ".join(f"turn {turn} at {_show(time)} = {_show(value)}" for turn, time, value in rows)


def differences(here: Figures, there: Figures) -> list[str]:
    """One line per figure that differs, in the program's order: each
    observation's samples per session (serial), then the run's, the pools'
    and the stages' figures, then the gauges; both values on each line."""
    lines: list[str] = []
    for name in here.observations:
        a, b = here.observations[name], there.observations.get(name, {})
        for serial in sorted(set(a) | set(b)):
            mine, theirs = a.get(serial, ()), b.get(serial, ())
            if mine != theirs:
                k = next((k for k, (x, y) in enumerate(zip(mine, theirs)) if x != y), min(len(mine), len(theirs)))
                where = f"sample {k + 1} of {len(mine)} here, {len(theirs)} there"
                lines.append(f"observe {name}, session {serial}, {where}: serq-ref {_samples(mine[k:k + 1])}; "
                             f"pyserq {_samples(theirs[k:k + 1])}")
    for field in RUN_FIELDS:
        if not _same(field, here.run[field], there.run[field]):
            lines.append(f"run {field}: serq-ref {_show(here.run[field])}, pyserq {_show(there.run[field])}")
    for kind, mine, theirs in (("pool", here.pools, there.pools), ("stage", here.stages, there.stages)):
        for (name, a), (_, b) in zip(mine, theirs):
            for field, value in a.items():
                if not _same(field, value, b[field]):
                    lines.append(f"{kind} {name} {field}: serq-ref {_show(value)}, pyserq {_show(b[field])}")
    for name, value in here.gauges.items():
        if not _same("gauge mean", value, there.gauges.get(name)):
            lines.append(f"gauge {name} mean: serq-ref {_show(value)}, pyserq {_show(there.gauges.get(name))}")
    return lines


@dataclass(frozen=True)
class Comparison:
    here: Figures
    there: Figures
    differences: tuple[str, ...]

    @property
    def agree(self) -> bool:
        return not self.differences


def compare(program: ir.Program, base_dir: str | None = None) -> Comparison:
    """Run ``program`` on both engines and compare (PeerMissing without pyserq)."""
    _pyserq()
    here = figures_here(program, base_dir)
    there = figures_on_pyserq(program, base_dir)
    return Comparison(here, there, tuple(differences(here, there)))
