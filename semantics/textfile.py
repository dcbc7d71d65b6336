"""A program's text as every command reads it: a file, or standard input
(FILE `-`), as UTF-8.

Below the compiler and the loader (``semantics.pipeline``), which both read
files, and below the command line, which shows the source line under an
error. A missing file is a usage error (exit 2); bytes that are not UTF-8
are the program's own error, located at its file (exit 1).
"""

from __future__ import annotations

import sys

from .errors import ProgramError, UsageError

#: The name a program read from standard input (FILE `-`) has in messages.
STDIN = "<stdin>"
#: That program's text, kept for the CLI's source lines under an error.
stdin_text: str | None = None


def read_stdin() -> str:
    """A program given as `-`: standard input, as UTF-8, like a file."""
    global stdin_text
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode("utf-8")
    try:
        stdin_text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProgramError(f"not UTF-8 text ({e.reason} at byte {e.start})", file=STDIN) from None
    return stdin_text


def read_text(path: str) -> str:
    """The UTF-8 text of the file at ``path``."""
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
