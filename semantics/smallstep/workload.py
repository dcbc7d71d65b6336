"""Workload rules (seed 002 §2 wlitem, §3 Workload; FORMAT.md, Arrival).

- ``workload/arrive``: a session arrives: its serial is the arrival count,
  ``init`` runs (on the stream of (session, turn 0)), an explicit session's
  attributes then overwrite, and it becomes ready.
- Arrival processes: poisson(rate) (an arrival at 0, then exponential gaps of
  mean 1/rate); renewal(gap) (the first arrival after one gap; gaps must be
  positive and finite); closed(n) (n sessions at 0; a session that ends is
  replaced at once, so think time is the program's own); batch(n) (n at 0);
  explicit sessions (all at 0); none. ``run { arrivals N; }`` stops an open
  workload after N arrivals.
- ``session/turn``: turn_no counts; an explicit session's next turn entry,
  or a trace's next row (new, out, think, forced), is loaded and ``more`` is
  1 while another remains; then the ``turn`` block runs on the stream of
  (session, turn_no).
- A trace (CSV ``session,turn,new,out,think,forced``): ordered, session i
  replays trace session i (modulo their number); otherwise each arriving
  session draws its trace session from the workload stream.
"""

from __future__ import annotations

import csv
import math
import os
from operator import call

from .. import ir
from ..errors import RunError, Span
from .configuration import READY, Configuration, Session, Workload, build, insert_event, ready_push, setter
from .machine import MAX_READIES_PER_INSTANT, Machine
from .rules import rule
from .rng import derive_stream, draw_uniform, member_stream, sample_exp
from .values import Env

TRACE_COLUMNS = ("session", "turn", "new", "out", "think", "forced")


#: What each column of a trace holds (seed 002 §2: "with a trace new, out, think, more, forced"): its
#: requirement, in words, and whether a value meets it. Every cell is checked where it is read (issue 23:
#: a negative `new` crashed the replay with a KeyError).
TRACE_CELLS = {
    "session": ("a session number, a whole number, 0 or more", lambda x: 0 <= x < math.inf and x == int(x)),
    "turn": ("a turn number, a whole number, 1 or more", lambda x: 1 <= x < math.inf and x == int(x)),
    "new": ("a number of tokens, a whole number, 0 or more", lambda x: 0 <= x < math.inf and x == int(x)),
    "out": ("a number of tokens, a whole number, 0 or more", lambda x: 0 <= x < math.inf and x == int(x)),
    "think": ("a time, a finite number, 0 or more", lambda x: 0 <= x < math.inf),
    "forced": ("0 or 1 (a forced miss or not)", lambda x: x in (0.0, 1.0)),
}


def trace_error(path: str, line: int, col: int, message: str, width: int = 1) -> RunError:
    """An error of the trace file at ``path``, located in it (line, column); the CLI adds where the program
    names the trace (``RunError.in_trace``)."""
    return RunError(message, span=Span(path, line, col, col + max(1, width)), in_trace=True)


