"""The step trace as a file (docs/step-trace.md): its header line, then one
record per applied rule (semantics.smallstep.driver.trace). The header is
made here, outside the small-step core, because it names the program by the
digest of its IR encoding (semantics.codec) and the package's version.
"""

from __future__ import annotations

import hashlib
from typing import Iterator

from . import SERQ_VERSION, codec, ir
from .smallstep import steptrace


def program_digest(program: ir.Program) -> str:
    """The sha256 (hex) of the program's canonical IR JSON: the text `serq-ref ir` prints (codec.dumps)."""
    return hashlib.sha256(codec.dumps(program).encode()).hexdigest()


def header(program: ir.Program, *, from_time: float = 0.0) -> dict:
    """The trace's first line: the format and its version, serq-ref's version, the IR version, the
    program's digest, and the run's seed, horizon, warm-up, arrival limit and the time the records start."""
    real = steptrace._real
    return {"format": steptrace.FORMAT, "version": steptrace.VERSION, "serq_ref": SERQ_VERSION,
            "ir": ir.IR_VERSION, "program": program_digest(program), "seed": int(program.seed),
            "horizon": real(program.horizon), "warmup": real(program.warmup),
            "arrivals": None if program.arrivals is None else int(program.arrivals), "from": real(from_time)}


def lines(program: ir.Program, *, base_dir: str | None = None, steps: int | None = None,
          from_time: float = 0.0) -> Iterator[dict]:
    """The whole trace: the header, then the records (``steps`` bounds the records, not the header)."""
    from .smallstep.driver import trace

    yield header(program, from_time=from_time)
    yield from trace(program, base_dir=base_dir, steps=steps, from_time=from_time)
