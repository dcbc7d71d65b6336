"""Fast forms of the step engine (semantics/smallstep/stages/step.py) and of
settle's loop that forms an iteration (semantics/smallstep/settle.py), for a
step stage of the shape vLLM's engine has (lib/vllm.sq): served in admission
order (``serve admission``: no keys, not exclusive prefill), without
speculative decoding, on pools that share no prefix, and no IR field that
this module does not know (``applies``; a program with any other setting,
such as a new extension, forms its iterations by the definition's rules).

| fast form | the definitions it folds |
|---|---|
| ``form_iteration`` | settle.form_iteration: step/iteration-start, then each step/schedule of a resident whose hold has room (or that waits) computed on the iteration as a local value, which is stored in the configuration before any other rule applies (step/grow and the pool/grow it follows, step/admit and pool/admit, step/admit-stop, step/apply: the definition's own rules, which read it there); then step/iteration or step/idle |
| ``close_iteration`` | step/iteration (and _count_iteration): the cost read, the end event scheduled and the counts added, the configuration built once |
| ``end_iteration`` | step/iteration-end (and its inter-token bookkeeping), each record built once |
| ``settle`` | settle (the definition's loop, calling ``form_iteration`` above and flow.py's loops) |

Every form computes what the rules compute, with the same arithmetic in the
same order, and calls the definition's helpers where they read the state
(context_before, want_of, within_length, slots_target, cost_context,
advance_position, innermost_hold, follow_up). The fast engine has no
observer (a step trace runs the definition), so no form emits a record.
tests/test_fast_step.py holds them to the definition (generated step-engine
programs and the oracle's scenario programs, byte for byte, the forms taken).
"""

from __future__ import annotations

import dataclasses

from .. import ir
from ..errors import RunError
from ..smallstep import settle as definition_settle
from ..smallstep.configuration import (DECODE, EMPTY_READY, GROWING, PREFILL, ActiveHold, Allocation, Configuration, Holding,
                                       PoolState, Session, Statistics,
                                       innermost_hold, insert_event, ready_pop, replace_at)
from ..smallstep.machine import EPSILON, Machine, follow_up
from ..smallstep.stages import step as definition
from ..smallstep.stages.step import (EVENT, Assignment, Iteration, Resident, StepState, StepStats, context_before,
                                     cost_context, slots_target, want_of, within_length)
from . import flow
from .records import build, setter

#: the fields of ir.Step this module knows: a step stage with another field not at its default falls back
KNOWN_STEP_FIELDS = frozenset({"budget", "cost", "chunk", "serve", "memory", "self_preemption", "schedule_ahead",
                               "spec_tokens", "spec_accept", "spec_lookahead", "spec_slots", "spec_within"})
#: the fields of ir.Pool this module knows (likewise, for every pool of the program)
KNOWN_POOL_FIELDS = frozenset({"name", "index", "cap", "block", "evict", "preempt", "queue", "spill", "admit_via",
                               "requeue", "share_prefixes"})
#: the fields of ir.Hold, ir.HoldPool and ir.Program the fast forms of pool rules (flow.py) and of the step
#: engine know: a program with another one not at its default runs by the definition's pool and step rules
KNOWN_HOLD_FIELDS = frozenset({"pools", "reuse", "body", "cache", "lease", "content"})
KNOWN_HOLD_POOL_FIELDS = frozenset({"ref", "units", "reserve"})
KNOWN_PROGRAM_FIELDS = frozenset({
    "version", "attrs", "attr_types", "sides", "observes", "pools", "stages", "arrival", "trace", "trace_ordered",
    "init", "turn", "session", "blocks", "horizon", "warmup", "seed", "arrivals", "slot_cached", "slot_serial",
    "slot_turn", "slot_new", "slot_out", "slot_think", "slot_more", "slot_forced", "slot_computed", "hidden", "share",
    "gauges"})

