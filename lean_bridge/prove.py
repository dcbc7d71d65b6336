"""``serq-ref lean prove``: the fragment's invariants, proved with Z3 by
symbolic execution of the mirror's own rules.

Every value of a configuration is a Z3 integer ≥ 0 (capacities, block sizes,
allocations, positions, cache entries, attributes, the budget, the chunk,
the tokens, the time): the rules the mirror runs (lean_bridge.mirror) are
executed on these terms, with ``arith.holds`` handing every branch on a
value to the ``Explorer``, which follows each feasible side in turn. On every
path the property is checked: the precondition and the path's conditions
together with the negated property must be unsatisfiable. What is bounded is
the structure only: the number of sessions, holders and cache entries (the
``bound``, 4 by default), and which of them play which part; ``shapes``
enumerates them for each rule.

The properties:

- ``memory``: allocated + cached ≤ cap in every pool, before and after the
  rule (it is inductive).
- ``budget``: within an iteration, the tokens given plus the budget left is
  the budget (so the tokens never exceed it), and a growth's pending tokens
  are within the budget left; ``run``: no resident is given more tokens than
  its run has left, and every resident given tokens is still a resident. The
  two together are inductive over the iteration's rules.
- ``re-entry``: a preempted session is at the head of its hold's queue with
  ``computed`` equal to the position its hold had reached, no longer a
  resident or a holder; or, if its hold re-read with that ``computed`` is
  above a cap, it is rejected (ended), as pool/reject says.

A loop of the fragment (the statements a session runs at one instant, the
turns of one iteration, a growth's victims) is a sequence of these rules,
one a turn: each preserves the invariants, so the loop does.
"""

from __future__ import annotations

import time as clock
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

import z3

from . import arith
from .mirror import engine, exec as mexec, sessions as msessions
from .mirror.state import (ActiveHold, Assignment, Entry, Frame, FrameKind, Holder, Iteration, Machine, PoolState,
                           Resident, Sample, Session, Status, cached_blocks, held_blocks)
from .syntax import (Attr, Binary, Branch, CtxVar, Ctx, Delay, Engine, Finish, Hold, Mode, Num, Observe, Order,
                     Pool, Program, SelfPreemption, ServeKey, Set, Slots, Spec, Step, Turn, Use)

# -- the explorer ----------------------------------------------------------------------


class Infeasible(Exception):
    """The path's conditions contradict each other (a replayed prefix)."""


class Explorer:
    """Runs a function once per feasible path through its symbolic branches."""

    def __init__(self, solver: z3.Solver):
        self.solver = solver
        self.prefix: tuple[bool, ...] = ()
        self.trail: list[bool] = []
        self.pending: list[tuple[bool, ...]] = []
        self.functions: dict[str, z3.FuncDeclRef] = {}
        self.checks = 0

    def satisfiable(self, condition) -> bool:
        self.solver.push()
        self.solver.add(condition)
        self.checks += 1
        verdict = self.solver.check()
        self.solver.pop()
        return verdict != z3.unsat

    def decide(self, condition) -> bool:
        k = len(self.trail)
        if k < len(self.prefix):
            taken = self.prefix[k]
        else:
            yes = self.satisfiable(condition)
            # the path so far is feasible, so when one side is not the other is
            no = self.satisfiable(z3.Not(condition)) if yes else True
            if yes and no:
                taken = True
                self.pending.append(tuple(self.trail) + (False,))
            else:
                taken = yes
        self.trail.append(taken)
        self.solver.add(condition if taken else z3.Not(condition))
        return taken

    def uninterpreted(self, name: str, a, b):
        """A product or quotient of two symbolic values: a function of its
        operands about which nothing else is assumed (not even ≥ 0), so that
        what is proved with it holds for the true one."""
        f = self.functions.get(name)
        if f is None:
            f = self.functions[name] = z3.Function(name, z3.IntSort(), z3.IntSort(), z3.IntSort())
        return f(a, b)

    def paths(self, run: Callable[[], Any]) -> Iterator[Any]:
        """Each feasible path's result, with the solver holding that path's
        conditions while the caller looks at it."""
        self.pending = [()]
        previous = arith.set_explorer(self)
        try:
            while self.pending:
                self.prefix = self.pending.pop()
                self.trail = []
                self.solver.push()
                try:
                    result = run()
                except Infeasible:
                    self.solver.pop()
                    continue
                yield result
                self.solver.pop()
        finally:
            arith.set_explorer(previous)


# -- the harness: one program, symbolic configurations ----------------------------------------

CACHED, SERIAL, TURN_NO, MORE, COMPUTED = 0, 1, 2, 3, 4
U_SLOTS, R_SLOTS, U_MEM, R_MEM, REUSE, CACHE, WORK, DELAY, KEY, X = range(5, 15)
ATTRS = ("cached", "serial", "turn_no", "more", "computed", "u_slots", "r_slots", "u_mem", "r_mem", "reuse",
         "cache", "work", "delay", "key", "x")
