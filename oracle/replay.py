"""A multi-turn trace replayed on vLLM's engine (lib/vllm.sq) on the step
clock, under the replay protocol of ../shared/oracle/README.md, one CSV row
per request: ``session,turn,sent,first,done,prompt,cached,out`` (the columns
of ../shared/oracle/prefix_cache/cache_trace.out.csv).

The program is examples/oracle/vllm_replay.sq with the engine (block size,
budget, max_seqs, usable blocks, chunk cap; prefix caching on, as the
protocol has it), ``spacing`` and ``sessions`` set, its trace pointed at the
given file. Per (session, turn): sent is the value of the ``sent`` sample;
first the time of the ``ttft`` sample (the step that sampled the first
token); done the time of the ``done`` sample; cached the ``cached_tokens``
sample (the prefix the request consumed at its first admission, lib/vllm.sq's
``first_cached``: vLLM's ``num_cached_tokens``); prompt and out
the trace's. A session is the trace's session number (session i of the
program replays the trace's i-th session, ``ordered``); a turn is numbered
from 1, as the trace does.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import NamedTuple

from semantics.errors import RunError, UsageError

from .vllm_sets import engine_sets

ROOT = Path(__file__).resolve().parent.parent
REPLAY_PROGRAM = ROOT / "examples" / "oracle" / "vllm_replay.sq"
#: The replay with a system prompt every session shares (a replay job's ``shared_head``; docs/design/shared-prefixes.md)
SHARED_REPLAY_PROGRAM = ROOT / "examples" / "oracle" / "vllm_replay_shared.sq"
COLUMNS = ("session", "turn", "sent", "first", "done", "prompt", "cached", "out")


class Row(NamedTuple):
    session: int
    turn: int
    sent: float
    first: float
    done: float
    prompt: int
    cached: int
    out: int

    def csv(self) -> str:
        return csv_line(self)


def csv_line(cells) -> str:
    """A row's CSV line from its cells in COLUMNS' order (a Row, or replay's tuple of its fields)."""
    session, turn, sent, first, done, prompt, cached, out = cells
    return f"{session},{turn},{float(sent)!r},{float(first)!r},{float(done)!r},{prompt},{cached},{out}"


def replay_program(trace: str, spacing: float, budget: float, max_seqs: float, blocks: float,
                   block_size: float = 16, sessions: int | None = None, chunk: float = 0, older_rule: bool = False,
                   asynchronous: bool = False, shared_head: int = 0):
    """The replay program of ``trace`` (a CSV path) and its trace's sessions; ``older_rule``: lib/vllm.sq's
    older self-preemption rule (docs/divergences.md, D1), which under its FCFS order answers the same;
    ``asynchronous``: vLLM's asynchronous scheduling (lib/vllm.sq's default), else the synchronous engine
    (every replay recorded before async-replays.jsonl); ``shared_head``: N > 0, every session's prompts begin
    with one system prompt of N tokens (examples/oracle/vllm_replay_shared.sq, whose KV pool shares
    prefixes)."""
    from semantics.link import link
    from semantics.programcache import compile_file_cached as compile_file
    from semantics.smallstep.workload import read_trace

    trace_sessions = read_checked_trace(trace)
    count = len(trace_sessions) if sessions is None else sessions
    if not 1 <= count <= len(trace_sessions):
        raise UsageError(f"--sessions {count}: the trace has {len(trace_sessions)} session(s)")
    for name, value in (("--spacing", spacing), ("--budget", budget), ("--max-seqs", max_seqs),
                        ("--blocks", blocks), ("--block-size", block_size), ("--chunk", chunk)):
        if not (math.isfinite(value) and value >= 0):
            raise UsageError(f"{name} {value:g}: a finite number, at least 0")
    sets = {**engine_sets(budget, max_seqs, block_size, blocks, chunk, prefix_caching=True, asynchronous=asynchronous),
            "spacing": float(spacing), "sessions": float(count), **({"older_rule": 1.0} if older_rule else {})}
    if shared_head:
        if not shared_head >= 1 or shared_head != int(shared_head):
            raise UsageError(f"--shared-head {shared_head:g}: a whole number of tokens, 1 or more")
        program, smap = compile_file(str(SHARED_REPLAY_PROGRAM), sets={**sets, "head": float(shared_head)})
    else:
        program, smap = compile_file(str(REPLAY_PROGRAM), sets=sets)
    link(program, smap, verdicts=False)  # range warnings only: the replay program is linked with them in the tests
    return dataclasses.replace(program, trace=str(Path(trace).resolve())), trace_sessions


#: The replay protocol sends each turn as a request of `new` prompt tokens generating `out` (vLLM's
#: SamplingParams.max_tokens); vLLM takes neither empty (an empty prompt is refused, max_tokens is at least 1).
REPLAY_CELLS = {
    "new": ("a request's prompt tokens, a whole number, 1 or more (the replay sends it to vLLM)",
            lambda x: 1 <= x < math.inf and x == int(x)),
    "out": ("a request's output tokens, a whole number, 1 or more (the replay's max_tokens)",
            lambda x: 1 <= x < math.inf and x == int(x)),
}


def read_checked_trace(trace: str):
    """The trace's sessions (semantics.smallstep.workload.read_trace): a file that cannot be read is a usage
    error (the command names it); a cell that is wrong is an error located in it (exit 1)."""
    from semantics.smallstep.workload import read_trace

    try:
        return read_trace(trace, REPLAY_CELLS)
    except RunError as e:
        if e.span is None:
            raise UsageError(e.message) from None
        raise


def trace_session_numbers(trace: str) -> list[int]:
    """The trace's session numbers, ascending (session i of the program replays the i-th)."""
    with open(trace, newline="", encoding="utf-8") as f:
        text = f.read()
    if '"' not in text and "\r" not in text and "\x00" not in text:
        # no quote, no line ending but \n, no NUL: each line is its cells split at the commas, as the csv
        # module reads it (an empty line none)
        if not text:
            return []
        lines = text.split("\n")
        k = _session_column(lines[0].split(","))
        rows = (line.split(",", k + 1) for line in lines[1:] if line)  # the cells up to the session's
    else:
        import csv
        import io

        rows = csv.reader(io.StringIO(text, newline=""))
        header = next(rows, None)
        if header is None:
            return []
        k = _session_column(header)
    # each distinct cell read once, in the file's order (a session's turns repeat its cell)
    cells = dict.fromkeys(row[k] if k < len(row) else None for row in rows if row)
    return sorted({int(float(cell)) for cell in cells})


def _session_column(header: list[str]) -> int:
    """The session's column: its last so named, as csv.DictReader reads."""
    return len(header) - 1 - header[::-1].index("session")


def replay(trace: str, spacing: float, budget: float, max_seqs: float, blocks: float, block_size: float = 16,
           sessions: int | None = None, chunk: float = 0, asynchronous: bool = False,
           shared_head: int = 0) -> list[Row]:
    """The rows of the replay, by session then turn (``asynchronous``, ``shared_head``: replay_program's)."""
    return [Row._make(cells) for cells in _cells(trace, spacing, budget, max_seqs, blocks, block_size, sessions, chunk,
                                                 asynchronous, shared_head)]


def replay_csv(trace: str, spacing: float, budget: float, max_seqs: float, blocks: float, block_size: float = 16,
               sessions: int | None = None, chunk: float = 0, asynchronous: bool = False, shared_head: int = 0) -> str:
    """The replay as `serq-ref oracle replay` prints it: COLUMNS' header, then each of replay's rows as its
    ``csv()`` writes it (csv_line), a line each (written from the cells, without the Row records)."""
    lines = [",".join(COLUMNS)]
    lines += [csv_line(cells) for cells in
              _cells(trace, spacing, budget, max_seqs, blocks, block_size, sessions, chunk, asynchronous, shared_head)]
    lines.append("")
    return "\n".join(lines)


def _cells(trace, spacing, budget, max_seqs, blocks, block_size, sessions, chunk, asynchronous, shared_head) -> list:
    """replay's rows, each a tuple of Row's fields. The cyclic garbage collector is off from the run to the
    last cell (on again after, if it was on), as it is during the run (semantics.smallstep.driver.run_machine):
    the result's records, the maps and the cells hold no reference cycle, and each pass it made here walked
    the objects the run had left (0.011 G instructions of the full trace's replay)."""
    import gc

    from semantics.fast import run

    program, trace_sessions = replay_program(trace, spacing, budget, max_seqs, blocks, block_size, sessions, chunk,
                                             asynchronous=asynchronous, shared_head=shared_head)
    collecting = gc.isenabled()
    gc.disable()
    try:
        # the sessions replay_program read are those the run reads from the same file (read_trace's, by the
        # stricter REPLAY_CELLS): handed over, the file is not read a second time
        result = run(program, trace_sessions=trace_sessions)
        numbers = trace_session_numbers(trace)
        samples = {o.name: o.samples for o in result.observes}
        done = {(serial, turn): time for time, serial, turn, _ in samples["done"]}
        sent = {(serial, turn): value for _, serial, turn, value in samples["sent"]}
        first = {(serial, turn): time for time, serial, turn, _ in samples["ttft"]}
        cached = {(serial, turn): value for _, serial, turn, value in samples["cached_tokens"]}
        cells = []
        count = len(trace_sessions) if sessions is None else sessions
        for serial in range(count):
            number = numbers[serial]
            for k, (new, out, _think, _forced) in enumerate(trace_sessions[serial], 1):
                key = (serial, k)
                if key not in done:
                    raise RunError(f"trace session {number}, turn {k} did not finish by the horizon "
                                   f"{result.horizon:g} steps")
                cells.append((number, k, sent[key], first[key], done[key], int(new), int(cached[key]), int(out)))
        return cells
    finally:
        if collecting:
            gc.enable()
