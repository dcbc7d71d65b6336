"""The machine: what a run knows of its program that never changes (block
sizes, capacities, compiled expressions, which pools a release can unblock,
the streams' keys, each stage's kind), the optional step-trace observer, and
the small helpers every family of rules shares (a session's evaluation
environment, making a session ready, counting a statistic).

Nothing here is state: the state of a run is the Configuration. The machine
is built by the driver (driver.build_machine), which also installs the parts
made of rules: the compiled statements, the event rules and time/advance.
This module imports no rule module: the rules are above it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

from .. import ir
from ..errors import RunError
from .configuration import (PLAIN, READY, Configuration, Frame, PoolStats, Session, Statistics, build, ready_push,
                            replace_at, setter)
from .observables import make_observables
from .rng import derive_stream
from .values import ESTIMATE_READERS, Env, ExpressionCompiler
from .windows import group_facts

#: A session made ready more often than this at one instant is a RunError
#: (SERQ-FACTS.md, run-time backstops).
MAX_READIES_PER_INSTANT = 1000
#: Statements at one instant without anything blocking.
MAX_QUIET_STATEMENTS = 1_000_000
#: Tolerance of the capacity comparisons (units are floats).
EPSILON = 1e-9

_LIVE_STATE_CALLS = ("Queue", "Busy", "Work", "Used", "Free", "Holders", "Queued", "Price", "BudgetLeft",
                     "EstLambda", "EstRho", "EstWait")


class CompiledHold:
    """A Hold statement with its expressions compiled."""

    __slots__ = ("stmt", "refs", "indices", "units", "reserves", "reuse", "cache", "lease_ref", "lease_index",
                 "lease_duration", "body", "content")

    def __init__(self, compiler: ExpressionCompiler, hold: ir.Hold):
        self.stmt = hold
        self.refs = tuple(p.ref for p in hold.pools)
        self.indices = tuple(compiler.compile_ref_index(p.ref) for p in hold.pools)
        self.units = tuple(compiler.compile(p.units) for p in hold.pools)
        self.reserves = tuple(None if p.reserve is None else compiler.compile(p.reserve) for p in hold.pools)
        self.reuse = None if hold.reuse is None else compiler.compile(hold.reuse)
        self.cache = None if hold.cache is None else compiler.compile(hold.cache)
        self.lease_ref = None if hold.lease is None else hold.lease.ref
        self.lease_index = None if hold.lease is None else compiler.compile_ref_index(hold.lease.ref)
        self.lease_duration = None if hold.lease is None else compiler.compile(hold.lease.duration)
        self.body = hold.body
        #: ``content (K : L, ...)``: (key, length) compiled, per segment (docs/design/shared-prefixes.md)
        self.content = tuple((compiler.compile(x.key), compiler.compile(x.length)) for x in hold.content)


class StepFacts:
    """A step stage's compiled parts (seed 002 §2: step { budget B; cost C;
    chunk K; serve ...; memory P; })."""

    __slots__ = ("budget", "cost", "chunk", "keys", "exclusive", "memory", "served", "continues", "ahead", "spec",
                 "accept", "lookahead", "slots", "within", "defer", "remote",
                 "remote_delay", "offload_chunks", "offload_load_delay", "offload_store_delay")

    def __init__(self, m: "Machine", s: int, stage: ir.Stage):
        kind = stage.kind
        compile_ = m.compiler.compile
        self.budget = compile_(kind.budget)
        self.cost = compile_(kind.cost)
        self.chunk = compile_(kind.chunk)
        #: serve by keys (admission order: none); exclusive prefill: no keys and ``exclusive``
        self.keys = tuple(compile_(k) for k in kind.serve) if kind.serve is not None else ()
        self.exclusive = kind.serve is None
        self.memory = kind.memory
        #: the pools whose queues it serves (admit via), in declaration order
        self.served = tuple(p for p, pool in enumerate(m.program.pools) if pool.admit_via == s)
        #: ``self preemption continue``: a pass goes on after a grower preempted itself (step/grow)
        self.continues = kind.self_preemption == "Continue"
        #: ``schedule ahead``: the next iteration is formed before the ended one's holds exit (step/apply)
        self.ahead = kind.schedule_ahead
        #: ``speculate (K) accept (e)``: K drafts per decoding resident and iteration (0: none), and the
        #: acceptance (docs/design/speculative-decoding.md)
        self.spec = float(kind.spec_tokens)
        self.accept = compile_(kind.spec_accept) if kind.spec_accept is not None else None
        #: ``speculate ... lookahead (A) slots (D) within (L)`` (docs/design/speculative-decoding.md, section 8):
        #: the units a growing resident's hold takes past its tokens, the budget each served resident takes
        #: beyond its tokens, and the model length (0: none)
        self.lookahead = float(kind.spec_lookahead)
        self.slots = float(kind.spec_slots)
        self.within = float(kind.spec_within)
        #: ``defer free`` (with schedule ahead): a resident the iteration in flight was given tokens is no victim
        #: while the next iteration is formed (step/defer; docs/design/kv-connector.md)
        self.defer = kind.defer_free and kind.schedule_ahead
        #: ``load remote (R) after (D)``: the units a session's first admission loads, and the iterations the
        #: transfer takes, read for the head of a queue it serves (step/load; docs/design/kv-connector.md)
        self.remote = compile_(kind.load_remote) if kind.load_remote is not None else None
        self.remote_delay = compile_(kind.load_delay) if kind.load_delay is not None else None
        #: ``offload to (N) load after (L) store after (S)``: the CPU tier's chunks (0: none) and its delays in
        #: iterations (docs/design/cpu-offloading.md; stages/offload.py)
        self.offload_chunks = kind.offload_chunks
        self.offload_load_delay = kind.offload_load_delay
        self.offload_store_delay = kind.offload_store_delay


class Machine:
    """The fixed part of a run of ``program``."""

    def __init__(self, program: ir.Program, kinds: Mapping, observer=None, trace_sessions=(),
                 compiler=ExpressionCompiler):
        """``kinds``: each stage kind's rules by name (stages.KINDS: "fifo",
        "ps", "flows"), given by the driver, which knows the rule modules;
        ``observer``: the step trace's, or None; ``compiler``: the class that
        compiles the program's expressions (values.ExpressionCompiler, or the
        fast engine's)."""
        self.program = program
        self.observer = observer
        self.trace_sessions = trace_sessions
        self.seed = program.seed
        self.warmup = program.warmup
        self.slot_turn = program.slot_turn
        self.slot_serial = program.slot_serial
        self.has_init = bool(program.blocks[program.init])
        #: the mean gap of ``arrive poisson(rate)`` (None for another arrival process)
        self.poisson_gap = 1.0 / program.arrival.rate if isinstance(program.arrival, ir.Poisson) else None
        self.caps = tuple(p.cap for p in program.pools)
        self.block_sizes = tuple(p.block for p in program.pools)
        self.servers = tuple(s.kind.servers if isinstance(s.kind, ir.Fifo) else 0 for s in program.stages)
        self.holds: dict[tuple[int, int], CompiledHold] = {}
        self._scan_stages()
        #: per stage, the name of its kind ("fifo", "ps", "delay", "flows": a ps stage some run holds with another, "step")
        self.kind_names = tuple(_kind_name(s, stage, self.flow_stages) for s, stage in enumerate(program.stages))
        #: per stage, its kind's rules and readers (stages.StageKind)
        self.stage_kinds = tuple(kinds.get(name) for name in self.kind_names)
        self.compiler = compiler(program, make_observables(self))
        compile_ = self.compiler.compile
        self.capacities = tuple(compile_(s.kind.capacity) if isinstance(s.kind, ir.Ps) else None for s in program.stages)
        self._check_flow_capacities()
        self.evict_keys = tuple(None if p.evict is None else tuple(compile_(k) for k in p.evict) for p in program.pools)
        #: per pool evicting by keys, whether every key reads only its entry (entry_local): then an eviction
        #: changes no key but the evicted entry's, which lets the fast engine's make_room_by keep them
        self.evict_local = tuple(p.evict is not None and all(entry_local(k) for k in p.evict) for p in program.pools)
        #: per pool, a memo of its entries' eviction keys by (release order, units), for keys that read
        #: nothing but their entry's size and release time (ENTRY_STATIC): an entry's keys then change
        #: only with its size, at any time (the fast engine's make_room_by); None for other pools
        self.evict_memo = tuple({} if p.evict is not None and all(entry_local(k, ENTRY_STATIC) for k in p.evict)
                                else None for p in program.pools)
        #: each gauge's expression, compiled (measure.read_gauges)
        self.gauge_reads = tuple(compile_(g.expr) for g in program.gauges)
        self.queue_keys = tuple(None if p.queue is None else tuple(compile_(k) for k in p.queue) for p in program.pools)
        self.spill = tuple(None if p.spill is None else (p.spill.to, p.spill.via, compile_(p.spill.work), compile_(p.spill.when))
                           for p in program.pools)
        self.lifo = tuple(p.preempt is not None for p in program.pools)
        #: per pool, its preemption keys compiled when they are not lifo's (``preempt by``), else None
        self.preempt_keys = tuple(None if p.preempt is None or p.preempt == ir.LIFO_KEYS
                                  else tuple(compile_(k) for k in p.preempt) for p in program.pools)
        #: per pool, whether a preempted hold re-enters its queue by the keys (``requeue by key``)
        self.requeue_key = tuple(p.requeue == "Key" for p in program.pools)
        #: per pool, the step stages whose memory it is (their residents are its preemption victims)
        self.engines_of_memory = tuple(tuple(s for s, stage in enumerate(program.stages)
                                             if isinstance(stage.kind, ir.Step) and stage.kind.memory == p)
                                       for p in range(len(program.pools)))
        #: the step stages, in declaration order (settle tries them in this order)
        self.engines = tuple(s for s, stage in enumerate(program.stages) if isinstance(stage.kind, ir.Step))
        #: a step stage has ``schedule ahead`` (session/hold-exit then asks step/park's premise)
        self.ahead = any(stage.kind.schedule_ahead for stage in program.stages if isinstance(stage.kind, ir.Step))
        #: per stage, a step stage's compiled parts (StepFacts), None for another kind
        self.steps = tuple(StepFacts(self, s, stage) if isinstance(stage.kind, ir.Step) else None
                           for s, stage in enumerate(program.stages))
        #: per pool, its KV cache groups' facts (``groups (full, window (W))``: windows.GroupFacts), None for a
        #: pool of one full group (docs/design/sliding-window.md)
        self.kv_groups = tuple(group_facts(program, p) for p in range(len(program.pools)))
        self.stream_arrivals = derive_stream(self.seed, ("arrivals",))
        self.stream_workload = derive_stream(self.seed, ("workload",))
        self.stream_machine = derive_stream(self.seed, ("machine",))
        self.stream_sessions = derive_stream(self.seed, ("session",))
        self._scan_holds()
        self.closed = isinstance(program.arrival, ir.Closed)
        #: whether any expression reads the online estimates (price, est_*): only then do completions feed them
        self.reads_estimates = _reads_estimates(program)
        #: a new session's attributes before init, and its continuation: the session block
        self.blank_attrs = (0.0,) * len(program.attrs)
        self.session_frames = (Frame(program.session, PLAIN, None, 0),)
        #: installed by the driver (driver.build_machine), once, before the run:
        #: per block, its statements with their rules and compiled expressions (sessions.Op)
        self.ops: tuple = ()
        #: c -> c at its first pending event's time, the event taken off (time/advance)
        self.take_first_event = None
        #: each event kind -> its rule (m, c, a, b) -> c
        self.event_rules: dict = {}
        #: (m, c, pool, need, stmt) -> c: evictions until the need fits (pools.make_room, or its fast form)
        self.make_room = None
        #: (m, c) -> c: the clean-up after every event (settle.settle, or its fast form)
        self.settle = None
        #: the fast engine's (semantics/fast/forms.py): (m, c, serial) -> c, settle with ``serial`` the one ready
        #: session (settle_ready); (c, t) -> the areas at ``t`` (make_areas_at); each event kind -> the driver's
        #: step at it as one form (m, c, a, b) -> c (event_steps); none in the definition's machine
        self.settle_ready = None
        self.areas_at = None
        self.event_steps: dict = {}

    # -- the static facts ---------------------------------------------------

    def _scan_stages(self) -> None:
        """The stages some run holds with another (flows)."""
        flow_stages: set[int] = set()
        for block in self.program.blocks:
            for stmt in block:
                if isinstance(stmt, ir.Run) and stmt.also:
                    for ref in (stmt.stage,) + tuple(stmt.also):
                        flow_stages.update(range(ref.base, ref.base + ref.count))
        self.flow_stages = frozenset(flow_stages)

    def _check_flow_capacities(self) -> None:
        """A stage shared by flows is ps(φ) with a constant φ above 0 (seed 002 §3, Stages)."""
        self.flow_capacity = {}
        for s in sorted(self.flow_stages):
            kind = self.program.stages[s].kind
            if not isinstance(kind, ir.Ps):
                raise RunError(f"stage {self.stage_name(s)} is held by a run over several stages, so it must be ps(φ) with a constant φ")
            env = Env(None)
            env.present = 1.0
            try:
                phi = self.capacities[s](env)
            except (AttributeError, RunError):
                phi = math.nan
            if not (phi > 0 and math.isfinite(phi)):
                raise RunError(f"stage {self.stage_name(s)} is held by a run over several stages: its capacity must be a constant above 0")
            self.flow_capacity[s] = phi

    def _scan_holds(self) -> None:
        """The holds, compiled; which pools a change of a pool can unblock; which queues are volatile."""
        program = self.program
        waits_at: dict[int, set[int]] = {}  # pool -> pools whose queue may hold a hold needing it
        volatile: set[int] = set()
        for b, block in enumerate(program.blocks):
            for i, stmt in enumerate(block):
                if isinstance(stmt, ir.Hold):
                    self.holds[(b, i)] = CompiledHold(self.compiler, stmt)
                    first = stmt.pools[0].ref
                    members = [range(p.ref.base, p.ref.base + p.ref.count) for p in stmt.pools]
                    for q in (q for r in members for q in r):
                        waits_at.setdefault(q, set()).update(range(first.base, first.base + first.count))
                    header = [p.units for p in stmt.pools] + [p.reserve for p in stmt.pools if p.reserve] + (
                        [stmt.reuse] if stmt.reuse else [])
                    own = {q for r in members for q in r}
                    if any(_reads_changing_state(e, own) for e in header):
                        volatile.update(range(first.base, first.base + first.count))
        for p, pool in enumerate(program.pools):
            if pool.queue is not None:
                volatile.add(p)
        self.dependents = tuple(tuple(sorted({q} | waits_at.get(q, set()))) for q in range(len(program.pools)))
        self.volatile = frozenset(volatile)
        #: per pool: whether a stage serves it (``admit via``), so that settle does not retry its admissions
        self.admitted_via_stage = tuple(p.admit_via is not None for p in program.pools)
        self.keeps_ended_attrs = any(p.evict is not None or p.spill is not None for p in program.pools)
        #: no session can hold a pool twice (``holders(p)`` is then the holdings' count; fast forms only)
        self.holds_once = holds_once(program)

    # -- names for messages -------------------------------------------------

    def pool_name(self, p: int) -> str:
        pool = self.program.pools[p]
        return pool.name if pool.index is None else f"{pool.name}[{pool.index}]"

    def stage_name(self, s: int) -> str:
        stage = self.program.stages[s]
        return stage.name if stage.index is None else f"{stage.name}[{stage.index}]"

    # -- shared helpers -----------------------------------------------------

    def round_up(self, p: int, units: float) -> float:
        """``units`` up to whole blocks of pool ``p``; a count of blocks past the largest
        double (1e308 units of blocks of 0.5) is ``units`` itself, a whole number at that size."""
        b = self.block_sizes[p]
        blocks = units / b if b else math.inf
        return units if not math.isfinite(blocks) else math.ceil(blocks - EPSILON) * b

    def round_down(self, p: int, units: float) -> float:
        """``units`` down to whole blocks of pool ``p`` (as round_up, past the largest double: ``units``)."""
        b = self.block_sizes[p]
        blocks = units / b if b else math.inf
        return units if not math.isfinite(blocks) else math.floor(blocks + EPSILON) * b

    def notify(self, rule: str, c: Configuration, fields: dict) -> None:
        """Report an applied rule to the step-trace observer."""
        self.observer(rule, c, fields)


