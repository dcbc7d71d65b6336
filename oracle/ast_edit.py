"""A serQ program as AST values, edited by name (issue 22 §3).

The oracle harness builds a scenario's program from an example file and the
library it uses: the file is parsed once (its ``use`` resolved: the
library's items in place), then the scenario's settings are written into the
AST by the name of what they change (the pool ``reqs``'s ``queue fifo``, the
stage ``engine``'s ``serve admission``, the hold of the definition
``vllm_request``), each edit failing loudly (``EditError``) when the node it
changes is not there, and the edited items are compiled
(``semantics.compiler.compile_items``). What an edit puts in is a parsed
fragment of serQ (a clause, an expression, statements), never the example
file's text with a piece of it replaced.

Every function returns new items: the AST is frozen, and the parsed files are
shared by every scenario (``load_items`` keeps one parse per file text).
"""

from __future__ import annotations

import dataclasses
import os
from functools import lru_cache
from pathlib import Path

from semantics.compiler import resolve_uses
from semantics.errors import Span
from semantics.syntax import ast
from semantics.syntax.parser import parse_text

Items = tuple[ast.Item, ...]


class EditError(AssertionError):
    """The program no longer has the node an edit changes: the example file
    and the harness disagree (a bug of the project, not of a scenario)."""


@dataclasses.dataclass(frozen=True)
class Loaded:
    """A parsed program: its items, each ``use`` resolved, and the files the uses read."""

    file: str
    items: Items
    uses: dict[str, Span]


def load_items(path: Path) -> Loaded:
    """The program at ``path`` parsed, its uses resolved; one parse per text of the file."""
    return _load(str(path), path.read_text(encoding="utf-8"))


@lru_cache(maxsize=8)
def _load(file: str, text: str) -> Loaded:
    uses: dict[str, Span] = {}
    items = resolve_uses(parse_text(text, file), {os.path.normpath(file)}, uses=uses)
    return Loaded(file, items, uses)


# --------------------------------------------------------------------------
# Fragments: serQ parsed on its own, to be placed by name
# --------------------------------------------------------------------------


def parse_expr(text: str, label: str) -> ast.Expr:
    """An expression: the right side of ``let _ = (text);``."""
    (item,) = parse_text(f"let _ = {text};", label).items
    return item.expr


def parse_stmts(text: str, label: str) -> tuple[ast.Stmt, ...]:
    """Statements of a session's body."""
    (item,) = parse_text(f"session {{ {text} }}", label).items
    return item.body


def parse_content(text: str, label: str) -> tuple[ast.Segment, ...]:
    """The segments of a hold's content clause, written ``K : L, ...``."""
    (item,) = parse_text(f"session {{ hold _ (1) content ({text}) {{ }} }}", label).items
    return item.body[0].content


def parse_pool_options(text: str, label: str) -> tuple[ast.Option, ...]:
    """Clauses of a pool: ``queue by (priority, arrival); requeue by key;``."""
    (item,) = parse_text(f"pool _ {{ {text} }}", label).items
    return item.options


def parse_step_options(text: str, label: str) -> tuple[ast.Option, ...]:
    """Clauses of a step stage: ``serve by (-admission);``."""
    (item,) = parse_text(f"stage _ : step {{ {text} }}", label).items
    return item.kind.values


# --------------------------------------------------------------------------
# Edits by name
# --------------------------------------------------------------------------


def _only(found: list, what: str):
    if len(found) != 1:
        raise EditError(f"the program has {len(found)} {what}, not one")
    return found[0]


def _replace_item(items: Items, old: ast.Item, new: ast.Item) -> Items:
    return tuple(new if item is old else item for item in items)


def _edit_options(options: tuple[ast.Option, ...], kind: str, new: tuple[ast.Option, ...],
                  where: str) -> tuple[ast.Option, ...]:
    """``options`` with the one clause of ``kind`` replaced by ``new``."""
    index = _only([k for k, o in enumerate(options) if o.kind == kind], f"`{kind}` clauses in {where}")
    return options[:index] + tuple(new) + options[index + 1:]


