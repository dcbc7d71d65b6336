"""The Lean fragment's syntax (lean/SerqRef/Syntax.lean), as frozen Python values.

One class per Lean constructor or structure, the same fields in the same
order: ``Expr.add a b`` is ``Add(a, b)``, ``Stmt.hold uses reuse body cache``
is ``Hold(uses, reuse, body, cache)``. Lean's ``List`` is a tuple, ``Option``
is a value or None. The blocks are an arena as in the IR: a statement names a
nested block by its index, so ``Stmt`` is not a nested inductive type.

Imports nothing from ``semantics``: the mirror is a second implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Union


class Ctx(Enum):
    """``SerqRef.Ctx``: the context variables the fragment reads."""

    NOW = "now"              # the clock, in steps
    RESIDENTS = "residents"  # residents when the iteration starts (budget, chunk, serve keys)
    DECODERS = "decoders"    # decoding residents when the iteration starts
    DECODING = "decoding"    # serve keys: 1 for a decoding resident
    ADMISSION = "admission"  # serve keys: the resident's session's latest admission number
    REMAINING = "remaining"  # serve keys: the tokens the resident's run has left


# -- Expr ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Num:
    n: int


@dataclass(frozen=True)
class Attr:
    slot: int


@dataclass(frozen=True)
class CtxVar:
    """``Expr.ctx c``."""

    c: Ctx


@dataclass(frozen=True)
class Queued:
    """``Expr.queued pool``: sessions waiting in the pool's queue."""

    pool: int


@dataclass(frozen=True)
class CachedIn:
    """``Expr.cachedIn pool``: the session's own cached prefix there, in units."""

    pool: int


@dataclass(frozen=True)
class Holders:
    """``Expr.holders pool``: the pool's holders (a hold's header only)."""

    pool: int


@dataclass(frozen=True)
class BudgetLeft:
    """``Expr.budgetLeft``: the engine's budget left (a hold's header only)."""


@dataclass(frozen=True)
class Binary:
    """``Expr.add a b`` … ``Expr.or a b``: ``op`` is the constructor's name."""

    op: str
    a: "Expr"
    b: "Expr"


@dataclass(frozen=True)
class Not:
    a: "Expr"


@dataclass(frozen=True)
class Cond:
    c: "Expr"
    a: "Expr"
    b: "Expr"


#: The binary constructors of ``Expr``, in declaration order.
BINARY_OPS = ("add", "sub", "mul", "div", "min", "max", "lt", "le", "gt", "ge", "eq", "ne", "and", "or")

Expr = Union[Num, Attr, CtxVar, Queued, CachedIn, Holders, BudgetLeft, Binary, Not, Cond]


# -- Stmt ----------------------------------------------------------------------------


class Mode(Enum):
    PREFILL = "prefill"
    DECODE = "decode"


@dataclass(frozen=True)
class Use:
    """``SerqRef.Use``: one pool of a hold, its units and reserve."""

    pool: int
    units: Expr
    reserve: Expr | None


@dataclass(frozen=True)
class Set:
    slot: int
    e: Expr


@dataclass(frozen=True)
class Observe:
    index: int
    e: Expr


@dataclass(frozen=True)
class Turn:
    pass


@dataclass(frozen=True)
class Hold:
    uses: tuple[Use, ...]
    reuse: Expr | None
    body: int
    cache: Expr | None


@dataclass(frozen=True)
class Step:
    """``Stmt.step mode work growing``: ``run ENGINE mode (work) [growing POOL]``."""

    mode: Mode
    work: Expr
    growing: int | None


@dataclass(frozen=True)
class Delay:
    """``Stmt.delay stage work``: a run on a delay stage (every job alone at rate 1)."""

    stage: int
    work: Expr


@dataclass(frozen=True)
class Branch:
    guard: Expr
    then_block: int
    else_block: int


@dataclass(frozen=True)
class Finish:
    """``Stmt.finish``: ``end;``."""


Stmt = Union[Set, Observe, Turn, Hold, Step, Delay, Branch, Finish]


# -- Program ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Pool:
    """``SerqRef.Pool``: capacity in blocks, units per block (1 without a
    block size), whether it preempts (``preempt lifo`` or ``preempt by``),
    ``admit via`` the engine; then (serq-ref's extensions, absent: the
    seed's rules) ``queue``, the keys of ``queue by`` (empty: fifo),
    ``requeue_key``, ``requeue by key`` (a preempted hold joins the queue as
    any hold, else at its head), and ``victim``, the keys of ``preempt by``
    (empty: lifo, the last admitted)."""

    cap: int
    block: int
    lifo: bool
    via_engine: bool
    queue: "tuple[ServeKey, ...]" = ()
    requeue_key: bool = False
    victim: "tuple[ServeKey, ...]" = ()


class Order(Enum):
    ASC = "asc"
    DESC = "desc"


class SelfPreemption(Enum):
    """``SerqRef.SelfPreemption``: what the pass does after a grower preempted
    itself: it ends (seed 001/002, vLLM 0c87a197) or goes on with the next
    resident, admitting nothing (vLLM 0.33.0's priority path; serQ's
    ``self preemption continue;``)."""

    ENDS = "ends"
    CONTINUES = "continues"


@dataclass(frozen=True)
class ServeKey:
    """A key and its order: ``-e`` is ``e`` descending (the engine's serve
    keys, a pool's queue and victim keys)."""

    order: Order
    key: Expr


@dataclass(frozen=True)
class Engine:
    """``SerqRef.Engine``: the one step engine (iteration cost 1);
    ``ahead``: ``schedule ahead`` (vLLM 0.33.0's asynchronous scheduling:
    the next iteration is formed before the ended one's finished requests
    exit, docs/design/async-scheduling.md)."""

    budget: Expr
    chunk: Expr
    serve: tuple[ServeKey, ...]
    memory: int
    self_preemption: SelfPreemption = SelfPreemption.ENDS
    ahead: bool = False


@dataclass(frozen=True)
class Spec:
    """``SerqRef.Spec``: an explicit session: attributes that overwrite
    init's, and one (slot, value) list per turn."""

    attrs: tuple[tuple[int, int], ...]
    turns: tuple[tuple[tuple[int, int], ...], ...]


@dataclass(frozen=True)
class Slots:
    """The built-in attributes' slots."""

    cached: int
    serial: int
    turn_no: int
    more: int
    computed: int


@dataclass(frozen=True)
class Program:
    """``SerqRef.Program``."""

    attr_count: int
    slots: Slots
    pools: tuple[Pool, ...]
    engine: Engine
    blocks: tuple[tuple[Stmt, ...], ...]
    init: int
    turn: int
    session: int
    sessions: tuple[Spec, ...]
