"""What holds at the head of every loop: an interval per attribute (issue 23, "No false warning").

A verdict's path (paths.py) forgets, at a loop body's start, every attribute
the body assigns: an earlier iteration may have changed it, so it goes back
to its range over the whole program. That range can be wider than any run
makes it at the loop's head: a pool of KV per turn, `hold kv[turn_no - 1]`,
in a tool-call loop that goes round again only under `turn_no < turns`, had
`turn_no` anywhere in [0, inf) there, and got "the index can be 4 when
`turn_no` = 5", which no run reaches.

This computes, by abstract interpretation of the session's blocks over
intervals (ranges.py's ``Interval`` and ``RangeEvaluator``), an invariant of
each loop's head: an interval per attribute that holds every time the body
starts. A loop's head is the least fixed point of "the entry's state joined
with the state at the end of the body", iterated with widening (an endpoint
still moving after a few rounds goes to infinity) and then improved by one
decreasing step (the body once more from the widened head), which is still
an invariant. Every transfer over-approximates the semantics:

- ``set x = e``: x gets the range of e in the current state; ``choose``:
  0 .. count-1;
- ``turn;``: turn_no + 1, the trace's columns and ``more`` anywhere in their
  ranges, then the turn block's statements;
- a hold: its body may start again after a preemption, so at its start what
  the body assigns is forgotten (back to its range), as the paths do;
  ``cached`` and ``computed`` are always their ranges (an admission and a
  preemption set them);
- a branch: each block from the state refined by its guard (a comparison of
  an attribute with an expression, ``&&`` of such in the first block, ``!``),
  joined; ``end;`` reaches nothing;
- a loop goes on forever (a session leaves it by ``end;``), a while leaves
  when its guard is 0.

The session starts with turn_no 0 (or an explicit session's value) and every
other attribute in its range. ``solver.Encoder`` adds, at a loop's head, each
forgotten attribute's interval to what Z3 may assume.
"""

from __future__ import annotations

import math

from .. import ir
from .paths import HOLD, TURN, list_assigned, list_assigned_slots
from .ranges import Interval, RangeEvaluator, join, make_point, widen

#: Rounds of plain iteration at a loop's head before an endpoint that still moves is widened.
ROUNDS_BEFORE_WIDENING = 4

State = tuple  # an Interval per attribute slot; None: no run reaches here



