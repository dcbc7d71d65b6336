"""From a file to a checked program: the one path every command takes.

A ``.sq`` file is compiled by the front end (``semantics.compiler``), a ``.json``
file is read as IR (``semantics.codec``) and validated against the JSON Schema
(``ir_schema``); either way the IR is linked (``semantics.link``), so an IR
from elsewhere gets the same checks as one compiled here.

The compiler's own output is not re-validated against the schema on every
command (jsonschema alone took a fifth of a `check`'s start-up): the tests
hold it to the schema for every example and every fuzzed program
(tests/test_examples.py, tests/test_run_fuzz.py), and `serq-ref ir`, which
writes IR for other tools, validates what it writes (``validate_schema``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from dataclasses import dataclass

from . import ir
from .errors import ErrorLog, ProgramError, Span, UsageError, Warning_
from .sourcemap import SourceMap, add_use_notes
from .textfile import STDIN, read_stdin, read_text


@dataclass(frozen=True)
class Loaded:
    program: ir.Program
    smap: SourceMap
    warnings: tuple[Warning_, ...]
    #: the directory a relative trace path is read from (the program file's)
    base_dir: str


@dataclass(frozen=True)
class Overrides:
    """The run block's values given on the command line (None: keep the file's)."""

    seed: int | None = None
    horizon: float | None = None
    warmup: float | None = None
    arrivals: int | None = None
    sets: tuple[tuple[str, float], ...] = ()


def validate_schema(obj: object, path: str, text: str | None = None) -> None:
    """Validate IR JSON against ir_schema; the error names ``path``, and where in it when the file's
    ``text`` is given."""
    from ir_schema import validate

    try:
        validate(obj)
    except ProgramError as e:
        raise ProgramError(e.message, locate_json(text, path, getattr(e, "json_key", ())), file=path) from None


def locate_json(text: str | None, path: str, key) -> Span | None:
    """The Span of the value at ``key`` in an IR file's ``text`` (a tuple of keys and indices, or the
    codec's `blocks[2][0].Hold` form), or of its nearest enclosing value (issue 23, badin4: an IR file's
    errors named the JSON path alone, without FILE:LINE:COL and the line); None without the text."""
    if text is None:
        return None
    from .jsonpos import nearest, positions

    if isinstance(key, str):
        key = tuple(int(index) if index else name
                    for name, index in re.findall(r"([A-Za-z_][A-Za-z_0-9]*)|\[(\d+)\]", key.lstrip("$")))
    try:
        line_col = nearest(positions(text), tuple(key))
    except (ValueError, IndexError):  # (text json.loads accepted: not expected)
        line_col = None
    return Span(path, *line_col) if line_col else Span(path, 1, 1)


def load_ir_text(text: str, path: str) -> ir.Program:
    """Decode IR JSON text: schema first (it names the JSON path), then the codec."""
    from . import codec

    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ProgramError(f"not JSON: {e.msg}", Span(path, e.lineno, e.colno), file=path) from None
    if isinstance(obj, dict) and obj.get("version") != ir.IR_VERSION:
        version = obj.get("version")
        if "version" not in obj:
            said = "has no `version`"
        elif isinstance(version, int) and not isinstance(version, bool):
            said = f"is IR version {version}"
        else:  # "13", 13.0, true: not the number the format writes
            said = f"gives its version as {json.dumps(version)}, not the number {ir.IR_VERSION}"
        raise ProgramError(f"the IR file {said}; serq-ref reads IR version {ir.IR_VERSION}",
                           locate_json(text, path, ("version",)), file=path)
    validate_schema(obj, path, text)
    try:
        return codec.decode_program(obj)
    except codec.IRFormatError as e:
        raise ProgramError(f"malformed IR at {e.path}: {e.message}" if e.path else e.message,
                           locate_json(text, path, e.path or ()), file=path) from None


#: The commands a program is loaded for: ``check`` and ``ir`` link it whether
#: or not it says how to run (a library has no run block); ``run`` and
#: ``trace`` need a horizon from the file or the command line; ``run`` alone
#: measures, so it alone needs the warm-up to end before the horizon.
COMMANDS = ("check", "ir", "run", "trace")


def load(path: str, overrides: Overrides = Overrides(), command: str = "check") -> Loaded:
    """Compile or read ``path``, apply ``overrides``, validate and link, for
    ``command`` (one of COMMANDS). Every error of the program's run settings
    and of the linker is raised together, in source order."""
    assert command in COMMANDS, command
    if path == "-":  # standard input: an IR file if it is a JSON object, else a .sq program
        text = read_stdin()
        path = STDIN
        ext = ".json" if text.lstrip().startswith("{") else ".sq"
    else:
        ext = os.path.splitext(path)[1]
        if ext not in (".sq", ".json"):
            raise UsageError(f"{path}: expected a .sq program or a .json IR file (or - for standard input)")
        text = read_text(path)  # a missing file is a usage error, before anything else
    if ext == ".sq":
        from .programcache import compile_source_cached

        program, smap = compile_source_cached(text, path, sets=dict(overrides.sets) or None)
    else:
        if overrides.sets:
            raise UsageError("--set applies to .sq programs; an IR file's constants are already folded")
        program = load_ir_text(text, path)  # validated against the schema as it was read
        smap = SourceMap(file=path)
    overridden = apply_overrides(program, overrides)
    if ext == ".json" and overridden is not program:
        from . import codec

        validate_schema(codec.encode_program(overridden), path)
    program = overridden
    from .link import link

    log = ErrorLog([smap.file] if smap.file else [])
    with log.recover():
        check_run_settings(program, overrides, smap, command)  # a UsageError is raised at once
    warnings: list[Warning_] = []
    with log.recover():
        warnings = link(program, smap, errors_elsewhere=bool(log.errors))
    for error in log.errors:  # one in a used file is located there and at the uses that read it
        add_use_notes(error, smap.uses)
    log.raise_errors()
    warnings = list_idleness_warnings(program, smap, command) + list(warnings)
    base_dir = os.getcwd() if path == STDIN else os.path.dirname(os.path.abspath(path))
    return Loaded(program, smap, tuple(warnings), base_dir)


def check_run_settings(program: ir.Program, overrides: Overrides, smap: SourceMap, command: str) -> None:
    """The run settings (seed 002 §2, the run block) a command needs, each
    from the file or the command line, which overrides it. A value the
    command line gave is blamed on its option (a UsageError, exit 2), one the
    file gave at its place in the run block (a ProgramError).

    - ``run`` and ``trace`` need a horizon: a program without one (a library,
      a program without a run block) is checked and compiled without, and
      "no horizon" is said only by a command that runs, only when neither the
      file nor --horizon gives one;
    - an infinite horizon runs until ``arrivals N`` have drained, so needs N
      (seed 002 §2: "horizon bounds both arrival generation and draining");
    - ``arrivals N`` needs an open workload (arrive poisson or renewal);
    - ``run`` measures over [warmup, end] (seed 002 §3 Statistics), so the
      warm-up must end before a finite horizon; ``check`` and ``ir`` say so
      when the file itself writes both, ``trace`` measures nothing.
    """
    written = smap.settings  # None: an IR file, which has every setting

    def from_file(name: str) -> bool:
        return getattr(overrides, name) is None and (written is None or name in written)

    def place(name: str) -> Span | None:
        return (written or {}).get(name, smap.run)

    runs = command in ("run", "trace")
    has_horizon = overrides.horizon is not None or from_file("horizon")
    if runs and not has_horizon:
        raise ProgramError("no horizon: write `run { horizon T; }` in the program, or give --horizon T",
                           smap.run, file=smap.file)
    if runs and program.horizon == math.inf and program.arrivals is None:
        if overrides.horizon is not None:
            raise UsageError("--horizon inf: no arrival limit ends the run, so it would never stop; give "
                             "--arrivals N too (an infinite horizon runs until N arrivals have drained), or a "
                             "finite --horizon")
        raise ProgramError(prefix_ir_path(smap, "horizon",
                           "the horizon is inf and no `arrivals N` ends the run: it would never stop (an infinite "
                           "horizon runs until N open arrivals have drained; write `run { horizon T; }` or add "
                           "`arrivals N;`, or give --horizon T or --arrivals N)"), place("horizon"), file=smap.file)
    if program.arrivals is not None and not isinstance(program.arrival, (ir.Poisson, ir.Renewal)):
        kind = describe_arrival(program.arrival)
        if overrides.arrivals is not None:
            raise UsageError(f"--arrivals {program.arrivals}: an arrival limit needs an open workload (arrive "
                             f"poisson or arrive renewal), and this program's is {kind}")
        raise ProgramError(prefix_ir_path(smap, "arrivals",
                           f"`arrivals {program.arrivals}` needs an open workload (arrive poisson or arrive "
                           f"renewal), and this program's is {kind}"), place("arrivals"), file=smap.file)
    if command == "run":  # a trace is as long as its --steps
        check_arrival_count(program, overrides, smap)
    measured = command == "run" or (command in ("check", "ir") and from_file("warmup") and from_file("horizon"))
    if measured and has_horizon and program.horizon > 0 and not program.warmup < program.horizon:  # (the link: > 0)
        message = (f"the warm-up ({program.warmup:g}) ends at or after the horizon ({program.horizon:g}): "
                   "nothing would be measured")
        if overrides.horizon is not None or overrides.warmup is not None:
            options = " and ".join(f"--{name} {value:g}" for name, value in
                                   (("horizon", overrides.horizon), ("warmup", overrides.warmup)) if value is not None)
            raise UsageError(f"{options}: {message}; give a longer --horizon or a shorter --warmup")
        raise ProgramError(prefix_ir_path(smap, "warmup", message + "; the horizon must be longer than the warm-up"),
                           smap.run, file=smap.file)


def list_idleness_warnings(program: ir.Program, smap: SourceMap, command: str = "check") -> list[Warning_]:
    """A program that can do nothing gets a warning (issue 13): sessions
    that never arrive (no workload, or `arrive none;`), or arrivals whose
    session is empty. A library, with neither, is definitions only: `check`
    on it checks its declarations and says it is a library (command_check),
    and a command that runs it gets the warning that the run does nothing
    (issue 23: an empty program ran 0 events without a word)."""
    arrives = not isinstance(program.arrival, ir.NoArrival)
    acts = bool(program.blocks[program.session])
    if arrives == acts:
        if arrives or command not in ("run", "trace"):
            return []
        message = ("the program has no workload and no session statements (an empty program, or a library of "
                   "definitions that a program reads with `use`), so a run does nothing")
        return [Warning_(message, smap.arrival, smap.file)]
    if acts:
        message = ("the program starts no session: its workload has no arrival process (arrive poisson, renewal, "
                   "closed or batch, or a trace), so a run does nothing")
        return [Warning_(message, smap.arrival, smap.file)]
    message = "the sessions do nothing: the program has arrivals but no session statements, so a run does nothing"
    return [Warning_(message, smap.arrival, smap.file)]


#: The most arrivals a run is started for (issue 13, "No silent hang"): serq-ref takes about 50 000
#: arrivals a second, so 10^8 is over half an hour, and `arrive poisson(1e17);` over a horizon of 1
#: ran for minutes with the progress bar at 0 % before this.
MAX_ARRIVALS = 100_000_000


def check_arrival_count(program: ir.Program, overrides: Overrides, smap: SourceMap) -> None:
    """An open workload's expected arrivals (poisson: one at 0, then rate ×
    horizon; renewal with a constant gap: horizon / gap; never more than an
    arrival limit) above MAX_ARRIVALS stop the command before the run, at the
    arrival clause (or --arrivals, when it asks for more)."""
    arrival = program.arrival
    if isinstance(arrival, ir.Poisson):
        expected, what = 1 + arrival.rate * program.horizon, f"arrive poisson({arrival.rate:g})"
    elif isinstance(arrival, ir.Renewal) and isinstance(arrival.gap, ir.Num) and arrival.gap.value > 0:
        expected, what = program.horizon / arrival.gap.value, f"arrive renewal({arrival.gap.value:g})"
    else:
        return
    if program.arrivals is not None:
        if program.arrivals > MAX_ARRIVALS and overrides.arrivals is not None:
            raise UsageError(f"--arrivals {program.arrivals}: serq-ref runs at most {MAX_ARRIVALS:,} arrivals "
                             "(about 50 000 a second)")
        expected = min(expected, program.arrivals)
    if not expected > MAX_ARRIVALS:  # a NaN (0 × inf) is no estimate
        return
    horizon = f"--horizon {program.horizon:g}" if overrides.horizon is not None else f"horizon {program.horizon:g}"
    raise ProgramError(prefix_ir_path(smap, "arrival",
                       f"{what} over the {horizon} is about {expected:.3g} arrivals; serq-ref runs at most "
                       f"{MAX_ARRIVALS:,} (it takes about 50 000 a second): a rate this high is a model of its own "
                       "(a shorter horizon, or `arrivals N`)"), smap.arrival, file=smap.file)


def prefix_ir_path(smap: SourceMap, field: str, message: str) -> str:
    """An IR file's error names the program field (docs/linking.md)."""
    return message if smap.settings is not None else f"{field}: {message}"


def describe_arrival(arrival: ir.Arrival) -> str:
    names = {ir.Closed: "closed", ir.Batch: "a batch", ir.Sessions: "explicit sessions", ir.NoArrival: "none"}
    return names.get(type(arrival), type(arrival).__name__)


def apply_overrides(program: ir.Program, o: Overrides) -> ir.Program:
    changes: dict[str, object] = {}
    if o.seed is not None:
        changes["seed"] = o.seed
    if o.horizon is not None:
        changes["horizon"] = o.horizon
    if o.warmup is not None:
        changes["warmup"] = o.warmup
    if o.arrivals is not None:
        changes["arrivals"] = o.arrivals
    return dataclasses.replace(program, **changes) if changes else program