def read_trace(path: str, cells: dict | None = None) -> tuple[tuple[tuple[float, float, float, float], ...], ...]:
    """The trace's sessions in ascending session number, each its rows
    (new, out, think, forced) in ascending turn number: the rows may come in
    any order (they are sorted), and a session's turns are numbered 1 to n,
    each once. Every cell is checked as TRACE_CELLS says, an error located at
    its line and column (``cells``: requirements that replace TRACE_CELLS')."""
    cells = {**TRACE_CELLS, **(cells or {})}
    try:
        with open(path, newline="", encoding="utf-8") as f:
            text = f.read()
        lines = text.splitlines()
        reader = csv.reader(text.splitlines(keepends=True))
        header = next(reader, None)
        missing = [col for col in TRACE_COLUMNS if header is None or col not in header]
        if missing:
            raise trace_error(path, 1, 1, f"the header must name the columns {','.join(TRACE_COLUMNS)} "
                                          f"({', '.join(missing)} missing)")
        index = {name: header.index(name) for name in TRACE_COLUMNS}
        sessions: dict[int, dict[int, tuple[int, tuple]]] = {}
        columns = [(name, index[name], *cells[name]) for name in TRACE_COLUMNS]
        positions = [index[name] for name in TRACE_COLUMNS]
        checks = [cells[name][1] for name in TRACE_COLUMNS]
        for row in reader:
            line = reader.line_num
            if not "".join(row).strip():
                continue  # a blank line
            try:  # the common row: every cell a number that meets its column's requirement
                numbers = [float(row[k]) for k in positions]
            except (IndexError, ValueError):
                numbers = None
            if numbers is None or not all(map(call, checks, numbers)):  # each column's requirement of its cell
                raise row_error(path, line, row, lines[line - 1] if line <= len(lines) else "", columns)
            session, turn, new, out, think, forced = numbers  # TRACE_COLUMNS' order
            key, turn = int(session), int(turn)
            turns = sessions.setdefault(key, {})
            if turn in turns:
                raw = lines[line - 1] if line <= len(lines) else ""
                raise trace_error(path, line, cell_column(row, raw, index["turn"]),
                                  f"session {key}'s turn {turn} is given twice (line {turns[turn][0]} and here): a "
                                  "session's turns are numbered 1 to n, each once", len(row[index["turn"]]))
            turns[turn] = (line, (new, out, think, forced))
    except OSError as e:
        raise RunError(f"trace {path}: {e.strerror}", in_trace=True) from None
    except UnicodeDecodeError as e:
        raise RunError(f"trace {path}: not UTF-8 text ({e.reason} at byte {e.start})", in_trace=True) from None
    except csv.Error as e:
        raise RunError(f"trace {path}: not a CSV file the run can read ({e})", in_trace=True) from None
    if not sessions:
        raise RunError(f"trace {path} has no rows", in_trace=True)
    for key, turns in sessions.items():
        if sorted(turns) != list(range(1, len(turns) + 1)):
            gap = min(set(range(1, len(turns) + 1)) - set(turns))
            raise trace_error(path, turns[max(turns)][0], 1,
                              f"session {key} has turns {', '.join(map(str, sorted(turns)))} but no turn {gap}: a "
                              "session's turns are numbered 1 to n, each once (the rows may come in any order)")
    return tuple(tuple(values for _, (_, values) in sorted(turns.items())) for _, turns in sorted(sessions.items()))


def row_error(path: str, line: int, row: list[str], raw: str, columns) -> RunError:
    """The error of the first cell of ``row`` (line ``raw``) that is missing, not a number, or a number its
    column does not take, the columns taken in ``columns``' order ((name, index, requirement, holds) each)."""
    for name, k, requirement, holds in columns:
        if k >= len(row) or not row[k].strip():
            return trace_error(path, line, len(raw) + 1 if k >= len(row) else cell_column(row, raw, k),
                               f"the trace's column `{name}` is missing in this row: it is {requirement}")
        cell = row[k].strip()
        try:
            value = float(cell)
        except ValueError:
            value = None
        if value is None or not holds(value):
            found = f"{cell!r}, not a number" if value is None else cell
            return trace_error(path, line, cell_column(row, raw, k), f"the trace's column `{name}` is {found}: it "
                                                                     f"is {requirement}", len(row[k]))
    raise AssertionError(f"line {line}: no cell is wrong")


def cell_column(row: list[str], raw: str, k: int) -> int:
    """The column (from 1) where cell ``k`` of ``row`` begins in its line ``raw``; 1 when the line quotes cells
    (the columns are then not where the cells' lengths put them)."""
    if ",".join(row) != raw:
        return 1
    return 1 + sum(len(cell) + 1 for cell in row[:k])


def load_trace(program: ir.Program, base_dir: str | None):
    if program.trace is None:
        return ()
    return read_trace(trace_path(program.trace, base_dir))


def trace_path(path: str, base_dir: str | None) -> str:
    """A program's trace file as the run reads and names it: a relative path taken from ``base_dir`` (when
    given), and then named relative to here when it is below here."""
    if not os.path.isabs(path) and base_dir is not None:
        path = os.path.join(base_dir, path)
        shown = os.path.relpath(path)  # as the errors name it: relative to here, when it is below here
        path = shown if not shown.startswith("..") else path
    return path


# -- arrivals ---------------------------------------------------------------------


def start_workload(m: Machine, c: Configuration) -> Configuration:
    """The arrivals at time 0, and the first arrival event of an open workload."""
    arrival = m.program.arrival
    if isinstance(arrival, ir.Poisson):
        return schedule_arrival(m, c, 0.0)
    if isinstance(arrival, ir.Renewal):
        gap, position = draw_gap(m, c)
        c = c._replace(workload=c.workload._replace(arrivals_draws=position))
        return schedule_arrival(m, c, gap)
    if isinstance(arrival, (ir.Closed, ir.Batch)):
        for _ in range(arrival.n):
            c = arrive(m, c)
        return c
    if isinstance(arrival, ir.Sessions):
        for k in range(len(arrival.sessions)):
            c = arrive(m, c, explicit=k)
    return c


