"""Where the IR came from: spans of the source text for the IR's parts.

The front end fills it while it lowers a program; the linker and the CLI use
it to put a location on an error found on the IR (a link check, a run-time
error that names its statement). An IR loaded from JSON has an empty map, and
its errors name the file and the IR path instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import Span


@dataclass(frozen=True)
class SourceMap:
    file: str | None = None
    #: (block id, statement index) -> the statement's span (for a desugared
    #: form, the form's span: "a linker error inside a form speaks of the
    #: kernel statement", at the form's place)
    stmts: dict[tuple[int, int], Span] = field(default_factory=dict)
    pools: dict[int, Span] = field(default_factory=dict)
    stages: dict[int, Span] = field(default_factory=dict)
    gauges: dict[int, Span] = field(default_factory=dict)
    #: the workload's arrival clause, the run block, the share declaration
    arrival: Span | None = None
    run: Span | None = None
    share: Span | None = None
    #: the run block's settings the source writes (horizon, warmup, seed,
    #: arrivals) and the span of each; None for an IR file, which has them all
    settings: dict[str, Span] | None = None

    def stmt(self, block: int, index: int) -> Span | None:
        return self.stmts.get((block, index))
