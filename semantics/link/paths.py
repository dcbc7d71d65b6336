"""The way a session comes to a statement: what the verdicts may assume there.

A verdict question is about one statement's expression. Read over the
attribute ranges alone (each attribute anywhere in its range, independently
of the others), it gets witnesses no run reaches: `prefill (prompt - cached)`
"can be negative when `prompt` = 1, `cached` = 2", though `cached` is at
most the hold's `reuse (K)` and `prompt` is `K + n`. The semantics
guarantees more, and ``solver.Encoder.walk`` gives it to Z3 along the path
to the statement (issue 13, "Warnings that are true"):

- the `set`s on the way, in order, as definitions (`prompt` is `K + n`, in
  terms of what `K` and `n` were), the workload's turn block at each `turn;`;
- the guards of the branches the statement is inside (1 in the first block,
  0 in the second), and of a branch passed whose other block ends the
  session;
- on entering a hold: `cached`, which the admission sets, is between 0 and
  the hold's `reuse` (seed 002 §3 Pools: the session "consumes at most ρ
  units of its own cached prefix"), and 0 without a cache clause;
- what the path cannot know is forgotten (its attribute back to its range):
  what a loop's body assigns, at the body's start (an earlier iteration may
  have assigned it); what a hold's body assigns, at the body's start and at
  its header, when a preemption can start the hold again (a preempted hold
  runs its header and body again: ``find_restartable_holds``); what a loop
  passed assigns inside it, and a `turn;`'s changes; `cached` after a hold,
  `computed` always (a preemption sets it). A branch passed is the run of one
  of its blocks, and a hold passed the run of its body (``solver.Encoder.
  pass_statement``).

This module finds the path; ``solver`` encodes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from .walk import list_child_blocks


@dataclass(frozen=True, slots=True)
class Path:
    """From the start of a root block to a statement: ``steps`` are (block,
    index) pairs, outermost first; at each the statements before ``index``
    are passed, and the one at ``index`` is entered (the last: the statement
    itself). ``after_init``: the path starts after the workload's init block
    (the session's root starts once init has run)."""

    steps: tuple[tuple[int, int], ...]
    after_init: bool


def find_parents(program: ir.Program) -> dict[int, tuple[int, int]]:
    """Each nested block's (parent block, index of the statement nesting it)."""
    parents: dict[int, tuple[int, int]] = {}
    pending = [root for root in (program.init, program.turn, program.session)]
    seen: set[int] = set()
    while pending:
        block = pending.pop()
        if block in seen:
            continue
        seen.add(block)
        for index, stmt in enumerate(program.blocks[block]):
            for child in list_child_blocks(stmt):
                parents.setdefault(child, (block, index))
                pending.append(child)
    return parents


def find_path(program: ir.Program, parents: dict[int, tuple[int, int]], block: int, index: int) -> Path:
    steps = [(block, index)]
    while block in parents:
        block, index = parents[block]
        steps.append((block, index))
    steps.reverse()
    return Path(tuple(steps), steps[0][0] == program.session and program.init != program.session)


#: What a statement may change besides the attributes it sets: markers.
TURN = "turn"
HOLD = "hold"


def find_restartable_holds(program: ir.Program) -> frozenset[tuple[int, int]]:
    """The holds (block, index) whose header and body a preemption can run again: one of its pools (a
    family's member) preempts (`preempt lifo` or `preempt by`: its holders are victims; under preempt none
    a growth waits: docs/semantics.md, pool/preempt), or it is inside such a hold (a victim's holds inside
    it are released with it, and its body runs them again). A hold on pools that never preempt, in no such
    hold, runs its body once per admission (issue 23: `hold mem (x)` whose body sets x had x forgotten at
    its header, on a pool no run preempts, and was warned of a value only a second admission could read)."""
    found: set[tuple[int, int]] = set()
    pending = [(root, False) for root in (program.init, program.turn, program.session)]
    seen: set[int] = set()
    while pending:
        block, inside = pending.pop()
        if (block, inside) in seen or not 0 <= block < len(program.blocks):
            continue
        seen.add((block, inside))
        for index, stmt in enumerate(program.blocks[block]):
            restartable = inside
            if isinstance(stmt, ir.Hold):
                restartable = restartable or any(
                    pool.preempt is not None
                    for held in stmt.pools for pool in program.pools[held.ref.base: held.ref.base + held.ref.count])
                if restartable:
                    found.add((block, index))
            pending.extend((child, restartable) for child in list_child_blocks(stmt))
    return frozenset(found)


def list_assigned(program: ir.Program, block: int) -> set[int | str]:
    """The attribute slots a block's statements assign, nested blocks
    included, with the markers TURN (a `turn;` inside: the turn block's
    attributes, turn_no and the trace's columns change) and HOLD (a hold
    inside: `cached` and `computed` change)."""
    found: set[int | str] = set()
    pending = [block]
    while pending:
        for stmt in program.blocks[pending.pop()]:
            found |= list_assigned_by(stmt)
            pending.extend(list_child_blocks(stmt))
    return found


def list_assigned_slots(program: ir.Program, block: int) -> set[int]:
    """The attribute slots a block assigns (nested blocks included)."""
    return {a for a in list_assigned(program, block) if isinstance(a, int)}


def list_assigned_by(stmt: ir.Stmt) -> set[int | str]:
    """What ``stmt`` itself assigns (not its nested blocks)."""
    if isinstance(stmt, ir.Set):
        return {stmt.slot}
    if isinstance(stmt, ir.Choose):
        return {stmt.var}
    if isinstance(stmt, ir.Turn):
        return {TURN}
    if isinstance(stmt, ir.Hold):
        return {HOLD}
    return set()


def ends_the_session(program: ir.Program, block: int) -> bool:
    """Whether every way through ``block`` ends the session: its last
    statement is `end;`, or a branch both of whose blocks end it."""
    stmts = program.blocks[block]
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ir.End):
        return True
    if isinstance(last, ir.Branch):
        return ends_the_session(program, last.then_block) and ends_the_session(program, last.else_block)
    return False
