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
- besides the intervals, relations between two attributes (issue 23, copies in
  loops): ``set x = y`` (a copy) or ``set x = y + c`` / ``y - c`` with a
  constant c records that x is y + c as the run computes it (a float sum,
  rounded to nearest: monotone in y); a copy of a copy is a copy of the
  original. A guard narrowing one side narrows the other through it (from x's
  bounds back to y's rounded outwards, so that the rounding can never make a
  value of y that a run has fall outside), which is how ``set calls =
  turn_no; branch (calls < turns) {...}`` bounds ``turn_no``. Any assignment
  of either side (a set, a choose, a ``turn;``, a hold's body forgotten) drops
  the relation; a join keeps the relations both sides have;
- ``turn;``: turn_no + 1 (a relation x = turn_no + c becomes x = turn_no +
  (c - 1), for a whole c), the trace's columns and ``more`` anywhere in
  their ranges, then the turn block's statements;
- a hold: its body may start again after a preemption, so at its start what
  the body assigns is forgotten (back to its range), as the paths do, when a
  preemption can (paths.find_restartable_holds);
  ``cached`` and ``computed`` are always their ranges (an admission and a
  preemption set them);
- a branch: each block from the state refined by its guard (a comparison of
  an attribute with an expression, ``&&`` of such in the first block, ``!``),
  joined; ``end;`` reaches nothing;
- a loop goes on forever (a session leaves it by ``end;``), a while leaves
  when its guard is 0.

The session starts with turn_no 0 (or an explicit session's value) and every
other attribute in its range, with no relation. ``solver.Encoder`` adds, at a
loop's head, each forgotten attribute's interval and the head's relations that
name one to what Z3 may assume.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import ir
from .paths import HOLD, TURN, find_restartable_holds, list_assigned, list_assigned_slots
from .ranges import Interval, RangeEvaluator, join, start_turn, widen

#: The most values an attribute's set of values holds (``State.values``); more: its interval alone.
MAX_VALUES = 8

#: Rounds at a loop's head after which the sets of values are dropped, so that the iteration ends.
ROUNDS_BEFORE_DROPPING_VALUES = 16

#: Rounds of plain iteration at a loop's head before an endpoint that still moves is widened.
ROUNDS_BEFORE_WIDENING = 4

#: (x, y, c): attribute x is attribute y + c as a run computes it (x is not y; c finite; 0: a copy)
Relation = tuple[int, int, float]


@dataclass(frozen=True, slots=True)
class State:
    """What holds of a session at a point: ``state[slot]`` is the attribute's interval, ``relations``
    the relations between two attributes (``Relation``). A point no run reaches is None, not a State."""

    intervals: tuple[Interval, ...]
    relations: frozenset[Relation] = frozenset()
    #: per attribute, the few values it can have (at most MAX_VALUES; None: any in its interval): issue 23,
    #: `x` is 0, or 0.5 where a branch set it, and the interval [0, 0.5] alone read as 0.25 gave a witness
    #: no run reaches; () when no attribute has a set
    values: tuple[frozenset[float] | None, ...] = ()

    def __getitem__(self, slot: int) -> Interval:
        return self.intervals[slot]

    def values_of(self, slot: int) -> frozenset[float] | None:
        return self.values[slot] if self.values else None

    def with_values(self, slot: int, values: frozenset[float] | None) -> tuple[frozenset[float] | None, ...]:
        if not self.values and values is None:
            return self.values
        current = self.values or (None,) * len(self.intervals)
        return current[:slot] + (values,) + current[slot + 1:]


class LoopHeads:
    """The invariant of every loop's head, by the loop statement's (block, index)."""

    def __init__(self, program: ir.Program, ranges: tuple[Interval, ...], columns: dict[int, Interval],
                 holes: frozenset[tuple[int, int]] = frozenset()):
        self.program = program
        #: statements the lowering could not lower (SourceMap.holes): any attribute may change there
        self.holes = holes
        self.ranges = ranges
        self.columns = columns
        self.heads: dict[tuple[int, int], State] = {}
        self.restartable = find_restartable_holds(program)
        self.depth = 0

    # -- the run of a session ------------------------------------------------------------------

    def analyse(self) -> dict[tuple[int, int], State]:
        program = self.program
        start = list(self.ranges)
        start[program.slot_turn] = start_turn(program)
        if 0 <= program.session < len(program.blocks):
            self.block(program.session, State(tuple(start)))
        return self.heads

    def block(self, block: int, state: State | None) -> State | None:
        for index, stmt in enumerate(self.program.blocks[block]):
            if state is None:
                return None
            state = self.statement(block, index, stmt, state)
        return state

    def statement(self, block: int, index: int, stmt: ir.Stmt, state: State) -> State | None:
        program = self.program
        state = self.without_fault(state, stmt)
        if state is None:
            return None
        if isinstance(stmt, ir.Set):
            value = self.evaluate(state, stmt.expr)
            return self.assign(state, stmt.slot, value, self.relate(state, stmt.slot, stmt.expr),
                               self.list_values(state, stmt.expr, value))
        if isinstance(stmt, ir.Choose):
            last = max(stmt.count - 1, 0)
            return self.assign(state, stmt.var, Interval(0.0, float(last), True),
                               values=frozenset(float(k) for k in range(last + 1)) if last < MAX_VALUES else None)
        if isinstance(stmt, ir.Turn):
            return self.turn(state)
        if isinstance(stmt, ir.End):
            if (block, index) in self.holes:
                return self.forget(state, set(range(len(program.attrs))) | {TURN})
            return None
        if isinstance(stmt, ir.Hold):
            again = list_assigned(program, stmt.body) if (block, index) in self.restartable else set()
            return self.block(stmt.body, self.forget(state, again | {HOLD}))
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
            if rounds >= ROUNDS_BEFORE_WIDENING:  # (the relations only ever go: they need no widening)
                after = State(tuple(widen(old, new) for old, new in zip(head.intervals, after.intervals)),
                              after.relations, after.values)  # (a set of values grows to MAX_VALUES, then goes)
            if rounds >= ROUNDS_BEFORE_DROPPING_VALUES:
                # a transfer need not be monotone in the sets of values nor in the relations (a relation a
                # narrowing by a statement passed gives back can come and go, round after round): from
                # here no values, and only relations the head had, so that the iteration ends (the
                # intervals only grow, the relations only go)
                after = State(after.intervals, after.relations & head.relations)
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
        # a relation with turn_no shifts by the 1 it adds (issue 23, badin4: `set next = turn_no + 1` then
        # `turn;` is next = turn_no, which a loop's head joined with its entry's had lost): exact where the
        # constant is a whole number, as turn_no is (a sum of whole numbers below 2^53)
        t = program.slot_turn
        shifted = frozenset((x, y, c - 1.0) if y == t else (x, y, c + 1.0) for x, y, c in state.relations
                            if t in (x, y) and c == math.floor(c) and abs(c) < 2.0 ** 52)
        values = state.values_of(t)
        state = self.assign(state, t, Interval(turn.low + 1, turn.high + 1, turn.whole), shifted,
                            None if values is None else frozenset(v + 1 for v in values))
        if program.trace is not None:
            for slot in (program.slot_new, program.slot_out, program.slot_think, program.slot_more,
                         program.slot_forced):
                state = self.assign(state, slot, self.ranges[slot])
        for index, stmt in enumerate(program.blocks[program.turn]):
            state = self.statement(program.turn, index, stmt, state)  # only set and observe: never None
        return state

    # -- states ------------------------------------------------------------------------------

    def evaluate(self, state: State, e: ir.Expr) -> Interval:
        value = RangeEvaluator(self.program, list(state.intervals)).evaluate(e)
        return Interval(-math.inf, math.inf, False) if value is None else value

    def assign(self, state: State, slot: int, value: Interval, relations: frozenset[Relation] = frozenset(),
               values: frozenset[float] | None = None) -> State:
        """``state`` with attribute ``slot`` assigned a value in ``value`` (one of ``values`` when given):
        every relation naming it goes, and ``relations`` (of its new value) come."""
        program = self.program
        if slot in (program.slot_cached, program.slot_computed):
            value, relations, values = self.ranges[slot], frozenset(), None
        intervals = state.intervals[:slot] + (value,) + state.intervals[slot + 1:]
        kept = frozenset(r for r in state.relations if slot not in r[:2])
        return State(intervals, kept | relations, state.with_values(slot, values))

    def list_values(self, state: State, e: ir.Expr, value: Interval) -> frozenset[float] | None:
        """The few values ``e`` can have: a point's, a copy's of an attribute with few values, or a
        conditional's arms' (None: any in ``value``)."""
        if value.low == value.high and math.isfinite(value.low):
            return frozenset({value.low + 0.0})
        if isinstance(e, ir.Attr):
            return state.values_of(e.slot)
        if isinstance(e, ir.Cond):
            a = self.list_values(state, e.then, self.evaluate(state, e.then))
            b = self.list_values(state, e.otherwise, self.evaluate(state, e.otherwise))
            if a is not None and b is not None and len(a | b) <= MAX_VALUES:
                return a | b
        return None

    def without_fault(self, state: State, stmt: ir.Stmt) -> State | None:
        """``state`` where ``stmt`` has no fault: a run goes on past a statement only with its family
        indices members and its guard 0 or 1 (seed 002 §3 Branching; solver.Encoder.pass_without_fault):
        issue 23, a loop whose first iteration stops every run at `h[turn_no - 1]` had a head that a
        second iteration, which no run starts, reaches. An index or a guard that is an attribute, or one
        plus or minus a constant, narrows it; one that leaves no value narrows nothing."""
        from .questions import list_expression_refs
        from .walk import list_parts, list_statement_refs

        refs = list_statement_refs(stmt) + list(list_expression_refs([p.expr for p in list_parts(stmt)]))
        bounds = [(ref.index, 0.0, float(ref.count - 1)) for _, ref in refs if ref.index is not None]
        if isinstance(stmt, ir.Branch):
            bounds.append((stmt.guard, 0.0, 1.0))
        for e, low, high in bounds:
            if isinstance(e, ir.Attr):
                slot, c = e.slot, 0.0
            else:
                shifted = split_shift(e)
                if shifted is None:
                    continue
                slot, c = shifted
            if slot in (self.program.slot_cached, self.program.slot_computed):
                continue
            if c != 0.0:  # y + c within [low, high]: y within it less c, rounded outwards (solve_low, solve_high)
                low, high = solve_low(low, c), solve_high(high, c)
            narrowed = self.restrict(state, slot, low, high)
            # none left: every run that comes to it stops there, a link error (questions), and the errors
            # after it are looked for as if it were mended (issue 23: one error must not hide another)
            state = narrowed if narrowed is not None else state
        return state

    def relate(self, state: State, slot: int, e: ir.Expr) -> frozenset[Relation]:
        """The relations ``set slot = e`` gives the attribute: a copy of an attribute (and of what that
        one is a copy of), or an attribute plus or minus a finite constant. Never with itself (``set k =
        k + 1`` relates k to nothing), nor with ``cached`` or ``computed``, which change without a
        statement (an admission, a preemption)."""
        program = self.program
        moving = (slot, program.slot_cached, program.slot_computed)
        source, constant = (e.slot, 0.0) if isinstance(e, ir.Attr) else (split_shift(e) or (None, 0.0))
        if source is None or source in moving:
            return frozenset()
        found = {(slot, source, constant)}
        if constant == 0.0:  # a copy is exactly its source, so whatever its source is, it is
            for x, y, c in state.relations:
                if x == source and y not in moving:
                    found.add((slot, y, c))
                elif y == source and c == 0.0 and x not in moving:
                    found.add((slot, x, 0.0))
        return frozenset(found)

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
        values: tuple[frozenset[float] | None, ...] = ()
        if a.values and b.values:
            values = tuple(None if x is None or y is None or len(x | y) > MAX_VALUES else x | y
                           for x, y in zip(a.values, b.values))
            values = values if any(v is not None for v in values) else ()
        return State(tuple(join(x, y) for x, y in zip(a.intervals, b.intervals)), a.relations & b.relations, values)

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
        moving = (self.program.slot_cached, self.program.slot_computed)
        for side, other, op in ((guard.left, guard.right, op), (guard.right, guard.left, FLIPPED[op])):
            if isinstance(side, ir.Attr) and side.slot not in moving:
                state = self.narrow(state, side.slot, op, self.evaluate(state, other))
            elif (shifted := split_shift(side)) is not None and shifted[0] not in moving:
                # `t + 1 < turns`: the sum narrowed as an attribute would be, then back to t (outwards)
                slot, c = shifted
                total = self.evaluate(state, side)
                low, high = narrow_interval(total, op, self.evaluate(state, other))
                state = None if low > high else self.restrict(state, slot, solve_low(low, c), solve_high(high, c))
            if state is None:
                return None
        return state

    def narrow(self, state: State, slot: int, op: str, other: Interval) -> State | None:
        """``state`` with attribute ``slot`` narrowed to the values v with ``v op w`` for some w in
        ``other`` (NaN, which compares false, aside: the ranges do not model it), and every attribute
        related to it narrowed in turn. None when no value is left."""
        low, high = narrow_interval(state[slot], op, other)
        return self.restrict(state, slot, low, high)

    def restrict(self, state: State, slot: int, low: float, high: float) -> State | None:
        """``state`` with attribute ``slot`` within [low, high] (whole ones only if it is whole), then
        what that says of the attributes related to it, until nothing changes. None when no value is left."""
        pending = [(slot, low, high)]
        for _ in range(RELATED_NARROWINGS):
            if not pending:
                break
            slot, low, high = pending.pop()
            x = state[slot]
            if x.whole:
                low = math.ceil(low) if math.isfinite(low) else low
                high = math.floor(high) if math.isfinite(high) else high
            low, high = max(low, x.low), min(high, x.high)
            if low > high:
                return None
            values = state.values_of(slot)
            if values is not None:
                kept = frozenset(v for v in values if low <= v <= high)
                if not kept:
                    return None
                if kept != values:
                    state = State(state.intervals, state.relations, state.with_values(slot, kept))
                low, high = max(low, min(kept)), min(high, max(kept))
            if (low, high) == (x.low, x.high):
                continue
            state = State(state.intervals[:slot] + (Interval(low, high, x.whole),) + state.intervals[slot + 1:],
                          state.relations, state.values)
            for related, source, c in state.relations:
                if source == slot:  # related = source + c, and a float sum is monotone in its operand
                    pending.append((related, low + c, high + c))
                elif related == slot:  # source + c is related's value: back from its bounds, outwards
                    pending.append((source, solve_low(low, c), solve_high(high, c)))
        return state


def narrow_interval(x: Interval, op: str, other: Interval) -> tuple[float, float]:
    """The bounds of the values v of ``x`` with ``v op w`` for some w in ``other`` (Ne: ``x``'s own)."""
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
    return low, high


def split_shift(e: ir.Expr) -> tuple[int, float] | None:
    """(slot, c) when ``e`` is an attribute plus or minus a finite constant c (as `relate` reads it)."""
    if isinstance(e, ir.Binary) and e.op in ("Add", "Sub"):
        for attr, number in ((e.left, e.right), (e.right, e.left)):
            if isinstance(attr, ir.Attr) and isinstance(number, ir.Num) and (e.op == "Add" or attr is e.left):
                c = number.value if e.op == "Add" else -number.value
                return (attr.slot, c) if math.isfinite(c) else None
    return None


#: How many narrowings one guard may pass on through the relations (each is sound; this only ends a cycle).
RELATED_NARROWINGS = 64


def solve_high(high: float, c: float) -> float:
    """A bound on y when y + c, rounded to nearest, is at most ``high``: y + c is below the float after
    ``high`` (rounding is monotone), so y is at most that less c, rounded up."""
    if c == 0.0 or not math.isfinite(high):
        return high
    bound = math.nextafter(math.nextafter(high, math.inf) - c, math.inf)
    return bound if math.isfinite(bound) else math.inf


def solve_low(low: float, c: float) -> float:
    """A bound on y when y + c, rounded to nearest, is at least ``low`` (``solve_high`` mirrored)."""
    if c == 0.0 or not math.isfinite(low):
        return low
    bound = math.nextafter(math.nextafter(low, -math.inf) - c, -math.inf)
    return bound if math.isfinite(bound) else -math.inf


#: A comparison seen from its right operand (x < y is y > x).
FLIPPED = {"Lt": "Gt", "Le": "Ge", "Gt": "Lt", "Ge": "Le", "Eq": "Eq", "Ne": "Ne"}
#: The comparison that holds when it does not.
NEGATED = {"Lt": "Ge", "Le": "Gt", "Gt": "Le", "Ge": "Lt", "Eq": "Ne", "Ne": "Eq"}


def compute_loop_heads(program: ir.Program, ranges: tuple[Interval, ...], columns: dict[int, Interval],
                       holes: frozenset[tuple[int, int]] = frozenset()) -> dict[tuple[int, int], State]:
    """Each loop's (and while's) head invariant, by its statement's (block, index)."""
    return LoopHeads(program, ranges, columns, holes).analyse()