def follow_up(c: Configuration, *items: tuple) -> Configuration:
    """``c`` with ``items`` (each (rule name, its arguments...)) after the follow-up work the rule being
    applied has left so far, in the order given (Configuration.work; settle.drain puts them all before the
    work that waited)."""
    return c._replace(work=c.work + items)


def runner_up(ranked: list, chosen) -> tuple | None:
    """For the step trace: of ``ranked`` ((key, who) pairs in the order a choice read them), the least but
    ``chosen``'s, the first found with the rules' own comparison (a strict ``<``); None if there is no other."""
    second = None
    for item in ranked:
        if item[1] != chosen and (second is None or item[0] < second[0]):
            second = item
    return second


def session_env(m: Machine, c: Configuration, s: Session, stmt=None) -> Env:
    return Env(c, s.attrs, s.serial, s.stream, s.draws, stmt)


#: The context variables an eviction key reads of its entry alone (seed 002 §2: size, age, last, waiting),
#: and now, which no eviction changes.
ENTRY_CONTEXT = frozenset({"Size", "Age", "Last", "Queued", "Now"})
#: Those of them no time or session changes: an entry's size and release time.
ENTRY_STATIC = frozenset({"Size", "Last"})
#: The functions of numbers alone (no pool or stage read).
PURE_FUNCTIONS = frozenset({"Min", "Max", "Abs", "Floor", "Ceil", "Sqrt", "Exp", "Ln", "Pow"})


