"""The two lints of seed 002 §3 "Lints", and a constant guard.

"Linking rejects two programs that are well formed and almost certainly not
what their author meant. A set that reads live pool or stage state
(cachedin, budget_left, used, …) and is then used in a hold's header: the
header is read at admission and the set is not, so the value reaching the
header is the one from before the session queued — at admission is the
clause for it. And a branch whose guard is a constant strictly between 0 and
1: that is a draw, and branch with is how to say so. Both are errors."
§3 Branching: "A constant guard that is not 0 or 1 is refused at link time."

The first lint is a may-reach analysis over the session tree: a ``set`` whose
value derives from live state (directly, or through an attribute that does)
reaches every statement after it until the attribute is assigned again; a
branch joins its two arms, a loop runs its body to a fixed point, ``end``
reaches nothing. ``turn`` runs the workload's turn block in place.
"""

from __future__ import annotations

import math

from .. import ir
from ..errors import ErrorLog
from ..sourcemap import SourceMap
from .constants import evaluate_constant
from .names import format_number, locate_statement, make_error, mention, name_attribute, show_expr
from .moments import describe_hold
from .walk import Visit, list_subexpressions, read_slots, visit_session

#: Observables whose value changes while a session waits (seed 002 §3, Lints).
LIVE_FUNCTIONS = frozenset(
    {
        "CachedIn",
        "BudgetLeft",
        "Used",
        "Free",
        "Holders",
        "Queued",
        "Queue",
        "Busy",
        "Work",
        "Price",
        "EstLambda",
        "EstRho",
        "EstWait",
    }
)

#: A set that read live state, as it reaches later statements: the set's
#: (block, index) and the live call it read.
Origin = tuple[tuple[int, int], ir.Call]
#: Attribute slot -> the live sets that may reach here, in (block, index) order.
Reaching = dict[int, tuple[Origin, ...]]


def find_live_call(e: ir.Expr) -> ir.Call | None:
    for sub in list_subexpressions(e):
        if isinstance(sub, ir.Call) and sub.fun in LIVE_FUNCTIONS:
            return sub
    return None


def join(a: Reaching, b: Reaching) -> Reaching:
    out: Reaching = {}
    for slot in sorted(set(a) | set(b)):
        out[slot] = tuple(sorted(set(a.get(slot, ())) | set(b.get(slot, ())), key=lambda origin: origin[0]))
    return out


class StaleHeaderLint:
    """Sets of live state that reach a hold's header (seed 002 §3, Lints)."""

    def __init__(self, program: ir.Program, smap: SourceMap, log: ErrorLog):
        self.program = program
        self.smap = smap
        self.log = log

    def flow_block(self, block: int, state: Reaching) -> Reaching:
        for index, stmt in enumerate(self.program.blocks[block]):
            state = self.flow_statement(block, index, stmt, state)
        return state

    def flow_statement(self, block: int, index: int, stmt: ir.Stmt, state: Reaching) -> Reaching:
        if isinstance(stmt, ir.Set):
            live = find_live_call(stmt.expr)
            origins = (((block, index), live),) if live is not None else ()
            for slot in read_slots(stmt.expr):
                origins += state.get(slot, ())
            state = {k: v for k, v in state.items() if k != stmt.slot}
            if origins:
                state[stmt.slot] = tuple(sorted(set(origins), key=lambda origin: origin[0]))
            return state
        if isinstance(stmt, ir.Choose):
            return {k: v for k, v in state.items() if k != stmt.var}
        if isinstance(stmt, ir.Turn):
            return self.flow_block(self.program.turn, state)
        if isinstance(stmt, ir.End):
            return {}
        if isinstance(stmt, ir.Hold):
            self.check_header(block, index, stmt, state)
            return self.flow_block(stmt.body, state)
        if isinstance(stmt, ir.Branch):
            return join(self.flow_block(stmt.then_block, state), self.flow_block(stmt.else_block, state))
        if isinstance(stmt, (ir.Loop, ir.While)):
            while True:
                after = join(state, self.flow_block(stmt.block, state))
                if after == state:
                    return state
                state = after
        return state

    def check_header(self, block: int, index: int, hold: ir.Hold, state: Reaching) -> None:
        header = [held.units for held in hold.pools] + [held.reserve for held in hold.pools if held.reserve is not None]
        header += [hold.reuse] if hold.reuse is not None else []
        for e in header:
            for slot in read_slots(e):
                for (set_block, set_index), live in state.get(slot, ()):
                    set_stmt = self.program.blocks[set_block][set_index]
                    assert isinstance(set_stmt, ir.Set)
                    name = name_attribute(self.program, set_stmt.slot)
                    read = name_attribute(self.program, slot)
                    through = "" if read == name else f" (through `{read}`)"
                    hold_site = locate_statement(self.program, self.smap, block, index)
                    self.log.add(make_error(
                        self.smap,
                        locate_statement(self.program, self.smap, set_block, set_index),
                        f"`{name}` reads {show_expr(self.program, live)} when the session reaches this `set`, and is "
                        f"used{through} in the header of {describe_hold(self.program, hold)} ({mention(hold_site)}), "
                        "which is read when the session is admitted; the value reaching the header is the one from "
                        f"before the session queued. Write `at admission ({name} = …)` if the admission value is "
                        "what you meant",
                    ))

    def run(self) -> None:
        state = self.flow_block(self.program.init, {})
        self.flow_block(self.program.session, state)


def check_constant_guards(program: ir.Program, smap: SourceMap, log: ErrorLog) -> None:
    for visit in visit_session(program):
        if isinstance(visit.stmt, (ir.Branch, ir.While)):
            with log.recover():
                check_constant_guard(program, smap, visit)


def check_constant_guard(program: ir.Program, smap: SourceMap, visit: Visit) -> None:
    value = evaluate_constant(visit.stmt.guard)
    if value is None or value in (0.0, 1.0):
        return
    site = locate_statement(program, smap, visit.block, visit.index)
    word = "branch" if isinstance(visit.stmt, ir.Branch) else "while"
    guard = show_expr(program, visit.stmt.guard)
    if 0 < value < 1:
        raise make_error(
            smap,
            site,
            f"`{word} ({guard})` is not a test: a guard is 0 or 1, and a constant strictly between them "
            f"is a probability. Write `branch with ({guard})` for a draw",
        )
    shown = "NaN" if math.isnan(value) else format_number(value)
    raise make_error(smap, site, f"`{word} ({guard})` is not a test: its guard is always {shown}, and a guard is 0 or 1")


def check_lints(program: ir.Program, smap: SourceMap, log: ErrorLog) -> None:
    """A stale header read; a constant guard that is not 0 or 1 (check 7)."""
    check_constant_guards(program, smap, log)
    StaleHeaderLint(program, smap, log).run()
