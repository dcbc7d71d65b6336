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
import os
from dataclasses import dataclass

from . import ir
from .errors import ProgramError, UsageError, Warning_
from .sourcemap import SourceMap


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


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise UsageError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory, not a program") from None
    except UnicodeDecodeError as e:
        raise ProgramError(f"not UTF-8 text ({e.reason} at byte {e.start})", file=path) from None
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None


def validate_schema(obj: object, path: str) -> None:
    """Validate IR JSON against ir_schema; the error names ``path``."""
    from ir_schema import validate

    try:
        validate(obj)
    except ProgramError as e:
        raise ProgramError(e.message, file=path) from None


def load_ir_text(text: str, path: str) -> ir.Program:
    """Decode IR JSON text: schema first (it names the JSON path), then the codec."""
    from . import codec

    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ProgramError(f"not JSON: {e.msg} (line {e.lineno}, column {e.colno})", file=path) from None
    if isinstance(obj, dict) and obj.get("version") != ir.IR_VERSION:
        raise ProgramError(
            f"IR version {obj.get('version')} is not IR version {ir.IR_VERSION}, which serq-ref reads", file=path
        )
    validate_schema(obj, path)
    try:
        return codec.decode_program(obj)
    except codec.IRFormatError as e:
        raise ProgramError(f"malformed IR at {e.path}: {e.message}" if e.path else e.message, file=path) from None


def load(path: str, overrides: Overrides = Overrides()) -> Loaded:
    """Compile or read ``path``, apply ``overrides``, validate and link."""
    ext = os.path.splitext(path)[1]
    if ext not in (".sq", ".json"):
        raise UsageError(f"{path}: expected a .sq program or a .json IR file")
    text = read_text(path)  # a missing file is a usage error, before anything else
    if ext == ".sq":
        from .compiler import compile_file

        program, smap = compile_file(path, sets=dict(overrides.sets) or None)
    else:
        if overrides.sets:
            raise UsageError("--set applies to .sq programs; an IR file's constants are already folded")
        program = load_ir_text(text, path)  # validated against the schema as it was read
        smap = SourceMap(file=path)
    overridden = apply_overrides(program, overrides)
    if ext == ".json" and overridden is not program:
        from . import codec

        validate_schema(codec.encode_program(overridden), path)
    check_measurement_interval(overridden, program, smap)
    program = overridden
    from .link import link

    warnings = link(program, smap)
    return Loaded(program, smap, tuple(warnings), os.path.dirname(os.path.abspath(path)))


def check_measurement_interval(program: ir.Program, written: ir.Program, smap: SourceMap) -> None:
    """The statistics cover [warmup, end] (seed 002 §3 Statistics): a warm-up
    that ends at or after a finite horizon leaves nothing to measure. A usage
    error when --horizon or --warmup made it so, else the program's error at
    its run block."""
    if not program.warmup >= program.horizon:  # an infinite horizon (run { arrivals N; }) always has room
        return
    message = (f"the warm-up ({program.warmup:g}) ends at or after the horizon ({program.horizon:g}): "
               "nothing would be measured")
    if (program.horizon, program.warmup) != (written.horizon, written.warmup):
        raise UsageError(message + "; give a longer --horizon or a shorter --warmup")
    raise ProgramError(message + "; the horizon must be longer than the warm-up", smap.run, file=smap.file)


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