_set_stages = setter(Configuration, "stages")
_set_stages_events_sequence = setter(Configuration, "stages", "events", "sequence")
_set_stages_events_sequence_statistics = setter(Configuration, "stages", "events", "sequence", "statistics")
_set_sessions_stages = setter(Configuration, "sessions", "stages")
_set_statistics = setter(Configuration, "statistics")
_set_ready = setter(Configuration, "ready")
_set_dirty = setter(Configuration, "dirty")
_set_engines = setter(Statistics, "engines")
_set_iteration = setter(StepState, "iteration")
_set_iteration_finishing = setter(StepState, "iteration", "finishing")
_set_iteration_count = setter(StepState, "iteration", "count")
_set_jobs_iteration = setter(StepState, "jobs", "iteration")
_set_jobs_iteration_finishing_decoded = setter(StepState, "jobs", "iteration", "finishing", "decoded")
_set_remaining = setter(Resident, "remaining")
_set_served = setter(Iteration, "served")
_set_served_pending = setter(Iteration, "served", "pending")
_set_served_assigned_left = setter(Iteration, "served", "assigned", "left")
_set_due_pending = setter(Iteration, "due", "pending")
_set_last_gaps = setter(StepStats, "last_token", "gaps")
_set_session_holds = setter(Session, "holds")
_set_pending_assigned_left = setter(Iteration, "pending", "assigned", "left")
_set_sessions = setter(Configuration, "sessions")
_set_pools = setter(Configuration, "pools")
_set_allocated_holders = setter(PoolState, "allocated", "holders")
_set_holding_units = setter(Holding, "units")
#: the defaults of Iteration's fields after the sixteen start_iteration gives (those an extension added: the
#: fast forms apply only where they keep their defaults)
_ITERATION_DEFAULTS = tuple(Iteration._field_defaults[f] for f in Iteration._fields[16:])
_set_allocations = setter(ActiveHold, "allocations")
_set_units = setter(Allocation, "units")
_set_position_advanced = setter(Allocation, "position", "advanced")
_set_advanced = setter(Allocation, "advanced")
_INF = float("inf")


def _non_default(node, known: frozenset) -> bool:
    """Whether the IR record ``node`` has a field outside ``known`` set to other than its default."""
    for f in dataclasses.fields(node):
        if f.name in known:
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
        if default is dataclasses.MISSING or getattr(node, f.name) != default:
            return True
    return False


def pools_known(program: ir.Program) -> bool:
    """Whether every field of the program, of its pools and of its hold statements is one the fast forms of
    pool rules know, or at its default (a setting added since, such as a new extension, is not)."""
    if _non_default(program, KNOWN_PROGRAM_FIELDS) or any(_non_default(p, KNOWN_POOL_FIELDS) for p in program.pools):
        return False
    for block in program.blocks:
        for stmt in block:
            if isinstance(stmt, ir.Hold) and (_non_default(stmt, KNOWN_HOLD_FIELDS) or any(
                    _non_default(x, KNOWN_HOLD_POOL_FIELDS) for x in stmt.pools)):
                return False
    return True


def applies(m: Machine) -> tuple[bool, ...]:
    """Per stage, whether its iterations are formed and ended by the forms here (the module's docstring):
    a step stage served in admission order, without speculate, whose IR has no field this module does not
    know but at its default, in a program whose pools and holds have none either (``m.fast_pools``:
    pools_known), no pool sharing prefixes, and no observer."""
    program = m.program
    if m.observer or not m.fast_pools or any(p.share_prefixes for p in program.pools):
        return tuple(False for _ in program.stages)
    out = []
    for s, stage in enumerate(program.stages):
        kind = stage.kind
        ok = (isinstance(kind, ir.Step) and not _non_default(kind, KNOWN_STEP_FIELDS) and kind.serve == ()
              and kind.spec_tokens == 0 and kind.spec_accept is None and kind.spec_lookahead == 0
              and kind.spec_slots == 0)
        if ok:
            facts = m.steps[s]
            ok = not facts.keys and not facts.exclusive and facts.spec == 0.0 and facts.slots == 0.0 \
                and facts.lookahead == 0.0
        out.append(ok)
    return tuple(out)


# -- forming an iteration ------------------------------------------------------------------------------------------


def start_iteration(m: Machine, c: Configuration, s: int) -> Configuration:
    """step/iteration-start (the definition's start_iteration), the stage's record built once."""
    facts = m.steps[s]
    context = context_before(m, c, s)
    env = definition._stage_env(c, context)
    budget = max(0.0, definition._read(m, c, s, "budget", facts.budget, env))
    chunk = max(0.0, definition._read(m, c, s, "chunk", facts.chunk, env))
    st = c.stages[s]
    it = build(Iteration, (st.count + 1, c.time, budget, chunk, budget - facts.slots, (), (), None, False, True,
                           facts.exclusive, None, context, None, (), facts.slots) + _ITERATION_DEFAULTS)
    st = _set_iteration_finishing(st, it, ()) if st.finishing else _set_iteration(st, it)
    return _set_stages(c, replace_at(c.stages, s, st))


