"""The trace's rows read for a run (semantics/smallstep/workload.py's
load_trace and read_trace), the common case written out: a trace file of
plain ASCII cells (no quotes, no carriage return), every cell a number that
meets TRACE_CELLS' requirement, each session's turns 1 to n each once. The
requirements are the definition's own functions, applied to each distinct
value of a column (they read the value only); the rows are split on commas,
which is what the csv reader does to a line without quotes. A file with
anything else (an error to report, quoted cells, another line ending) is
read by the definition's read_trace, whose answer (or error) it is. The
replay of the 333-session trace read it in 0.07-0.1 s of its run's 1.6 s.
tests/test_fast_trace.py holds it to read_trace."""

from __future__ import annotations

from .. import ir
from ..smallstep.workload import TRACE_CELLS, TRACE_COLUMNS, read_trace, trace_path

#: a character for which the definition's reading is not the plain split here (a line ending splitlines takes
#: that csv does not, a quote, a carriage return): the definition reads such a file
_UNPLAIN = frozenset('"\r\x0b\x0c\x1c\x1d\x1e')


def load_trace(program: ir.Program, base_dir: str | None):
    """semantics.smallstep.workload.load_trace: the program's trace's sessions (``read``)."""
    if program.trace is None:
        return ()
    return read(trace_path(program.trace, base_dir))


def read(path: str):
    """read_trace(path): its sessions, each its rows (new, out, think, forced) in turn order."""
    found = _read_plain(path)
    return read_trace(path) if found is None else found


def _read_plain(path: str):
    """The trace at ``path`` read as read_trace reads it when it is plain and right; None otherwise."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.isascii() or not _UNPLAIN.isdisjoint(text):
        return None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return None
    header = lines[0].split(",")
    if any(col not in header for col in TRACE_COLUMNS):
        return None
    ks = [header.index(name) for name in TRACE_COLUMNS]
    width = max(ks)
    columns = [[] for _ in TRACE_COLUMNS]
    for line in lines[1:]:
        row = line.split(",")
        if len(row) <= width:
            if line == "" or all(not cell.strip() for cell in row):
                continue  # a blank line
            return None
        try:
            for k, column in zip(ks, columns):
                column.append(float(row[k]))  # float() strips the spaces the definition's strip() takes off
        except ValueError:
            return None  # not a number, or an empty cell (a blank row too: the definition's)
    for name, column in zip(TRACE_COLUMNS, columns):
        holds = TRACE_CELLS[name][1]
        if not all(holds(x) for x in set(column)):
            return None
    sessions: dict = {}
    for key, turn, new, out, think, forced in zip(*columns):
        turns = sessions.setdefault(int(key), {})
        turn = int(turn)
        if turn in turns:
            return None
        turns[turn] = (new, out, think, forced)
    if not sessions:
        return None
    for turns in sessions.values():
        if len(turns) != max(turns):  # 1 to n each once: n distinct turns, each at least 1, the largest n
            return None
    return tuple(tuple(values for _, values in sorted(turns.items())) for _, turns in sorted(sessions.items()))