def draw_gap(m: Machine, c: Configuration) -> tuple[float, int]:
    """The next interarrival gap from the arrivals stream, and the stream's next position."""
    position = c.workload.arrivals_draws
    if m.poisson_gap is not None:
        gap, position = sample_exp(m.poisson_gap, m.stream_arrivals, position), position + 1
    else:
        env = Env(c, None, -1, m.stream_arrivals, position)
        gap = m.compiler.compile(m.program.arrival.gap)(env)
        position = env.draws
        if not (gap > 0 and math.isfinite(gap)):
            raise RunError(f"arrive renewal: a gap of {gap:g}; gaps must be positive and finite", time=c.time)
    return gap, position


def schedule_arrival(m: Machine, c: Configuration, gap: float) -> Configuration:
    limit = m.program.arrivals
    if limit is not None and c.workload.generated >= limit:
        return c
    key = (c.time + gap, c.sequence)
    return c._replace(events=insert_event(c.events, key, "arrive"), sequence=c.sequence + 1)


def arrival_event(m: Machine, c: Configuration, _a: int = 0, _b: int = 0) -> Configuration:
    """The open workload's arrival event: the next one is scheduled, then the session arrives (workload/arrive)."""
    gap, position = draw_gap(m, c)
    generated = c.workload.generated + 1
    limit = m.program.arrivals
    if limit is None or generated < limit:
        key = (c.time + gap, c.sequence)
        return arrive(m, c, arrival=(generated, position), events=insert_event(c.events, key, "arrive"))
    return arrive(m, c, arrival=(generated, position))


def replace_closed(m: Machine, c: Configuration) -> Configuration:
    """Under ``arrive closed`` a session that ends is replaced at once: a new
    session arrives (workload/arrive). Backstop: sessions that end without letting time pass
    (a hold rejected at once, say) would be replaced forever at one instant;
    past MAX_READIES_PER_INSTANT replacements at one instant the run stops
    with an error, as for the session backstops (SERQ-FACTS.md)."""
    instant, count = c.workload.replaced
    count = count + 1 if instant == c.time else 1
    if count > MAX_READIES_PER_INSTANT:
        raise RunError(
            f"arrive closed: {count - 1} sessions ended at one instant without letting time pass, and each is "
            "replaced at once, so the run cannot advance",
            time=c.time,
        )
    c = c._replace(workload=c.workload._replace(replaced=(c.time, count)))
    return arrive(m, c)


_set_next_serial = setter(Workload, "next_serial")
_set_next_serial_generated = setter(Workload, "next_serial", "generated", "arrivals_draws")
_set_arrived = setter(Configuration, "workload", "sessions", "ready")
_set_arrived_scheduled = setter(Configuration, "workload", "sessions", "ready", "events", "sequence")


@rule("workload/arrive", "a session arrives: its serial is the arrival count, init runs (on the stream of (session, turn 0)), an explicit session's attributes overwrite, and it is ready",
      "002 §3 Workload: init runs at arrival; 002 §2: arrive poisson / renewal / closed / batch, explicit sessions")
def arrive(m: Machine, c: Configuration, explicit: int = -1, arrival=None, events=None) -> Configuration:
    """workload/arrive: a new session, in the same update as what the open
    workload's arrival event changed: ``arrival``, its (arrivals generated,
    the arrivals stream's position), and ``events`` (the events with the next
    arrival, which took the next sequence number)."""
    program = m.program
    w = c.workload
    serial = w.next_serial
    attrs = m.blank_attrs
    k = m.slot_serial
    attrs = attrs[:k] + (float(serial),) + attrs[k + 1:]
    script, draws = arrival_script(m, serial, explicit, w.workload_draws)
    if draws != w.workload_draws:
        w = w._replace(workload_draws=draws)
    if m.has_init:
        c, attrs = run_workload_block(m, c, program.init, attrs, serial, 0)
    attrs = explicit_attrs(m, attrs, explicit)
    s = build(Session, (serial, attrs, m.session_frames, 0, READY, (), (), None, None, None, -1, (),
                        -1, member_stream(m.stream_sessions, serial), 0, script, 0, (c.time, 1)))
    if arrival is None:
        w = _set_next_serial(w, serial + 1)
    else:
        w = _set_next_serial_generated(w, serial + 1, arrival[0], arrival[1])
    if events is None:
        c = _set_arrived(c, w, c.sessions.set(serial, s), ready_push(c.ready, serial))
    else:
        c = _set_arrived_scheduled(c, w, c.sessions.set(serial, s), ready_push(c.ready, serial), events, c.sequence + 1)
    if m.observer:
        m.notify("workload/arrive", c, {"session": serial})
    return c


