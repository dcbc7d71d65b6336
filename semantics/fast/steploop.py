"""The fast engine's own loop for a step engine and its pools: lib/vllm.sq's
engine (the request pool served by the engine, the KV pool of blocks with an
LRU cache of each session's prefix) and the sessions that hold them, as the
oracle's scenario and replay programs run them (``applies`` says which
programs, field by field).

The definition (semantics/smallstep) builds one immutable configuration per
rule, and the fast forms (step.py, flow.py) still build one per few rules;
here one run keeps the same facts in mutable state of its own: the pending
events in a heap on their (time, sequence number) keys (the end of the
iteration in flight beside it, with its own key), the sessions in a
dict (``_Session``: the definition's Session record's fields, updated in
place; the record is built where a rule of the definition takes one, and for
the last configuration), the ready sessions in a deque, each pool's
allocated and cached units, its queue, holders and cache entries in lists
(the definition's Waiting, Holding and CacheEntry records; each session's
live entry and each holding also found by key), the step stage's residents
in a list (``_Resident``, its remaining tokens lowered in place; in the
definition's order: their session's latest admission, then job id) and the
iteration being formed in local variables, a delay stage's jobs in a dict,
the statistics in lists and the areas in a closure's variables
(``_integrator``). Every rule it applies is the
definition's, written out on that state with the same arithmetic in the same
order:

| here | the definition's rules |
|---|---|
| ``_advance`` | time/advance (measure.integrate: each area plus its level times dt) |
| ``_arrive`` | workload/arrive and the open workload's arrival event (arrival_event, draw_gap) |
| ``_run_session`` | settle.run_session: session/set, session/observe, session/turn, session/run with stage/delay-enter or stage/step-enter, session/hold-enter (pools.enter_hold), the hold's exit (pool/release, session/hold-exit), session/end (and workload/arrive under ``closed``); the local rules (branch, loop, while, choose, a block's end) are the definition's own functions |
| ``_form`` | settle.form_iteration: step/iteration-start, step/schedule, pool/grow and step/grow (a growth that fits), step/admit with pool/admit (pool/consume, the LRU evictions of make_room), step/admit-stop, step/iteration, step/idle, and under schedule ahead step/apply |
| ``_end_iteration`` | step/iteration-end (and its inter-token bookkeeping; under schedule ahead the sessions finishing), stage/step-complete |
| the hold's exit in ``_run_session`` | under schedule ahead step/park: a session finishing at the engine waits at the exit of its hold on the engine's memory until the next iteration is formed |
| ``_settle`` | settle's loop: the ready sessions, then an iteration on the idle engine when no other event is pending now |

The definition's readers are applied to a view of the state (``_View``: the
time, the sessions, the pools and stages as objects of the same fields): the
expressions and the pool and stage queries they read. Some are written out
on the loop's state with the same arithmetic: admissible (``_admissible``: a
head's header, with at admission), budget_plan and the context_before it
reads (``_budget_plan``, ``_context``), cost_context and want_of; the holds'
headers are compiled again (``_compile_holds``) with readers of cachedin (an
entry by its owner) and budget_left (``_budget_plan``) on the loop's state.
At the end the last configuration's statistics, samples, areas and counts
are built for measure.build_result.

What the loop does not write out it does not approximate: a preemption, a
growth that waits, a rejected hold, a session that ends inside a hold, and
every RunError or limit (its message, statement and time are the
definition's to give) abandon the loop's run, and the program runs from its
start on the fast forms (engine.py), which give the answer; a run costs
then what the loop spent until it gave up, on top. tests/test_fast_steploop.py
holds the loop to the definition (the oracle corpora's scenario programs
and generated step-engine programs over the knobs' ranges, byte for byte,
the loop counted as taken) and docs/campaigns.md records its campaign.
"""

from __future__ import annotations

import bisect
import math
import operator
from collections import deque
from heapq import heappop, heappush

import immutables

from .. import ir
from ..errors import RunStop
from ..results import RunResult
from ..smallstep.configuration import (AT_STAGE, DECODE, FINISHING, HOLD, LOOP, PLAIN, PREFILL, QUEUED, READY, ActiveHold, Allocation,
                                       CacheEntry, Frame, Holding, PendingHold, PoolStats, Session, StageStats,
                                       Waiting, Workload, innermost_hold)
from ..smallstep.driver import PROGRESS_EVERY, initial_configuration
from ..smallstep.machine import EPSILON, MAX_QUIET_STATEMENTS, MAX_READIES_PER_INSTANT, CompiledHold, Machine
from ..smallstep.observables import holding_sessions
from ..smallstep.pools import MAX_EVICTIONS, Admission, select_head
from ..smallstep.rng import derive_stream, member_stream, sample_exp
from ..smallstep.sessions import end_session, exit_block, exit_hold_body, loop_again
from ..smallstep.stages.delay import DelayJob
from ..smallstep.stages.step import Resident, StepStats, _read, _stage_env
from ..smallstep.values import Env, resolve_index
from ..smallstep.workload import arrival_script, explicit_attrs, next_turn
from .flow import _HOLDING_DEFAULTS
from .loop import run_walk
from .pools import _EXACT, _set_entry_units, _whole, add_evicted_units, evict_lru
from .records import build, setter
from .step import _non_default, _set_advanced, _set_allocations, _set_position_advanced, _set_units
from .values import constant

STEP, DELAY = "step", "delay"

#: the statements the loop runs itself (the local ones it hands to their rules)
_SET, _OBSERVE, _RUN, _HOLD, _TURN, _END, _EXIT_HOLD, _LOCAL, _BRANCH, _LOOP, _LOOP_AGAIN, _BLOCK_EXIT = range(12)
#: the comparisons of a branch's guard written into a run (_written_run)
_COMPARISONS = frozenset({"Lt", "Le", "Gt", "Ge", "Eq", "Ne"})
#: a run of set and observe statements (and branches of nothing else), from one to the last of the run, as one
#: written function (_written_run); such a statement before it is first reached
_WRITTEN, _UNWRITTEN = 12, 13
#: the fields of each statement, stage and arrival the loop knows: a program with another one (a setting an
#: extension adds) not at its default is not the loop's (step._non_default)
KNOWN_FIELDS = {ir.Set: {"slot", "expr"}, ir.Observe: {"index", "expr"}, ir.Run: {"stage", "mode", "work", "growing", "also"},
                ir.Hold: {"pools", "reuse", "body", "cache", "lease", "content"}, ir.Turn: set(), ir.End: set(),
                ir.Branch: {"guard", "then_block", "else_block"}, ir.Loop: {"block"}, ir.While: {"guard", "block"},
                ir.Choose: {"var", "count", "key"}, ir.Stage: {"name", "index", "kind"}, ir.Poisson: {"rate"},
                ir.Renewal: {"gap"}, ir.Closed: {"n"}, ir.Batch: {"n"}, ir.Sessions: {"sessions"}}
_STATEMENTS = {ir.Set: _SET, ir.Observe: _OBSERVE, ir.Run: _RUN, ir.Hold: _HOLD, ir.Turn: _TURN, ir.End: _END,
               ir.Branch: _BRANCH, ir.Loop: _LOOP, ir.While: _LOCAL, ir.Choose: _LOCAL}
#: a block's end by its rule (sessions.end_op); a while's end is the definition's rule (_LOCAL)
_BLOCK_ENDS = {end_session: _END, exit_hold_body: _EXIT_HOLD, loop_again: _LOOP_AGAIN, exit_block: _BLOCK_EXIT}

#: the loop's setters (those the fast forms made for the same records and fields are theirs, imported above:
#: each is Python source compiled at import, 0.3 ms)
_set_attrs_frames_pc_draws = setter(Session, "attrs", "frames", "pc", "draws")
_set_entry_dead = setter(CacheEntry, "owner", "units")
_INF = math.inf
_LOW = -_EXACT
_new = object.__new__
#: an Admission's content (the hold's content clause) by default: the loop's pools share no prefixes
_ADMISSION_CONTENT = Admission._field_defaults["content"]


_SESSION_FIELDS = Session._fields
_session_values = operator.attrgetter(*_SESSION_FIELDS)


class _Session:
    """A session (the definition's Session record's fields), updated in place while the loop runs it: the
    record a rule of the definition takes, and the last configuration holds, is built from it (``record``)."""

    __slots__ = _SESSION_FIELDS

    def record(self) -> Session:
        return build(Session, _session_values(self))

    def assign(self, record: Session) -> None:
        """Its fields set to ``record``'s."""
        for name, value in zip(_SESSION_FIELDS, record):
            setattr(self, name, value)


def _mutable(record: Session) -> _Session:
    s = _new(_Session)
    s.assign(record)
    return s


class _Resident:
    """A resident (the definition's Resident record's fields, which the readers read by name), its remaining
    tokens lowered in place as iterations serve it."""

    #: with ``growing``, the hold and allocation it grows (innermost_hold), which stay while it is a resident, and
    #: its position once an iteration advanced it and its units once _form read them or a growth grew them
    #: (None: the allocation's), written into the allocation when its run completes (_end_iteration; the units
    #: at once where the memory's units per resident are read and the memory holds more than this allocation
    #: of the session: _grow);
    #: while an iteration serves it, its assignment's tokens (the definition's Assignment: its job id, serial
    #: and mode are the resident's), and the number of the pass that served it last (``served``: _form)
    __slots__ = Resident._fields + ("hold", "alloc", "position", "units", "tokens", "served")

    def __init__(self, job_id, owner, arrived, started, spill, mode, remaining, growing):
        self.job_id, self.owner, self.arrived, self.started = job_id, owner, arrived, started
        self.spill, self.mode, self.remaining, self.growing = spill, mode, remaining, growing
        self.units, self.served = None, -1