SLOTS_POOL, MEM_POOL = 0, 1
POOL_NAMES = ("slots", "mem")
ENGINE, GATE = 0, 1
HOLD_STMT = (2, 4)
USES = (Use(SLOTS_POOL, Attr(U_SLOTS), Attr(R_SLOTS)), Use(MEM_POOL, Attr(U_MEM), Attr(R_MEM)))
BLOCKS = (
    (),                                                                      # 0 init
    (Set(X, Binary("add", Attr(X), Num(1))),),                               # 1 turn
    (Set(X, Binary("add", Attr(X), Attr(DELAY))),                            # 2 the session
     Observe(0, CtxVar(Ctx.NOW)),
     Turn(),
     Branch(Binary("eq", Attr(X), Num(1)), 4, 5),
     Hold(USES, Attr(REUSE), 3, Attr(CACHE)),
     Finish()),
    (Step(Mode.PREFILL, Attr(WORK), MEM_POOL),                               # 3 the hold's body
     Delay(GATE, Attr(DELAY)),
     Step(Mode.DECODE, Attr(WORK), MEM_POOL),
     Branch(Binary("eq", Attr(X), Num(0)), 6, 7)),
    (),                                                                      # 4, 5 a branch's blocks
    (),
    (Finish(),),                                                             # 6 end inside the hold
    (),                                                                      # 7
)


@dataclass(frozen=True)
class Shape:
    """The structure of a configuration: the subject (the session the rule is
    about) and the others. ``before``/``after``: residents admitted before or
    after the subject; ``away``: holders not on the engine (in a delay inside
    the hold); ``queued``: waiting at the hold; ``entries``: the cache
    entries of each pool (slots, mem); ``own``: the index of the subject's own
    entry, in each pool that has entries (None: it has none); ``mode``: the subject's run; ``advanced``: whether its position has
    moved; ``assigned``: whether the other residents were given tokens in
    the iteration; ``turns``: explicit turns the subject has left."""

    subject: str
    before: int = 0
    after: int = 0
    away: int = 0
    queued: int = 0
    entries: tuple[int, int] = (0, 0)
    own: int | None = None
    mode: Mode = Mode.PREFILL
    advanced: bool = True
    assigned: bool = False
    turns: int = 0

    def sessions(self) -> int:
        return 1 + self.before + self.after + self.away + self.queued

    def describe(self) -> str:
        parts = [f"subject {self.subject}"]
        for name in ("before", "after", "away", "queued"):
            if getattr(self, name):
                parts.append(f"{name} {getattr(self, name)}")
        if any(self.entries):
            parts.append(f"entries slots {self.entries[0]}, mem {self.entries[1]}")
        if self.own is not None:
            parts.append(f"own entry at {self.own}")
        if self.subject in ("resident", "grower", "victim"):
            parts.append(self.mode.value)
        if not self.advanced:
            parts.append("not advanced")
        if self.assigned:
            parts.append("others assigned")
        return ", ".join(parts)


@dataclass
class Instance:
    """A symbolic configuration built from a shape."""

    shape: Shape
    program: Program
    machine: Machine
    iteration: Iteration
    subject: int
    variables: dict[str, Any] = field(default_factory=dict)
    rule_program: Program | None = None  # the program the rule runs under (Rule.program)
    rule_before: Machine | None = None   # the machine before the rule (Rule.before)