def entry_local(e, context: frozenset = ENTRY_CONTEXT) -> bool:
    """Whether expression ``e`` reads only numbers, the context variables in
    ``context`` and (with ENTRY_CONTEXT) attributes, and draws nothing. With
    ENTRY_CONTEXT its value for an entry does not change while a room is
    made, but for the entry an eviction shrinks; with ENTRY_STATIC it changes
    only with the entry's size (an attribute may be set again, now moves)."""
    if isinstance(e, ir.Num):
        return True
    if isinstance(e, ir.Attr):
        return context is ENTRY_CONTEXT
    if isinstance(e, ir.Ctx):
        return e.var in context
    if isinstance(e, ir.Unary):
        return entry_local(e.operand, context)
    if isinstance(e, ir.Binary):
        return entry_local(e.left, context) and entry_local(e.right, context)
    if isinstance(e, ir.Cond):
        return entry_local(e.test, context) and entry_local(e.then, context) and entry_local(e.otherwise, context)
    if isinstance(e, ir.Call):
        return e.fun in PURE_FUNCTIONS and all(isinstance(a, ir.ExprArg) and entry_local(a.expr, context)
                                               for a in e.args)
    return False  # a draw (Sample), or anything else


def with_draws(s: Session, env: Env) -> Session:
    """The session with its stream advanced to where ``env`` left it."""
    return s if env.draws == s.draws else s._replace(draws=env.draws)