def replace_pool_option(items: Items, pool: str, kind: str, new: tuple[ast.Option, ...]) -> Items:
    """The pool ``pool``'s one clause of ``kind`` (``queue_fifo``, ``preempt_lifo``) replaced by ``new``."""
    decl = _only([i for i in items if isinstance(i, ast.PoolDecl) and i.name == pool], f"pools `{pool}`")
    options = _edit_options(decl.options, kind, new, f"pool `{pool}`")
    return _replace_item(items, decl, dataclasses.replace(decl, options=options))


def _step_stage(items: Items, stage: str) -> ast.StageDecl:
    decl = _only([i for i in items if isinstance(i, ast.StageDecl) and i.name == stage], f"stages `{stage}`")
    if decl.kind.kind != "step":
        raise EditError(f"the stage `{stage}` is {decl.kind.kind}, not step")
    return decl


def replace_step_option(items: Items, stage: str, kind: str, new: tuple[ast.Option, ...]) -> Items:
    """The step stage ``stage``'s one clause of ``kind`` (``serve_admission``) replaced by ``new``."""
    decl = _step_stage(items, stage)
    values = _edit_options(decl.kind.values, kind, new, f"stage `{stage}`")
    return _replace_item(items, decl, dataclasses.replace(decl, kind=dataclasses.replace(decl.kind, values=values)))


def insert_step_option(items: Items, stage: str, before: str | None, new: tuple[ast.Option, ...]) -> Items:
    """``new`` among the step stage ``stage``'s clauses: before its one clause
    of kind ``before``, or last (``before`` None)."""
    decl = _step_stage(items, stage)
    values = decl.kind.values
    if before is None:
        values = values + tuple(new)
    else:
        at = _only([k for k, o in enumerate(values) if o.kind == before], f"`{before}` clauses in stage `{stage}`")
        values = values[:at] + tuple(new) + values[at:]
    return _replace_item(items, decl, dataclasses.replace(decl, kind=dataclasses.replace(decl.kind, values=values)))


def replace_hold_reserve(items: Items, definition: str, pool: str, old: str, new: ast.Expr) -> Items:
    """In the definition ``definition``'s one top-level hold, the pool
    ``pool``'s reservation, the name ``old``, replaced by ``new``."""
    decl = _only([i for i in items if isinstance(i, ast.DefBlock) and i.name == definition],
                  f"definitions `{definition}`")
    hold = _only([s for s in decl.body if isinstance(s, ast.Hold)], f"holds in `{definition}`")
    use = _only([p for p in hold.pools if _path_name(p.pool) == pool], f"uses of `{pool}` in `{definition}`'s hold")
    if not (isinstance(use.reserve, ast.Name) and _path_name(use.reserve.path) == old):
        raise EditError(f"`{definition}`'s hold does not reserve ({old}) in `{pool}`")
    pools = tuple(dataclasses.replace(p, reserve=new) if p is use else p for p in hold.pools)
    body = tuple(dataclasses.replace(s, pools=pools) if s is hold else s for s in decl.body)
    return _replace_item(items, decl, dataclasses.replace(decl, body=body))


def replace_hold_units(items: Items, definition: str, pool: str, new) -> Items:
    """In the definition ``definition``'s one top-level hold, the pool ``pool``'s units replaced by
    ``new(units)`` (an expression made of the old one)."""
    decl = _only([i for i in items if isinstance(i, ast.DefBlock) and i.name == definition],
                  f"definitions `{definition}`")
    hold = _only([s for s in decl.body if isinstance(s, ast.Hold)], f"holds in `{definition}`")
    use = _only([p for p in hold.pools if _path_name(p.pool) == pool], f"uses of `{pool}` in `{definition}`'s hold")
    pools = tuple(dataclasses.replace(p, units=new(p.units)) if p is use else p for p in hold.pools)
    body = tuple(dataclasses.replace(s, pools=pools) if s is hold else s for s in decl.body)
    return _replace_item(items, decl, dataclasses.replace(decl, body=body))