class Fallback(Exception):
    """The loop met what it does not write out: the run is the fast forms' (the module's docstring)."""


class _View:
    """The state as the definition's readers see a configuration: its time, sessions, pools and stages."""

    __slots__ = ("time", "sessions", "pools", "stages")


class _Pool:
    """A pool's state (PoolState's fields the readers read), mutable."""

    __slots__ = ("cap", "block", "allocated", "cached", "holders", "entries", "queue", "growers", "table", "groups",
                 "whole", "small_excess", "own", "holding")

    def __init__(self, cap, block):
        self.cap, self.block = cap, block
        #: make_room_lru's premise of runs of whole blocks, as far as the pool's constants go
        self.whole = bool(block) and _whole(block) and _whole(cap)
        #: whether a need that fits (allocated + cached + need <= cap + EPSILON, each at least 0) is always within
        #: check_evictions' limit: no blocks, or blocks of at least one unit in a cap within +-_EXACT (the
        #: excess is then at most EPSILON and a few units of rounding)
        self.small_excess = not block or (block >= 1.0 and cap <= _EXACT)
        self.allocated = self.cached = 0.0
        self.holders, self.entries, self.queue = [], [], []
        self.growers, self.table, self.groups = (), None, 0
        #: each session's live cache entry among ``entries`` (own_entry_index's answer, by serial)
        self.own = {}
        #: each holding among ``holders`` by (serial, hold id)
        self.holding = {}


class _StepState:
    """A step stage's state as the readers read it: its residents, the iteration (forming or in flight), and
    under schedule ahead the sessions finishing and parked (no load)."""

    __slots__ = ("jobs", "iteration", "parked", "loads", "finishing")

    def __init__(self):
        self.jobs, self.iteration, self.parked, self.loads, self.finishing = [], None, [], (), []


class _DelayState:
    __slots__ = ("jobs", "by_id")

    def __init__(self):
        self.by_id = {}
        self.jobs = self.by_id.values()  # start order (a dict keeps its insertion order)


class _Formed:
    """What cost_context and busy(s) read of an iteration: its context and what it assigned, the residents it
    serves in the order served (each with its assignment's tokens: _Resident.tokens), and the tokens of each,
    and of each prefill chunk with its attention term, in that order (the terms of cost_context's sums)."""

    __slots__ = ("context", "assigned", "tokens", "prefilled", "attention")  # (set by _form)


def applies(m: Machine) -> bool:
    """Whether ``m``'s program is of the shape the loop runs: one step stage whose iterations the fast forms
    form (step.applies: serve admission, no speculate, every field known), synchronous or ahead (without
    defer free or load remote), the other stages delay stages; pools that the fast forms of pool rules know (step.pools_known), none sharing
    prefixes, with KV cache groups, a spill or eviction by keys (queue keys: the loop's; requeue by key: a
    preemption, which the loop gives up); every hold's first
    pool admitted by the engine, without lease; the statements set, observe, turn, run (plain at a delay
    stage, prefill or decode at the step stage), hold, end and the local ones; a workload of sessions
    (``arrive poisson``, ``renewal``, ``closed`` or ``batch``, a trace or none) without init or turn block; no
    gauge, estimate, flow or observer."""
    program = m.program
    if (m.observer or program.gauges or m.reads_estimates or m.flow_stages or not m.fast_pools
            or len(m.engines) != 1 or not all(m.fast_steps[s] for s in m.engines)):
        return False
    s = m.engines[0]
    facts = m.steps[s]
    if facts.defer or facts.remote is not None or facts.keys or facts.exclusive or facts.spec \
            or facts.slots or facts.lookahead or facts.within:
        return False
    if any(name not in (STEP, DELAY) for name in m.kind_names):
        return False
    for p, pool in enumerate(program.pools):
        if (pool.share_prefixes or pool.groups or m.spill[p] is not None or m.evict_keys[p] is not None
                or m.kv_groups[p] is not None):
            return False
    if not isinstance(program.arrival, (ir.Poisson, ir.Renewal, ir.Closed, ir.Batch, ir.Sessions)) or _unknown(
            program.arrival) or any(_unknown(stage) for stage in program.stages):
        return False
    for b in (program.init, program.turn):  # a workload block sets and observes
        if b is not None and any(not isinstance(stmt, (ir.Set, ir.Observe)) for stmt in program.blocks[b]):
            return False
    for hold in m.holds.values():
        first = hold.refs[0]
        if hold.lease_ref is not None or hold.content or any(
                not m.admitted_via_stage[q] for q in range(first.base, first.base + first.count)):
            return False
    for b, block in enumerate(program.blocks):
        if b in (program.init, program.turn):
            continue
        for stmt in block:
            kind = _STATEMENTS.get(type(stmt))
            if kind is None or _unknown(stmt):
                return False
            if kind == _RUN:
                if stmt.also or stmt.stage.index is not None:
                    return False
                name = m.kind_names[stmt.stage.base]
                if (name == DELAY) != (stmt.mode == "Plain") or (name == STEP and stmt.growing is not None
                                                               and stmt.growing.index is not None):
                    return False
    return True


#: the context variables of a step stage's cost: the residents before the iteration and what it scheduled, each
#: a finite number at least 0 in the loop (counts, and sums of finite units and tokens; the attention may
#: overflow: _close checks it)
_COST_CONTEXT = frozenset({"Nres", "Ndec", "Kvb", "Kvp", "Ntok", "Npre", "Attn"})


def _constant_cost(e):
    """(value, the context variables read) when cost expression ``e`` is a sum of numbers and of zeros times
    context variables (lib/vllm.sq's step clock: ``1 + 0 * decoders + ...``): for any finite values of them
    at least 0 each product is that zero, so the definition's closures give ``value`` (summed in the same
    order); else None."""
    if type(e) is ir.Cost:
        return _constant_cost(e.expr)
    if type(e) is ir.Num:
        return (e.value, frozenset()) if math.isfinite(e.value) else None
    if type(e) is ir.Binary and e.op == "Add":
        left, right = _constant_cost(e.left), _constant_cost(e.right)
        if left is None or right is None:
            return None
        value = left[0] + right[0]
        return (value, left[1] | right[1]) if math.isfinite(value) else None
    if type(e) is ir.Binary and e.op == "Mul":
        for zero, var in ((e.left, e.right), (e.right, e.left)):
            if type(zero) is ir.Num and zero.value == 0.0 and type(var) is ir.Ctx and var.var in _COST_CONTEXT:
                return zero.value, frozenset({var.var})  # (a signed zero times a finite x >= 0: that zero)
    return None


def _unknown(node) -> bool:
    """Whether IR record ``node`` has a field the loop does not know set to other than its default (a record
    of a type it does not know: yes)."""
    known = KNOWN_FIELDS.get(type(node))
    return known is None or _non_default(node, known)


def run(m: Machine, progress=None) -> RunResult | None:
    """Run ``m``'s program (``applies(m)``) to its end: the RunResult the definition's run gives; None when the
    loop met what it does not write out (the caller runs the program on the fast forms). The collector is off
    while it runs, as in driver.run_machine."""
    return run_walk(m, progress, _walk)


def _walk(m: Machine, progress):
    """The configuration the step loop's walk of ``m`` ends in; None where it meets what it does not write
    out (a Fallback, or a stop the definition reports with its own words)."""
    try:
        return _Run(m, progress).walk()
    except (Fallback, RunStop):
        return None


