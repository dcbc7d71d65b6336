"""The abstract syntax of a serQ program as the parser reads it (seed 002, section 2).

Every node is a frozen dataclass with a ``span`` (keyword-only, last): the
place in the source it was read from, which every later error and the
SourceMap point at. The same statement classes carry the kernel program the
desugaring produces (``semantics.syntax.desugar``): there the sugar nodes
(``Request``, ``Mark``, ``Call``, ``Serving``, ``Transfer``, ``RunOwn`` and a
hold's ``bindings``) no longer occur, and every statement's ``side`` says
whether it is the workload's or the server's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from ..errors import Span

# --------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PathPart:
    """One dotted part of a name: ``kv`` or ``D[j]``."""

    name: str
    index: "Expr | None"


@dataclass(frozen=True, slots=True)
class Path:
    """A name with optional member indices and dotted parts: ``kv``,
    ``kv[k]``, ``P.kv``, ``D[j].kv``, ``D.nic.latency[j]``."""

    parts: tuple[PathPart, ...]
    span: Span = field(kw_only=True)

    @property
    def dotted(self) -> str:
        """The long name the parts spell, indices left out (``D.kv``)."""
        return ".".join(part.name for part in self.parts)

    @property
    def indices(self) -> tuple["Expr", ...]:
        return tuple(part.index for part in self.parts if part.index is not None)

    @property
    def simple(self) -> str | None:
        """The name when the path is one part without an index."""
        if len(self.parts) == 1 and self.parts[0].index is None:
            return self.parts[0].name
        return None


@dataclass(frozen=True, slots=True)
class Num:
    value: float
    span: Span = field(kw_only=True)
    #: the literal as the source spells it (None for a number the front end
    #: made): a seed is read from it exactly, not through a float
    text: str | None = field(default=None, kw_only=True, compare=False)


@dataclass(frozen=True, slots=True)
class Name:
    """A name read as a value (or, as a function's argument, a pool or stage)."""

    path: Path
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """``f(args)``: a function, an observable, or a use of an expression ``def``."""

    function: str
    args: tuple["Expr", ...]
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class Sample:
    distribution: str
    args: tuple["Expr", ...]
    span: Span = field(kw_only=True)
    #: ``~empirical("FILE", "COLUMN")`` (docs/design/draws.md): the file and the column as written, each with
    #: its span; the lowering reads the values (None for a draw of expressions)
    source: tuple[str, Span, str, Span] | None = field(default=None, kw_only=True)


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # "Neg" or "Not"
    operand: "Expr"
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class Binary:
    op: str  # an IR binary operator name
    left: "Expr"
    right: "Expr"
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class Cond:
    test: "Expr"
    then: "Expr"
    otherwise: "Expr"
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class Over:
    """``max j in n (e)``: an aggregate the lowering writes out."""

    aggregate: str  # "max", "min" or "sum"
    variable: str
    count: "Expr"
    body: "Expr"
    span: Span = field(kw_only=True)


Expr = Union[Num, Name, FunctionCall, Sample, Unary, Binary, Cond, Over]

# --------------------------------------------------------------------------
# Statements
# --------------------------------------------------------------------------

WORKLOAD = "Workload"
SERVER = "Server"


@dataclass(frozen=True, slots=True)
class Turn:
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


@dataclass(frozen=True, slots=True)
class End:
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


@dataclass(frozen=True, slots=True)
class Request:
    """``request;`` (queue None) or ``request gw;``."""

    queue: str | None
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


@dataclass(frozen=True, slots=True)
class Set:
    name: str
    expr: Expr
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


@dataclass(frozen=True, slots=True)
class Observe:
    name: str
    expr: Expr
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


@dataclass(frozen=True, slots=True)
class HoldPool:
    pool: Path
    units: Expr
    reserve: Expr | None
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class Binding:
    name: str
    expr: Expr
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class Lease:
    pool: Path
    duration: Expr
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class Hold:
    pools: tuple[HoldPool, ...]
    reuse: Expr | None
    bindings: tuple[Binding, ...]
    body: tuple["Stmt", ...]
    cache: Expr | None
    lease: Lease | None
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)
    #: ``content (K : L, ...)`` (docs/design/shared-prefixes.md): read with the header, as the units are
    content: tuple["Segment", ...] = field(default=(), kw_only=True)


@dataclass(frozen=True, slots=True)
class Segment:
    """``K : L`` of a hold's content clause: the next L units are key K's content."""

    key: Expr
    length: Expr
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class Grow:
    pool: Path
    amount: Expr
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


@dataclass(frozen=True, slots=True)
class Drop:
    pool: Path
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


@dataclass(frozen=True, slots=True)
class Release:
    pool: Path
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