_set_ready = setter(Session, "status", "readies", "job", "growth", "pending")
_set_sessions_ready = setter(Configuration, "sessions", "ready")


def ready_session(c: Configuration, s: Session) -> Session:
    """The premise and the session of making ``s`` ready (make_ready): the
    backstop against a session made ready too often at one instant."""
    instant, count = s.readies
    count = count + 1 if instant == c.time else 1
    if count > MAX_READIES_PER_INSTANT:
        raise RunError(f"session {s.serial} became ready {MAX_READIES_PER_INSTANT} times at one instant "
                       f"(time {c.time:g}): the program makes no progress", time=c.time)
    return _set_ready(s, READY, (c.time, count), None, None, None)


def make_ready(m: Machine, c: Configuration, s: Session, **changes) -> Configuration:
    """``s`` becomes ready: it joins the end of the ready sequence (in the
    same update as ``changes``, other fields of the configuration)."""
    s = ready_session(c, s)
    if not changes:
        return _set_sessions_ready(c, c.sessions.set(s.serial, s), ready_push(c.ready, s.serial))
    return c._replace(sessions=c.sessions.set(s.serial, s), ready=ready_push(c.ready, s.serial), **changes)


def is_warm(m: Machine, c: Configuration) -> bool:
    return c.time >= m.warmup


