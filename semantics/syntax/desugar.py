"""The parser's desugarings: from the program as written to the kernel program.

Seed 002 describes each as the parser's, so that the IR never sees it:

- ``let`` constants are folded in order (``--set`` replaces one before it is
  folded), ``def``s are expanded where they are used;
- the serving vocabulary (``prefill``, ``decode``, ``tool``, ``transfer``)
  becomes ``run`` by the which-stage rule, ``load`` and ``release``;
- the two sides: ``request;`` splices the server block in its place, and each
  side's words are held to it;
- queues: their pools and stages become the program's under long names
  (``P.kv``), an entry call is the entry's body in place (``self``, the
  parameters, the ``from`` pool substituted), ``mark`` is a ``set``, and a
  pull relation's transfer is written out;
- ``at admission`` bindings are substituted into the hold's header, and a
  binding the body reads is ``set`` at the body's top;
- ``branch with (p)`` is ``branch (~bernoulli(p))``.

What comes out (``Kernel``) names pools, stages and attributes by their long
names and carries each statement's side; ``semantics.syntax.lower`` turns it
into the IR.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass, field
from typing import Mapping

from ..errors import ErrorLog, ProgramError, Span, UsageError
from ..ir import BUILTIN_ATTRS, CONTEXT_VARIABLES
from . import ast
from .parser import get_keywords
from .constants import NotConstant, evaluate_constant, evaluate_count, fold, format_number, is_whole

CONTEXT_NAMES = frozenset(CONTEXT_VARIABLES.values())
OBSERVABLES = frozenset({
    "queue", "busy", "work", "used", "free", "cachedin", "holders", "queued", "price", "budget_left",
    "est_lambda", "est_rho", "est_wait",
})
#: The functions a call may name (a def may not take one of these names).
LANGUAGE_FUNCTIONS = OBSERVABLES | {"min", "max", "abs", "floor", "ceil", "sqrt", "exp", "ln", "pow", "blocksize"}
#: The stage names that play a serving form's role (seed 002, Which stage).
ROLE_STAGES = {"prefill": ("prefill",), "decode": ("decode",), "tool": ("tool",), "transfer": ("link", "transfer")}
ROLE_MODES = {"prefill": "Prefill", "decode": "Decode", "tool": "Plain", "transfer": "Plain"}
#: The roles a queue may play and the entries each has (seed 002, Queues).
QUEUE_ROLES = {"gateway": ("route",), "prefill": ("prefill",), "decode": ("decode",), "link": ("transfer",)}
#: How deep defs, entries and requests may expand into one another.
MAX_EXPANSION_DEPTH = 64

# --------------------------------------------------------------------------
# What the desugaring produces
# --------------------------------------------------------------------------

#: The most members a pool or stage family may have (an aggregate writes out at most 4096 terms).
MAX_FAMILY_MEMBERS = 4096


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """A pool of the program: ``count`` members (``family``: declared with [N])."""

    name: str
    count: int
    family: bool
    options: tuple[ast.Option, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class StageSpec:
    """A stage of the program: ``count`` members of one kind."""

    name: str
    count: int
    family: bool
    kind: ast.Kind
    span: Span

    @property
    def is_step(self) -> bool:
        return self.kind.kind == "step"


@dataclass(frozen=True, slots=True)
class Kernel:
    """The kernel program: what lower.py turns into the IR."""

    file: str
    lets: Mapping[str, float]
    pools: tuple[PoolSpec, ...]
    stages: tuple[StageSpec, ...]
    arrival: ast.Option | None
    trace: tuple[str, bool] | None
    init: tuple[ast.Stmt, ...]
    turn: tuple[ast.Stmt, ...]
    session: tuple[ast.Stmt, ...]
    hidden: tuple[tuple[str, Span], ...]
    gauges: tuple[ast.GaugeDecl, ...]
    run: Mapping[str, ast.Option]
    run_span: Span | None
    share: tuple[str, Span] | None
    #: the `trace "FILE";` clause, where an error of the trace file is also located
    trace_span: Span | None = None


# --------------------------------------------------------------------------
# Queues and scopes
# --------------------------------------------------------------------------


@dataclass(slots=True)
class QueueInfo:
    """A declared queue as the desugaring knows it. Built while the items are
    read; a pull relation below the queue fills ``pull_source`` in."""

    decl: ast.QueueDecl
    count: int
    family: bool
    visible: tuple[StageSpec, ...]
    serve: StageSpec | None
    leased: str | None  # the local name of the pool its entries lease
    pull_source: str | None = None
    pull_latency: bool = False

    @property
    def name(self) -> str:
        return self.decl.name

    def entry(self, verb: str) -> ast.Entry | None:
        for entry in self.decl.entries:
            if entry.verb == verb:
                return entry
        return None


@dataclass(frozen=True, slots=True)
class QueueScope:
    """Inside an entry of a queue: which member, called from where."""

    info: QueueInfo
    member: ast.Expr | None
    source: tuple[QueueInfo, ast.Expr | None] | None
    gateway: bool


@dataclass(frozen=True, slots=True)
class Scope:
    side: str
    stages: tuple[StageSpec, ...]
    place: str  # "session", "workload", "server", "entry", "init", "turn"
    subst: Mapping[str, ast.Expr] = field(default_factory=dict)
    index_subst: Mapping[str, ast.Expr] = field(default_factory=dict)
    queue: QueueScope | None = None
    depth: int = 0


def make_simple_name(name: str, span: Span) -> ast.Name:
    return ast.Name(ast.Path((ast.PathPart(name, None),), span=span), span=span)


def make_dotted_path(parts: list[tuple[str, ast.Expr | None]], span: Span) -> ast.Path:
    return ast.Path(tuple(ast.PathPart(n, i) for n, i in parts), span=span)


def make_path_name(path: ast.Path) -> ast.Name:
    return ast.Name(path, span=path.span)


# --------------------------------------------------------------------------
# Reading expressions
# --------------------------------------------------------------------------


def walk_expr(expr: ast.Expr):
    """Every sub-expression, the expression first (indices of names included)."""
    yield expr
    if isinstance(expr, ast.Name):
        for index in expr.path.indices:
            yield from walk_expr(index)
    elif isinstance(expr, (ast.FunctionCall, ast.Sample)):
        for arg in expr.args:
            yield from walk_expr(arg)
    elif isinstance(expr, ast.Unary):
        yield from walk_expr(expr.operand)
    elif isinstance(expr, ast.Binary):
        yield from walk_expr(expr.left)
        yield from walk_expr(expr.right)
    elif isinstance(expr, ast.Cond):
        yield from walk_expr(expr.test)
        yield from walk_expr(expr.then)
        yield from walk_expr(expr.otherwise)
    elif isinstance(expr, ast.Over):
        yield from walk_expr(expr.count)
        yield from walk_expr(expr.body)


def has_draw(expr: ast.Expr) -> bool:
    return any(isinstance(e, ast.Sample) for e in walk_expr(expr))


def read_names(expr: ast.Expr) -> set[str]:
    """The dotted names an expression reads as values or references."""
    return {e.path.dotted for e in walk_expr(expr) if isinstance(e, ast.Name)}


def find_live_read(expr: ast.Expr) -> str | None:
    """What live state an expression reads (an observable, a context
    variable, ``cached``), spelled for a message; None when it reads none."""
    for e in walk_expr(expr):
        if isinstance(e, ast.FunctionCall) and e.function in OBSERVABLES:
            return f"{e.function}(…)"
        if isinstance(e, ast.Name) and e.path.simple in CONTEXT_NAMES:
            return f"the context variable `{e.path.simple}`"
        if isinstance(e, ast.Name) and e.path.simple == "cached":
            return "`cached`, which the admission itself sets"
    return None


def iterate_stmt_exprs(stmt: ast.Stmt):
    """The expressions a kernel statement reads directly (not its blocks')."""
    if isinstance(stmt, (ast.Set, ast.Observe)):
        yield stmt.expr
    elif isinstance(stmt, ast.Hold):
        for pool in stmt.pools:
            yield make_path_name(pool.pool)
            yield pool.units
            if pool.reserve is not None:
                yield pool.reserve
        for extra in (stmt.reuse, stmt.cache):
            if extra is not None:
                yield extra
        for segment in stmt.content:
            yield segment.key
            yield segment.length
        if stmt.lease is not None:
            yield make_path_name(stmt.lease.pool)
            yield stmt.lease.duration
    elif isinstance(stmt, (ast.Grow, ast.Load)):
        yield make_path_name(stmt.pool)
        yield stmt.amount
    elif isinstance(stmt, (ast.Drop, ast.Release)):
        yield make_path_name(stmt.pool)
    elif isinstance(stmt, ast.Run):
        for stage in stmt.stages:
            yield make_path_name(stage)
        yield stmt.work
        if stmt.growing is not None:
            yield make_path_name(stmt.growing)
    elif isinstance(stmt, ast.Branch):
        yield stmt.guard
    elif isinstance(stmt, ast.Choose):
        yield stmt.count
        yield from stmt.keys


def get_nested_blocks(stmt: ast.Stmt) -> tuple[tuple[ast.Stmt, ...], ...]:
    if isinstance(stmt, ast.Hold):
        return (stmt.body,)
    if isinstance(stmt, ast.Branch):
        return (stmt.then, stmt.otherwise)
    if isinstance(stmt, ast.Loop):
        return (stmt.body,)
    return ()


def walk_stmts(stmts):
    """Every statement of a block and its nested blocks, in pre-order."""
    for stmt in stmts:
        yield stmt
        for block in get_nested_blocks(stmt):
            yield from walk_stmts(block)


def collect_block_reads(stmts) -> set[str]:
    read: set[str] = set()
    for stmt in walk_stmts(stmts):
        for expr in iterate_stmt_exprs(stmt):
            read |= read_names(expr)
    return read


# --------------------------------------------------------------------------
# The desugaring
# --------------------------------------------------------------------------


class Desugarer:
    """Reads the items in order, then writes the session out in the kernel."""

    def __init__(self, file: str, sets: Mapping[str, float] | None):
        self.file = file
        self.sets = dict(sets or {})
        self.lets: dict[str, float] = {}
        self.expr_defs: dict[str, ast.DefExpr] = {}
        self.block_defs: dict[str, ast.DefBlock] = {}
        self.pools: list[PoolSpec] = []
        self.stages: list[StageSpec] = []
        self.queues: dict[str, QueueInfo] = {}
        self.workload: ast.Workload | None = None
        self.workload_visible: tuple[StageSpec, ...] = ()
        self.session_item: ast.SessionItem | None = None
        self.session_visible: tuple[StageSpec, ...] = ()
        self.server: ast.ServerItem | None = None
        self.server_visible: tuple[StageSpec, ...] = ()
        self.server_requested = False
        self.gateway_requested = False
        self.run_block: ast.RunBlock | None = None
        self.share: tuple[str, Span] | None = None
        self.share_from_pull = False
        self.gauges: list[ast.GaugeDecl] = []
        #: The sets written for bindings the body reads: (attribute, span).
        self.binding_sets: list[tuple[str, int]] = []
        #: A pull relation's latency, by reader queue.
        self.pull_latencies: dict[str, ast.Expr] = {}
        #: The errors found so far: the items are read one after another
        #: whatever an item before was, then (when they were all right) the
        #: statements, one after another; each phase raises them all.
        self.log = ErrorLog([file])

    # ------------------------------------------------------------- items

    def read_items(self, items: tuple[ast.Item, ...]) -> None:
        for item in items:
            with self.log.recover():
                self.read_item(item)
        # a statement reads the declarations: after a wrong one, its errors would be that one's again
        self.log.raise_errors()
        unknown = [name for name in self.sets if name not in self.lets]
        if unknown:  # the command line is wrong, not the program: a usage error (exit 2)
            raise UsageError("; ".join(f"--set {name}: the program declares no let constant {name}" for name in unknown)
                             + f" (--set replaces a declared let; {self.file} has "
                               f"{', '.join(self.lets) or 'none'})")

    def read_item(self, item: ast.Item) -> None:
        if isinstance(item, ast.Let):
            if item.name in self.lets:
                raise ProgramError(f"let `{item.name}` is declared twice", item.span)
            self.check_fresh(item.name, item.span, "let constant")
            if item.name in self.sets:
                value = float(self.sets[item.name])
                if math.isnan(value):
                    raise ProgramError(f"--set {item.name} is NaN: a constant is a number or inf", item.span)
            else:
                value = evaluate_constant(item.expr, self.lets, f"let `{item.name}`")
            self.lets[item.name] = value
        elif isinstance(item, (ast.DefExpr, ast.DefBlock)):
            self.check_fresh(item.name, item.span, "def")
            for name in (item.name,) + item.params:
                if name in get_keywords():
                    raise ProgramError(f"`{name}` is a keyword of the language; a def and its parameters take names "
                                       f"of their own", item.span)
            if len(set(item.params)) != len(item.params):
                raise ProgramError(f"def `{item.name}` names a parameter twice", item.span)
            (self.expr_defs if isinstance(item, ast.DefExpr) else self.block_defs)[item.name] = item
        elif isinstance(item, ast.PoolDecl):
            self.add_pool(item.name, item.family, item.options, item.span)
        elif isinstance(item, ast.StageDecl):
            self.add_stage(item.name, item.family, item.kind, item.span)
        elif isinstance(item, ast.QueueDecl):
            self.read_queue(item)
        elif isinstance(item, ast.Workload):
            if self.workload is not None:
                raise ProgramError("a second workload block: a program has one", item.span)
            self.workload = item
            self.workload_visible = tuple(self.stages)
        elif isinstance(item, ast.SessionItem):
            if self.session_item is not None:
                raise ProgramError("a second session block: a program has one", item.span)
            self.session_item = item
            self.session_visible = tuple(self.stages)
        elif isinstance(item, ast.ServerItem):
            if self.server is not None:
                raise ProgramError("a second server block: a program has one", item.span)
            self.server = item
            self.server_visible = tuple(self.stages)
        elif isinstance(item, ast.RunBlock):
            if self.run_block is not None:
                raise ProgramError("a second run block: a program has one", item.span)
            self.run_block = item
        elif isinstance(item, ast.Share):
            if self.share is not None:
                what = "a pull relation gives it" if self.share_from_pull else "it is declared twice"
                raise ProgramError(f"`share` again: {what}", item.span)
            self.share = (item.policy, item.span)
        elif isinstance(item, ast.Pull):
            self.read_pull(item)
        elif isinstance(item, ast.GaugeDecl):
            if any(g.name == item.name for g in self.gauges):
                raise ProgramError(f"gauge `{item.name}` is declared twice", item.span)
            self.gauges.append(item)
        else:  # pragma: no cover - use is resolved before
            raise AssertionError(f"unexpected item {item!r}")

    def check_fresh(self, name: str, span: Span, what: str) -> None:
        """One name, one meaning (seed 002, section 2)."""
        if name in CONTEXT_NAMES or name == "inf":
            raise ProgramError(f"`{name}` is a name the language supplies; a {what} named `{name}` would be read "
                               f"where the language's `{name}` was meant: give it a name of its own", span)
        if name in BUILTIN_ATTRS:
            raise ProgramError(f"`{name}` is a built-in session attribute; a {what} may not take its name", span)
        if name in LANGUAGE_FUNCTIONS:
            raise ProgramError(f"`{name}` is a function the language supplies; a {what} may not take its name", span)
        for table, kind in ((self.lets, "let constant"), (self.expr_defs, "def"), (self.block_defs, "def")):
            if name in table and not (what == "let constant" and kind == "let constant"):
                raise ProgramError(f"`{name}` is already a {kind}; a {what} may not take its name", span)

    def family_count(self, family: ast.Expr | None, name: str) -> int:
        """A family's size: a whole number from 1 to MAX_FAMILY_MEMBERS (every
        member is written out in the IR, so a huge size would hang the compile)."""
        if family is None:
            return 1
        count = evaluate_count(family, self.lets, f"the size of family `{name}`", 1)
        if count > MAX_FAMILY_MEMBERS:
            raise ProgramError(f"the size of family `{name}` is {format_number(float(count))}: a family has at most "
                               f"{MAX_FAMILY_MEMBERS} members (each is a pool or stage of its own)", family.span)
        return count

    def add_pool(self, name: str, family, options, span, count: int | None = None) -> PoolSpec:
        if any(p.name == name for p in self.pools):
            raise ProgramError(f"pool `{name}` is declared twice", span)
        count = self.family_count(family, name) if count is None else count
        spec = PoolSpec(name, count, family is not None, tuple(options), span)
        self.pools.append(spec)
        return spec

    def add_stage(self, name: str, family, kind: ast.Kind, span, count: int | None = None,
                  is_family: bool | None = None) -> StageSpec:
        if any(s.name == name for s in self.stages):
            raise ProgramError(f"stage `{name}` is declared twice", span)
        count = self.family_count(family, name) if count is None else count
        spec = StageSpec(name, count, family is not None if is_family is None else is_family, kind, span)
        self.stages.append(spec)
        return spec

    # ------------------------------------------------------------ queues

    def read_queue(self, decl: ast.QueueDecl) -> None:
        if decl.name in self.queues:
            raise ProgramError(f"queue `{decl.name}` is declared twice", decl.span)
        for role in decl.roles:
            if role not in QUEUE_ROLES:
                raise ProgramError(f"queue `{decl.name}`: `{role}` is not a role (the roles are "
                                   f"{', '.join(QUEUE_ROLES)})", decl.span)
        count = self.family_count(decl.family, decl.name)
        family = decl.family is not None
        local_pools = [p.name for p in decl.pools]
        renames = {name: f"{decl.name}.{name}" for name in local_pools}
        for pool in decl.pools:
            options = tuple(rename_option(o, renames) for o in pool.options)
            self.add_pool(f"{decl.name}.{pool.name}", decl.family, options, pool.span, count)
        serve = None
        if decl.serve is not None:
            kind = rename_kind(decl.serve, renames)
            serve = self.add_stage(decl.name, decl.family, kind, decl.serve.span, count, family)
            if decl.latency is not None:
                if "link" not in decl.roles or any(e.verb == "transfer" for e in decl.entries):
                    raise ProgramError("`latency` on a serve is a link's, and only a link without a transfer "
                                       "entry takes one", decl.latency.span)
                evaluate_constant(decl.latency, self.lets, f"queue `{decl.name}`'s latency")
                self.add_stage(f"{decl.name}.latency", decl.family, ast.Kind("delay", (), span=decl.latency.span),
                               decl.latency.span, count, family)
        if decl.nic is not None:
            self.add_stage(f"{decl.name}.nic", decl.family, rename_kind(decl.nic, renames), decl.nic.span, count,
                           family)
        for entry in decl.entries:
            allowed = {verb for role in decl.roles for verb in QUEUE_ROLES[role]}
            if entry.verb not in allowed:
                roles = ", ".join(decl.roles) or "none"
                raise ProgramError(f"queue `{decl.name}` has no role with the entry `{entry.verb}` (its roles: "
                                   f"{roles}; entries: route, prefill, decode, transfer)", entry.span)
        leased = {stmt.lease.pool.dotted for entry in decl.entries for stmt in walk_stmts(entry.body)
                  if isinstance(stmt, ast.Hold) and stmt.lease is not None}
        if len(leased) > 1:
            raise ProgramError(f"queue `{decl.name}`'s entries lease several pools ({', '.join(sorted(leased))}): "
                               f"a `from` on it could not say which", decl.span)
        self.queues[decl.name] = QueueInfo(decl, count, family, tuple(self.stages), serve,
                                           next(iter(leased)) if leased else None)

    def read_pull(self, item: ast.Pull) -> None:
        for name in (item.reader, item.source):
            if name not in self.queues:
                raise ProgramError(f"`{item.reader} pull {item.source}`: no queue `{name}` is declared above it",
                                   item.span)
            if self.queues[name].decl.nic is None:
                raise ProgramError(f"`{item.reader} pull {item.source}`: queue `{name}` has no nic to read over",
                                   item.span)
        reader = self.queues[item.reader]
        if reader.pull_source is not None:
            raise ProgramError(f"queue `{item.reader}` already pulls from `{reader.pull_source}`: a reader has one "
                               f"source", item.span)
        if self.share is not None:
            raise ProgramError("a program with a pull relation does not also write `share`: the relation gives it",
                               item.span)
        reader.pull_source = item.source
        if item.latency is not None:
            evaluate_constant(item.latency, self.lets, f"`{item.reader} pull {item.source}`'s latency")
            reader.pull_latency = True
            self.add_stage(f"{item.reader}.nic.latency", None, ast.Kind("delay", (), span=item.span),
                           item.span, reader.count, reader.family)
            self.pull_latencies[item.reader] = item.latency
        self.share = (item.policy, item.span)
        self.share_from_pull = True

    # ----------------------------------------------------------- program

    def desugar(self, items: tuple[ast.Item, ...]) -> Kernel:
        kernel, _ = self.desugar_recovering(items)
        self.log.raise_errors()
        assert kernel is not None
        return kernel

    def desugar_recovering(self, items: tuple[ast.Item, ...]) -> tuple[Kernel | None, list[ProgramError]]:
        """The kernel and the errors found: a declaration's error or a whole-program one raises them (no
        kernel); with errors in statements or gauges only, the kernel without those (each dropped), so that
        the rest of the program can still be lowered and linked and its own errors reported (issue 23: one
        error must not hide another)."""
        self.read_items(items)
        kernel = None
        with self.log.recover():
            kernel = self.desugar_program()
        if kernel is None:
            self.log.raise_errors()
        return kernel, self.log.sorted_errors()

    def desugar_program(self) -> Kernel:
        """The kernel of the items read: the session's statements desugared
        (an error in one recorded, the next desugared), then the checks of the
        program as a whole."""
        workload = self.workload
        wl_items = workload.items if workload else ()
        wl_session = [o for o in wl_items if o.kind == "session"]
        if len(wl_session) > 1:
            raise ProgramError("a second session in the workload: a workload has one", wl_session[1].span)
        if self.session_item is not None and (wl_session or self.server is not None):
            other = wl_session[0].span if wl_session else self.server.span
            raise ProgramError("a top-level session and a workload's session with a server are two forms of one "
                               "thing: a program writes one", other)
        if self.session_item is not None:
            session = self.desugar_block(self.session_item.body,
                                         Scope(ast.WORKLOAD, self.session_visible, "session"))
        elif wl_session:
            session = self.desugar_block(wl_session[0].values[0], Scope(ast.WORKLOAD, self.workload_visible,
                                                                        "workload"))
            if self.log.errors:  # a `request` with an error is still a request
                pass
            elif self.server is not None and not self.server_requested:
                raise ProgramError("the server block is never requested: the workload's session runs it with "
                                   "`request;`", self.server.span)
            elif self.server is None and not self.gateway_requested:
                raise ProgramError("a workload's session without a server: write `server { … }` and "
                                   "`request;`, or request a gateway queue (`request gw;`)", wl_session[0].span)
        elif self.server is not None:
            raise ProgramError("the server block is never requested: a workload's session runs it with "
                               "`request;`", self.server.span)
        else:
            session = ()
        init = turn = ()
        for option in wl_items:
            if option.kind in ("init", "turn"):
                if (init if option.kind == "init" else turn):
                    raise ProgramError(f"a second `{option.kind}` block in the workload", option.span)
                block = self.desugar_block(option.values[0], Scope(ast.WORKLOAD, self.workload_visible,
                                                                   option.kind))
                if option.kind == "init":
                    init = block
                else:
                    turn = block
        self.check_binding_names(init + turn + session)
        arrivals = [o for o in wl_items if o.kind in ("poisson", "renewal", "closed", "batch", "none")]
        if len(arrivals) > 1:
            raise ProgramError("a second `arrive`: a workload has one arrival process", arrivals[1].span)
        traces = [o for o in wl_items if o.kind == "trace"]
        if len(traces) > 1:
            raise ProgramError("a second `trace`: a workload replays one", traces[1].span)
        hidden = tuple((name, o.span) for o in wl_items if o.kind == "hidden" for name in o.values)
        run: dict[str, ast.Option] = {}
        if self.run_block is not None:
            for option in self.run_block.options:
                if option.kind in run:
                    raise ProgramError(f"`{option.kind}` twice in the run block", option.span)
                run[option.kind] = option
        declarations = Scope(ast.WORKLOAD, (), "declaration")
        pools = tuple(dataclasses.replace(p, options=tuple(self.rewrite_value(o, declarations) for o in p.options))
                      for p in self.pools)
        stages = tuple(dataclasses.replace(s, kind=self.rewrite_value(s.kind, declarations)) for s in self.stages)
        gauges = []
        for g in self.gauges:  # a gauge with an error is recorded and dropped, as a statement is
            with self.log.recover():
                gauges.append(ast.GaugeDecl(g.name, self.rewrite_expr(g.expr, Scope(ast.WORKLOAD, (), "gauge")),
                                            span=g.span))
        return Kernel(
            file=self.file,
            lets=dict(self.lets),
            pools=pools,
            stages=stages,
            arrival=arrivals[0] if arrivals else None,
            trace=traces[0].values if traces else None,
            init=tuple(init),
            turn=tuple(turn),
            session=tuple(session),
            hidden=hidden,
            gauges=tuple(gauges),
            run=run,
            run_span=self.run_block.span if self.run_block else None,
            share=self.share,
            trace_span=traces[0].span if traces else None,
        )

    def check_binding_names(self, stmts: tuple[ast.Stmt, ...]) -> None:
        """A binding the body reads has a name of its own: no other set of the program writes it."""
        generated = {identity for _, identity in self.binding_sets}
        for stmt in walk_stmts(stmts):
            if isinstance(stmt, (ast.Set, ast.Choose)) and id(stmt) not in generated:
                for name, identity in self.binding_sets:
                    if stmt.name == name:
                        raise ProgramError(f"`{name}` is an at admission binding the body reads, and the program "
                                           f"also sets it here: give the binding a name of its own", stmt.span)
        self.check_binding_scope(stmts, frozenset(), {name for name, _ in self.binding_sets}, generated)

    def check_binding_scope(self, stmts, in_scope: frozenset[str], bindings: set[str], generated: set[int]) -> None:
        """A binding the body reads is not read outside the holds that bind it."""
        for stmt in stmts:
            inner = in_scope
            if isinstance(stmt, ast.Hold):
                inner = in_scope | {s.name for s in stmt.body if isinstance(s, ast.Set) and id(s) in generated}
                outside = [p.units for p in stmt.pools] + [p.reserve for p in stmt.pools] + [stmt.reuse]
                outside += [x for segment in stmt.content for x in (segment.key, segment.length)]
                inside = [stmt.cache, stmt.lease.duration if stmt.lease else None]
                checks = [(e, in_scope) for e in outside if e is not None]
                checks += [(e, inner) for e in inside if e is not None]
            else:
                checks = [(e, in_scope) for e in iterate_stmt_exprs(stmt)]
            for expr, visible in checks:
                stray = (read_names(expr) & bindings) - visible
                if stray:
                    name = sorted(stray)[0]
                    raise ProgramError(f"`{name}` is an at admission binding, read here outside the hold that binds "
                                       f"it: it has its value only in that hold's body", stmt.span)
            for block in get_nested_blocks(stmt):
                self.check_binding_scope(block, inner if isinstance(stmt, ast.Hold) else in_scope, bindings,
                                         generated)

    # -------------------------------------------------------- statements

    def desugar_block(self, stmts, scope: Scope) -> tuple[ast.Stmt, ...]:
        out: list[ast.Stmt] = []
        for stmt in stmts:
            with self.log.recover():
                out.extend(self.desugar_stmt(stmt, scope))
        return tuple(out)

    def desugar_stmt(self, stmt: ast.Stmt, scope: Scope) -> list[ast.Stmt]:
        side = scope.side
        span = stmt.span
        if scope.place in ("init", "turn") and not isinstance(stmt, (ast.Set, ast.Observe)):
            raise ProgramError(f"a workload's {scope.place} block only sets and observes", span)
        if isinstance(stmt, (ast.Turn, ast.End)):
            word = "turn" if isinstance(stmt, ast.Turn) else "end"
            if side == ast.SERVER:
                raise ProgramError(f"`{word};` is the session's: a server is done with a request when its block "
                                   f"ends", span)
            return [dataclasses.replace(stmt, side=side)]
        if isinstance(stmt, ast.Request):
            return self.desugar_request(stmt, scope)
        if isinstance(stmt, ast.Set):
            return [ast.Set(self.attribute_name(stmt.name, scope), self.rewrite_expr(stmt.expr, scope), span=span,
                            side=side)]
        if isinstance(stmt, ast.Observe):
            return [ast.Observe(stmt.name, self.rewrite_expr(stmt.expr, scope), span=span, side=side)]
        if isinstance(stmt, ast.Hold):
            return [self.desugar_hold(stmt, scope)]
        if isinstance(stmt, (ast.Grow, ast.Load)):
            return [dataclasses.replace(stmt, pool=self.rewrite_path(stmt.pool, scope),
                                        amount=self.rewrite_expr(stmt.amount, scope), side=side)]
        if isinstance(stmt, (ast.Drop, ast.Release)):
            return [dataclasses.replace(stmt, pool=self.rewrite_path(stmt.pool, scope), side=side)]
        if isinstance(stmt, ast.Run):
            return [ast.Run(tuple(self.rewrite_path(p, scope) for p in stmt.stages), stmt.mode,
                            self.rewrite_expr(stmt.work, scope),
                            None if stmt.growing is None else self.rewrite_path(stmt.growing, scope),
                            span=span, side=side)]
        if isinstance(stmt, ast.RunOwn):
            if scope.queue is None or scope.queue.info.serve is None:
                raise ProgramError("`run (w);` names no stage: it runs on the queue's own stage, in a queue's "
                                   "entry; elsewhere write `run STAGE (w);`", span)
            return [ast.Run((self.own_stage(scope, span),), "Plain", self.rewrite_expr(stmt.work, scope), None,
                            span=span, side=side)]
        if isinstance(stmt, ast.Branch):
            guard = self.rewrite_expr(stmt.guard, scope)
            if stmt.draw:
                # seed 002, Branching: branch with (p) is branch (~bernoulli(p))
                guard = ast.Sample("bernoulli", (guard,), span=stmt.guard.span)
            return [ast.Branch(guard, self.desugar_block(stmt.then, scope), self.desugar_block(stmt.otherwise, scope),
                               False, span=span, side=side)]
        if isinstance(stmt, ast.Loop):
            return [ast.Loop(self.desugar_block(stmt.body, scope), span=span, side=side)]
        if isinstance(stmt, ast.Choose):
            return [ast.Choose(self.attribute_name(stmt.name, scope), self.rewrite_expr(stmt.count, scope),
                               tuple(self.rewrite_expr(k, scope) for k in stmt.keys), span=span, side=side)]
        if isinstance(stmt, ast.Mark):
            if scope.queue is None or scope.queue.gateway:
                raise ProgramError("`mark` is for a queue's entry: the caller reads the moment as QUEUE.NAME", span)
            name = f"{scope.queue.info.name}.{stmt.name}"
            return [ast.Set(name, make_simple_name("now", span), span=span, side=side)]
        if isinstance(stmt, ast.CallStmt):
            return self.desugar_call(stmt, scope)
        if isinstance(stmt, ast.Serving):
            return self.desugar_serving(stmt, scope)
        if isinstance(stmt, ast.Transfer):
            return self.desugar_transfer(stmt, scope)
        raise AssertionError(f"unexpected statement {stmt!r}")  # pragma: no cover

    def attribute_name(self, name: str, scope: Scope) -> str:
        """What an entry sets is the queue's (``D.known``); elsewhere the name itself."""
        if scope.queue is not None and not scope.queue.gateway:
            return f"{scope.queue.info.name}.{name}"
        return name

    def desugar_request(self, stmt: ast.Request, scope: Scope) -> list[ast.Stmt]:
        if scope.side == ast.SERVER:
            raise ProgramError("`request` is the session's: a server does not request itself", stmt.span)
        if scope.place == "session":
            raise ProgramError("`request` belongs to a workload's session, which has a server (or a gateway) to "
                               "request; a top-level session is the whole path", stmt.span)
        if stmt.queue is None:
            if self.server is None:
                raise ProgramError("`request;` runs the server block, and this program has none: write "
                                   "`server { … }` (or request a gateway queue, `request gw;`)", stmt.span)
            self.server_requested = True
            if scope.depth > MAX_EXPANSION_DEPTH:
                raise ProgramError("the server requests itself", stmt.span)
            return list(self.desugar_block(self.server.body, Scope(ast.SERVER, self.server_visible, "server",
                                                                   depth=scope.depth + 1)))
        info = self.queues.get(stmt.queue)
        if info is None:
            raise ProgramError(f"`request {stmt.queue};`: no queue `{stmt.queue}` is declared", stmt.span)
        if "gateway" not in info.decl.roles:
            raise ProgramError(f"`request {stmt.queue};`: queue `{stmt.queue}` does not play the gateway role "
                               f"(declare it `queue {stmt.queue} : gateway`)", stmt.span)
        if info.family:
            raise ProgramError(f"`request {stmt.queue};`: a gateway is a single queue, not a family", stmt.span)
        route = info.entry("route")
        if route is None:
            raise ProgramError(f"gateway `{stmt.queue}` has no `route {{ … }}` entry", info.decl.span)
        self.gateway_requested = True
        queue_scope = QueueScope(info, None, None, True)
        inner = Scope(ast.SERVER, info.visible, "entry", self.queue_subst(info, None, None, route, ()), {},
                      queue_scope, scope.depth + 1)
        return list(self.desugar_block(route.body, inner))

    # -------------------------------------------------------------- hold

    def desugar_hold(self, hold: ast.Hold, scope: Scope) -> ast.Hold:
        bound: dict[str, ast.Expr] = {}
        binding_spans: dict[str, ast.Binding] = {}
        later = {self.attribute_name(b.name, scope) for b in hold.bindings}
        for binding in hold.bindings:
            name = self.attribute_name(binding.name, scope)
            later.discard(name)
            value = self.rewrite_expr(binding.expr, scope)
            if has_draw(value):
                raise ProgramError(f"the at admission binding `{binding.name}` draws: it is substituted, so a name "
                                   f"used twice would draw twice (draw into a set above the hold instead)",
                                   binding.span)
            ahead = read_names(value) & later
            if ahead:
                raise ProgramError(f"the binding `{binding.name}` reads `{sorted(ahead)[0]}`, bound after it: a "
                                   f"binding reads only the ones before it", binding.span)
            if name in bound:
                raise ProgramError(f"`{binding.name}` is bound twice in one at admission clause", binding.span)
            bound[name] = substitute(value, bound)
            binding_spans[name] = binding

        def header(expr: ast.Expr | None) -> ast.Expr | None:
            if expr is None:
                return None
            return substitute(self.rewrite_expr(expr, scope), bound)

        pools = tuple(ast.HoldPool(self.rewrite_path(p.pool, scope), header(p.units), header(p.reserve), span=p.span)
                      for p in hold.pools)
        body = self.desugar_block(hold.body, scope)
        cache = None if hold.cache is None else self.rewrite_expr(hold.cache, scope)
        lease = None
        if hold.lease is not None:
            lease = ast.Lease(self.rewrite_path(hold.lease.pool, scope), self.rewrite_expr(hold.lease.duration, scope),
                              span=hold.lease.span)
        read = collect_block_reads(body)
        for extra in (cache, lease.duration if lease else None):
            if extra is not None:
                read |= read_names(extra)
        sets: list[ast.Stmt] = []
        for name, value in bound.items():
            if name not in read:
                continue
            binding = binding_spans[name]
            live = find_live_read(value)
            if live is not None:
                raise ProgramError(
                    f"the body reads the binding `{binding.name}`, which reads {live}: that has another value in the "
                    f"body than at admission (the body reads `cached`, the units the admission consumed)",
                    binding.span)
            self.check_binding_name(binding.name, binding.span)
            set_stmt = ast.Set(name, value, span=binding.span, side=scope.side)
            self.binding_sets.append((name, id(set_stmt)))
            sets.append(set_stmt)
        content = tuple(ast.Segment(header(x.key), header(x.length), span=x.span) for x in hold.content)
        return ast.Hold(pools, header(hold.reuse), (), tuple(sets) + body, cache, lease, span=hold.span,
                        side=scope.side, content=content)

    def check_binding_name(self, name: str, span: Span) -> None:
        what = None
        if name in BUILTIN_ATTRS:
            what = "a built-in attribute"
        elif name in CONTEXT_NAMES or name == "inf":
            what = "a name the language supplies"
        elif name in self.lets:
            what = "a let constant"
        elif any(p.name == name for p in self.pools):
            what = "a pool"
        elif any(s.name == name for s in self.stages):
            what = "a stage"
        if what is not None:
            raise ProgramError(f"the body reads the binding `{name}`, which is also {what}: a binding the body "
                               f"reads has a name of its own", span)

    # --------------------------------------------------------- defs, calls

    def desugar_call(self, call: ast.CallStmt, scope: Scope) -> list[ast.Stmt]:
        name = call.target.simple
        if name is not None and call.source is None and call.to is None:
            if name in self.block_defs:
                definition = self.block_defs[name]
                if len(call.args) != len(definition.params):
                    raise ProgramError(f"`{name}` takes {len(definition.params)} argument(s), got {len(call.args)}",
                                       call.span)
                if scope.depth > MAX_EXPANSION_DEPTH:
                    raise ProgramError(f"`{name}` expands into itself", call.span)
                args = {p: self.rewrite_expr(a, scope) for p, a in zip(definition.params, call.args)}
                # a use is the body's text in place: it reads the names of the place it is used in
                inner = dataclasses.replace(scope, subst={**scope.subst, **args}, depth=scope.depth + 1)
                return [self.respan(s, call.span) for s in self.desugar_block(definition.body, inner)]
            if name in self.expr_defs:
                raise ProgramError(f"`{name}` is an expression def: use it in an expression, not as a statement",
                                   call.span)
            if name in ("reserve", "reuse", "cache", "lease"):  # `… } lease kv (t) cache (e);`: the hold ended
                raise ProgramError(f"`{name} (…)` here is read as a statement after the hold it was meant for: "
                                   "a hold's clauses go in the order hold POOL (n) [reserve (r)], … [reuse (e)] "
                                   "[content (K : L, …)] [at admission (…)] { … } [cache (e)] [lease POOL (t)]", call.span)
            near = difflib.get_close_matches(name, sorted(self.block_defs), n=1, cutoff=0.6)
            raise ProgramError(f"no def named `{name}`" + (f" (did you mean `{near[0]}`?)" if near else ""),
                               call.span)
        head = call.target.parts[0].name
        if head in self.queues and len(call.target.parts) == 2:
            return self.expand_entry(call, scope)
        if head in self.queues:
            raise ProgramError(f"an entry call is `{head}[i].VERB(args)` or `{head}.VERB(args)`", call.span)
        raise ProgramError(f"no queue named `{head}` (an entry call is QUEUE[i].VERB(args))", call.target.span)

    def respan(self, stmt: ast.Stmt, span: Span) -> ast.Stmt:
        """A statement a def wrote, placed at the use (its nested ones keep theirs)."""
        return dataclasses.replace(stmt, span=span)

    def expand_entry(self, call: ast.CallStmt, scope: Scope) -> list[ast.Stmt]:
        head, verb_part = call.target.parts
        info = self.queues[head.name]
        verb = verb_part.name
        if verb_part.index is not None:
            raise ProgramError(f"`{head.name}.{verb}` is an entry: index the queue, `{head.name}[i].{verb}(…)`",
                               call.span)
        entry = info.entry(verb)
        if entry is None:
            verbs = ", ".join(e.verb for e in info.decl.entries) or "none"
            raise ProgramError(f"queue `{info.name}` has no entry `{verb}` (its entries: {verbs})", call.target.span)
        if "gateway" in info.decl.roles and verb == "route":
            raise ProgramError(f"a gateway's route is entered with `request {info.name};`", call.span)
        self.check_entry(info, entry)
        member = None
        if head.index is not None:
            member = self.rewrite_expr(head.index, scope)
            self.check_member(member, info, call.target.span)
        elif info.family and info.count != 1:
            raise ProgramError(f"queue `{info.name}` is a family of {info.count}: call a member, "
                               f"`{info.name}[i].{verb}(…)`", call.target.span)
        elif info.family:
            member = ast.Num(0.0, span=call.span)
        if len(call.args) != len(entry.params):
            raise ProgramError(f"`{info.name}.{verb}` takes {len(entry.params)} argument(s), got {len(call.args)}",
                               call.span)
        args = tuple(self.rewrite_expr(a, scope) for a in call.args)
        for arg in args:
            if has_draw(arg):
                raise ProgramError("an entry's arguments are substituted like an at admission binding, so none may "
                                   "draw: draw into a set before the call", arg.span)
        after: list[ast.Stmt] = []
        source: tuple[QueueInfo, ast.Expr | None] | None = None
        if call.to is not None:
            if call.source is None:
                raise ProgramError("`to POOL (n)` moves KV from the pool `from` names: write both", call.span)
            to_pool, amount = call.to
            from_pool = self.rewrite_path(call.source, scope)
            after = [ast.Load(self.rewrite_path(to_pool, scope), self.rewrite_expr(amount, scope), span=call.span,
                              side=scope.side),
                     ast.Release(from_pool, span=call.span, side=scope.side)]
        elif call.source is not None:
            if entry.source is None:
                raise ProgramError(f"`{info.name}.{verb}` reads no KV from another queue: it takes no `from`",
                                   call.source.span)
            source_head = call.source.parts[0]
            source_info = self.queues.get(source_head.name)
            if source_info is None or len(call.source.parts) != 1:
                raise ProgramError(f"`from {call.source.dotted}`: the source is a queue (or a member, Q[i])",
                                   call.source.span)
            if info.pull_source is not None and info.pull_source != source_info.name:
                raise ProgramError(f"queue `{info.name}` pulls from `{info.pull_source}`, and this entry is called "
                                   f"from `{source_info.name}`", call.source.span)
            if source_info.leased is None:
                raise ProgramError(f"`from {source_info.name}`: no entry of `{source_info.name}` leases a pool, so "
                                   f"there is no KV to take from it", call.source.span)
            for source_entry in source_info.decl.entries:
                if not has_lease_on_every_way(source_entry.body):
                    raise ProgramError(
                        f"`from {source_info.name}`: entry `{source_entry.verb}` of `{source_info.name}` does not "
                        f"lease `{source_info.leased}` on every way through it, so a request that went through it "
                        f"left no KV to take", source_entry.span)
            source_member = None
            if source_head.index is not None:
                source_member = self.rewrite_expr(source_head.index, scope)
                self.check_member(source_member, source_info, call.source.span)
            elif source_info.family and source_info.count != 1:
                raise ProgramError(f"queue `{source_info.name}` is a family: name the member, "
                                   f"`from {source_info.name}[i]`", call.source.span)
            elif source_info.family:
                source_member = ast.Num(0.0, span=call.source.span)
            source = (source_info, source_member)
        elif entry.source is not None:
            raise ProgramError(f"`{info.name}.{verb}` takes the KV another queue leased: call it with "
                               f"`from QUEUE[i]`", call.span)
        queue_scope = QueueScope(info, member, source, False)
        subst = self.queue_subst(info, member, source, entry, args)
        index_subst = {}
        if source is not None and entry.source is not None:
            index_subst[entry.source] = source[1] if source[1] is not None else ast.Num(0.0, span=call.span)
        inner = Scope(scope.side, info.visible, "entry", subst, index_subst, queue_scope, scope.depth + 1)
        if scope.depth > MAX_EXPANSION_DEPTH:
            raise ProgramError(f"`{info.name}.{verb}` calls itself", call.span)
        return list(self.desugar_block(entry.body, inner)) + after

    def check_entry(self, info: QueueInfo, entry: ast.Entry) -> None:
        """"An entry sees its own" (seed 002, Queues): its header reads its
        parameters, its queue's pools and stage and the constants; its body
        also now, cached and the request's hidden attributes; its statements
        hold, grow, load and release only its queue's pools and its `from` pool."""
        local_pools = {p.name for p in info.decl.pools}
        own = {info.name, "nic", "self", "inf", "computed"} | local_pools | set(entry.params) | set(self.lets)
        own |= CONTEXT_NAMES
        if entry.source is not None:
            own.add(entry.source)
        hidden = {name for option in (self.workload.items if self.workload else ()) if option.kind == "hidden"
                  for name in option.values}
        body_own = own | {"cached"} | hidden | set(collect_set_names(entry.body))
        pool_names = local_pools | ({entry.source} if entry.source is not None else set())
        for stmt in walk_stmts(entry.body):
            if isinstance(stmt, ast.Hold):
                bound: set[str] = set()
                header = [p.units for p in stmt.pools] + [p.reserve for p in stmt.pools if p.reserve is not None]
                header += [stmt.reuse] if stmt.reuse is not None else []
                header += [x for segment in stmt.content for x in (segment.key, segment.length)]
                for binding in stmt.bindings:
                    self.check_entry_reads(info, binding.expr, own | bound, "header")
                    bound.add(binding.name)
                for expr in header:
                    self.check_entry_reads(info, expr, own | bound, "header")
                for expr in (stmt.cache, stmt.lease.duration if stmt.lease else None):
                    if expr is not None:
                        self.check_entry_reads(info, expr, body_own, "body")
                pools = [p.pool for p in stmt.pools] + ([stmt.lease.pool] if stmt.lease else [])
            elif isinstance(stmt, (ast.Grow, ast.Load, ast.Release)):
                pools = [stmt.pool]
            elif isinstance(stmt, ast.Transfer):
                pools = [stmt.source, stmt.dest]
            else:
                pools = []
            for pool in pools:
                if pool.parts[0].name not in pool_names:
                    raise ProgramError(
                        f"queue `{info.name}`'s entry acts on `{pool.dotted}`: an entry holds, grows, loads and "
                        f"releases only its queue's pools and the pool its `from` names", pool.span)
            if not isinstance(stmt, ast.Hold):
                for expr in iterate_entry_exprs(stmt):
                    self.check_entry_reads(info, expr, body_own, "body")

    def check_entry_reads(self, info: QueueInfo, expr: ast.Expr, allowed: set[str], where: str) -> None:
        for name, span in collect_free_names(expr):
            if name not in allowed:
                if where == "header":
                    what = "its parameters, its queue's pools and stage and the constants"
                else:
                    what = "those, now, cached, what it sets and the request's hidden attributes"
                raise ProgramError(f"queue `{info.name}`'s entry reads `{name}` in its {where}: an entry's {where} "
                                   f"reads {what} (pass the value as a parameter)", span)

    def check_member(self, member: ast.Expr, info: QueueInfo, span: Span) -> None:
        if not info.family:
            raise ProgramError(f"queue `{info.name}` is not a family: call it without an index", span)
        try:
            value = fold(member, self.lets)
        except NotConstant:
            return
        if not (is_whole(value) and 0 <= value < info.count):
            raise ProgramError(f"`{info.name}[{format_number(value)}]` is out of range: `{info.name}` has {info.count} member(s)",
                               span)

    def queue_subst(self, info: QueueInfo, member, source, entry: ast.Entry, args) -> dict[str, ast.Expr]:
        """The names an entry's body reads, as the program's: its pools and
        stages under long names, ``self``, its parameters, its ``from``."""
        span = entry.span
        subst: dict[str, ast.Expr] = {}
        if entry.verb != "route":  # a gateway's route sets the request's own attributes
            for name in collect_set_names(entry.body):
                subst[name] = self.long_name([info.name, name], None, span)
        for pool in info.decl.pools:
            subst[pool.name] = self.long_name([info.name, pool.name], member, span)
        if info.serve is not None:
            subst[info.name] = self.long_name([info.name], member, span)
        if info.decl.nic is not None:
            subst["nic"] = self.long_name([info.name, "nic"], member, span)
        subst["self"] = member if member is not None else ast.Num(0.0, span=span)
        if entry.source is not None and source is not None:
            source_info, source_member = source
            subst[entry.source] = self.long_name([source_info.name, source_info.leased], source_member, span)
        subst.update(zip(entry.params, args))
        return subst

    def long_name(self, parts: list[str], member, span: Span) -> ast.Name:
        path = make_dotted_path([(p, None) for p in parts[:-1]] + [(parts[-1], member)], span)
        return ast.Name(path, span=span)

    def own_stage(self, scope: Scope, span: Span) -> ast.Path:
        queue = scope.queue
        return make_dotted_path([(queue.info.name, queue.member)], span)

    # ------------------------------------------------ the serving vocabulary

    def find_role_stage(self, role: str, scope: Scope, span: Span) -> StageSpec:
        """The which-stage rule: the stage of the role's name, failing that
        (prefill, decode) the step engine; exactly one must qualify."""
        names = ROLE_STAGES[role]
        candidates = [s for s in scope.stages if s.name in names]
        if not candidates and role in ("prefill", "decode"):
            candidates = [s for s in scope.stages if s.is_step]
        if len(candidates) == 1:
            return candidates[0]
        wanted = " or ".join(f"`{n}`" for n in names)
        engine = ", or one step engine" if role in ("prefill", "decode") else ""
        if not candidates:
            raise ProgramError(f"`{role}` finds no stage: declare a stage named {wanted}{engine} above it, or "
                               f"name the stage with `on`", span)
        found = ", ".join(f"`{s.name}`" for s in candidates)
        raise ProgramError(f"`{role}` finds several stages ({found}): name one with `on`", span)

    def stage_of_path(self, path: ast.Path) -> StageSpec | None:
        for stage in self.stages:
            if stage.name == path.dotted:
                return stage
        return None

    def desugar_serving(self, form: ast.Serving, scope: Scope) -> list[ast.Stmt]:
        work = self.rewrite_expr(form.work, scope)
        growing = None if form.growing is None else self.rewrite_path(form.growing, scope)
        stages = self.form_stages(form.role, form.index, form.on, scope, form.span)
        mode = "Plain"
        if len(stages) == 1:
            spec = self.stage_of_path(stages[0])
            if spec is not None and spec.is_step:
                mode = ROLE_MODES[form.role]
        return [ast.Run(stages, mode, work, growing, span=form.span, side=scope.side)]

    def form_stages(self, role: str, index, on, scope: Scope, span: Span) -> tuple[ast.Path, ...]:
        if on is not None:
            return tuple(self.rewrite_path(p, scope) for p in on)
        if scope.queue is not None and scope.queue.info.serve is not None and index is None:
            return (self.own_stage(scope, span),)
        spec = self.find_role_stage(role, scope, span)
        member = None if index is None else self.rewrite_expr(index, scope)
        return (make_dotted_path([(spec.name, member)], span),)

    def desugar_transfer(self, form: ast.Transfer, scope: Scope) -> list[ast.Stmt]:
        side = scope.side
        span = form.span
        work = self.rewrite_expr(form.work, scope)
        dest = self.rewrite_path(form.dest, scope)
        source = self.rewrite_path(form.source, scope)
        amount = self.rewrite_expr(form.amount, scope)
        runs: list[ast.Stmt] = []
        queue = scope.queue
        if form.on is None and form.index is None and queue is not None and not queue.gateway:
            info = queue.info
            if info.pull_source is None:
                raise ProgramError(f"a transfer without `on` in queue `{info.name}`, which pulls from no queue: "
                                   f"write `{info.name} pull SOURCE …;` or name the stages with `on`", span)
            if queue.source is None:
                raise ProgramError(f"this transfer reads from the queue the entry is called from: call "
                                   f"`{info.name}`'s entry with `from {info.pull_source}[i]`", span)
            source_info, source_member = queue.source
            if info.pull_latency:
                latency = self.pull_latencies[info.name]
                runs.append(ast.Run((make_dotted_path([(info.name, None), ("nic", None), ("latency", queue.member)],
                                                 span),),
                                    "Plain", latency, None, span=span, side=side))
            links = (make_dotted_path([(source_info.name, None), ("nic", source_member)], span),
                     make_dotted_path([(info.name, None), ("nic", queue.member)], span))
            runs.append(ast.Run(links, "Plain", work, None, span=span, side=side))
        else:
            stages = self.form_stages("transfer", form.index, form.on, scope, span)
            for stage in stages:
                link = self.queues.get(stage.parts[0].name)
                if link is not None and link.decl.latency is not None and len(stage.parts) == 1:
                    member = stage.parts[0].index
                    runs.append(ast.Run((make_dotted_path([(link.name, None), ("latency", member)], span),), "Plain",
                                        link.decl.latency, None, span=span, side=side))
            runs.append(ast.Run(stages, "Plain", work, None, span=span, side=side))
        return runs + [ast.Load(dest, amount, span=span, side=side), ast.Release(source, span=span, side=side)]

    # ------------------------------------------------------- expressions

    def rewrite_value(self, value, scope: Scope):
        """A declaration's clause with the defs its expressions use expanded."""
        if isinstance(value, ast.Option):
            return ast.Option(value.kind, tuple(self.rewrite_value(v, scope) for v in value.values), span=value.span)
        if isinstance(value, ast.Kind):
            return ast.Kind(value.kind, tuple(self.rewrite_value(v, scope) for v in value.values), span=value.span)
        if isinstance(value, (ast.Num, ast.Name, ast.FunctionCall, ast.Sample, ast.Unary, ast.Binary, ast.Cond,
                              ast.Over)):
            return self.rewrite_expr(value, scope)
        return value

    def rewrite_expr(self, expr: ast.Expr, scope: Scope, in_index: bool = False) -> ast.Expr:
        """Expand defs and apply the scope's substitutions."""
        if isinstance(expr, ast.Num):
            return expr
        if isinstance(expr, ast.Name):
            return self.rewrite_name(expr, scope, in_index)
        if isinstance(expr, ast.FunctionCall):
            args = tuple(self.rewrite_expr(a, scope, in_index) for a in expr.args)
            if expr.function in self.expr_defs and expr.function not in scope.subst:
                definition = self.expr_defs[expr.function]
                if len(args) != len(definition.params):
                    raise ProgramError(f"`{expr.function}` takes {len(definition.params)} argument(s), got "
                                       f"{len(args)}", expr.span)
                if scope.depth > MAX_EXPANSION_DEPTH:
                    raise ProgramError(f"`{expr.function}` expands into itself", expr.span)
                inner = dataclasses.replace(scope, subst={**scope.subst, **dict(zip(definition.params, args))},
                                            depth=scope.depth + 1)
                return self.rewrite_expr(definition.body, inner)
            if expr.function in self.block_defs:
                raise ProgramError(f"`{expr.function}` is a def of statements: use it as a statement", expr.span)
            return ast.FunctionCall(expr.function, args, span=expr.span)
        if isinstance(expr, ast.Sample):
            return ast.Sample(expr.distribution, tuple(self.rewrite_expr(a, scope, in_index) for a in expr.args),
                              span=expr.span, source=expr.source)
        if isinstance(expr, ast.Unary):
            return ast.Unary(expr.op, self.rewrite_expr(expr.operand, scope, in_index), span=expr.span)
        if isinstance(expr, ast.Binary):
            return ast.Binary(expr.op, self.rewrite_expr(expr.left, scope, in_index),
                              self.rewrite_expr(expr.right, scope, in_index), span=expr.span)
        if isinstance(expr, ast.Cond):
            return ast.Cond(self.rewrite_expr(expr.test, scope, in_index),
                            self.rewrite_expr(expr.then, scope, in_index),
                            self.rewrite_expr(expr.otherwise, scope, in_index), span=expr.span)
        if isinstance(expr, ast.Over):
            inner = dataclasses.replace(
                scope, subst={k: v for k, v in scope.subst.items() if k != expr.variable},
                index_subst={k: v for k, v in scope.index_subst.items() if k != expr.variable})
            return ast.Over(expr.aggregate, expr.variable, self.rewrite_expr(expr.count, scope, in_index),
                            self.rewrite_expr(expr.body, inner, in_index), span=expr.span)
        raise AssertionError(f"unexpected expression {expr!r}")  # pragma: no cover

    def rewrite_name(self, expr: ast.Name, scope: Scope, in_index: bool) -> ast.Expr:
        path = expr.path
        if in_index and path.simple is not None and path.simple in scope.index_subst:
            return scope.index_subst[path.simple]
        new_path = self.rewrite_path(path, scope, value=True)
        if isinstance(new_path, ast.Path):
            return ast.Name(new_path, span=expr.span)
        return new_path  # an expression a parameter or binding stands for

    def rewrite_path(self, path: ast.Path, scope: Scope, value: bool = False):
        """A path with the scope's names replaced (a pool parameter, a
        queue's pool); with ``value``, a simple name may become any expression."""
        parts = [ast.PathPart(p.name, None if p.index is None else self.rewrite_expr(p.index, scope, True))
                 for p in path.parts]
        first = parts[0]
        replacement = scope.subst.get(first.name)
        if replacement is None:
            return ast.Path(tuple(parts), span=path.span)
        if isinstance(replacement, ast.Name):
            head = list(replacement.path.parts)
            last = head[-1]
            index = first.index if first.index is not None else last.index
            head[-1] = ast.PathPart(last.name, index)
            return ast.Path(tuple(head) + tuple(parts[1:]), span=path.span)
        if value and len(parts) == 1 and first.index is None:
            return replacement
        raise ProgramError(f"`{first.name}` stands for an expression here, not a pool or stage", path.span)


def has_lease_on_every_way(stmts) -> bool:
    """Whether every way through a block passes a hold that leases."""
    for stmt in stmts:
        if isinstance(stmt, ast.Hold) and (stmt.lease is not None or has_lease_on_every_way(stmt.body)):
            return True
        if isinstance(stmt, ast.Branch) and all(has_lease_on_every_way(b) for b in (stmt.then, stmt.otherwise)):
            return True
        if isinstance(stmt, ast.Loop) and has_lease_on_every_way(stmt.body):
            return True
    return False


def collect_free_names(expr: ast.Expr, bound: frozenset[str] = frozenset()):
    """(name, span) of every name an expression reads (the first part of a
    dotted one), leaving out aggregate indices bound inside it."""
    if isinstance(expr, ast.Name):
        if expr.path.parts[0].name not in bound:
            yield expr.path.parts[0].name, expr.span
        for index in expr.path.indices:
            yield from collect_free_names(index, bound)
    elif isinstance(expr, (ast.FunctionCall, ast.Sample)):
        for arg in expr.args:
            yield from collect_free_names(arg, bound)
    elif isinstance(expr, ast.Unary):
        yield from collect_free_names(expr.operand, bound)
    elif isinstance(expr, ast.Binary):
        yield from collect_free_names(expr.left, bound)
        yield from collect_free_names(expr.right, bound)
    elif isinstance(expr, ast.Cond):
        for part in (expr.test, expr.then, expr.otherwise):
            yield from collect_free_names(part, bound)
    elif isinstance(expr, ast.Over):
        yield from collect_free_names(expr.count, bound)
        yield from collect_free_names(expr.body, bound | {expr.variable})


def iterate_entry_exprs(stmt: ast.Stmt):
    """The expressions a statement of an entry reads, sugar included."""
    if isinstance(stmt, (ast.Set, ast.Observe)):
        yield stmt.expr
    elif isinstance(stmt, (ast.Grow, ast.Load)):
        yield stmt.amount
    elif isinstance(stmt, (ast.Run, ast.RunOwn, ast.Serving)):
        yield stmt.work
    elif isinstance(stmt, ast.Transfer):
        yield stmt.work
        yield stmt.amount
    elif isinstance(stmt, ast.Branch):
        yield stmt.guard
    elif isinstance(stmt, ast.Choose):
        yield stmt.count
        yield from stmt.keys
    elif isinstance(stmt, ast.CallStmt):
        yield from stmt.args


def collect_set_names(stmts) -> list[str]:
    """The names a block sets (set, choose, a binding), in order of first appearance."""
    names: list[str] = []
    for stmt in walk_stmts(stmts):
        found = []
        if isinstance(stmt, (ast.Set, ast.Choose)):
            found = [stmt.name]
        elif isinstance(stmt, ast.Hold):
            found = [b.name for b in stmt.bindings]
        for name in found:
            if name not in names:
                names.append(name)
    return names


def map_operands(expr: ast.Expr, f, body=None) -> ast.Expr:
    """``expr`` with ``f`` applied to each operand it has (an aggregate's body
    with ``body`` when given); a name or a number is returned as it is."""
    if isinstance(expr, ast.FunctionCall):
        return ast.FunctionCall(expr.function, tuple(f(a) for a in expr.args), span=expr.span)
    if isinstance(expr, ast.Sample):
        return ast.Sample(expr.distribution, tuple(f(a) for a in expr.args), span=expr.span, source=expr.source)
    if isinstance(expr, ast.Unary):
        return ast.Unary(expr.op, f(expr.operand), span=expr.span)
    if isinstance(expr, ast.Binary):
        return ast.Binary(expr.op, f(expr.left), f(expr.right), span=expr.span)
    if isinstance(expr, ast.Cond):
        return ast.Cond(f(expr.test), f(expr.then), f(expr.otherwise), span=expr.span)
    if isinstance(expr, ast.Over):
        return ast.Over(expr.aggregate, expr.variable, f(expr.count), (body or f)(expr.body), span=expr.span)
    return expr


def substitute(expr: ast.Expr, bound: Mapping[str, ast.Expr]) -> ast.Expr:
    """``expr`` with every unindexed name in ``bound`` (``hit``, ``P.hit``) replaced by its expression."""
    if not bound:
        return expr
    if isinstance(expr, ast.Name):
        name = expr.path.dotted if not expr.path.indices else None
        if name is not None and name in bound:
            return bound[name]
        parts = tuple(ast.PathPart(p.name, None if p.index is None else substitute(p.index, bound))
                      for p in expr.path.parts)
        return ast.Name(ast.Path(parts, span=expr.path.span), span=expr.span)
    body = None
    if isinstance(expr, ast.Over):  # the aggregate's variable shadows a binding of its name
        inner = {k: v for k, v in bound.items() if k != expr.variable}
        body = lambda e: substitute(e, inner)  # noqa: E731
    return map_operands(expr, lambda e: substitute(e, bound), body)


def rename_option(option: ast.Option, renames: Mapping[str, str]) -> ast.Option:
    """A queue's pool option with the queue's pool names written long."""
    return ast.Option(option.kind, tuple(rename_value(v, renames) for v in option.values), span=option.span)


def rename_kind(kind: ast.Kind, renames: Mapping[str, str]) -> ast.Kind:
    return ast.Kind(kind.kind, tuple(rename_value(v, renames) for v in kind.values), span=kind.span)


def rename_value(value, renames: Mapping[str, str]):
    if isinstance(value, ast.Option):
        return rename_option(value, renames)
    if isinstance(value, ast.Path):
        return rename_path(value, renames)
    if isinstance(value, (ast.Num, ast.Name, ast.FunctionCall, ast.Sample, ast.Unary, ast.Binary, ast.Cond, ast.Over)):
        subst = {old: ast.Name(ast.Path((ast.PathPart(new, None),), span=value.span), span=value.span)
                 for old, new in renames.items()}
        return rename_expr(value, subst)
    return value


def rename_path(path: ast.Path, renames: Mapping[str, str]) -> ast.Path:
    first = path.parts[0]
    if first.name in renames:
        return ast.Path((ast.PathPart(renames[first.name], first.index),) + path.parts[1:], span=path.span)
    return path


def rename_expr(expr: ast.Expr, subst: Mapping[str, ast.Name]) -> ast.Expr:
    """Pool names in a declaration's expression (``used(kv)``) written long."""
    if isinstance(expr, ast.Name):
        first = expr.path.parts[0]
        parts = tuple(ast.PathPart(p.name, None if p.index is None else rename_expr(p.index, subst))
                      for p in expr.path.parts)
        if first.name in subst:
            parts = (ast.PathPart(subst[first.name].path.dotted, parts[0].index),) + parts[1:]
        return ast.Name(ast.Path(parts, span=expr.path.span), span=expr.span)
    return map_operands(expr, lambda e: rename_expr(e, subst))


def desugar_program(file: str, items: tuple[ast.Item, ...], sets: Mapping[str, float] | None) -> Kernel:
    """The kernel program of a parsed file whose ``use``s are resolved."""
    return Desugarer(file, sets).desugar(items)


def desugar_recovering(file: str, items: tuple[ast.Item, ...],
                       sets: Mapping[str, float] | None) -> tuple[Kernel | None, list[ProgramError]]:
    """``desugar_program``, with the kernel of the statements and gauges that had no error besides the errors
    (Desugarer.desugar_recovering)."""
    return Desugarer(file, sets).desugar_recovering(items)