class Builder:
    def __init__(self, solver: z3.Solver):
        self.solver = solver
        self.variables: dict[str, Any] = {}

    def nat(self, name: str, least: int = 0):
        v = z3.Int(name)
        self.solver.add(v >= least)
        self.variables[name] = v
        return v

    def build(self, shape: Shape) -> Instance:
        n = shape.sessions()
        # serials: the residents before, the subject, the residents after, away holders, queued
        order = (["before"] * shape.before + ["subject"] + ["after"] * shape.after + ["away"] * shape.away
                 + ["queued"] * shape.queued)
        subject = order.index("subject")
        role = {k: r for k, r in enumerate(order)}
        if shape.subject == "queued-head":
            role[subject] = "head"
        caps = [self.nat(f"cap[{POOL_NAMES[q]}]") for q in (0, 1)]
        blocks = [self.nat(f"block[{POOL_NAMES[q]}]", 1) for q in (0, 1)]
        pools = (Pool(caps[0], blocks[0], False, True), Pool(caps[1], blocks[1], True, False))
        budget, chunk = self.nat("budget"), self.nat("chunk")
        specs = []
        attrs = []
        for k in range(n + 1):  # one more spec: the session workload/arrive makes
            turn_value = self.nat(f"s{k}.turn.x")
            specs.append(Spec((), (((X, turn_value),),)))
            if k < n:
                values = [self.nat(f"s{k}.{ATTRS[slot]}") for slot in range(len(ATTRS))]
                values[SERIAL] = k
                attrs.append(tuple(values))
        program = Program(len(ATTRS), Slots(CACHED, SERIAL, TURN_NO, MORE, COMPUTED), pools,
                          Engine(Num(budget), Num(chunk), (ServeKey(Order.ASC, Attr(KEY)),), MEM_POOL),
                          BLOCKS, 0, 1, 2, tuple(specs))
        holding = [k for k in range(n) if role[k] in ("before", "subject", "after", "away")
                   and not (k == subject and shape.subject in SUBJECT_NOT_HOLDING)]
        admission = {k: 10 + i for i, k in enumerate(holding)}
        sessions = []
        residents = []
        delays = []
        queue = []
        for k in range(n):
            r = role[k]
            place = shape.subject if k == subject else r
            frames, holds, pending, status = self.place(place, k, admission.get(k))
            sessions.append(Session(k, attrs[k], frames, holds, pending, admission.get(k, 0), status,
                                    0 if k != subject else 1 - min(shape.turns, 1)))
            if status is Status.RESIDENT:
                mode = shape.mode if k == subject else Mode.PREFILL
                residents.append(Resident(k, admission[k], 100 + k, mode, self.nat(f"s{k}.remaining", 1), MEM_POOL))
            if status is Status.DELAYED:
                delays.append((self.nat(f"s{k}.due"), k))
            if status is Status.QUEUED:
                queue.append(k)
        if shape.subject == "queued-head":  # the subject waits at the head
            queue.remove(subject)
            queue.insert(0, subject)
        residents.sort(key=lambda r: (r.admission, r.job))
        pool_states = []
        for q in (0, 1):
            holders = tuple(Holder(k, admission[k], self.nat(f"held[{POOL_NAMES[q]}][s{k}]"),
                                   self.nat(f"position[{POOL_NAMES[q]}][s{k}]"),
                                   shape.advanced if k == subject else True) for k in holding)
            entries = tuple(Entry(subject if shape.own == j else None, self.nat(f"entry[{POOL_NAMES[q]}][{j}]", 1))
                            for j in range(shape.entries[q]))
            pool_states.append(PoolState(holders, entries, tuple(queue) if q == SLOTS_POOL else (), 0))
        time = self.nat("now")
        machine = Machine(time, 1000, tuple(sessions), tuple(pool_states), tuple(residents), tuple(delays), (), (),
                          False)
        iteration = self.iteration(shape, machine, residents, subject, budget, chunk)
        return Instance(shape, program, machine, iteration, subject, self.variables)

    def place(self, place: str, k: int, admission: int | None):
        """The frames, holds, pending hold and status of a session at ``place``."""
        top_after_hold = Frame(2, 5, FrameKind.TOP)
        hold = (ActiveHold(admission, HOLD_STMT, (SLOTS_POOL, MEM_POOL)),) if admission is not None else ()
        if place.startswith("top:"):
            return (Frame(2, int(place[4:]), FrameKind.TOP),), (), None, Status.READY
        if place == "plain-end":
            return (Frame(4, 0, FrameKind.PLAIN), Frame(2, 4, FrameKind.TOP)), (), None, Status.READY
        if place in ("queued", "head", "queued-head"):
            return (top_after_hold,), (), HOLD_STMT, Status.QUEUED
        if place.startswith("body:"):
            return (Frame(3, int(place[5:]), FrameKind.BODY), top_after_hold), hold, None, Status.READY
        if place == "end-in-body":
            return ((Frame(6, 0, FrameKind.PLAIN), Frame(3, 4, FrameKind.BODY), top_after_hold), hold, None,
                    Status.READY)
        if place in ("before", "after", "resident", "grower", "victim"):
            return (Frame(3, 1, FrameKind.BODY), top_after_hold), hold, None, Status.RESIDENT
        if place == "away":
            return (Frame(3, 2, FrameKind.BODY), top_after_hold), hold, None, Status.DELAYED
        raise AssertionError(place)

    def iteration(self, shape: Shape, m: Machine, residents: list, subject: int, budget, chunk) -> Iteration:
        assigned = []
        if shape.assigned:
            for r in residents:
                if r.serial != subject or shape.subject == "victim":
                    assigned.append(Assignment(r.serial, self.nat(f"tokens[s{r.serial}]")))
        left = self.nat("left")
        pending = None
        if shape.subject == "grower":
            pending = (subject, MEM_POOL, self.nat(f"tokens[s{subject}]"))
        served = tuple(a.serial for a in assigned) + ((subject,) if pending else ())
        decoders = sum(1 for r in residents if r.mode is Mode.DECODE)
        return Iteration(budget, chunk, len(residents), decoders, left, served, tuple(assigned), False, False, False,
                         pending)


