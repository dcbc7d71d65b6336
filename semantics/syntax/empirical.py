"""``~empirical("FILE", "COLUMN")`` (docs/design/draws.md): the values of a
CSV file's column, read when the program is compiled, so that the IR carries
them (one ``Num`` argument each) and a run needs no file.

FILE is resolved relative to the program's file, as ``trace`` is; the first
line is the header, naming the columns; blank lines are skipped. Every cell
of the column must be a finite number. A file that cannot be read, or a
column the header does not name, is an error at the program's string; a cell
that is not a finite number (or missing) is an error at its line and column
in the CSV, with a note naming the program's line.
"""

from __future__ import annotations

import csv
import math
import os

from ..errors import ProgramError, Span


def resolve(path: str, program_file: str) -> str:
    """``path`` relative to the directory of ``program_file`` (as written when absolute)."""
    if os.path.isabs(path) or not program_file or program_file.startswith("<"):
        return path
    return os.path.join(os.path.dirname(program_file), path)


def read_column(path: str, path_span: Span, column: str, column_span: Span) -> tuple[float, ...]:
    """The column's values in file order (module docstring); a located ProgramError otherwise."""
    full = resolve(path, path_span.file)
    here = f"{column_span.file}:{column_span.line}:{column_span.col}: the program draws the column here"
    try:
        with open(full, newline="", encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ProgramError(f"~empirical: cannot read the file `{full}`: {e.strerror}", path_span) from None
    except UnicodeDecodeError as e:
        raise ProgramError(f"~empirical: the file `{full}` is not UTF-8 text ({e.reason} at byte {e.start})",
                           path_span) from None
    lines = text.splitlines()
    reader = csv.reader(text.splitlines(keepends=True))
    try:
        header = next(reader, None)
        names = [name.strip() for name in header or ()]
        if column not in names:
            shown = ", ".join(f"`{n}`" for n in names) if names else "none: the file is empty"
            raise ProgramError(f"~empirical: the file `{full}` has no column `{column}` (its header names {shown})",
                               column_span)
        k = names.index(column)
        values = []
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            raw = lines[line - 1] if line <= len(lines) else ""
            offsets = [1]
            for cell in row[:-1]:
                offsets.append(offsets[-1] + len(cell) + 1)
            if ",".join(row) != raw:  # quoted cells: the columns are not where the cells' lengths put them
                offsets = [1] * len(row)
            if k >= len(row) or not row[k].strip():
                col = len(raw) + 1 if k >= len(row) else offsets[k]
                raise ProgramError(f"~empirical: the column `{column}` has no value in this row: every row gives "
                                   "a finite number", Span(full, line, col, col + 1), notes=(here,))
            cell = row[k].strip()
            try:
                value = float(cell)
            except ValueError:
                value = math.nan
                found = f"{cell!r}, not a number"
            else:
                found = cell
            if not math.isfinite(value):
                raise ProgramError(f"~empirical: the column `{column}` is {found}: every value is a finite number",
                                   Span(full, line, offsets[k], offsets[k] + max(1, len(row[k]))), notes=(here,))
            values.append(value)
    except csv.Error as e:
        raise ProgramError(f"~empirical: `{full}` is not a CSV file the compiler can read ({e})", path_span) from None
    if not values:
        raise ProgramError(f"~empirical: the column `{column}` of `{full}` has no values: it needs one or more",
                           column_span)
    return tuple(values)
