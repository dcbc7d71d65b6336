"""Errors of serq-ref, a closed set.

- ``ProgramError``: the program is wrong (syntax, link, IR format). Exit 1.
- ``RunError``: the program went wrong while it ran (a branch guard that is
  not 0 or 1, a backstop). Exit 1. Names the statement.
- ``UsageError``: the command line is wrong. Exit 2.

Anything else escaping is a bug of serq-ref (an impossible state), reported as
such by the CLI, never as a raw traceback.

A diagnostic reads ``FILE:LINE:COL: error: message``, then the source line and
a caret under the column (``format_diagnostic``).
"""

from __future__ import annotations

from dataclasses import dataclass


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


class RunError(SerqError):
    """A program that fails while it runs. ``stmt`` is the (block id,
    statement index) of the IR statement that failed, and ``time`` the
    simulated time; the CLI turns ``stmt`` into a span with the SourceMap."""

    def __init__(self, message: str, stmt: tuple[int, int] | None = None, time: float | None = None, span: Span | None = None):
        super().__init__(message, span)
        self.stmt = stmt
        self.time = time


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
                lines.append(f"  {text}")
                width = 1 if span.end_col is None or span.end_col <= span.col else span.end_col - span.col
                lines.append("  " + " " * (span.col - 1) + "^" * width)
    else:
        lines = [f"{file}: {severity}: {message}" if file else f"{severity}: {message}"]
    lines.extend(f"  note: {n}" for n in notes)
    return "\n".join(lines)


def render(err: SerqError, source: str | None) -> str:
    return format_diagnostic(err.severity, err.message, err.span, err.file, source, err.notes)