def form_iteration(m: Machine, c: Configuration, s: int) -> Configuration:
    """settle.form_iteration for a stage ``applies`` takes (the module's docstring): the same rules in the
    same order; a schedule that neither waits for a growth nor leaves follow-up work is computed on the
    iteration held here, which goes into the configuration before any other rule reads it."""
    drain = flow.drain
    facts = m.steps[s]
    slots = facts.slots
    c = start_iteration(m, c, s)
    st = c.stages[s]
    it = st.iteration
    local = False  # whether ``it`` is newer than the configuration's
    while True:
        if it.pending is not None:
            a = it.pending
            grown = _grow(m, c, s, a, st) if a.job_id >= 0 else None
            if grown is not None:  # pool/grow (it fits), then step/grow: it grew
                c = grown
                it = _set_pending_assigned_left(it, None, it.assigned + (a,), it.left - a.tokens - slots)
                local = True
                continue
            if local:
                c = _set_stages(c, replace_at(c.stages, s, _set_iteration(st, it)))
                local = False
            if definition.pending_growth(m, c, s) > EPSILON:  # the growth, then step/grow
                c = drain(m, follow_up(c, *definition.growth_for(m, c, s)))
            else:
                c = definition.select_prefill(m, c, s)
            st = c.stages[s]
            it = st.iteration
            continue
        if it.open and it.left > 0:
            served = it.served
            r = None
            for x in st.jobs:  # next_resident: the first not yet served, in admission order
                if x.job_id not in served:
                    r = x
                    break
            if r is not None:  # step/schedule
                tokens = min(want_of(r, it.chunk, 0.0), it.left)
                waits = c.sessions[r.owner].status == GROWING
                position = need = 0.0
                if not waits and r.growing is not None:
                    session = c.sessions[r.owner]
                    h, k = innermost_hold(session, r.growing)
                    if h < 0:
                        raise RunError(f"a run growing {m.pool_name(r.growing)} outside a hold of "
                                       f"{m.pool_name(r.growing)}", time=c.time)
                    a = session.holds[h].allocations[k]
                    position = a.position
                    tokens = within_length(m, s, position, tokens)
                    need = slots_target(m, s, position, tokens) - a.units
                if tokens <= 0.0:
                    waits = True
                served = served + (r.job_id,)
                if waits:
                    it = _set_served(it, served)
                elif need > EPSILON:
                    it = _set_served_pending(it, served, build(Assignment, (r.job_id, r.owner, r.mode, tokens,
                                                                            position, 0.0, 0.0)))
                else:
                    it = _set_served_assigned_left(it, served, it.assigned + (build(Assignment, (
                        r.job_id, r.owner, r.mode, tokens, position, 0.0, 0.0)),), it.left - tokens - slots)
                local = True
                continue
            if not it.preempted:
                if local:
                    c = _set_stages(c, replace_at(c.stages, s, _set_iteration(st, it)))
                    local = False
                head = definition.next_head(m, c, s)
                if head is not None:
                    q, a = head
                    if a.fits:  # pool/admit, then step/admit (the session runs at once)
                        c = flow.admit_head(m, c, s, q, a)
                    else:
                        c = definition.admit_stop(m, c, s, q, a)
                    st = c.stages[s]
                    it = st.iteration
                    continue
        if local:
            st = _set_iteration(st, it)
            c = _set_stages(c, replace_at(c.stages, s, st))
        # schedule ahead: a batch, though empty, while a parked session waits for it
        formed = it.assigned or it.preempted or st.parked or st.rejects
        c = close_iteration(m, c, s) if formed else definition.drop_iteration(m, c, s)
        st = c.stages[s]
        if st.parked or st.rejects or st.overrun:  # schedule ahead: the ended iteration's results apply now
            c = drain(m, definition.apply_ended(m, c, s))
        return c