#: Places where the subject holds nothing.
SUBJECT_NOT_HOLDING = ("top:0", "top:1", "top:2", "top:3", "top:4", "plain-end", "queued-head", "none")

# -- properties ---------------------------------------------------------------------------------


def memory(p: Program, m: Machine):
    """allocated + cached ≤ cap in every pool."""
    return z3.And([held_blocks(ps.holders) + cached_blocks(ps.entries) <= p.pools[q].cap
                   for q, ps in enumerate(m.pools)])


def _resident(m: Machine, serial: int) -> Resident | None:
    return next((r for r in m.residents if r.serial == serial), None)


def budget(m: Machine, it: Iteration):
    """Tokens given + budget left = budget (so given ≤ budget); pending tokens within the budget left."""
    given = 0
    for a in reversed(it.assigned):
        given = a.tokens + given
    facts = [given + it.left == it.budget, given <= it.budget]
    if it.pending is not None:
        facts.append(it.pending[2] <= it.left)
    return z3.And(facts)


def run_left(m: Machine, it: Iteration):
    """No resident given more tokens than its run has left; every one given tokens still a resident."""
    facts = []
    for a in it.assigned:
        r = _resident(m, a.serial)
        facts.append(z3.BoolVal(False) if r is None else a.tokens <= r.remaining)
    if it.pending is not None:
        r = _resident(m, it.pending[0])
        facts.append(z3.BoolVal(False) if r is None else it.pending[2] <= r.remaining)
    return z3.And(facts) if facts else z3.BoolVal(True)


def re_entry(p: Program, before: Machine, after: Machine):
    """Every resident preempted by the rule: at the head of its hold's queue
    with computed = its position, or the computed it had when that is further
    (a hold preempted again while it recomputes keeps the furthest position),
    neither resident nor holder; or rejected."""
    facts = []
    for r in before.residents:
        if _resident(after, r.serial) is not None:
            continue
        s = after.sessions[r.serial]
        if s.status is Status.ENDED:
            continue  # pool/reject: its hold, re-read, is above a cap
        hold = next(h for h in before.sessions[r.serial].holds if MEM_POOL in h.pools)
        position = next(x.position for x in before.pools[MEM_POOL].holders
                        if x.serial == r.serial and x.hold == hold.id)
        # at the head; under requeue by key, at the end, to be chosen by its keys as any hold
        queue = after.pools[SLOTS_POOL].queue
        head = (queue[-1:] if p.pools[SLOTS_POOL].requeue_key else queue[:1]) == (r.serial,)
        holding = any(x.serial == r.serial for ps in after.pools for x in ps.holders)
        facts.append(z3.And(z3.BoolVal(head and s.status is Status.QUEUED and s.pending == HOLD_STMT
                                       and not holding),
                            s.attrs[COMPUTED] == arith.nmax(position, before.sessions[r.serial].attrs[COMPUTED])))
    return z3.And(facts) if facts else z3.BoolVal(True)


# -- the rules ------------------------------------------------------------------------------------


def _session(i: Instance) -> Session:
    return i.machine.sessions[i.subject]


def _execute(i: Instance):
    return msessions.execute(i.program, i.machine, _session(i)), i.iteration


def _spawn(i: Instance):
    return mexec.spawn(i.program, i.machine, len(i.machine.sessions)), i.iteration


def _grow(i: Instance):
    serial, q, tokens = i.iteration.pending
    return engine.grow_turn(i.program, i.machine, i.iteration, serial, q, tokens)


def _grow_continuing(i: Instance):
    """step/grow under vLLM 0.33.0's self-preemption rule (the pass goes on)."""
    program = replace(i.program, engine=replace(i.program.engine, self_preemption=SelfPreemption.CONTINUES))
    serial, q, tokens = i.iteration.pending
    return engine.grow_turn(program, i.machine, i.iteration, serial, q, tokens)


def _withdraw(i: Instance):
    return engine.withdraw(i.program, i.machine, i.iteration, i.subject, MEM_POOL)


def _schedule(i: Instance):
    return i.machine, engine.schedule(i.iteration, _resident(i.machine, i.subject))


def _admit(i: Instance):
    admitted = engine.admit_head(i.program, i.machine, i.iteration)
    if admitted is None:
        return i.machine, i.iteration
    m, it, _ = admitted
    return m, it


def _start(i: Instance):
    return i.machine, engine.start_iteration(i.program, i.machine)


def _end(i: Instance):
    return engine.end_iteration(i.program, i.machine, i.iteration), i.iteration


# -- serq-ref's extensions: schedule ahead, preempt by, requeue by key ---------------------------------