def append_to_init(items: Items, names: tuple[str, ...], new: tuple[ast.Stmt, ...]) -> Items:
    """The workload's init block, which sets ``names`` in order, with ``new`` after."""
    workload = _only([i for i in items if isinstance(i, ast.Workload)], "workloads")
    init = _only([o for o in workload.items if o.kind == "init"], "init blocks")
    (body,) = init.values  # the init option's one value: its block
    if tuple(s.name if isinstance(s, ast.Set) else None for s in body) != names:
        raise EditError(f"the workload's init does not set {', '.join(names)}")
    changed = dataclasses.replace(init, values=(tuple(body) + tuple(new),))
    return _replace_item(items, workload, dataclasses.replace(
        workload, items=tuple(changed if o is init else o for o in workload.items)))


def replace_session_call(items: Items, target: str, args: tuple[str, ...], new: tuple[ast.Stmt, ...]) -> Items:
    """The session's one call of ``target`` with the arguments ``args``
    (names or numbers, as written) replaced by the statements ``new``."""
    session = _only([i for i in items if isinstance(i, ast.SessionItem)], "sessions")
    call = _only([s for s in session.body if isinstance(s, ast.CallStmt) and _path_name(s.target) == target],
                 f"calls of `{target}` in the session")
    if tuple(_show_arg(a) for a in call.args) != args:
        raise EditError(f"the session calls `{target}` with other arguments than ({', '.join(args)})")
    body = tuple(x for s in session.body for x in (new if s is call else (s,)))
    return _replace_item(items, session, dataclasses.replace(session, body=body))


def prepend_lets(items: Items, lets: tuple[tuple[str, ast.Expr], ...], label: str) -> Items:
    """``let NAME = EXPR;`` for each of ``lets``, before every item."""
    span = Span(label, 1, 1)
    return tuple(ast.Let(name, expr, span=span) for name, expr in lets) + items


def _path_name(path: ast.Path) -> str | None:
    """The name a path of one part without an index is, else None."""
    if len(path.parts) == 1 and path.parts[0].index is None:
        return path.parts[0].name
    return None


def _show_arg(e: ast.Expr) -> str | None:
    if isinstance(e, ast.Name):
        return _path_name(e.path)
    if isinstance(e, ast.Num):
        return e.text
    return None


def set_hold_content(items: Items, definition: str, content: tuple[ast.Segment, ...]) -> Items:
    """In the definition ``definition``'s one top-level hold, the content clause ``content``
    (docs/design/shared-prefixes.md), which the hold must not have yet."""
    decl = _only([i for i in items if isinstance(i, ast.DefBlock) and i.name == definition],
                 f"definitions `{definition}`")
    hold = _only([s for s in decl.body if isinstance(s, ast.Hold)], f"holds in `{definition}`")
    if hold.content:
        raise EditError(f"`{definition}`'s hold has a content clause already")
    body = tuple(dataclasses.replace(s, content=content) if s is hold else s for s in decl.body)
    return _replace_item(items, decl, dataclasses.replace(decl, body=body))


def edit_session_call(items: Items, target: str, index: int, arg: ast.Expr, after: tuple[ast.Stmt, ...]) -> Items:
    """The session's one call of ``target`` (among its top-level statements, whatever its arguments) with its
    argument ``index`` replaced by ``arg``, and the statements ``after`` put after it."""
    session = _only([i for i in items if isinstance(i, ast.SessionItem)], "sessions")
    call = _only([s for s in session.body if isinstance(s, ast.CallStmt) and _path_name(s.target) == target],
                 f"calls of `{target}` in the session")
    if not index < len(call.args):
        raise EditError(f"the session's call of `{target}` has no argument {index}")
    changed = dataclasses.replace(call, args=tuple(arg if k == index else a for k, a in enumerate(call.args)))
    body = tuple(x for s in session.body for x in ((changed,) + after if s is call else (s,)))
    return _replace_item(items, session, dataclasses.replace(session, body=body))