def _grow(m: Machine, c: Configuration, s: int, a: Assignment, st: StepState) -> Configuration | None:
    """The pending chunk ``a``'s growth (step.growth_for's pool/grow item, pools.grow) when it fits the pool
    without a preemption, on a pool that evicts lru and spills nothing (make_room_lru reads no stage): the
    configuration after pool/grow (pools._allocate_more, make_room first), or
    ``c`` when the growth rounds to nothing; None when it does not fit (or is infinite, or the resident is
    gone): the definition's rules apply (pool/preempt, pool/grow-wait, the error)."""
    r = None
    for x in st.jobs:  # step.resident_of
        if x.job_id == a.job_id:
            r = x
            break
    if r is None or r.growing is None:
        return None
    p = r.growing
    if m.evict_keys[p] is not None or m.spill[p] is not None:
        return None  # (its evictions may read the iteration, which the configuration does not hold yet)
    serial = r.owner
    session = c.sessions[serial]
    h, k = innermost_hold(session, p)
    if h < 0:
        return None
    hold = session.holds[h]
    alloc = hold.allocations[k]
    amount = slots_target(m, s, alloc.position, a.tokens) - alloc.units  # step.pending_growth, growth_for
    if not amount > EPSILON:
        return None
    current = alloc.units  # pools.growth_need
    need = m.round_up(p, current + amount) - current
    if need == _INF:
        return None
    if need <= EPSILON:
        return c
    if c.pools[p].table is not None or not c.pools[p].allocated + need <= m.caps[p] + EPSILON:  # grow_fits
        return None
    # pool/grow: pools._allocate_more on a pool that shares nothing
    c = m.make_room(m, c, p, need, None)
    session = c.sessions[serial]
    hold = session.holds[h]
    alloc = hold.allocations[k]
    hold = _set_allocations(hold, replace_at(hold.allocations, k, _set_units(alloc, alloc.units + need)))
    session = _set_session_holds(session, replace_at(session.holds, h, hold))
    pool = c.pools[p]
    hold_id = hold.hold_id
    holders = tuple([_set_holding_units(x, x.units + need) if x.serial == serial and x.hold_id == hold_id else x
                     for x in pool.holders])
    c = _set_pools(c, replace_at(c.pools, p, _set_allocated_holders(pool, pool.allocated + need, holders)))
    return _set_sessions(c, c.sessions.set(serial, session))


def _advance_position(hold, k: int, amount: float):
    """pools.advance_position, each record built by a setter."""
    allocations = []
    for i, x in enumerate(hold.allocations):
        if i == k:
            allocations.append(_set_position_advanced(x, x.position + amount, True))
        elif x.advanced:
            allocations.append(x)
        else:
            allocations.append(_set_advanced(x, True))
    return _set_allocations(hold, tuple(allocations))


def close_iteration(m: Machine, c: Configuration, s: int) -> Configuration:
    """step/iteration (the definition's close_iteration and _count_iteration), the configuration built once."""
    st = c.stages[s]
    it = st.iteration
    env = cost_context(m, c, s, it)
    cost = max(0.0, definition._read(m, c, s, "cost", m.steps[s].cost, env))
    if cost == 0.0 and env.tokens > 0:
        raise RunError(f"step stage {m.stage_name(s)}: an iteration of {env.tokens:g} tokens costs 0: an "
                       f"iteration with tokens must take time", time=c.time)
    due = (c.time + cost, c.sequence)
    it = _set_due_pending(it, due, None)
    stages = replace_at(c.stages, s, _set_iteration_count(st, it, it.number))
    events = insert_event(c.events, due, EVENT, s)
    if not c.time >= m.warmup:
        return _set_stages_events_sequence(c, stages, events, c.sequence + 1)
    # step._count_iteration
    stats = c.statistics
    old = stats.engines[s]
    assigned = it.assigned
    prefills, decodes = count_modes(assigned)
    new = build(StepStats, (old.iterations + 1, old.prefill_only + (1 if prefills and not decodes else 0),
                            old.decode_only + (1 if decodes and not prefills else 0),
                            old.mixed + (1 if prefills and decodes else 0), old.empty + (1 if not assigned else 0),
                            old.tokens + env.tokens, old.decodes + decodes, old.last_token, old.gaps,
                            old.scheduled + len(assigned), old.offered + it.budget, old.preemptions))
    return _set_stages_events_sequence_statistics(c, stages, events, c.sequence + 1,
                                                  _set_engines(stats, replace_at(stats.engines, s, new)))