def ahead(p: Program) -> Program:
    """The program under ``schedule ahead``."""
    return replace(p, engine=replace(p.engine, ahead=True))


def by_key(p: Program) -> Program:
    """The program whose memory preempts by ``(-key)`` (the largest key first:
    vLLM's ``preempt by (-priority, -arrival)``) and whose slots pool requeues
    a preempted hold by key."""
    pools = list(p.pools)
    pools[MEM_POOL] = replace(pools[MEM_POOL], victim=(ServeKey(Order.DESC, Attr(KEY)),))
    pools[SLOTS_POOL] = replace(pools[SLOTS_POOL], queue=(ServeKey(Order.ASC, Attr(KEY)),), requeue_key=True)
    return replace(p, pools=tuple(pools))


def with_parked(i: Instance) -> tuple[Machine, Iteration]:
    """The configuration with the last admitted resident after the subject
    parked instead (schedule ahead: its run completed, it waits at the exit
    of its hold with its blocks held); the iteration has not served it."""
    m, it = i.machine, i.iteration
    last = max((r for r in m.residents if r.serial != i.subject), key=lambda r: r.admission, default=None)
    if last is None or last.admission < _resident(m, i.subject).admission:
        return m, it
    s = m.sessions[last.serial]
    frames = (Frame(3, len(BLOCKS[3]), FrameKind.BODY),) + s.frames[1:]
    sessions = tuple(replace(x, frames=frames, status=Status.PARKED) if x.serial == last.serial else x
                     for x in m.sessions)
    m = replace(m, sessions=sessions, residents=tuple(r for r in m.residents if r.serial != last.serial),
                parked=(last.serial,))
    back = sum((a.tokens for a in it.assigned if a.serial == last.serial), 0)
    it = replace(it, assigned=tuple(a for a in it.assigned if a.serial != last.serial), left=it.left + back,
                 served=tuple(x for x in it.served if x != last.serial))
    return m, it


def _park(i: Instance):
    """session/hold-exit under schedule ahead, the subject finishing: step/park."""
    return msessions.execute(ahead(i.program), replace(i.machine, finishing=(i.subject,)), _session(i)), i.iteration


def _apply(i: Instance):
    """step/apply: the subject, parked at the exit of its hold, exits it."""
    s = replace(_session(i), status=Status.PARKED)
    m = replace(i.machine, sessions=tuple(s if x.serial == i.subject else x for x in i.machine.sessions),
                parked=(i.subject,))
    return mexec.apply_parked(ahead(i.program), m), i.iteration


def _grow_parked(i: Instance):
    """step/grow under schedule ahead with the last admitted holder parked:
    step/preempt-parked when the growth does not fit."""
    m, it = with_parked(i)
    serial, q, tokens = it.pending
    return engine.grow_turn(ahead(i.program), m, it, serial, q, tokens)


def _withdraw_in_flight(i: Instance):
    """step/withdraw under schedule ahead of a victim the last iteration gave a
    decode token (its last token is not cached: ``in_flight``)."""
    return engine.withdraw(ahead(i.program), replace(i.machine, decoded=(i.subject,)), i.iteration, i.subject,
                           MEM_POOL)


def _grow_by_key(i: Instance):
    """step/grow under ``preempt by (-key)`` and ``requeue by key``."""
    serial, q, tokens = i.iteration.pending
    return engine.grow_turn(by_key(i.program), i.machine, i.iteration, serial, q, tokens)


MEMORY, BUDGET, RUN, REENTRY = "memory invariant", "iteration within its budget", "resident within its run", \
    "preempted re-enters at the head"
PARKED, EXITED, VICTIM = "a parked session's blocks are held", "an unparked session has exited its hold", \
    "the victim has the greatest keys"
#: re-entry under requeue by key: at the end of the queue, to be chosen by its keys as any hold
REQUEUE = "preempted re-enters its queue by key"


def parked_held(before: Machine, after: Machine):
    """Every session parked after the rule holds what it held before, and is parked."""
    facts = []
    for serial in after.parked:
        for q, ps in enumerate(after.pools):
            mine = [h for h in ps.holders if h.serial == serial]
            was = [h for h in before.pools[q].holders if h.serial == serial]
            facts.append(z3.BoolVal(len(mine) == len(was)))
            facts.extend(a.blocks == b.blocks for a, b in zip(mine, was))
        facts.append(z3.BoolVal(after.sessions[serial].status is Status.PARKED))
    return z3.And(facts) if facts else z3.BoolVal(True)


def exited(before: Machine, after: Machine):
    """Every session parked before and not after holds nothing (its hold exited)."""
    facts = [z3.BoolVal(not any(h.serial == serial for ps in after.pools for h in ps.holders))
             for serial in before.parked if serial not in after.parked]
    return z3.And(facts) if facts else z3.BoolVal(True)


