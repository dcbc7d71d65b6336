"""Errors of serq-ref, a closed set.

- ``ProgramError``: the program is wrong (syntax, link, IR format). Exit 1.
- ``RunError``: the program went wrong while it ran (a branch guard that is
  not 0 or 1, a backstop against a run that makes no progress). Exit 1.
  Names the statement.
- ``LimitError``: the run reached a limit of serq-ref's implementation, not
  a trap of the program (more evictions at once than MAX_EVICTIONS): the model has no error there, and
  the message says so. Exit 1. Names the statement, as a RunError does (both
  are ``RunStop``s).
- ``UsageError``: the command line is wrong. Exit 2.

Anything else escaping is a bug of serq-ref (an impossible state), reported as
such by the CLI, never as a raw traceback.

A diagnostic reads ``FILE:LINE:COL: error: message``, then the source line and
a caret under the column (``format_diagnostic``).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable, Iterator


@dataclass(frozen=True, slots=True)
class Span:
    """A place in a source file: 1-based line and column; ``end_col`` is the
    column after the last character on the same line (None: one character)."""

    file: str
    line: int
    col: int
    end_col: int | None = None


class SerqError(Exception):
    """Base of the errors a user can cause. ``span`` may be None (an IR file,
    a whole-program fact); ``file`` then names the file alone."""

    exit_code = 1
    severity = "error"

    def __init__(self, message: str, span: Span | None = None, file: str | None = None, notes: tuple[str, ...] = ()):
        super().__init__(message)
        self.message = message
        self.span = span
        self.file = file if file is not None else (span.file if span else None)
        self.notes = notes


class ProgramError(SerqError):
    """A program that does not parse, link or load."""


class ProgramErrors(ProgramError):
    """Several errors of one program, in source order (``ErrorLog``). The CLI
    renders each; ``message`` is the first's, for a caller that shows one."""

    def __init__(self, errors: Iterable[ProgramError]):
        self.errors = tuple(errors)
        first = self.errors[0]
        super().__init__(first.message, first.span, first.file, first.notes)


class ErrorLog:
    """The errors found so far by a pass that goes on after one (the front
    end's items and statements, the linker's checks): each unit it checks
    runs in ``recover()``, which records a ProgramError and lets the next
    unit be checked. ``raise_errors`` raises them in source order: a program
    error without a span first (it concerns the whole program), then by file
    in the order the files were first seen (the main file first, then each
    used file), line and column; at most one error per place, the first
    found (a check later in the pass would only restate it)."""

    def __init__(self, files: Iterable[str] = ()):
        self.errors: list[ProgramError] = []
        self.files: list[str] = list(files)

    @contextmanager
    def recover(self) -> Iterator[None]:
        try:
            yield
        except ProgramErrors as e:
            self.errors.extend(e.errors)
        except ProgramError as e:
            self.errors.append(e)

    def add(self, error: ProgramError) -> None:
        self.errors.append(error)

    def sorted_errors(self) -> list[ProgramError]:
        for e in self.errors:
            if e.span is not None and e.span.file not in self.files:
                self.files.append(e.span.file)
        seen: set[object] = set()
        unique: list[ProgramError] = []
        for e in self.errors:
            place = (e.span.file, e.span.line, e.span.col) if e.span is not None else (e.file, get_ir_path(e.message))
            if place not in seen:
                seen.add(place)
                unique.append(e)

        def key(e: ProgramError) -> tuple:
            if e.span is None:
                return (0, 0, 0, 0)
            return (1, self.files.index(e.span.file), e.span.line, e.span.col)

        return sorted(unique, key=key)  # stable: errors at one place keep the order found

    def raise_errors(self) -> None:
        """Raise the errors recorded, if any: one as itself, several as ProgramErrors."""
        errors = self.sorted_errors()
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ProgramErrors(errors)


def get_ir_path(message: str) -> str:
    """The IR path a located-less message begins with (``blocks[2][3] (Hold)``,
    ``pools[1] (kv)``; docs/linking.md), or the whole message."""
    head, sep, _ = message.partition(": ")
    if sep and head.startswith(("blocks[", "pools[", "stages[", "gauges[")):
        return head
    return message


class RunStop(SerqError):
    """A run that stops before its end: ``stmt`` is the (block id,
    statement index) of the IR statement where it stopped, and ``time`` the
    simulated time; the CLI turns ``stmt`` into a span with the SourceMap.
    Either a trap of the program (RunError) or a limit of serq-ref's
    implementation (LimitError)."""

    def __init__(self, message: str, stmt: tuple[int, int] | None = None, time: float | None = None, span: Span | None = None,
                 in_trace: bool = False):
        super().__init__(message, span)
        self.stmt = stmt
        self.time = time
        #: an error of the trace file the program reads (located in it, when it has a place there); the CLI
        #: also names the program's `trace "FILE";`
        self.in_trace = in_trace


class RunError(RunStop):
    """A program that fails while it runs: a trap of the program (a guard
    that is not 0 or 1, a NaN work, a load past its allocation, a run that
    makes no progress), which any engine running the model would meet."""


class LimitError(RunStop):
    """A run stopped by a limit of serq-ref's implementation, not by the
    program: the model has no error there (an engine with more room would
    run on). Its message names the limit and says it is serq-ref's."""


class UsageError(SerqError):
    exit_code = 2


@dataclass(frozen=True, slots=True)
class Warning_:
    """A link-time warning (a Z3 witness for some admissible values)."""

    message: str
    span: Span | None
    file: str | None = None


def format_diagnostic(
    severity: str, message: str, span: Span | None, file: str | None, source: str | None, notes: tuple[str, ...] = ()
) -> str:
    """``FILE:LINE:COL: severity: message``, the source line, a caret line."""
    if span is not None:
        head = f"{span.file}:{span.line}:{span.col}: {severity}: {message}"
        lines = [head]
        if source is not None:
            src_lines = source.splitlines()
            if 1 <= span.line <= len(src_lines):
                text = src_lines[span.line - 1].expandtabs(1)
                width = 1 if span.end_col is None or span.end_col <= span.col else span.end_col - span.col
                text, col = _window(text, span.col)
                lines.append(f"  {text}")
                lines.append("  " + " " * (col - 1) + "^" * max(1, min(width, len(text) - col + 1)))
    else:
        lines = [f"{file}: {severity}: {message}" if file else f"{severity}: {message}"]
    lines.extend(f"  note: {n}" for n in notes)
    return "\n".join(lines)


#: The most characters of a source line a diagnostic shows (a campaign file's line is a whole case).
LINE_WINDOW = 120


def _window(text: str, col: int) -> tuple[str, int]:
    """At most LINE_WINDOW characters of ``text`` around column ``col``, with
    ``…`` where it is cut, and the column in what is shown."""
    if len(text) <= LINE_WINDOW:
        return text, col
    start = max(0, min(col - 1 - LINE_WINDOW // 3, len(text) - LINE_WINDOW))
    shown = text[start:start + LINE_WINDOW]
    col -= start
    if start > 0:
        shown, col = "…" + shown, col + 1
    if start + LINE_WINDOW < len(text):
        shown += "…"
    return shown, col


def render(err: SerqError, source: str | None) -> str:
    return format_diagnostic(err.severity, err.message, err.span, err.file, source, err.notes)
