"""The differential peer: pyserq, the serQ reference implementation (Rust,
on the registry as ``pyserq``), run on our IR.

pyserq reads IR version 14; ours is version 13. The two differ, for the
programs both run, in two places: a choose's count is an expression
(``{"Num": n}``, not a number), and a run over several stages names the
program's share on the run itself. ``encode_for_pyserq`` makes those changes
and nothing else. pyserq is a test-only dependency (the ``test`` extra):
nothing under ``semantics/`` imports this module.
"""

from __future__ import annotations

import json

from semantics import codec, ir
from semantics.errors import ProgramError

#: The IR version pyserq 0.1.6 reads.
PYSERQ_IR_VERSION = 14


def encode_for_pyserq(program: ir.Program) -> dict:
    """``program`` as the JSON object pyserq reads (IR version 14)."""
    for stage in program.stages:  # pyserq has the seed's rule only (docs/architecture.md, self_preemption)
        if isinstance(stage.kind, ir.Step) and stage.kind.self_preemption != "End":
            raise ProgramError(f"stage {stage.name} has `self preemption continue`, which pyserq does not have (its "
                               f"pass ends when a grower preempts itself): this program cannot be run on pyserq")
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
    return encoded


def run_on_pyserq(program: ir.Program):
    """pyserq's run of ``program``: its report object (``.json()``, ``.observes``)."""
    try:
        import pyserq
    except ImportError:
        raise SystemExit("pyserq is missing: it is a test dependency, python3 -m pip install -e '.[test]'") from None
    return pyserq.run(pyserq.Program.from_json(json.dumps(encode_for_pyserq(program))))


def report_of(program: ir.Program) -> dict:
    """pyserq's report of ``program`` as a JSON object."""
    return json.loads(run_on_pyserq(program).json())