def victim_order(before: Machine, after: Machine):
    """The resident the rule preempted has the greatest key of the residents
    holding the memory (ties: the latest admission): vLLM 0.33.0's
    ``max(running, key=(priority, arrival_time))``, scheduler.py:932-936."""
    holding = {h.serial for h in before.pools[MEM_POOL].holders}
    candidates = [r for r in before.residents if r.serial in holding]
    facts = []
    for v in candidates:
        if _resident(after, v.serial) is not None:
            continue
        kv = before.sessions[v.serial].attrs[KEY]
        for c in candidates:
            if c.serial != v.serial:
                kc = before.sessions[c.serial].attrs[KEY]
                facts.append(z3.Or(kv > kc, z3.And(kv == kc, z3.BoolVal(v.admission > c.admission))))
    return z3.And(facts) if facts else z3.BoolVal(True)


@dataclass(frozen=True)
class Rule:
    name: str
    apply: Callable[[Instance], tuple[Machine, Iteration]]
    properties: tuple[str, ...]
    shapes: Callable[[int], list[Shape]]
    #: the iteration's invariants are assumed before (False: the rule starts one)
    in_iteration: bool = False
    #: the program the rule runs under (serq-ref's extensions), for the properties that read it
    program: Callable[[Program], Program] = lambda p: p
    #: the configuration before the rule, where it is not the shape's (a parked session)
    before: Callable[[Instance], tuple[Machine, Iteration]] | None = None


def _entries(bound: int, subject: str, own: bool = True, **fixed) -> list[Shape]:
    """The subject at its place; 0 to ``bound`` cache entries in one pool (the
    other has none: a rule acts on each pool of a hold by itself, so a
    pool's invariant after it depends on that pool alone); with ``own``, the
    subject's own entry absent, first or last."""
    out = []
    for pool in (SLOTS_POOL, MEM_POOL):
        for e in range(0 if pool == SLOTS_POOL else 1, bound + 1):
            entries = (e, 0) if pool == SLOTS_POOL else (0, e)
            places = sorted({None, 0, e - 1} - {-1}, key=lambda x: -1 if x is None else x) if own and e else [None]
            for j in places:
                out.append(Shape(subject, entries=entries, own=j, **fixed))
    return out


def session_shapes(place: str, holding: bool) -> Callable[[int], list[Shape]]:
    """A session statement's rule: the other sessions all residents or all
    away (the rule reads them only as holders), every entry structure; a
    holding subject advanced or not."""
    def shapes(bound: int) -> list[Shape]:
        others = bound - 1
        out = []
        for residents in (0, others):
            for s in _entries(bound, place, own=holding, before=residents, away=others - residents):
                out.append(s)
                if holding:
                    out.append(replace(s, advanced=False))
        return out
    return shapes


def light_shapes(place: str) -> Callable[[int], list[Shape]]:
    """Rules that read no pool: the most structure the bound allows, every entry count."""
    def shapes(bound: int) -> list[Shape]:
        others = bound - 1
        half = others // 2
        rest = dict(before=half, away=others - half - (1 if others > 1 else 0), queued=1 if others > 1 else 0)
        return _entries(bound, place, own=False, **rest)
    return shapes


def turn_shapes(bound: int) -> list[Shape]:
    return [replace(s, turns=t) for s in light_shapes("top:2")(bound) for t in (0, 1)]


def resident_shapes(subject: str, modes: bool, assigned: bool, pools: bool = True, every_position: bool = True,
                    own_if_last: bool = False) -> Callable[[int], list[Shape]]:
    """The subject a resident; residents after it 0 to bound-1 (the victims
    a growth takes before it), the rest before it, or (``every_position``
    false, for a rule that does not read the residents' order) the subject
    first or last; its mode and the others' tokens where the rule reads
    them; every entry structure where it reads the pools (else none or the
    most); with ``own_if_last``, the subject's own entry only where it is the
    last resident (the only case where its prefix is released)."""
    def shapes(bound: int) -> list[Shape]:
        out = []
        for after in (range(bound) if every_position else sorted({0, bound - 1})):
            place = dict(after=after, before=bound - 1 - after)
            structures = (_entries(bound, subject, own=not own_if_last or after == 0, **place) if pools else
                          [Shape(subject, entries=(e, e), **place) for e in (0, bound)])
            for s in structures:
                for mode in ((Mode.PREFILL, Mode.DECODE) if modes else (Mode.PREFILL,)):
                    for given in ((False, True) if assigned else (False,)):
                        out.append(replace(s, mode=mode, assigned=given))
        return out
    return shapes


