"""Expressions (lean/SerqRef/Eval.lean): ``eval`` on ℕ, the environments it
reads, and the two readings of the engine's budget (``want``, ``plan``).

Comparisons, ``&&``, ``||`` and ``!`` are 1 or 0; a non-zero operand is
true; ``sub`` is truncated; ``div`` is Lean's (floor, ``a / 0 = 0``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..arith import ite, monus, ndiv, nmax, nmin, nmul
from ..syntax import (Attr, Binary, BudgetLeft, CachedIn, Cond, Ctx, CtxVar, Holders, Mode, Not, Num, Program,
                      Queued)
from .state import Entry, Machine, Resident, Session, get_d, pool_of, pool_spec


@dataclass(frozen=True)
class Env:
    """``SerqRef.Env``: what an expression reads besides the machine."""

    attrs: tuple
    serial: int
    time: Any
    residents: int
    decoders: int
    decoding: Any
    admission: Any
    remaining: Any
    budget_left: Any


def own_blocks(serial: int, entries: tuple[Entry, ...]) -> Any:
    """``ownBlocks``: the blocks of the session's own cache entry (0 without one)."""
    for e in entries:
        if e.owner == serial:
            return e.blocks
    return 0


def eval_expr(p: Program, m: Machine, v: Env, e) -> Any:
    """``eval p m v e``."""
    kind = type(e)
    if kind is Num:
        return e.n
    if kind is Attr:
        return get_d(v.attrs, e.slot, 0)
    if kind is CtxVar:
        return {Ctx.NOW: v.time, Ctx.RESIDENTS: v.residents, Ctx.DECODERS: v.decoders, Ctx.DECODING: v.decoding,
                Ctx.ADMISSION: v.admission, Ctx.REMAINING: v.remaining}[e.c]
    if kind is Queued:
        return len(pool_of(m, e.pool).queue)
    if kind is CachedIn:
        return nmul(own_blocks(v.serial, pool_of(m, e.pool).entries), pool_spec(p, e.pool).block)
    if kind is Holders:
        return len(pool_of(m, e.pool).holders)
    if kind is BudgetLeft:
        return v.budget_left.value() if isinstance(v.budget_left, Planned) else v.budget_left
    if kind is Not:
        return ite(eval_expr(p, m, v, e.a) == 0, 1, 0)
    if kind is Cond:
        return ite(eval_expr(p, m, v, e.c) != 0, eval_expr(p, m, v, e.a), eval_expr(p, m, v, e.b))
    assert kind is Binary, e
    a = eval_expr(p, m, v, e.a)
    b = eval_expr(p, m, v, e.b)
    op = e.op
    if op == "add":
        return a + b
    if op == "sub":
        return monus(a, b)
    if op == "mul":
        return nmul(a, b)
    if op == "div":
        return ndiv(a, b)
    if op == "min":
        return nmin(a, b)
    if op == "max":
        return nmax(a, b)
    if op == "lt":
        return ite(a < b, 1, 0)
    if op == "le":
        return ite(a <= b, 1, 0)
    if op == "gt":
        return ite(a > b, 1, 0)
    if op == "ge":
        return ite(a >= b, 1, 0)
    if op == "eq":
        return ite(a == b, 1, 0)
    if op == "ne":
        return ite(a != b, 1, 0)
    if op == "and":
        return ite(a != 0, ite(b != 0, 1, 0), 0)
    if op == "or":
        return ite(a != 0, 1, ite(b != 0, 1, 0))
    raise AssertionError(f"unknown operator {op}")


def count_decoders(residents: tuple[Resident, ...]) -> int:
    """``countDecoders``."""
    return len([r for r in residents if r.mode is Mode.DECODE])


def env_with(m: Machine, attrs: tuple, serial: int, budget_left: Any) -> Env:
    """``Machine.envWith``: what a session's statements and hold headers read."""
    return Env(attrs, serial, m.time, len(m.residents), count_decoders(m.residents), 0, 0, 0, budget_left)


def session_env(m: Machine, s: Session, budget_left: Any) -> Env:
    """``Machine.envOf``."""
    return env_with(m, s.attrs, s.serial, budget_left)


def engine_env(m: Machine) -> Env:
    """``Machine.engineEnv``: the budget and chunk, read before an iteration;
    a parked session (schedule ahead) counts among the residents, as vLLM's
    finished request is still running until its batch's output is applied
    (get_request_counts, vllm/v1/core/sched/scheduler.py:756-758, 2920-2922)."""
    return Env((), 0, m.time, len(m.residents) + len(m.parked), count_decoders(m.residents), 0, 0, 0, 0)


def want(chunk: Any, r: Resident) -> Any:
    """``want``: a decode takes one token, a prefill up to the chunk (0: no cap)."""
    if r.mode is Mode.DECODE:
        return nmin(1, r.remaining)
    return ite(chunk == 0, r.remaining, nmin(r.remaining, chunk))


def sum_want(chunk: Any, residents: tuple[Resident, ...]) -> Any:
    """``sumWant``."""
    total = 0
    for r in reversed(residents):
        total = want(chunk, r) + total
    return total


def plan(p: Program, m: Machine) -> Any:
    """``plan``: budget_left read outside the engine's admission (a hold's
    header when it joins its queue): the budget the residents leave."""
    v = engine_env(m)
    return monus(eval_expr(p, m, v, p.engine.budget), sum_want(eval_expr(p, m, v, p.engine.chunk), m.residents))


class Planned:
    """``plan p m`` where a session's environment carries it: computed only
    if an expression reads budget_left (as Lean's kernel, which reduces a
    term only as far as it is needed; the value is the same)."""

    def __init__(self, p: Program, m: Machine):
        self.p, self.m, self.computed = p, m, None

    def value(self) -> Any:
        if self.computed is None:
            self.computed = plan(self.p, self.m)
        return self.computed
