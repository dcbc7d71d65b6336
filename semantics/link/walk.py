"""Walking the IR: the session tree's statements, and the parts of an expression.

The blocks reachable from ``init``, ``turn`` and ``session`` form a tree
(FORMAT.md, Program); ``visit_session`` walks it depth first in program order,
each statement with the holds that enclose it. Every walk here is in a
declared order (block order, statement index, argument position), so the
first error the linker reports is the same on every run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .. import ir


@dataclass(frozen=True, slots=True)
class Visit:
    """A statement of the session tree: its block and index, and the holds
    around it (outermost first)."""

    block: int
    index: int
    stmt: ir.Stmt
    holds: tuple[ir.Hold, ...]


def list_roots(program: ir.Program) -> tuple[int, ...]:
    """The blocks a session starts from, once each, in the order init, turn, session."""
    roots: list[int] = []
    for block in (program.init, program.turn, program.session):
        if block not in roots:
            roots.append(block)
    return tuple(roots)


def list_child_blocks(stmt: ir.Stmt) -> tuple[int, ...]:
    """The blocks a statement nests, in the order the IR writes them."""
    if isinstance(stmt, ir.Hold):
        return (stmt.body,)
    if isinstance(stmt, ir.Branch):
        return (stmt.then_block, stmt.else_block)
    if isinstance(stmt, (ir.Loop, ir.While)):
        return (stmt.block,)
    return ()


def visit_block(program: ir.Program, block: int, holds: tuple[ir.Hold, ...] = ()) -> Iterator[Visit]:
    """Every statement of ``block`` and the blocks nested in it, depth first."""
    for index, stmt in enumerate(program.blocks[block]):
        yield Visit(block, index, stmt, holds)
        inner = holds + (stmt,) if isinstance(stmt, ir.Hold) else holds
        for child in list_child_blocks(stmt):
            yield from visit_block(program, child, inner)


def visit_session(program: ir.Program) -> Iterator[Visit]:
    """Every statement reachable from init, turn and session."""
    for root in list_roots(program):
        yield from visit_block(program, root)


# --------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------


def list_operands(e: ir.Expr) -> tuple[ir.Expr, ...]:
    """The expressions directly inside ``e``, a call's reference indices included."""
    if isinstance(e, ir.Sample):
        return e.args
    if isinstance(e, ir.Call):
        inner: list[ir.Expr] = []
        for arg in e.args:
            if isinstance(arg, ir.ExprArg):
                inner.append(arg.expr)
            elif arg.ref.index is not None:
                inner.append(arg.ref.index)
        return tuple(inner)
    if isinstance(e, ir.Unary):
        return (e.operand,)
    if isinstance(e, ir.Binary):
        return (e.left, e.right)
    if isinstance(e, ir.Cond):
        return (e.test, e.then, e.otherwise)
    if isinstance(e, ir.Cost):
        return (e.expr,)
    return ()


def list_subexpressions(e: ir.Expr) -> Iterator[ir.Expr]:
    """``e`` and every expression inside it, pre-order, left to right
    (with a stack of its own: an aggregate written out nests thousands deep)."""
    pending = [e]
    while pending:
        current = pending.pop()
        yield current
        pending.extend(reversed(list_operands(current)))


def read_slots(e: ir.Expr) -> tuple[int, ...]:
    """The attribute slots ``e`` reads, in order of first reading."""
    slots: list[int] = []
    for sub in list_subexpressions(e):
        if isinstance(sub, ir.Attr) and sub.slot not in slots:
            slots.append(sub.slot)
    return tuple(slots)


def strip_cost(e: ir.Expr) -> ir.Expr:
    """The value of a ``Cost`` is its expression's."""
    while isinstance(e, ir.Cost):
        e = e.expr
    return e


# --------------------------------------------------------------------------
# The parts of a statement
# --------------------------------------------------------------------------

#: A statement's expression parts are read at one of two moments.
SESSION = "session"  # when the session reaches the statement (or leaves the scope)
HEADER = "header"  # a hold's units, reserve, reuse: when the session is admitted


@dataclass(frozen=True, slots=True)
class Part:
    """One expression of a statement: what it is (``the work of run``), when
    it is read (SESSION or HEADER), and for a hold's pool the pool's reference."""

    role: str
    moment: str
    expr: ir.Expr


def list_ref_parts(refs: tuple[ir.Ref | None, ...]) -> list[Part]:
    return [Part("a pool or stage index", SESSION, r.index) for r in refs if r is not None and r.index is not None]


def list_parts(stmt: ir.Stmt) -> list[Part]:
    """The expressions of a statement, in the IR's field order."""
    if isinstance(stmt, ir.Set):
        return [Part("a set", SESSION, stmt.expr)]
    if isinstance(stmt, ir.Observe):
        return [Part("an observe", SESSION, stmt.expr)]
    if isinstance(stmt, ir.Hold):
        parts: list[Part] = []
        for held in stmt.pools:
            parts += list_ref_parts((held.ref,))
            parts.append(Part("units", HEADER, held.units))
            if held.reserve is not None:
                parts.append(Part("reserve", HEADER, held.reserve))
        if stmt.reuse is not None:
            parts.append(Part("reuse", HEADER, stmt.reuse))
        for segment in stmt.content:
            parts += [Part("a content key", HEADER, segment.key), Part("a content length", HEADER, segment.length)]
        if stmt.cache is not None:
            parts.append(Part("cache", SESSION, stmt.cache))
        if stmt.lease is not None:
            parts += list_ref_parts((stmt.lease.ref,))
            parts.append(Part("lease", SESSION, stmt.lease.duration))
        return parts
    if isinstance(stmt, (ir.Grow, ir.Load)):
        return list_ref_parts((stmt.ref,)) + [Part("amount", SESSION, stmt.amount)]
    if isinstance(stmt, (ir.Drop, ir.Release)):
        return list_ref_parts((stmt.ref,))
    if isinstance(stmt, ir.Run):
        refs = (stmt.stage,) + (stmt.also or ()) + (stmt.growing,)
        return list_ref_parts(refs) + [Part("work", SESSION, stmt.work)]
    if isinstance(stmt, (ir.Branch, ir.While)):
        return [Part("guard", SESSION, stmt.guard)]
    if isinstance(stmt, ir.Choose):
        return [Part("a choose key", SESSION, k) for k in stmt.key]
    return []


def list_statement_refs(stmt: ir.Stmt) -> list[tuple[str, ir.Ref]]:
    """The pool ("p") and stage ("s") references a statement names itself."""
    if isinstance(stmt, ir.Hold):
        refs = [("p", held.ref) for held in stmt.pools]
        return refs + ([("p", stmt.lease.ref)] if stmt.lease is not None else [])
    if isinstance(stmt, (ir.Grow, ir.Load, ir.Drop, ir.Release)):
        return [("p", stmt.ref)]
    if isinstance(stmt, ir.Run):
        refs = [("s", stmt.stage)] + [("s", r) for r in stmt.also or ()]
        return refs + ([("p", stmt.growing)] if stmt.growing is not None else [])
    return []