def admit_shapes(bound: int) -> list[Shape]:
    out = []
    for residents in range(bound):
        for s in _entries(bound, "queued-head", before=residents, queued=bound - 1 - residents):
            out.append(replace(s, assigned=True))
    return out


def iteration_shapes(bound: int) -> list[Shape]:
    out = []
    for residents in range(bound):
        for given in (False, True):
            out.append(Shape("resident", before=residents, assigned=given, entries=(bound, bound)))
    return out


RULES: tuple[Rule, ...] = (
    Rule("workload/arrive", _spawn, (MEMORY,), light_shapes("top:0")),
    Rule("session/set", _execute, (MEMORY,), light_shapes("top:0")),
    Rule("session/observe", _execute, (MEMORY,), light_shapes("top:1")),
    Rule("session/turn", _execute, (MEMORY,), turn_shapes),
    Rule("session/branch", _execute, (MEMORY,), light_shapes("top:3")),
    Rule("session/block-exit", _execute, (MEMORY,), light_shapes("plain-end")),
    Rule("session/hold-enter (pool/reject)", _execute, (MEMORY,), light_shapes("top:4")),
    Rule("stage/step-enter", _execute, (MEMORY,), session_shapes("body:0", holding=False)),
    Rule("stage/ps-enter (delay)", _execute, (MEMORY,), session_shapes("body:1", holding=False)),
    Rule("stage/ps-complete (delay)", lambda i: (mexec.release_due(i.machine), i.iteration), (MEMORY,),
         light_shapes("away")),
    Rule("session/hold-exit (pool/release)", _execute, (MEMORY,), session_shapes("body:4", holding=True)),
    Rule("session/end (pool/release)", _execute, (MEMORY,), session_shapes("end-in-body", holding=True)),
    Rule("step/iteration-start", _start, (MEMORY, BUDGET, RUN), iteration_shapes),
    Rule("step/schedule", _schedule, (MEMORY, BUDGET, RUN),
         resident_shapes("resident", modes=True, assigned=True, pools=False), in_iteration=True),
    Rule("step/grow (pool/grow, pool/evict-*)", _grow, (MEMORY, BUDGET, RUN, REENTRY),
         resident_shapes("grower", modes=False, assigned=True, own_if_last=True), in_iteration=True),
    Rule("step/grow, self preemption continue", _grow_continuing, (MEMORY, BUDGET, RUN, REENTRY),
         resident_shapes("grower", modes=False, assigned=True, own_if_last=True), in_iteration=True),
    Rule("step/withdraw (pool/preempt)", _withdraw, (MEMORY, BUDGET, RUN, REENTRY),
         resident_shapes("victim", modes=False, assigned=True, every_position=False), in_iteration=True),
    Rule("step/admit (pool/admit, pool/consume, pool/evict-*)", _admit, (MEMORY, BUDGET, RUN), admit_shapes,
         in_iteration=True),
    Rule("step/iteration-end (stage/step-complete)", _end, (MEMORY,), iteration_shapes),
    Rule("step/idle", lambda i: (mexec.idle(i.machine), i.iteration), (MEMORY,), light_shapes("away")),
    # serq-ref's extensions of seed 002 (docs/design/async-scheduling.md, priorities-and-limits.md)
    Rule("step/park (schedule ahead)", _park, (MEMORY, PARKED), session_shapes("body:4", holding=True),
         program=ahead),
    Rule("step/apply (session/hold-exit)", _apply, (MEMORY, EXITED), session_shapes("body:4", holding=True),
         program=ahead, before=lambda i: (replace(i.machine, parked=(i.subject,)), i.iteration)),
    Rule("step/grow, a parked holder (step/preempt-parked)", _grow_parked, (MEMORY, BUDGET, RUN, PARKED, EXITED),
         resident_shapes("grower", modes=False, assigned=True, pools=False), in_iteration=True, program=ahead,
         before=with_parked),
    Rule("step/withdraw, its decode in flight (pool/preempt)", _withdraw_in_flight, (MEMORY, BUDGET, RUN, REENTRY),
         resident_shapes("victim", modes=False, assigned=True, every_position=False), in_iteration=True,
         program=ahead),
    # three sessions: each candidate's keys are compared with the best so far, three ways, so four take
    # 5 280 paths and 30 s of CPU, more than the other rules together
    Rule("step/grow, preempt by and requeue by key", _grow_by_key, (MEMORY, BUDGET, RUN, REQUEUE, VICTIM),
         lambda bound: resident_shapes("grower", modes=False, assigned=True, pools=False)(min(bound, 3)),
         in_iteration=True, program=by_key),
)


# -- proving ------------------------------------------------------------------------------------------