def count_pool(c: Configuration, p: int, **increments) -> Configuration:
    """Add ``increments`` to pool ``p``'s statistics (by field name)."""
    stats = c.statistics
    counts = list(stats.pools[p])
    for name, amount in increments.items():
        counts[_POOL_STATS_INDEX[name]] += amount
    return _set_statistics(c, _set_pool_stats(stats, replace_at(stats.pools, p, build(PoolStats, counts))))


_POOL_STATS_INDEX = {name: i for i, name in enumerate(PoolStats._fields)}
_set_statistics = setter(Configuration, "statistics")
_set_pool_stats = setter(Statistics, "pools")


def explain_pool(c: Configuration, p: int, line: str, limit: int = 5) -> Configuration:
    stats = c.statistics
    old: PoolStats = stats.pools[p]
    if len(old.explanations) >= limit:
        return c
    new = old._replace(explanations=old.explanations + (line,))
    return c._replace(statistics=stats._replace(pools=replace_at(stats.pools, p, new)))


def mark_dirty(m: Machine, c: Configuration, p: int) -> Configuration:
    """Pool ``p`` changed: it and the pools whose waiting holds need it are retried at the next settle."""
    deps = m.dependents[p]
    if c.dirty.issuperset(deps):
        return c
    return c._replace(dirty=c.dirty.union(deps))