def count_modes(assigned) -> tuple[int, int]:
    """How many of an iteration's assignments prefill and how many decode (step._count_iteration's counts), in
    one pass; shared by close_iteration and the step loop's _Run._close."""
    prefills = decodes = 0
    for a in assigned:
        if a.mode == PREFILL:
            prefills += 1
        elif a.mode == DECODE:
            decodes += 1
    return prefills, decodes


# -- the iteration's end -------------------------------------------------------------------------------------------


def end_iteration(m: Machine, c: Configuration, s: int, _b: int = 0) -> Configuration:
    """step/iteration-end (the definition's end_iteration without speculate, and _note_tokens), each record
    built once: per served resident its run lowered, its growing hold advanced; the runs done complete
    (the follow-up stage/step-complete, in the order served)."""
    if not m.fast_steps[s]:
        return definition.end_iteration(m, c, s, _b)
    st = c.stages[s]
    it = st.iteration
    jobs = {r.job_id: r for r in st.jobs}
    sessions = c.sessions
    done = []
    assigned = it.assigned
    for a in assigned:
        if a.job_id < 0:
            continue
        r = jobs[a.job_id]
        r = jobs[a.job_id] = _set_remaining(r, r.remaining - a.tokens)
        if r.growing is not None:
            session = sessions[a.serial]
            h, k = innermost_hold(session, r.growing)
            holds = session.holds
            sessions = sessions.set(a.serial, _set_session_holds(session, replace_at(
                holds, h, _advance_position(holds[h], k, a.tokens))))
        if r.remaining <= EPSILON:
            done.append(r)
    residents = tuple([jobs[r.job_id] for r in st.jobs])
    if m.steps[s].ahead:
        st = _set_jobs_iteration_finishing_decoded(st, residents, None, tuple([r.owner for r in done]),
                                                   tuple([a.serial for a in assigned
                                                          if a.mode == DECODE or a.drafts > 0]))
    else:
        st = _set_jobs_iteration(st, residents, None)
    c = _set_sessions_stages(c, sessions, replace_at(c.stages, s, st))
    # _note_tokens: the inter-token latency's bookkeeping
    stats = c.statistics
    old = stats.engines[s]
    last = last0 = old.last_token
    gaps = gaps0 = old.gaps
    now = c.time
    warm = now >= m.warmup
    for a in assigned:
        if a.job_id < 0:
            continue
        finished = jobs[a.job_id].remaining <= EPSILON
        if a.mode == PREFILL:
            if finished:
                last = last.set(a.serial, now)
            continue
        previous = last.get(a.serial)
        if previous is not None and warm:
            gaps = (now - previous, gaps)
        last = last.delete(a.serial) if finished and a.serial in last else (last if finished else
                                                                            last.set(a.serial, now))
    if last is not last0 or gaps is not gaps0:
        c = _set_statistics(c, _set_engines(stats, replace_at(stats.engines, s, _set_last_gaps(old, last, gaps))))
    if done:
        return follow_up(c, *[("stage/step-complete", s, r) for r in done])
    return c


# -- settle --------------------------------------------------------------------------------------------------------


def settle(m: Machine, c: Configuration) -> Configuration:
    """settle (the definition's), forming an iteration by ``form_iteration`` above on a stage it takes."""
    drain = flow.drain
    run_session = flow.run_session
    volatile = m.volatile
    engines = m.engines
    fast = m.fast_steps
    tried = ()
    if c.work:
        c = drain(m, c)
    while True:
        while c.ready != EMPTY_READY:
            serial, rest = ready_pop(c.ready)
            c = run_session(m, _set_ready(c, rest), serial)
        if c.dirty or volatile:
            admit_via = m.admitted_via_stage
            pools_ = sorted(c.dirty | volatile)
            c = _set_dirty(c, frozenset())
            for p in pools_:
                c = flow.retry_growers(m, c, p)
                if not admit_via[p]:
                    c = flow.try_admit(m, c, p)
            if c.ready != EMPTY_READY or c.dirty:
                continue
        if not engines or (c.events and c.events[0][0] == c.time):
            return c
        s = next((s for s in engines if s not in tried and definition.idle_with_work(m, c, s)), None)
        if s is None:
            return c
        tried += (s,)
        c = form_iteration(m, c, s) if fast[s] else definition_settle.form_iteration(m, c, s)