@dataclass
class Result:
    rule: str
    property: str
    proved: bool
    shapes: int = 0
    paths: int = 0
    counterexample: str | None = None
    seconds: float = 0.0

    def line(self) -> str:
        if self.proved:
            return (f"{self.rule}: {self.property}: proved ({self.shapes} shapes, {self.paths} paths, "
                    f"{self.seconds:.1f} s)")
        return f"{self.rule}: {self.property}: NOT PROVED: {self.counterexample}"


def _goal(prop: str, i: Instance, m: Machine, it: Iteration):
    if prop == MEMORY:
        return memory(i.program, m)
    if prop == BUDGET:
        return budget(m, it)
    if prop == RUN:
        return run_left(m, it)
    if prop in (REENTRY, REQUEUE):
        return re_entry(i.rule_program, i.machine, m)
    if prop == PARKED:
        return parked_held(i.machine, m)
    if prop == EXITED:
        return exited(i.rule_before, m)
    if prop == VICTIM:
        return victim_order(i.machine, m)
    raise AssertionError(prop)


def counterexample(model: z3.ModelRef, i: Instance) -> str:
    """The configuration the rule fails on, with the model's values."""
    def value(x) -> str:
        return str(model.eval(x, model_completion=True)) if isinstance(x, z3.ExprRef) else str(x)

    m, it = i.machine, i.iteration
    parts = [f"[{i.shape.describe()}]"]
    for q, ps in enumerate(m.pools):
        pool = i.program.pools[q]
        holders = ", ".join(f"s{h.serial} {value(h.blocks)} at {value(h.position)}" for h in ps.holders)
        entries = ", ".join(f"{'dead' if e.owner is None else f's{e.owner}'} {value(e.blocks)}" for e in ps.entries)
        parts.append(f"pool {POOL_NAMES[q]}: cap {value(pool.cap)} blocks of {value(pool.block)}, "
                     f"held [{holders}], cached [{entries}], queue {list(ps.queue)}")
    s = m.sessions[i.subject]
    attrs = " ".join(f"{ATTRS[k]}={value(x)}" for k, x in enumerate(s.attrs) if k != SERIAL)
    parts.append(f"session s{i.subject} ({s.status.value}): {attrs}")
    residents = ", ".join(f"s{r.serial} {r.mode.value} {value(r.remaining)} left" for r in m.residents)
    if residents:
        parts.append(f"residents [{residents}]")
    if i.shape.subject in ("resident", "grower", "victim", "queued-head"):
        given = ", ".join(f"s{a.serial} {value(a.tokens)}" for a in it.assigned)
        pending = "" if it.pending is None else f", pending s{it.pending[0]} {value(it.pending[2])}"
        parts.append(f"iteration: budget {value(it.budget)}, chunk {value(it.chunk)}, left {value(it.left)}, "
                     f"given [{given}]{pending}")
    return "; ".join(parts)


def prove_rule(rule: Rule, bound: int) -> list[Result]:
    start = clock.perf_counter()
    results = {prop: Result(rule.name, prop, True) for prop in rule.properties}
    for shape in rule.shapes(bound):
        solver = z3.SolverFor("QF_UFLIA")
        builder = Builder(solver)
        i = builder.build(shape)
        i.rule_program = rule.program(i.program)
        before_m, before_it = rule.before(i) if rule.before is not None else (i.machine, i.iteration)
        i.rule_before = before_m
        solver.add(memory(i.program, before_m))
        if rule.in_iteration:
            solver.add(budget(before_m, before_it), run_left(before_m, before_it))
        explorer = Explorer(solver)
        for prop in rule.properties:
            results[prop].shapes += 1
        for m, it in explorer.paths(lambda: rule.apply(i)):
            goals = {prop: _goal(prop, i, m, it) for prop in rule.properties if results[prop].proved}
            for prop in goals:
                results[prop].paths += 1
            solver.push()
            solver.add(z3.Not(z3.And(list(goals.values()))))
            together = solver.check()
            solver.pop()
            if together == z3.unsat:
                continue  # every property holds on this path
            for prop, goal in goals.items():
                r = results[prop]
                solver.push()
                solver.add(z3.Not(goal))
                verdict = solver.check()
                if verdict == z3.sat:
                    r.proved = False
                    r.counterexample = counterexample(solver.model(), i)
                elif verdict == z3.unknown:
                    r.proved = False
                    r.counterexample = f"[{shape.describe()}] Z3 answered unknown ({solver.reason_unknown()})"
                solver.pop()
    seconds = clock.perf_counter() - start
    for r in results.values():
        r.seconds = seconds
    return list(results.values())


def prove_all(bound: int = 4, echo: Callable[[str], None] | None = None,
              rules: tuple[Rule, ...] = RULES) -> list[Result]:
    """Every (rule, property), each a line to ``echo`` as it is decided."""
    out = []
    for rule in rules:
        for r in prove_rule(rule, bound):
            out.append(r)
            if echo is not None:
                echo(r.line())
    return out