class LoopHeads:
    """The invariant of every loop's head, by the loop statement's (block, index)."""

    def __init__(self, program: ir.Program, ranges: tuple[Interval, ...], columns: dict[int, Interval]):
        self.program = program
        self.ranges = ranges
        self.columns = columns
        self.heads: dict[tuple[int, int], State] = {}
        self.depth = 0

    # -- the run of a session ------------------------------------------------------------------

    def analyse(self) -> dict[tuple[int, int], State]:
        program = self.program
        start = list(self.ranges)
        turn = make_point(0.0)
        if isinstance(program.arrival, ir.Sessions):
            for spec in program.arrival.sessions:
                for slot, value in spec.attrs:
                    if slot == program.slot_turn:
                        turn = join(turn, make_point(value))
        start[program.slot_turn] = turn
        if 0 <= program.session < len(program.blocks):
            self.block(program.session, tuple(start))
        return self.heads

    def block(self, block: int, state: State | None) -> State | None:
        for index, stmt in enumerate(self.program.blocks[block]):
            if state is None:
                return None
            state = self.statement(block, index, stmt, state)
        return state

    def statement(self, block: int, index: int, stmt: ir.Stmt, state: State) -> State | None:
        program = self.program
        if isinstance(stmt, ir.Set):
            return self.assign(state, stmt.slot, self.evaluate(state, stmt.expr))
        if isinstance(stmt, ir.Choose):
            return self.assign(state, stmt.var, Interval(0.0, float(max(stmt.count - 1, 0)), True))
        if isinstance(stmt, ir.Turn):
            return self.turn(state)
        if isinstance(stmt, ir.End):
            return None
        if isinstance(stmt, ir.Hold):
            return self.block(stmt.body, self.forget(state, list_assigned(program, stmt.body) | {HOLD}))
        if isinstance(stmt, ir.Branch):
            then = self.block(stmt.then_block, self.refine(state, stmt.guard, True))
            otherwise = self.block(stmt.else_block, self.refine(state, stmt.guard, False))
            return self.join(then, otherwise)
        if isinstance(stmt, (ir.Loop, ir.While)):
            return self.loop(block, index, stmt, state)
        return state  # observe, run, grow, drop, release, load: no attribute changes

    def loop(self, block: int, index: int, stmt: ir.Loop | ir.While, entry: State) -> State | None:
        guard = stmt.guard if isinstance(stmt, ir.While) else None

        def body(head: State) -> State | None:
            start = head if guard is None else self.refine(head, guard, True)
            return self.block(stmt.block, start)

        head = entry
        rounds = 0
        while True:
            after = self.join(entry, body(head))
            if rounds >= ROUNDS_BEFORE_WIDENING:
                after = tuple(widen(old, new) for old, new in zip(head, after))
            if after == head:
                break
            head, rounds = after, rounds + 1
        head = self.join(entry, body(head))  # one decreasing step: still an invariant, the widening undone
        self.heads[(block, index)] = head
        if guard is None:
            return None  # a loop goes on until `end;`
        return self.refine(head, guard, False)

    def turn(self, state: State) -> State:
        program = self.program
        turn = state[program.slot_turn]
        state = self.assign(state, program.slot_turn, Interval(turn.low + 1, turn.high + 1, turn.whole))
        if program.trace is not None:
            for slot in (program.slot_new, program.slot_out, program.slot_think, program.slot_more,
                         program.slot_forced):
                state = self.assign(state, slot, self.ranges[slot])
        for index, stmt in enumerate(program.blocks[program.turn]):
            state = self.statement(program.turn, index, stmt, state)  # only set and observe: never None
        return state

    # -- states ------------------------------------------------------------------------------

    def evaluate(self, state: State, e: ir.Expr) -> Interval:
        value = RangeEvaluator(self.program, list(state)).evaluate(e)
        return Interval(-math.inf, math.inf, False) if value is None else value

    def assign(self, state: State, slot: int, value: Interval) -> State:
        program = self.program
        if slot in (program.slot_cached, program.slot_computed):
            value = self.ranges[slot]
        return state[:slot] + (value,) + state[slot + 1:]

    def forget(self, state: State, assigned: set) -> State:
        program = self.program
        slots = {a for a in assigned if isinstance(a, int)}
        if TURN in assigned:
            slots |= {program.slot_turn} | list_assigned_slots(program, program.turn)
        for slot in slots:
            state = self.assign(state, slot, self.ranges[slot])
        return state

    @staticmethod
    def join(a: State | None, b: State | None) -> State | None:
        if a is None:
            return b
        if b is None:
            return a
        return tuple(join(x, y) for x, y in zip(a, b))

    def refine(self, state: State, guard: ir.Expr, holds: bool) -> State | None:
        """The states of ``state`` in which ``guard`` is true (``holds``) or false: a comparison of an
        attribute with an expression narrows the attribute; anything else narrows nothing. None when no
        value is left."""
        if isinstance(guard, ir.Unary) and guard.op == "Not":
            return self.refine(state, guard.operand, not holds)
        if isinstance(guard, ir.Binary) and guard.op == "And" and holds:
            state = self.refine(state, guard.left, True)
            return None if state is None else self.refine(state, guard.right, True)
        if isinstance(guard, ir.Binary) and guard.op == "Or" and not holds:
            state = self.refine(state, guard.left, False)
            return None if state is None else self.refine(state, guard.right, False)
        if not (isinstance(guard, ir.Binary) and guard.op in FLIPPED):
            return state
        op = guard.op if holds else NEGATED[guard.op]
        for attr, other, op in ((guard.left, guard.right, op), (guard.right, guard.left, FLIPPED[op])):
            if isinstance(attr, ir.Attr) and attr.slot not in (self.program.slot_cached,
                                                                self.program.slot_computed):
                state = self.narrow(state, attr.slot, op, self.evaluate(state, other))
                if state is None:
                    return None
        return state

    def narrow(self, state: State, slot: int, op: str, other: Interval) -> State | None:
        """``state`` with attribute ``slot`` narrowed to the values v with ``v op w`` for some w in
        ``other`` (NaN, which compares false, aside: the ranges do not model it)."""
        x = state[slot]
        low, high = x.low, x.high
        if op in ("Lt", "Le"):
            bound = other.high
            if op == "Lt" and x.whole and math.isfinite(bound):
                bound = math.ceil(bound) - 1
            high = min(high, bound)
        elif op in ("Gt", "Ge"):
            bound = other.low
            if op == "Gt" and x.whole and math.isfinite(bound):
                bound = math.floor(bound) + 1
            low = max(low, bound)
        elif op == "Eq":
            low, high = max(low, other.low), min(high, other.high)
        else:  # Ne narrows nothing an interval can say
            return state
        if low > high:
            return None
        return state[:slot] + (Interval(low, high, x.whole),) + state[slot + 1:]


#: A comparison seen from its right operand (x < y is y > x).
FLIPPED = {"Lt": "Gt", "Le": "Ge", "Gt": "Lt", "Ge": "Le", "Eq": "Eq", "Ne": "Ne"}
#: The comparison that holds when it does not.
NEGATED = {"Lt": "Ge", "Le": "Gt", "Gt": "Le", "Ge": "Lt", "Eq": "Ne", "Ne": "Eq"}


def compute_loop_heads(program: ir.Program, ranges: tuple[Interval, ...],
                       columns: dict[int, Interval]) -> dict[tuple[int, int], State]:
    """Each loop's (and while's) head invariant, by its statement's (block, index)."""
    return LoopHeads(program, ranges, columns).analyse()
