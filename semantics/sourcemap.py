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
    #: the workload's `trace "FILE";` clause: an error of the trace file is located in it and here too
    trace: Span | None = None
    #: each file a `use` reads (its path as errors name it) -> the `use` that reads it, in the main file or
    #: in another used file: an error of a used file is located in it and at the uses that lead to it
    uses: dict[str, Span] = field(default_factory=dict)
    #: the statements the lowering could not lower (an error of each is reported), an `end;` in the IR: the
    #: linker of the rest of the program reads one as a statement that may assign anything and goes on, so
    #: that the errors after it are found (issue 23: one error must not hide another)
    holes: frozenset[tuple[int, int]] = frozenset()

    def use_notes(self, path: str | None) -> tuple[str, ...]:
        """Where the program reads ``path`` through `use`s, from the nearest use back to the main file."""
        return note_uses(path, self.uses)

    def stmt(self, block: int, index: int) -> Span | None:
        return self.stmts.get((block, index))


def note_uses(path: str | None, uses: dict[str, Span]) -> tuple[str, ...]:
    """A note per `use` on the way to the file ``path`` (none for the main file): ``FILE:LINE:COL: `use`
    reads PATH here``."""
    notes: list[str] = []
    while path in uses and len(notes) <= len(uses):
        span = uses[path]
        notes.append(f"{span.file}:{span.line}:{span.col}: the program reads {path} here (`use`)")
        path = span.file
    return tuple(notes)


def add_use_notes(error, uses: dict[str, Span]) -> None:
    """Give a ProgramError (each of a ProgramErrors) located in a used file the notes of its `use`s."""
    for e in getattr(error, "errors", None) or (error,):
        if e.span is not None and e.span.file in uses and not any("(`use`)" in n for n in e.notes):
            e.notes = tuple(e.notes) + note_uses(e.span.file, uses)