def arrival_script(m: Machine, serial: int, explicit: int, workload_draws: int) -> tuple[int, int]:
    """workload/arrive's script for session ``serial``: an explicit session's index, else the trace's session
    it replays (in order, or drawn from the workload stream at position ``workload_draws``), else -1; and the
    workload stream's position after it."""
    if explicit >= 0 or not m.trace_sessions:
        return explicit, workload_draws
    if m.program.trace_ordered:
        return serial % len(m.trace_sessions), workload_draws
    u = draw_uniform(m.stream_workload, workload_draws)
    return min(int(u * len(m.trace_sessions)), len(m.trace_sessions) - 1), workload_draws + 1


def explicit_attrs(m: Machine, attrs: tuple, explicit: int) -> tuple:
    """``attrs`` with explicit session ``explicit``'s attributes written over them (-1: none)."""
    if explicit < 0:
        return attrs
    attrs = list(attrs)
    for slot, value in m.program.arrival.sessions[explicit].attrs:
        attrs[slot] = value
    return tuple(attrs)


def run_workload_block(m: Machine, c: Configuration, block: int, attrs: tuple, serial: int,
                       turn: int) -> tuple[Configuration, tuple]:
    """Run an init or turn block (set and observe only) on the stream of (session, turn)."""
    statements = m.program.blocks[block]
    if not statements:
        return c, attrs
    env = Env(c, attrs, serial, derive_stream(m.seed, ("turn", serial, turn)), 0)
    values = list(attrs)
    for index, stmt in enumerate(statements):
        env.stmt = (block, index)
        if isinstance(stmt, ir.Set):
            values[stmt.slot] = m.compiler.compile(stmt.expr)(env)
            env.attrs = tuple(values)
        elif isinstance(stmt, ir.Observe):
            value = m.compiler.compile(stmt.expr)(env)
            if c.time >= m.warmup:
                c = c._replace(samples=record_sample(c, serial, turn, stmt.index, value))
        else:
            raise RunError(f"a workload block may only set and observe, not {type(stmt).__name__}",
                           stmt=(block, index), time=c.time)
    return c, tuple(values)


def take_turn(m: Machine, c: Configuration, serial: int) -> Configuration:
    """session/turn: turn_no counts, the next turn's attributes are loaded, the turn block runs."""
    program = m.program
    s = c.sessions[serial]
    attrs, turn_no, script_turn = next_turn(m, s.attrs, s.script, s.script_turn)
    c, attrs = run_workload_block(m, c, program.turn, attrs, serial, int(turn_no))
    s = s._replace(attrs=attrs, script_turn=script_turn)
    c = c._replace(sessions=c.sessions.set(serial, s))
    if c.time >= program.warmup:
        c = c._replace(statistics=c.statistics._replace(turns=c.statistics.turns + 1))
    return c


def next_turn(m: Machine, attrs: tuple, script: int, script_turn: int) -> tuple[tuple, float, int]:
    """session/turn's attributes before the turn block: ``attrs`` with turn_no counted and the session's
    script's next turn loaded (an explicit session's attributes, or the trace's row: new, out, think, forced;
    ``more``: whether a turn is left), the new turn_no, and the script's position after it."""
    program = m.program
    attrs = list(attrs)
    turn_no = attrs[program.slot_turn] + 1.0
    attrs[program.slot_turn] = turn_no
    arrival = program.arrival
    if script >= 0 and isinstance(arrival, ir.Sessions):
        turns = arrival.sessions[script].turns or ()
        if script_turn < len(turns):
            for slot, value in turns[script_turn]:
                attrs[slot] = value
            script_turn += 1
        attrs[program.slot_more] = 1.0 if script_turn < len(turns) else 0.0
    elif script >= 0 and m.trace_sessions:
        rows = m.trace_sessions[script]
        if script_turn < len(rows):
            new, out, think, forced = rows[script_turn]
            attrs[program.slot_new] = new
            attrs[program.slot_out] = out
            attrs[program.slot_think] = think
            attrs[program.slot_forced] = forced
            script_turn += 1
        attrs[program.slot_more] = 1.0 if script_turn < len(rows) else 0.0
    return tuple(attrs), turn_no, script_turn


def record_sample(c: Configuration, serial: int, turn: int, index: int, value: float) -> tuple:
    """The samples with observation ``index``'s sample (at the time, of the
    session ``serial`` in turn ``turn``, of ``value``) added."""
    return (index, c.time, serial, turn, value), c.samples