class _Run:
    """One run's state and the rules applied to it. (Its fields are slots: an instance of more than 30
    attributes has a dictionary of its own, whose every read CPython 3.11 looks up by name.)"""

    __slots__ = ("ahead", "areas_now", "arrivals_draws", "constant_budget", "constant_chunk", "constant_cost",
                 "cost_env", "cost_reads_attention", "count", "due", "ended", "engine", "events", "facts", "forms",
                 "gaps", "generated", "held", "hold_env", "hold_pools", "holds", "holds_once", "in_flight",
                 "integrate", "last_token", "m", "needs_context", "next_serial", "now", "pool_counts", "pools",
                 "program", "progress", "ready", "replaced", "s", "samples", "seq", "served_queues", "session_env",
                 "sessions", "stage_counts", "stages", "step_counts", "table", "taken", "turns", "view", "warmup",
                 "workload_draws")

    def __init__(self, m: Machine, progress):
        self.m = m
        self.progress = progress
        program = m.program
        self.program = program
        self.s = m.engines[0]
        self.facts = m.steps[self.s]
        self.warmup = m.warmup
        view = self.view = _View()
        view.time = 0.0
        self.sessions = view.sessions = {}
        self.pools = view.pools = [_Pool(p.cap, p.block) for p in program.pools]
        self.stages = view.stages = [_StepState() if name == STEP else _DelayState() for name in m.kind_names]
        self.engine = self.stages[self.s]
        #: the queues of the pools the engine serves, in its order (each pool's queue is one list throughout)
        self.served_queues = [self.pools[p].queue for p in self.facts.served]
        self.ahead = self.facts.ahead
        self.ready = deque()
        self.events = []
        self.now = 0.0
        self.seq = self.taken = self.ended = self.turns = 0
        self.next_serial = self.generated = self.arrivals_draws = self.workload_draws = 0
        self.replaced = (-1.0, 0)
        self.samples = []
        n_pools, n_stages = len(program.pools), len(program.stages)
        # PoolStats' counts per pool (wait_sum, wait_count, admissions, evicted_entries, evicted_units)
        self.pool_counts = [[0.0, 0, 0, 0, 0.0] for _ in range(n_pools)]
        self.stage_counts = [[0, 0.0, 0.0] for _ in range(n_stages)]  # completed, wait_sum, service_sum
        # the step stage's counts (StepStats: iterations ... offered), its last tokens and gaps (oldest first)
        self.step_counts = [0, 0, 0, 0, 0, 0.0, 0, 0, 0.0]
        self.count = 0  # iterations so far
        self.forms = 0  # iterations formed, idle ones too (_form)
        self.last_token = {}
        self.gaps = []
        self.in_flight = None  # the iteration in flight (_Formed), None: idle
        self.due = None  # its end event's (time, sequence number)
        #: a resident's session -> (its holds, the units they hold on the memory, whether in one allocation):
        #: _context's, kept by _grow and _end_iteration when they replace the holds
        self.held = {}
        self.cost_env = Env(self.view)
        self.table = self._table()
        self.holds_once = m.holds_once
        self.integrate, self.areas_now = self._integrator()
        self.holds = self._compile_holds()
        #: the pools of each hold that names them all without an index
        self.hold_pools = {stmt: tuple(ref.base for ref in hold.refs) for stmt, hold in self.holds.items()
                           if all(index is None for index in hold.indices)}
        kind = program.stages[self.s].kind
        #: the budget and the chunk when each is a finite number whatever the state (values.constant), at least 0
        budget, chunk = constant(kind.budget), constant(kind.chunk)
        self.constant_budget = None if budget is None else max(0.0, budget)
        self.constant_chunk = None if chunk is None else max(0.0, chunk)
        #: the cost when it is a number whatever the iteration (_constant_cost), at least 0; whether it reads
        #: the attention (which alone of what it reads may be inf); whether an iteration must read the context
        cost = _constant_cost(kind.cost)
        self.constant_cost = None if cost is None else max(0.0, cost[0])
        self.cost_reads_attention = cost is not None and "Attn" in cost[1]
        self.needs_context = budget is None or chunk is None or cost is None

    # -- the walk (driver.walk) -------------------------------------------------------------------------------------

    def walk(self):
        """The run's last configuration (driver.walk's, with every=False), as far as build_result reads it."""
        program = self.program
        horizon = program.horizon
        limit = program.arrivals
        arrival = program.arrival
        if limit is not None and not isinstance(arrival, (ir.Poisson, ir.Renewal)):
            raise Fallback
        events = self.events
        # start_workload
        if isinstance(arrival, ir.Poisson):
            self._schedule_arrival(0.0)
        elif isinstance(arrival, ir.Renewal):
            gap, self.arrivals_draws = self._gap(self.arrivals_draws)
            self._schedule_arrival(gap)
        elif isinstance(arrival, ir.Sessions):
            for k in range(len(arrival.sessions)):
                self._arrive(explicit=k)
        else:
            for _ in range(arrival.n):
                self._arrive()
        self._settle()
        count = 0
        progress = self.progress
        # (the event taken, time/advance (_advance) and settle (_settle) written out in the loop)
        warmup, view, integrate = self.warmup, self.view, self.integrate
        ready, run_session, st = self.ready, self._run_session, self.engine
        while True:
            # the first event by (time, sequence number): the iteration in flight's end (kept beside the heap,
            # ``due``: its time and number) or the heap's first
            if self.in_flight is not None and (not events or self.due < events[0]):
                t = self.due[0]
                if not t <= horizon:
                    break
                kind = "iteration"
            elif events and events[0][0] <= horizon:
                t, _, kind, a, b = heappop(events)
            else:
                break
            now = self.now
            if t > now:  # time/advance
                dt = t - (now if now > warmup else warmup)
                if dt > 0:
                    integrate(dt)
                self.now = view.time = now = t
            self.taken += 1
            if kind == "iteration":
                self._end_iteration()
            elif kind == "delay":
                self._delay_complete(a, b)
            else:
                self._arrival_event()
            while ready:  # settle
                run_session(ready.popleft())
            if not (events and events[0][0] == now) and self.in_flight is None and (
                    st.jobs or st.parked or any(self.served_queues)):
                self._form()
                while ready:  # (none: the admitted sessions run at once)
                    run_session(ready.popleft())
            if limit is not None and self.generated >= limit and not self.sessions:
                if self.now <= program.warmup:
                    raise Fallback
                return self._configuration()
            if progress is not None:
                count += 1
                if count % PROGRESS_EVERY == 0:
                    progress(min(1.0, self.now / horizon) if horizon > 0 else 1.0)
        if limit is not None or not math.isfinite(horizon):
            raise Fallback  # the definition's errors
        if horizon > self.now:
            self._advance(horizon)
        return self._configuration()

    def _advance(self, t: float) -> None:
        """time/advance to ``t`` (measure.integrate, in the order of Configuration.areas)."""
        if t > self.now:
            warmup = self.warmup
            dt = t - (self.now if self.now > warmup else warmup)
            if dt > 0:
                self.integrate(dt)
            self.now = self.view.time = t

    def _integrator(self):
        """``integrate(dt)``: every area plus its level times ``dt`` (measure.integrate's arithmetic, in the
        order of Configuration.areas: per pool used, cached, queue, holders; per stage jobs present and its
        level; the live sessions), written out for the program as the fast forms' event taker is, the areas
        kept in the closure's own variables; and ``areas()``, their list."""
        levels = []
        members = []
        for p in range(len(self.pools)):
            members.append(f"p{p} = pools[{p}]")
            holders = f"len(p{p}.holders)" if self.holds_once else f"holding_sessions(p{p})"
            levels += [f"p{p}.allocated", f"p{p}.cached", f"len(p{p}.queue)", holders]
        lines = []
        for s, st in enumerate(self.stages):
            members.append(f"st{s} = stages[{s}]")
            lines.append(f"        n = len(st{s}.jobs)")
            levels.append("n")
            levels.append(f"(0.0 if st{s}.iteration is None else 1.0)" if type(st) is _StepState
                          else "(1.0 if n else 0.0)")
        levels.append("len(sessions)")
        names = [f"a{k}" for k in range(len(levels))]
        body = []
        n_stage_line = 0
        for k, level in enumerate(levels):
            if level == "n":  # a stage's jobs: counted once for its two areas
                body.append(lines[n_stage_line])
                n_stage_line += 1
            body.append(f"        {names[k]} += {level} * dt")
        source = "\n".join(
            ["def make(pools, stages, sessions, holding_sessions):"]
            + [f"    {x}" for x in members]
            + [f"    {' = '.join(names)} = 0.0",
               "    def integrate(dt):",
               f"        nonlocal {', '.join(names)}"]
            + body
            + ["    def areas():",
               f"        return [{', '.join(names)}]",
               "    return integrate, areas"]) + "\n"
        namespace = {}
        exec(source, namespace)
        return namespace["make"](self.pools, self.stages, self.sessions, holding_sessions)

    def _compile_holds(self) -> dict:
        """The holds' headers and cache clauses compiled again, by a compiler whose ``cachedin`` and
        ``budget_left`` read this run's state directly (an entry by its owner; the budget from the residents
        here): the definition's readers' answers (observables.cachedin, step.budget_plan), without the search
        of the pool's entries and the configuration's records. The other queries are the machine's."""
        m = self.m
        observables = dict(m.compiler.observables)
        pools = self.pools
        s_engine = self.s
        budget_plan = observables["BudgetLeft"]

        def cachedin(env, p: int) -> float:
            entry = pools[p].own.get(env.serial)
            return entry.units if entry is not None else 0.0

        def budget_left(env, s: int) -> float:
            if env.budget is not None and env.budget[0] == s:
                return env.budget[1]
            if s != s_engine:
                return budget_plan(env, s)
            return self._budget_plan()

        observables["CachedIn"], observables["BudgetLeft"] = cachedin, budget_left
        compiler = type(m.compiler)(self.program, observables)
        return {stmt: CompiledHold(compiler, hold.stmt) for stmt, hold in m.holds.items()}

    def _context(self) -> tuple:
        """context_before: residents, decoders, kv_decode, kv_prefill (no load; the parked sessions counted)."""
        memory = self.facts.memory
        sessions = self.sessions
        held = self.held
        st = self.engine
        decoders = kv_decode = kv_prefill = 0.0
        for r in st.jobs:
            if memory is None:
                units = 0.0
            else:  # step.memory_of, kept while the session's holds are the same record
                holds = sessions[r.owner].holds
                known = held.get(r.owner)
                if known is not None and known[0] is holds:
                    units = known[1]
                else:
                    on = [a.units for h in holds for a in h.allocations if a.pool == memory]
                    units = sum(on)
                    held[r.owner] = (holds, units, len(on) == 1)
            if r.mode == DECODE:
                decoders += 1.0
                kv_decode += units
            else:
                kv_prefill += units
        return float(len(st.jobs) + len(st.parked)), decoders, kv_decode, kv_prefill

    def _limits(self, context) -> tuple[float, float]:
        """The budget and the chunk, each at least 0, read with the context before the iteration (a constant
        one once: values.constant)."""
        budget, chunk = self.constant_budget, self.constant_chunk
        if budget is None or chunk is None:
            m, s, facts, view = self.m, self.s, self.facts, self.view
            env = _stage_env(view, context)
            if budget is None:
                budget = max(0.0, _read(m, view, s, "budget", facts.budget, env))
            if chunk is None:
                chunk = max(0.0, _read(m, view, s, "chunk", facts.chunk, env))
        return budget, chunk

    def _budget_plan(self) -> float:
        """step.budget_plan on this run's state: max(0, B - what each resident asks), with the context before
        the iteration."""
        facts = self.facts
        budget, chunk = self.constant_budget, self.constant_chunk
        if budget is None or chunk is None:  # (the context is read only by a budget or chunk that is no constant)
            budget, chunk = self._limits(self._context())
        slots = facts.slots
        # want_of (no speculate: applies) of each resident, and its slots, summed in the residents' order
        wants = []
        for r in self.engine.jobs:  # (min(a, b) as Python's min takes it: a unless b < a)
            remaining = r.remaining
            if r.mode == DECODE:
                wants.append((remaining if remaining < 1.0 else 1.0) + slots)
            elif chunk > 0:
                wants.append((chunk if chunk < remaining else remaining) + slots)
            else:
                wants.append(remaining + slots)
        left = budget - slots - sum(wants)
        return left if left > 0.0 else 0.0  # (max(0.0, left): 0.0 unless left > 0.0)

    def _configuration(self):
        """The last configuration, as far as build_result reads it."""
        m = self.m
        c0 = initial_configuration(m)
        stats = c0.statistics
        pools = tuple(build(PoolStats, (w, n, adm, ent, units, 0, 0, 0, 0, ()))
                      for w, n, adm, ent, units in self.pool_counts)
        stages = tuple(build(StageStats, tuple(x)) for x in self.stage_counts)
        gaps = None
        for g in self.gaps:
            gaps = (g, gaps)
        it, po, do, mx, em, tok, dec, sch, off = self.step_counts
        engines = tuple(None if e is None else build(StepStats, (it, po, do, mx, em, tok, dec, immutables.Map(self.last_token),
                                                                 gaps, sch, off, 0))
                        for e in stats.engines)
        samples = None
        for x in self.samples:
            samples = (x, samples)
        stats = stats._replace(pools=pools, stages=stages, engines=engines, ended=self.ended, turns=self.turns)
        sessions = immutables.Map({serial: s.record() for serial, s in self.sessions.items()})
        return c0._replace(time=self.now, sessions=sessions, statistics=stats,
                           areas=tuple(self.areas_now()), samples=samples, taken=self.taken, sequence=self.seq,
                           workload=Workload(self.next_serial, self.generated, self.arrivals_draws,
                                             self.workload_draws, 0, self.replaced))

    # -- arrivals (workload.py) -------------------------------------------------------------------------------------

    def _gap(self, position: int):
        """workload.draw_gap."""
        m = self.m
        if m.poisson_gap is not None:
            return sample_exp(m.poisson_gap, m.stream_arrivals, position), position + 1
        env = Env(self.view, None, -1, m.stream_arrivals, position)
        gap = m.compiler.compile(self.program.arrival.gap)(env)
        if not (gap > 0 and math.isfinite(gap)):
            raise Fallback
        return gap, env.draws

    def _schedule_arrival(self, gap: float) -> None:
        limit = self.program.arrivals
        if limit is not None and self.generated >= limit:
            return
        heappush(self.events, (self.now + gap, self.seq, "arrive", 0, 0))
        self.seq += 1

    def _arrival_event(self) -> None:
        """The open workload's arrival event (arrival_event): the next one scheduled, then workload/arrive."""
        gap, position = self._gap(self.arrivals_draws)
        generated = self.generated + 1
        limit = self.program.arrivals
        if limit is None or generated < limit:
            heappush(self.events, (self.now + gap, self.seq, "arrive", 0, 0))
            self.seq += 1
        self.generated, self.arrivals_draws = generated, position
        self._arrive()

    def _arrive(self, explicit: int = -1) -> None:
        """workload/arrive: a new session, its init block run, an explicit session's attributes written."""
        m = self.m
        program = self.program
        serial = self.next_serial
        attrs = m.blank_attrs
        k = m.slot_serial
        attrs = attrs[:k] + (float(serial),) + attrs[k + 1:]
        script, self.workload_draws = arrival_script(m, serial, explicit, self.workload_draws)
        if m.has_init:
            attrs = self._workload_block(program.init, attrs, serial, 0)
        attrs = explicit_attrs(m, attrs, explicit)
        self.sessions[serial] = _mutable(build(Session, (serial, attrs, m.session_frames, 0, READY, (), (), None, None,
                                                         None, -1, (), -1, member_stream(m.stream_sessions, serial), 0,
                                                         script, 0, (self.now, 1))))
        self.next_serial = serial + 1
        self.ready.append(serial)

    def _workload_block(self, block: int, attrs: tuple, serial: int, turn: int) -> tuple:
        """workload.run_workload_block: an init or turn block (set and observe) on the stream of (session,
        turn)."""
        m = self.m
        statements = self.program.blocks[block]
        if not statements:
            return attrs
        env = Env(self.view, attrs, serial, derive_stream(m.seed, ("turn", serial, turn)), 0)
        values = list(attrs)
        for index, stmt in enumerate(statements):
            env.stmt = (block, index)
            if isinstance(stmt, ir.Set):
                values[stmt.slot] = m.compiler.compile(stmt.expr)(env)
                env.attrs = tuple(values)
            else:
                value = m.compiler.compile(stmt.expr)(env)
                if self.now >= self.warmup:
                    self.samples.append((stmt.index, self.now, serial, turn, value))
        return tuple(values)

    def _make_ready(self, s: Session) -> None:
        """machine.make_ready: ``s`` ready (the backstop: a RunError, the definition's), at the end of the
        ready sessions."""
        instant, count = s.readies
        count = count + 1 if instant == self.now else 1
        if count > MAX_READIES_PER_INSTANT:
            raise Fallback
        s.status, s.readies, s.job, s.growth, s.pending = READY, (self.now, count), None, None, None  # machine.make_ready
        self.ready.append(s.serial)

    # -- settle -----------------------------------------------------------------------------------------------------

    def _settle(self) -> None:
        """settle: the ready sessions run; then, when no other event is pending now, an iteration on the idle
        engine that has residents or a waiting queue. (No pool retries: every hold waits in a queue the engine
        serves, and no growth waits: applies, Fallback.)"""
        ready = self.ready
        run_session = self._run_session
        while ready:
            run_session(ready.popleft())
        events = self.events
        if events and events[0][0] == self.now:
            return
        st = self.engine
        if self.in_flight is None and (st.jobs or st.parked or any(self.served_queues)):
            self._form()
            while ready:  # (none: the admitted sessions run at once)
                run_session(ready.popleft())

    # -- a session's run (settle.run_session) -----------------------------------------------------------------------

    def _table(self):
        """Per block, per statement (then its end): (what the loop does, its expression, the statement after
        it, where it is, its slot, observation index or stage, its Op). A set or observe statement, once a
        session reaches it, is replaced by the run of set and observe statements from it written as one
        function (_WRITTEN: _written_run), and so is a branch whose blocks hold only such statements."""
        m = self.m
        #: the Envs the session path evaluates on, made once (not an Env per use: object.__new__ costs): the
        #: session's statements' (_run_session) and a hold's header and cache clause's (_enter_hold,
        #: _admissible, _exit_hold). Each use sets every field it reads but config (the view, always):
        #: serial, stream, attrs, draws, stmt (before the statement that reads it), and the budget
        self.session_env = _new(Env)
        self.hold_env = _new(Env)
        self.session_env.config = self.hold_env.config = self.view
        rows = []
        for block in m.ops:
            row = []
            for n, op in enumerate(block):
                if n == len(block) - 1:  # the block's end (sessions.end_op: its stmt is the opener)
                    code = _BLOCK_ENDS.get(op.rule, _LOCAL)
                    assert code != _LOCAL or op.local
                else:
                    code = _STATEMENTS[type(op.stmt)]
                    assert code != _LOCAL or op.local, "a statement the loop does not run"
                f = op.exprs[0] if code in (_SET, _OBSERVE, _RUN, _BRANCH) else None
                aux = None
                if code == _SET:
                    aux = op.stmt.slot
                elif code == _OBSERVE:
                    aux = op.stmt.index
                elif code == _RUN:
                    aux = op.exprs[2][0]
                elif code == _BRANCH:
                    aux = (op.stmt.then_block, op.stmt.else_block)
                elif code == _LOOP:
                    aux = op.stmt.block
                row.append((code, f, op.next, op.at, aux, op))
            rows.append(row)  # (a list: a set or observe is replaced by its run's written function when reached)
        for row in rows:  # (those written into a run: _UNWRITTEN, until the run is written)
            marks = [_in_run(rows, row, pc) for pc in range(len(row))]
            for pc, mark in enumerate(marks):
                if mark:
                    row[pc] = (_UNWRITTEN,) + row[pc][1:]
        return tuple(rows)

    def _run_session(self, serial: int) -> None:
        """Run the ready session ``serial`` until it blocks or ends (settle.run_session). Its attributes,
        frames, statement and stream position are kept here while it runs (its record is built when it
        blocks, or for a rule of the definition's)."""
        m = self.m
        sessions = self.sessions
        s = sessions.get(serial)
        if s is None or s.status != READY:
            return
        view = self.view
        now = self.now
        table = self.table
        quiet = MAX_QUIET_STATEMENTS
        env = self.session_env  # (its fields set here: _table)
        env.serial = serial
        env.stream = s.stream
        attrs = env.attrs = s.attrs
        env.draws = s.draws
        pc = s.pc
        frames = s.frames
        row = table[frames[-1].block]
        warm = now >= self.warmup
        while True:
            code, f, nxt, at, aux, op = row[pc]
            if code == _WRITTEN:  # session/set and session/observe, a run of them
                attrs = f(env, attrs, now, serial, self.samples, warm)
                pc = nxt
                continue
            env.stmt = at
            if code == _RUN:  # session/run
                work = f(env)
                if not 0 < work < _INF:
                    if not work == work or work == _INF:
                        raise Fallback
                    pc = nxt  # zero work completes at once
                    continue
                job_id = self.seq
                s.attrs, s.frames, s.pc, s.draws, s.status, s.job = attrs, frames, nxt, env.draws, AT_STAGE, (aux, job_id)
                if self.stages[aux].__class__ is _DelayState:  # stage/delay-enter
                    due = (now + work, job_id + 1)
                    self.stages[aux].by_id[job_id] = build(DelayJob, (job_id, serial, now, now, None, work, due))
                    heappush(self.events, (due[0], job_id + 1, "delay", aux, job_id))
                    self.seq = job_id + 2
                else:  # stage/step-enter
                    growing = op.exprs[4]
                    p = None if growing is None else growing[0].base if growing[1] is None \
                        else resolve_index(growing[0], growing[1], env, "pool")
                    job = _Resident(job_id, serial, now, now, None, op.exprs[3], work, p)
                    if p is not None:  # the hold it grows: its hold and allocation index (innermost_hold), which
                        # stay while it is a resident, and its position once an iteration advanced it (None: the
                        # allocation's), written into the allocation when its run completes (_end_iteration)
                        holds = s.holds  # (the innermost: most often the last hold's, found here first)
                        k = 0
                        for a in holds[-1].allocations if holds else ():
                            if a.pool == p:
                                job.hold, job.alloc = len(holds) - 1, k
                                break
                            k += 1
                        else:
                            job.hold, job.alloc = innermost_hold(s, p)
                        job.position = None
                    jobs = self.stages[aux].jobs
                    key = (s.admission, job_id)
                    if not jobs or (sessions[jobs[-1].owner].admission, jobs[-1].job_id) <= key:
                        jobs.append(job)  # (bisect_right's place: after every resident of a key at most its own)
                    else:
                        i = bisect.bisect_right(jobs, key, key=lambda r: (sessions[r.owner].admission, r.job_id))
                        jobs.insert(i, job)
                    self.seq = job_id + 1
                return
            elif code == _BRANCH:  # session/branch
                value = f(env)
                if value == 1.0:
                    block = aux[0]
                elif value == 0.0:
                    block = aux[1]
                else:
                    raise Fallback  # the guard's RunError
                frames = frames + (build(Frame, (block, PLAIN, at, nxt)),)
                pc = 0
                row = table[block]
            elif code == _BLOCK_EXIT:  # session/block-exit
                pc = frames[-1].resume
                frames = frames[:-1]
                row = table[frames[-1].block]
            elif code == _TURN:
                turn = attrs[m.slot_turn]
                if not math.isfinite(turn):
                    raise Fallback
                s = self._take_turn(s, attrs, frames, nxt, env.draws)
                attrs = env.attrs = s.attrs
                env.draws = s.draws
                pc = s.pc
            elif code == _HOLD:
                self._enter_hold(s, attrs, frames, nxt, env.draws, at)
                return
            elif code == _EXIT_HOLD:  # the hold's body ended: every allocation goes back, then session/hold-exit
                s.attrs, s.frames, s.pc, s.draws = attrs, frames, pc, env.draws
                if self.ahead and serial in self.engine.finishing and any(
                        a.pool == self.facts.memory for a in s.holds[-1].allocations):
                    # step/park (schedule ahead): it waits at the exit, its units held, until the engine's next
                    # iteration is formed (step/apply)
                    self.engine.finishing.remove(serial)
                    self.engine.parked.append(serial)
                    s.status = FINISHING
                    return
                s = self._exit_hold(s)
                attrs = env.attrs = s.attrs
                env.draws = s.draws
                pc = s.pc
                frames = s.frames
                row = table[frames[-1].block]
            elif code == _LOOP_AGAIN:  # session/loop-again
                # (the definition's backstop counts every statement at the instant; only a loop's turn or a
                # while's repeats them, so they are counted here, a block's length at a turn: a run that
                # reaches the backstop is given up, at the latest a block's nesting later, and then runs on the
                # fast forms, which give its RunError)
                quiet -= len(row)
                if quiet < 0:
                    raise Fallback
                pc = 0
            elif code == _LOOP:  # session/loop
                frames = frames + (build(Frame, (aux, LOOP, at, nxt)),)
                pc = 0
                row = table[aux]
            elif code == _END:
                if s.job is not None or s.growth is not None or s.pending is not None or s.holds or s.leases:
                    raise Fallback  # an end inside a hold: its releases are the definition's
                del sessions[serial]
                if now >= self.warmup:
                    self.ended += 1
                if m.closed:  # workload.replace_closed
                    instant, n = self.replaced
                    n = n + 1 if instant == now else 1
                    if n > MAX_READIES_PER_INSTANT:
                        raise Fallback
                    self.replaced = (now, n)
                    self._arrive()
                return
            elif code == _UNWRITTEN:  # (reached the first time: its run written out, then run)
                row[pc] = (_WRITTEN, _written_run(m, table, row, pc), _run_end(table, row, pc), at, None, op)
            else:  # _LOCAL: while, choose, a while's end: the definition's rule
                quiet -= len(row)
                if quiet < 0:
                    raise Fallback
                s.assign(op.rule(m, view, _set_attrs_frames_pc_draws(s.record(), attrs, frames, pc, env.draws), op, env))
                # (the rule may set what else it likes on the Env: later runs take a new one)
                self.session_env = _new(Env)
                self.session_env.config = view
                attrs = env.attrs = s.attrs
                env.draws = s.draws
                pc = s.pc
                frames = s.frames
                row = table[frames[-1].block]

    def _take_turn(self, s: Session, attrs: tuple, frames: tuple, pc: int, draws: int) -> Session:
        """session/turn (workload.take_turn, no turn block) of session ``s`` (at ``attrs``, ``frames``,
        ``draws``, its statement after the turn ``pc``): turn_no counts, the next trace row is loaded."""
        program = self.program
        attrs, turn_no, script_turn = next_turn(self.m, attrs, s.script, s.script_turn)
        if program.turn is not None and program.blocks[program.turn]:  # (an empty turn block leaves them)
            attrs = self._workload_block(program.turn, attrs, s.serial, int(turn_no))
        s.attrs, s.frames, s.pc, s.draws, s.script_turn = attrs, frames, pc, draws, script_turn
        if self.now >= program.warmup:
            self.turns += 1
        return s

    # -- holds (pools.py) -------------------------------------------------------------------------------------------

    def _enter_hold(self, s: Session, attrs: tuple, frames: tuple, pc: int, draws: int, stmt) -> None:
        """pools.enter_hold by session ``s`` (at ``attrs``, ``frames``, ``draws``, its statement after the hold
        ``pc``): the hold's units and reserve read to judge whether it can ever fit (a reject is the
        definition's: Fallback), then session/hold-enter: it waits at the end of its first pool's queue."""
        m = self.m
        hold = self.holds[stmt]
        env = self.hold_env  # session_env's fields (_table)
        env.attrs = attrs
        serial = env.serial = s.serial
        env.stream = s.stream
        env.draws = draws
        env.stmt = stmt
        env.budget = None
        pools = self.hold_pools.get(stmt)  # (named without an index: resolve_index's base + 0)
        if pools is None:
            pools = tuple(resolve_index(ref, index, env, "pool") for ref, index in zip(hold.refs, hold.indices))
        units_of, reserves, caps, sizes = hold.units, hold.reserves, m.caps, m.block_sizes
        for k in range(len(pools)):
            p = pools[k]
            # (builtin max(a, b) and min(a, b) are written ``b if b > a else a`` and ``b if b < a else a``: the
            # first of the largest, the first of the least, with the same comparisons)
            units = units_of[k](env)
            units = units if units > 0.0 else 0.0  # max(0.0, units)
            reserve = reserves[k]
            if reserve is not None:
                reserve = reserve(env)
                reserve = reserve if reserve > 0.0 else 0.0
            else:
                reserve = 0.0
            if _up(reserve if reserve > units else units, sizes[p]) > caps[p] + EPSILON:  # (max(units, reserve))
                raise Fallback  # pool/reject
        s.attrs, s.frames, s.pc, s.draws = attrs, frames, pc, env.draws
        s.status, s.pending = QUEUED, build(PendingHold, (stmt, pools, self.now))
        self.pools[pools[0]].queue.append(build(Waiting, (serial, self.seq, False)))
        self.seq += 1

    def _admit(self, p: int, a) -> None:
        """pool/admit of the head ``a`` (which fits): it leaves the queue and takes its units on every pool of
        its hold (its own cached prefix consumed, room made), its body runs."""
        m = self.m
        waiting, units, reuse = a.waiting, a.units, a.reuse
        serial = waiting.serial
        sessions = self.sessions
        s = sessions[serial]
        pending = s.pending
        stmt = pending.stmt
        hold = self.holds[stmt]
        pools = self.pools
        queue = pools[p].queue
        del queue[0 if queue[0] is waiting else queue.index(waiting)]  # (the first equal to it: the head, most often)
        admission = self.seq
        self.seq = admission + 1
        cached = 0.0
        warm = self.now >= self.warmup
        allocations = []
        cache = hold.cache is not None
        key = (serial, admission)
        sizes = m.block_sizes
        for q, u in zip(pending.pools, units):
            pool = pools[q]
            consumed = 0.0
            if cache:  # pool/consume
                entry = pool.own.pop(serial, None)
                if entry is not None:
                    entries = pool.entries
                    k = entries.index(entry)
                    whole = _down(reuse, sizes[q])
                    consumed = entry.units
                    consumed = whole if whole < consumed else consumed  # min(entry.units, whole)
                    rest = entry.units - consumed
                    if rest > EPSILON:
                        entries[k] = _set_entry_dead(entry, None, rest)
                    else:
                        del entries[k]
                    pool.cached = pool.cached - consumed
                cached = consumed if consumed > cached else cached  # max(cached, consumed)
            need = _up(u, sizes[q])
            if need == _INF:
                raise Fallback
            self._make_room(q, need, stmt)
            pool.allocated = pool.allocated + need
            holdings = pool.holding
            if key in holdings:
                raise Fallback  # (a hold naming one pool twice: its releases are the fast forms')
            holding = holdings[key] = build(Holding, (admission, serial, admission, need, False) + _HOLDING_DEFAULTS)
            pool.holders.append(holding)
            if warm:
                self.pool_counts[q][2] += 1
            allocations.append(build(Allocation, (q, need, need if need < consumed else consumed, False)))
        if warm:
            counts = self.pool_counts[p]
            counts[0] += self.now - pending.joined
            counts[1] += 1
        attrs = list(s.attrs)
        attrs[self.program.slot_cached] = cached
        # made ready (machine.make_ready), its body to run: the engine runs it at once (step/admit: _form), so
        # it is not put in the ready sequence, which step/admit would take it out of
        instant, count = s.readies
        count = count + 1 if instant == self.now else 1
        if count > MAX_READIES_PER_INSTANT:
            raise Fallback
        s.holds = s.holds + (build(ActiveHold, (admission, pending.stmt, tuple(allocations))),)
        s.attrs = tuple(attrs)
        s.frames = s.frames + (build(Frame, (hold.body, HOLD, pending.stmt, s.pc)),)
        s.pc, s.admission, s.status, s.readies = 0, admission, READY, (self.now, count)
        s.job = s.growth = s.pending = None

    def _admissible(self, p: int, budget) -> Admission:
        """pools.admissible at pool ``p`` (whose queue is not empty) for a pool the loop runs (no KV cache groups,
        no shared prefixes): its head (the first to join, or by the queue's keys: the definition's select_head
        on the loop's state), the header evaluated now (the hold's compiled header: _compile_holds), and whether
        it fits every pool of its hold."""
        m = self.m
        pools = self.pools
        waiting = pools[p].queue[0] if m.queue_keys[p] is None else select_head(m, self.view, p, budget)[0]
        s = self.sessions[waiting.serial]
        pending = s.pending
        stmt = pending.stmt
        hold = self.holds[stmt]
        env = self.hold_env  # session_env's fields and the budget (_table)
        env.attrs = s.attrs
        env.serial = s.serial
        env.stream = s.stream
        env.draws = s.draws
        env.stmt = stmt
        env.budget = budget
        units_of, reserves = hold.units, hold.reserves
        if len(units_of) == 2:  # (two pools, lib/vllm.sq's hold: no loop; the units first, then the reserves)
            # (max(0.0, x) written ``x if x > 0.0 else 0.0``, max(u, n) ``n if n > u else u``: builtin max's
            # first of the largest, with its comparisons)
            u0 = units_of[0](env)
            u0 = u0 if u0 > 0.0 else 0.0
            u1 = units_of[1](env)
            u1 = u1 if u1 > 0.0 else 0.0
            r0, r1 = reserves
            units = (u0, u1)
            if r0 is not None:
                n0 = r0(env)
                n0 = n0 if n0 > 0.0 else 0.0
            else:
                n0 = 0.0
            if r1 is not None:
                n1 = r1(env)
                n1 = n1 if n1 > 0.0 else 0.0
            else:
                n1 = 0.0
            needs = (n0 if n0 > u0 else u0, n1 if n1 > u1 else u1)
        else:
            units = tuple([max(0.0, f(env)) for f in units_of])
            needs = tuple([max(u, max(0.0, r(env)) if r is not None else 0.0) for u, r in zip(units, reserves)])
        if hold.reuse is not None:
            reuse = hold.reuse(env)
            reuse = reuse if reuse > 0.0 else 0.0  # max(0.0, reuse)
        else:
            reuse = _INF
        caps, sizes = m.caps, m.block_sizes
        fits = True
        for q, need in zip(pending.pools, needs):
            if not pools[q].allocated + _up(need, sizes[q]) <= caps[q] + EPSILON:
                fits = False
                break
        return build(Admission, (waiting, units, needs, reuse, env.draws, fits, None, _ADMISSION_CONTENT))

    def _make_room(self, q: int, need: float, stmt) -> None:
        """make_room on a pool that evicts lru and spills nothing (fast/pools.make_room_lru's arithmetic: the
        pool/evict-block and pool/evict-entry rules, a run of whole blocks of one entry at once when every count
        is a whole number)."""
        pool = self.pools[q]
        allocated = pool.allocated
        cached = pool.cached
        total = allocated + cached + need  # (the sum as make_room_lru adds it, read once)
        cap = pool.cap
        if total <= cap + EPSILON and pool.small_excess:
            return  # (it fits, and then check_evictions' count is below its limit: _Pool.small_excess)
        block = pool.block
        entries = pool.entries
        if block:  # check_evictions' count: min(total - cap, cached) blocks (min's choice, without its call)
            excess = total - cap
            if (cached if cached < excess else excess) / block > MAX_EVICTIONS:
                raise Fallback  # check_evictions' LimitError
        if total <= cap + EPSILON or not entries:
            return
        # (x % 1.0 == 0.0: x is a whole number, for x within +-_EXACT)
        whole = pool.whole and _LOW < allocated < _EXACT and allocated % 1.0 == 0.0 \
            and _LOW < need < _EXACT and need % 1.0 == 0.0
        if whole:  # the common case: one run of pool/evict-block on the first entry makes the room (evict_lru's
            # first turn, and the need then fits)
            entry = entries[0]
            left = entry.units
            if left - block > EPSILON and _LOW < cached < _EXACT and cached % 1.0 == 0.0 \
                    and _LOW < left < _EXACT and left % 1.0 == 0.0:
                j = -(-(total - cap) // block)  # (min of the deficit's blocks and the entry's but one, as min takes)
                k = -(-(left - block) // block)
                if k < j:
                    j = k
                evicted = j * block
                if not allocated + (cached - evicted) + need > cap + EPSILON:
                    entry = entries[0] = _set_entry_units(entry, left - evicted)
                    if entry.owner is not None:
                        pool.own[entry.owner] = entry
                    pool.cached = cached - evicted
                    if self.now >= self.warmup:  # add_evicted_units of the one piece (block, j times)
                        counts = self.pool_counts[q]
                        units = counts[4]
                        if j == 1:
                            counts[4] = units + block
                        else:
                            times = int(j)
                            if _LOW < units < _EXACT and units % 1.0 == 0.0 and abs(units) + block * times < _EXACT:
                                counts[4] = units + block * times  # (the block is whole: pool.whole)
                            else:
                                counts[4] = add_evicted_units(units, [(block, times)])
                    return
        first, left, cached, removed, gone = evict_lru(entries, block, cap, allocated, cached, need, whole)
        own = pool.own
        for k in range(first):
            owner = entries[k].owner
            if owner is not None:
                del own[owner]
        if first < len(entries) and left != entries[first].units:
            entry = entries[first] = _set_entry_units(entries[first], left)
            if entry.owner is not None:
                own[entry.owner] = entry
        del entries[:first]
        pool.cached = cached
        if self.now >= self.warmup:
            counts = self.pool_counts[q]
            counts[3] += gone
            counts[4] = add_evicted_units(counts[4], removed)

    def _exit_hold(self, s: Session) -> Session:
        """The end of a hold's body (exit_hold_body, without schedule ahead or lease): every allocation goes back
        (pool/release: give_back, min(cache, computed) units cached), then session/hold-exit."""
        m = self.m
        serial = s.serial
        hold = s.holds[-1]
        compiled = self.holds[hold.stmt]
        cache = compiled.cache
        if cache is not None:  # session_env: one for every pool (its draws are the session's, which it writes
            # back after each)
            env = self.hold_env  # (_table)
            env.attrs = s.attrs
            env.serial = serial
            env.stream = s.stream
            env.stmt = hold.stmt
            env.budget = None
        done = []
        for a in hold.allocations:  # pool/release, in the hold's order
            q = a.pool
            done.append(q)
            pool = self.pools[q]
            computed = a.position if a.advanced else a.units
            units = a.units
            pool.allocated = pool.allocated - units
            holders = pool.holders
            holding = pool.holding.pop((serial, hold.hold_id), None)
            if holding is not None:  # the first holding of the session and hold (the only one)
                del holders[holders.index(holding)]
            if cache is not None:
                env.draws = s.draws
                want = cache(env)
                want = want if want > 0.0 else 0.0  # max(0.0, want)
                if env.draws != s.draws:
                    s.draws = env.draws
                x = computed if computed < want else want  # min(want, computed, units), the first of the least
                kept = _down(units if units < x else x, m.block_sizes[q])
                if kept > 0:
                    entries = pool.entries
                    entry = pool.own.get(serial)
                    cached = pool.cached
                    if entry is not None:
                        cached -= entry.units
                        del entries[entries.index(entry)]
                    entry = pool.own[serial] = build(CacheEntry, (serial, serial, kept, self.now, self.seq))
                    entries.append(entry)
                    pool.cached = cached + kept
                    self.seq += 1
        attrs = list(s.attrs)
        attrs[self.program.slot_computed] = 0.0
        s.preempted_at = tuple((q, x) for q, x in s.preempted_at if q not in done) if s.preempted_at else ()
        s.frames, s.pc, s.holds, s.attrs = s.frames[:-1], s.frames[-1].resume, s.holds[:-1], tuple(attrs)
        return s

    # -- the step engine (stages/step.py, settle.form_iteration) ----------------------------------------------------

    def _form(self) -> None:
        """settle.form_iteration on the idle engine: step/iteration-start, then step/schedule of each resident in
        admission order (pool/grow and step/grow when its hold must grow first, and the growth fits), step/admit
        of each head while the budget lasts (or step/admit-stop), then step/iteration or step/idle."""
        s = self.s
        facts = self.facts
        st = self.engine
        sessions = self.sessions
        context = self._context() if self.needs_context else None  # (no reader of it: None)
        if st.finishing:  # schedule ahead: the next iteration is formed; a session that did not park goes on
            st.finishing = []
        budget, chunk = self.constant_budget, self.constant_chunk
        if budget is None or chunk is None:
            budget, chunk = self._limits(context)
        slots = facts.slots
        left = budget - slots
        formed = st.iteration = _new(_Formed)  # what busy(s) reads while it forms (its fields set here: no call)
        formed.context = context
        formed.assigned = assigned = []
        formed.tokens = all_tokens = []
        formed.prefilled = prefilled = []
        formed.attention = attention = []
        number = self.forms = self.forms + 1  # (a resident's ``served``: this pass served it)
        open_ = True
        jobs = st.jobs
        i = 0  # the residents before it were served (a resident joins at the end when it is admitted now)
        while open_ and left > 0:
            if i < len(jobs):
                r = jobs[i]
                i += 1
                if r.served == number:
                    continue
                r.served = number
                # step/schedule
                # step.want_of (no speculate): a decode asks one token, a prefill up to the chunk (0: no cap)
                # (min(a, b) as Python's min takes it, a unless b < a, without its call)
                remaining = r.remaining
                mode = r.mode
                if mode == DECODE:
                    want = remaining if remaining < 1.0 else 1.0
                elif chunk > 0:
                    want = chunk if chunk < remaining else remaining
                else:
                    want = remaining
                tokens = left if left < want else want
                # (a session growing, waiting for room, is not served: the loop gives a growth that waits up, so
                # no session of its run is GROWING)
                position = need = 0.0
                if r.growing is not None:
                    h, k = r.hold, r.alloc
                    position, units = r.position, r.units
                    if h < 0:
                        raise Fallback
                    if position is None or units is None:  # (the allocation's, not yet kept on the resident)
                        session = sessions[r.owner]
                        alloc = session.holds[h].allocations[k]
                        if position is None:
                            position = alloc.position
                        if units is None:  # (kept: the allocation's units, which only _grow changes)
                            units = r.units = alloc.units
                    need = position + tokens - units
                if tokens <= 0.0:
                    continue
                if need > EPSILON:  # pool/grow (when it fits), then step/grow
                    self._grow(r, sessions[r.owner], h, k, need)
                r.tokens = tokens  # its Assignment (job_id, serial and mode: the resident's)
                assigned.append(r)
                all_tokens.append(tokens)
                if mode == PREFILL:
                    prefilled.append(tokens)
                    attention.append(tokens * (position + tokens / 2.0))
                left = left - tokens - slots
                continue
            # step/admit: the head of the first queue the stage serves
            head = None
            for q in facts.served:
                if self.pools[q].queue:
                    head = q, self._admissible(q, (s, left))
                    break
            if head is None:
                break
            q, a = head
            serial = a.waiting.serial
            waiter = sessions[serial]
            if waiter.draws != a.draws:  # header_drawn
                waiter.draws = a.draws
            if not a.fits:  # step/admit-stop
                open_ = False
                break
            self._admit(q, a)  # pool/admit, then step/admit: it runs at once
            self._run_session(serial)
            jobs = st.jobs
            # (its run joined the residents after every resident served: admission order)
        # the residents a closed or spent iteration did not reach are not served
        if assigned or st.parked:  # schedule ahead: a batch, though empty, while a parked session waits for it
            self._close(formed, budget)
        else:  # step/idle: the stage stays idle
            st.iteration = None
        if st.parked:  # step/apply (schedule ahead): the ended iteration's results: the parked sessions go on
            parked, st.parked = st.parked, []
            for serial in parked:
                self._make_ready(sessions[serial])

    def _grow(self, r: Resident, session: Session, h: int, k: int, amount: float) -> None:
        """pool/grow of the resident's hold by ``amount`` (growth_need: to whole blocks) when it fits the pool
        (room made by evictions); a growth that does not fit (a preemption, a wait) is the definition's."""
        m = self.m
        p = r.growing
        current = r.units
        if current is None:
            current = session.holds[h].allocations[k].units
        need = _up(current + amount, m.block_sizes[p]) - current
        if need == _INF:
            raise Fallback
        if need <= EPSILON:
            return
        pool = self.pools[p]
        if not pool.allocated + need <= m.caps[p] + EPSILON:
            raise Fallback  # pool/preempt or pool/grow-wait
        self._make_room(p, need, None)  # (evictions touch no session: its hold is as it was)
        pool.allocated = pool.allocated + need
        memory = self.facts.memory
        holds = session.holds
        if not self.needs_context or p != memory:  # the memory's units per resident (_context) are not read, or
            r.units = current + need  # not this pool's: the allocation's new units are kept on the resident
            return
        known = self.held.get(r.owner)
        if known is not None and known[0] is holds and known[2]:
            # the memory's units: one allocation's (0 + its units, which grew by need)
            self.held[r.owner] = (holds, known[1] + need, True)
            r.units = current + need
            return
        hold = holds[h]  # else written into the allocation now (pool/grow's record), the memory's units read again
        alloc = hold.allocations[k]
        hold = _set_allocations(hold, hold.allocations[:k] + (_set_units(alloc, current + need),)
                                + hold.allocations[k + 1:])
        session.holds = holds[:h] + (hold,) + holds[h + 1:]
        r.units = None

    def _close(self, formed: _Formed, budget: float) -> None:
        """step/iteration: the cost read, the end an event at now + cost, the counts added."""
        m = self.m
        s = self.s
        assigned = formed.assigned
        # cost_context: the context before the iteration and what it scheduled (the sums of _form's terms)
        tokens = sum(formed.tokens)
        cost = self.constant_cost
        if cost is not None:  # a number whatever the context, tokens and prefilled (finite here)
            if self.cost_reads_attention and not math.isfinite(sum(formed.attention)):
                raise Fallback  # 0 * inf: the definition's RunError
        else:
            env = self.cost_env  # (one environment, its fields set for each iteration)
            env.residents, env.decoders, env.kv_decode, env.kv_prefill = formed.context
            env.tokens = tokens
            env.prefilled = sum(formed.prefilled)
            env.attention = sum(formed.attention)
            cost = max(0.0, _read(m, self.view, s, "cost", self.facts.cost, env))
        if cost == 0.0 and tokens > 0:
            raise Fallback
        now = self.now
        self.due = (now + cost, self.seq)  # its end: an event of that time and number (walk takes it in order)
        self.seq += 1
        self.count += 1
        self.in_flight = formed
        if now >= self.warmup:
            counts = self.step_counts
            prefills = len(formed.prefilled)  # count_modes: a resident prefills or decodes
            decodes = len(assigned) - prefills
            counts[0] += 1
            if prefills:  # prefill only, or mixed
                counts[3 if decodes else 1] += 1
            else:  # decode only, or empty
                counts[2 if decodes else 4] += 1
            counts[5] = counts[5] + tokens
            counts[6] += decodes
            counts[7] += len(assigned)
            counts[8] = counts[8] + budget

    def _end_iteration(self) -> None:
        """step/iteration-end: each served resident's run lowered by its tokens, its growing hold's position
        advanced, and the inter-token bookkeeping (_note_tokens), assignment by assignment; the runs done
        complete (stage/step-complete), in the order served."""
        s = self.s
        st = self.engine
        formed = self.in_flight
        self.in_flight = st.iteration = None
        sessions = self.sessions
        jobs = st.jobs
        now = self.now
        warm = now >= self.warmup
        last = self.last_token
        gaps = self.gaps
        done = []
        for r in formed.assigned:  # (each its assignment's tokens; its serial is the resident's owner)
            tokens = r.tokens
            remaining = r.remaining = r.remaining - tokens
            if r.growing is not None:  # pools.advance_position, kept on the resident until its run completes
                if r.position is None:
                    r.position = sessions[r.owner].holds[r.hold].allocations[r.alloc].position + tokens
                else:
                    r.position = r.position + tokens
            fin = remaining <= EPSILON
            if fin:
                done.append(r)
            # _note_tokens
            if r.mode == PREFILL:
                if fin:
                    last[r.owner] = now
                continue
            serial = r.owner
            previous = last.get(serial)
            if previous is not None and warm:
                gaps.append(now - previous)
            if fin:
                last.pop(serial, None)
            else:
                last[serial] = now
        if self.ahead:  # schedule ahead: their holds on the memory exit after the next iteration is formed
            st.finishing = [r.owner for r in done]
        # stage/step-complete, in the order served
        for r in done:
            jobs.remove(r)  # (by identity: a resident is its own object)
            if r.growing is not None and r.position is not None:  # the position its iterations advanced the hold to
                # and the units its growths grew it to (pools.advance_position, pool/grow), written into the hold
                session = sessions[r.owner]
                h, k, position = r.hold, r.alloc, r.position
                holds = session.holds
                session.holds = holds[:h] + (_advance_position(holds[h], k, position, r.units),) + holds[h + 1:]
                known = self.held.get(r.owner)
                if known is not None and known[0] is holds:  # (a position moved: the units are the same)
                    self.held[r.owner] = (session.holds, known[1], known[2])
            self._finish(s, r)

    def _delay_complete(self, s: int, job_id: int) -> None:
        """stage/delay-complete."""
        self._finish(s, self.stages[s].by_id.pop(job_id))

    def _finish(self, s: int, job) -> None:
        """jobs.finish_job: the completion counted (at or after the warm-up), the session ready."""
        now = self.now
        if now >= self.warmup:
            counts = self.stage_counts[s]
            counts[0] += 1
            counts[1] = counts[1] + job.started - job.arrived
            counts[2] = counts[2] + now - job.started
        self._make_ready(self.sessions[job.owner])


def _up(units: float, b: float) -> float:
    """machine.round_up's arithmetic on a pool's block size ``b``: ``units`` up to whole blocks (a count of
    blocks past the largest double: ``units``). (A function of the block size, not the machine's method, which
    costs the replay's run 6 M instructions more: tests/test_fast_steploop.py holds the two equal.)"""
    blocks = units / b if b else _INF
    return units if not -_INF < blocks < _INF else math.ceil(blocks - EPSILON) * b


def _down(units: float, b: float) -> float:
    """machine.round_down's arithmetic on a pool's block size ``b`` (as _up)."""
    blocks = units / b if b else _INF
    return units if not -_INF < blocks < _INF else math.floor(blocks + EPSILON) * b


def _advance_position(hold: ActiveHold, k: int, position: float, units: float | None) -> ActiveHold:
    """The hold as pools.advance_position leaves it, its allocation ``k`` advanced to ``position`` (and grown to
    ``units``, unless None: pool/grow's growths kept on the resident), each record built by a setter."""
    allocations = []
    for i, x in enumerate(hold.allocations):
        if i == k:
            allocations.append(_set_position_advanced(x, position, True) if units is None
                               else build(Allocation, (x.pool, units, position, True)))
        elif x.advanced:
            allocations.append(x)
        else:
            allocations.append(_set_advanced(x, True))
    return _set_allocations(hold, tuple(allocations))



#: branches written into a run nest at most this deep (Python's indentation has a limit)
_MAX_WRITTEN_NESTING = 16


def _in_run(table, row: list, pc: int, depth: int = 0) -> bool:
    """Whether statement ``pc`` of ``row`` (not its block's end) is written into a run (_written_run): a set,
    an observe, or a branch whose two blocks hold nothing else (and end by session/block-exit), ``depth``
    branches deep."""
    if pc >= len(row) - 1:
        return False
    kind = type(row[pc][5].stmt)
    if kind is ir.Set or kind is ir.Observe:
        return True
    if kind is not ir.Branch or depth >= _MAX_WRITTEN_NESTING:
        return False
    stmt = row[pc][5].stmt
    return all(table[b][-1][0] == _BLOCK_EXIT and _run_end(table, table[b], 0, depth + 1) == len(table[b]) - 1
               for b in (stmt.then_block, stmt.else_block))


def _run_end(table, row: list, start: int, depth: int = 0) -> int:
    """The statement after the run of statements written into one function (_in_run) from ``start`` in
    ``row``, ``depth`` branches deep."""
    end = start
    while _in_run(table, row, end, depth):
        end += 1
    return end


def _written_run(m: Machine, table, row: list, start: int):
    """The run of statements from ``start`` in ``row`` (the table's; _in_run) as one Python function
    ``f(env, attrs, now, serial, samples, warm)`` that runs them in order and gives the attributes after them
    (env.attrs set to them): session/set, the attribute takes the expression's value; session/observe, a
    sample (its index, the time, the session, its turn_no, the value) kept at or after the warm-up (``warm``),
    a turn_no that is no finite number the definition's RunError (check_turn_number: Fallback);
    session/branch, the guard's block run (its frame entered and left by session/block-exit with nothing
    between that reads it), a guard neither 1 nor 0 its RunError (Fallback). Each expression is written out
    as values.WrittenCompiler writes it (its ``source``), reading the attributes from a list that each set
    writes into; one it does not write out as a whole (a draw, a query alone) is called as compiled (the
    statement's Op), with env.attrs and env.stmt the statement's, as the loop sets them, and so is a written one
    that calls a draw or a query on the env."""
    source = getattr(m.compiler, "source", None)
    namespace = {"Fallback": Fallback, "_INF": _INF}
    ops = []

    def gather(row, start, end):
        for pc in range(start, end):
            op = row[pc][5]
            ops.append(op)
            if type(op.stmt) is ir.Branch:
                for b in (op.stmt.then_block, op.stmt.else_block):
                    gather(table[b], 0, len(table[b]) - 1)

    gather(row, start, _run_end(table, row, start))
    sets = any(type(op.stmt) is ir.Set for op in ops)
    lines = ["def written(env, attrs, now, serial, samples, warm):"] + (["    attrs = list(attrs)"] if sets else [])

    def value(op, expr, indent, target="value"):
        """The lines that set ``target`` to ``expr``'s value; and its source when it is written out."""
        prefix = f"{op.at[0]}_{op.at[1]}_"
        written = None if source is None else source(expr, prefix)
        if written is None:  # its compiled function, on the env as the loop keeps it
            namespace[f"_f{prefix}"] = op.exprs[0]
            return (([f"{indent}env.attrs = tuple(attrs)"] if sets else [])
                    + [f"{indent}env.stmt = {op.at!r}", f"{indent}{target} = _f{prefix}(env)"]), None
        body, names, _ = written
        namespace.update(names)
        if "(env)" in body or "(env, " in body:  # a draw or a query inside it, called on the env: the env's
            # attributes and statement the statement's, as the loop sets them (what it reads of them is theirs)
            return (([f"{indent}env.attrs = tuple(attrs)"] if sets else [])
                    + [f"{indent}env.stmt = {op.at!r}", f"{indent}{target} = {body}"]), body
        return [f"{indent}{target} = {body}"], body

    def emit(row, start, end, indent):
        for pc in range(start, end):
            op = row[pc][5]
            stmt = op.stmt
            kind = type(stmt)
            if kind is ir.Branch:
                guard = stmt.guard
                evaluate, body = value(op, guard, indent)
                if body is not None and len(evaluate) == 1 and type(guard) is ir.Binary \
                        and guard.op in _COMPARISONS and body.startswith("(1.0 if ") and body.endswith(" else 0.0)"):
                    # a comparison (its 1 or 0 written as values.WrittenCompiler writes it): the Python one
                    tests = ((f"if {body[len('(1.0 if '):-len(' else 0.0)')]}:", stmt.then_block),
                             ("else:", stmt.else_block))
                else:
                    lines.extend(evaluate)
                    tests = (("if value == 1.0:", stmt.then_block), ("elif value == 0.0:", stmt.else_block))
                for test, b in tests:
                    lines.append(indent + test)
                    before = len(lines)
                    emit(table[b], 0, len(table[b]) - 1, indent + "    ")
                    if len(lines) == before:
                        lines.append(indent + "    pass")
                if len(tests) == 2 and tests[1][0] != "else:":
                    lines.extend((indent + "else:", indent + "    raise Fallback  # the guard's RunError"))
                continue
            if kind is ir.Set:
                lines.extend(value(op, stmt.expr, indent, f"attrs[{stmt.slot!r}]")[0])
            else:
                lines.extend(value(op, stmt.expr, indent)[0])
                lines.extend(indent + x for x in (
                    "if warm:", f"    turn = attrs[{m.slot_turn!r}]", "    if not -_INF < turn < _INF:",
                    "        raise Fallback", f"    samples.append(({stmt.index!r}, now, serial, int(turn), value))"))

    emit(row, start, _run_end(table, row, start), "    ")
    if sets:
        lines.append("    attrs = env.attrs = tuple(attrs)")
    lines.append("    return attrs")
    exec("\n".join(lines) + "\n", namespace)
    return namespace["written"]