@dataclass(frozen=True, slots=True)
class Load:
    pool: Path
    amount: Expr
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


@dataclass(frozen=True, slots=True)
class Run:
    """``run S [prefill|decode] (w) [growing P]`` or ``run S1, S2 (w)``."""

    stages: tuple[Path, ...]
    mode: str  # "Plain", "Prefill" or "Decode"
    work: Expr
    growing: Path | None
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


@dataclass(frozen=True, slots=True)
class RunOwn:
    """``run (w);`` in a queue's entry: the queue's own stage."""

    work: Expr
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


@dataclass(frozen=True, slots=True)
class Branch:
    guard: Expr
    then: tuple["Stmt", ...]
    otherwise: tuple["Stmt", ...]
    draw: bool  # ``branch with (p)``: sugar for branch (~bernoulli(p))
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


@dataclass(frozen=True, slots=True)
class Loop:
    body: tuple["Stmt", ...]
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


@dataclass(frozen=True, slots=True)
class Choose:
    name: str
    count: Expr
    keys: tuple[Expr, ...]
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


@dataclass(frozen=True, slots=True)
class Mark:
    name: str
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


@dataclass(frozen=True, slots=True)
class CallStmt:
    """``NAME(args);`` (a statement ``def``) or ``Q[e].VERB(args) [from S[e]] [to P(e)];``."""

    target: Path
    args: tuple[Expr, ...]
    source: Path | None
    to: tuple[Path, Expr] | None
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


@dataclass(frozen=True, slots=True)
class Serving:
    """``prefill|decode|tool [[e] | on S] w [growing P];``."""

    role: str  # "prefill", "decode" or "tool"
    index: Expr | None
    on: tuple[Path, ...] | None
    work: Expr
    growing: Path | None
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


@dataclass(frozen=True, slots=True)
class Transfer:
    """``transfer [[e] | on S, ...] x from P to Q (n);``."""

    index: Expr | None
    on: tuple[Path, ...] | None
    work: Expr
    source: Path
    dest: Path
    amount: Expr
    span: Span = field(kw_only=True)
    side: str = field(default=WORKLOAD, kw_only=True)


Stmt = Union[
    Turn, End, Request, Set, Observe, Hold, Grow, Drop, Release, Load, Run, RunOwn, Branch, Loop, Choose, Mark,
    CallStmt, Serving, Transfer,
]

# --------------------------------------------------------------------------
# Declarations
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Option:
    """A clause of a declaration: ``kind`` says which (``cap``, ``evict_by``,
    ``budget``, ``horizon``, ...), ``values`` its expressions and paths."""

    kind: str
    values: tuple
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class Let:
    name: str
    expr: Expr
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class Use:
    file: str
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class DefExpr:
    name: str
    params: tuple[str, ...]
    body: Expr
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class DefBlock:
    name: str
    params: tuple[str, ...]
    body: tuple[Stmt, ...]
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class PoolDecl:
    name: str
    family: Expr | None
    options: tuple[Option, ...]
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class Kind:
    """A stage kind: ``fifo`` (values: the count or nothing), ``ps`` (the
    capacity), ``delay``, or ``step`` (values: its options)."""

    kind: str
    values: tuple
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class StageDecl:
    name: str
    family: Expr | None
    kind: Kind
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class Workload:
    items: tuple[Option, ...]  # kinds: arrive_*, trace, init, turn, session, hidden
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class SessionItem:
    body: tuple[Stmt, ...]
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class ServerItem:
    body: tuple[Stmt, ...]
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class Entry:
    """An entry of a queue: ``VERB [(params)] [from NAME] { ... }``."""

    verb: str
    params: tuple[str, ...]
    source: str | None
    body: tuple[Stmt, ...]
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class QueueDecl:
    name: str
    family: Expr | None
    roles: tuple[str, ...]
    pools: tuple[PoolDecl, ...]
    serve: Kind | None
    latency: Expr | None
    nic: Kind | None
    entries: tuple[Entry, ...]
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class RunBlock:
    options: tuple[Option, ...]
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class Share:
    policy: str  # "MaxMin" or "Bottleneck"
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class Pull:
    reader: str
    source: str
    latency: Expr | None
    policy: str
    span: Span = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class GaugeDecl:
    name: str
    expr: Expr
    span: Span = field(kw_only=True)


Item = Union[
    Let, Use, DefExpr, DefBlock, PoolDecl, StageDecl, Workload, SessionItem, ServerItem, QueueDecl, RunBlock, Share,
    Pull, GaugeDecl,
]


@dataclass(frozen=True, slots=True)
class Program:
    """A parsed file: its items in source order (a ``use`` still unresolved)."""

    file: str
    items: tuple[Item, ...]