def fail(message: str, c: Configuration, stmt=None):
    raise RunError(message, stmt=stmt, time=c.time)


def _reads_estimates(node) -> bool:
    """Whether an IR value (the program, a part of it) holds a call of price or est_*: a search of its records
    (their fields), tuples and lists, each record type's field names looked up once (dataclasses.fields builds
    its answer at every call: 0.003 G instructions less in the replay's process, cachegrind 2026-12-04)."""
    stack = [node]
    while stack:
        node = stack.pop()
        if isinstance(node, (tuple, list)):
            stack.extend(node)
            continue
        if isinstance(node, ir.Call) and node.fun in ESTIMATE_READERS:
            return True
        names = _FIELD_NAMES.get(type(node))
        if names is None:
            names = _FIELD_NAMES[type(node)] = (tuple(f.name for f in dataclasses.fields(node))
                                                if dataclasses.is_dataclass(node) and not isinstance(node, type)
                                                else ())
        for name in names:
            stack.append(getattr(node, name))
    return False


#: each type _reads_estimates met -> its dataclass fields' names (() for any other value: a leaf)
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _reads_changing_state(e, own_pools: set[int]) -> bool:
    """Whether an admission header can change value without its own pools
    changing: it reads the time, draws, or reads another pool's or a stage's
    live state. Such a queue is retried at every settle."""
    if isinstance(e, ir.Ctx):
        return e.var != "Waited"
    if isinstance(e, ir.Sample):
        return True
    if isinstance(e, ir.Call):
        if e.fun in _LIVE_STATE_CALLS:
            return True
        if e.fun == "CachedIn":
            ref = e.args[0].ref
            if not set(range(ref.base, ref.base + ref.count)) <= own_pools:
                return True
        return any(_reads_changing_state(a.expr, own_pools) for a in e.args if isinstance(a, ir.ExprArg))
    if isinstance(e, (ir.Num, ir.Attr)):
        return False
    if isinstance(e, ir.Cost):
        return _reads_changing_state(e.expr, own_pools)
    if isinstance(e, ir.Unary):
        return _reads_changing_state(e.operand, own_pools)
    if isinstance(e, ir.Binary):
        return _reads_changing_state(e.left, own_pools) or _reads_changing_state(e.right, own_pools)
    if isinstance(e, ir.Cond):
        return any(_reads_changing_state(x, own_pools) for x in (e.test, e.then, e.otherwise))
    return True


def _kind_name(s: int, stage: ir.Stage, flow_stages: frozenset) -> str:
    """The kind of stage ``s``: "fifo", "ps", "delay" (ps(present): every job at rate 1), "flows" (a ps stage some
    run holds with another) or "step"."""
    if s in flow_stages:
        return "flows"
    if isinstance(stage.kind, ir.Fifo):
        return "fifo"
    if isinstance(stage.kind, ir.Ps):
        return "delay" if stage.kind.capacity == ir.Ctx("N") else "ps"  # delay is written ps(present)
    return "step"


def holds_once(program: ir.Program) -> bool:
    """Whether every holding in a pool is another session's in every run: a
    holding joins a pool only at the admission of a hold, one per pool the
    hold names, and leaves it at the hold's exit or release unless a lease
    keeps it. So a session holds a pool twice only if some hold has a lease,
    names two pools that can be the same one (a family's members included),
    or is entered inside another hold's body; a program with none of these
    holds each pool at most once per session. ``holders(p)`` is the count of
    sessions (observables.holding_sessions); with this fact the fast forms
    count the holdings instead, and the written-out time/advance is checked
    against the definition on every reachable configuration
    (tests/test_smallstep_properties.py)."""
    def inside(block: int) -> bool:  # a hold anywhere in the block or the blocks it opens
        for stmt in program.blocks[block]:
            if isinstance(stmt, ir.Hold):
                return True
            if isinstance(stmt, ir.Branch) and (inside(stmt.then_block) or inside(stmt.else_block)):
                return True
            if isinstance(stmt, (ir.Loop, ir.While)) and inside(stmt.block):
                return True
        return False

    for block in program.blocks:
        for stmt in block:
            if not isinstance(stmt, ir.Hold):
                continue
            if stmt.lease is not None or inside(stmt.body):
                return False
            named = [q for use in stmt.pools for q in range(use.ref.base, use.ref.base + use.ref.count)]
            if len(named) != len(set(named)):
                return False
    return True
