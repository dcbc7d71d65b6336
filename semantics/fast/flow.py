"""Fast forms of the loops that apply rules one at a time (semantics/smallstep/
settle.py: a session's run, the follow-up work's drain, the pools' retries, a
head's admission by a step stage) and of the pool rules they apply most in a
step engine's run (pool/admit, pool/release), on pools that share no prefix.

| fast form | the definitions it folds |
|---|---|
| ``run_session``, ``drain``, ``retry_growers``, ``try_admit`` | the definition's loops (settle.py), the follow-up items applied by ``FOLLOW_UPS`` below |
| ``FOLLOW_UPS`` | settle.FOLLOW_UPS with ``run-session`` this module's run_session, ``pool/admit`` and ``pool/release`` the forms below |
| ``admit`` | pool/admit (pools.admit) when no pool of the hold shares prefixes, records built by setters; else the definition |
| ``release_next`` | pool/release (pools.release_next, release_units, give_back) of an allocation on a pool that shares no prefix and is not leased; else the definition |

``admit`` and ``release_next`` apply only to a program whose every field, every pool's and every hold's is
one they know or at its default (``Machine.fast_pools``, step.pools_known): a program with a pool or hold
setting added since (a new extension) is admitted and released by the definition's rules.
| ``admit_head`` | settle.admit_head without speculate: pool/admit, then step/admit (the admitted session taken off the ready sequence and run at once) |

Each computes what the definition computes, with the same arithmetic in the
same order, calling the definition's helpers where they read the state
(consume_prefix, make_room, session_env, mark_dirty, count_pool, make_ready,
ready_session). The fast engine runs no observer, so none emits a record.
tests/test_fast_step.py, tests/test_engines_equal.py and the digest hold
them to the definition.
"""

from __future__ import annotations

import math

from ..smallstep import pools as definition_pools
from ..smallstep import settle as definition_settle
from ..smallstep.configuration import (HOLD, READY, ActiveHold, Allocation, CacheEntry, Configuration, Frame,
                                       Holding, PoolState, Session, own_entry_index, ready_from, ready_serials,
                                       replace_at)
from ..smallstep.machine import EPSILON, MAX_QUIET_STATEMENTS, Machine, count_pool, fail, make_ready, mark_dirty
from ..smallstep.pools import KEEP, UNWIND, _computed, consume_prefix, fail_infinite
from ..smallstep.stages.step import Iteration, StepState
from ..smallstep.values import Env
from .records import build, setter

_new = object.__new__
_set_work = setter(Configuration, "work")
_set_ready = setter(Configuration, "ready")
_set_pools = setter(Configuration, "pools")
_set_sessions = setter(Configuration, "sessions")
_set_sessions_sequence = setter(Configuration, "sessions", "sequence")
_set_pools_sessions_sequence = setter(Configuration, "pools", "sessions", "sequence")
_set_stages = setter(Configuration, "stages")
_set_ended_attrs = setter(Configuration, "ended_attrs")
_set_queue = setter(PoolState, "queue")
#: the defaults of Holding's fields after the five pool/admit gives (those an extension added, e.g. skipped:
#: the fast forms apply only to pools where they keep their defaults)
_HOLDING_DEFAULTS = tuple(Holding._field_defaults[f] for f in Holding._fields[5:])
_set_allocated_holders = setter(PoolState, "allocated", "holders")
_set_allocated_holders_entries_cached = setter(PoolState, "allocated", "holders", "entries", "cached")
_set_holds = setter(Session, "holds")
_set_draws = setter(Session, "draws")
_set_attrs_frames_pc_admission = setter(Session, "attrs", "frames", "pc", "admission")
_set_holds_frames_pc = setter(Session, "holds", "frames", "pc")
_set_allocations = setter(ActiveHold, "allocations")
_set_iteration = setter(StepState, "iteration")
_set_admitted = setter(Iteration, "admitted")


# -- the loops -----------------------------------------------------------------------------------------------------


def drain(m: Machine, c: Configuration) -> Configuration:
    """settle.drain, the items applied by this module's FOLLOW_UPS."""
    work = c.work
    follow_ups = FOLLOW_UPS
    while work:
        item = work[0]
        c = follow_ups[item[0]](m, _set_work(c, ()), *item[1:])
        work = c.work + work[1:] if c.work else work[1:]
    return _set_work(c, ()) if c.work else c


def run_session(m: Machine, c: Configuration, serial: int) -> Configuration:
    """settle.run_session, its follow-up work drained by ``drain`` above."""
    ops = m.ops
    quiet = MAX_QUIET_STATEMENTS
    assert not c.work, "a session runs with no follow-up work waiting (drain, settle)"
    s = c.sessions.get(serial)
    env = _new(Env)
    env.config = c
    env.serial = serial
    env.stream = None if s is None else s.stream
    while s is not None and s.status == READY:
        quiet -= 1
        if quiet < 0:
            fail(f"{MAX_QUIET_STATEMENTS} statements ran at time {c.time:g} without anything blocking: "
                 f"the program loops without letting time pass", c, (s.frames[-1].block, max(0, s.pc - 1)))
        op = ops[s.frames[-1].block][s.pc]
        env.attrs = s.attrs
        env.draws = s.draws
        env.stmt = op.at
        if op.local:
            s = op.rule(m, c, s, op, env)
            continue
        c = op.rule(m, c, s, op, env)
        if c.work:
            c = drain(m, c)
        env.config = c
        s = c.sessions.get(serial)
    return c


def retry_growers(m: Machine, c: Configuration, p: int) -> Configuration:
    """settle.retry_growers, drained by ``drain`` above."""
    while True:
        grower = definition_pools.fitting_grower(m, c, p)
        if grower is None:
            return c
        c = drain(m, definition_pools.resume_grower(m, c, p, *grower))


def try_admit(m: Machine, c: Configuration, p: int) -> Configuration:
    """settle.try_admit, pool/admit by ``admit`` below."""
    while True:
        a = definition_pools.admissible(m, c, p)
        if a is None:
            return c
        c = definition_pools.header_drawn(c, a)
        if not a.fits:
            return c
        c = admit(m, c, p, a)
        if c.work:
            c = drain(m, c)


def admit_head(m: Machine, c: Configuration, s: int, q: int, a) -> Configuration:
    """settle.admit_head on a stage without speculate: pool/admit (``admit`` below), then step/admit: the
    session taken off the ready sequence, the iteration's admitted, and its run at once (the follow-up
    run-session)."""
    if m.steps[s].spec:
        return definition_settle.admit_head(m, c, s, q, a)
    serial = a.waiting.serial
    c = admit(m, definition_pools.header_drawn(c, a), q, a)
    if c.work:
        c = drain(m, c)
    # step/admit
    ready = c.ready
    if ready[0] is None and ready[1] is not None and ready[1][1] is None and ready[1][0] == serial:
        c = _set_ready(c, ready_from(()))  # it was the one ready session
    else:
        c = _set_ready(c, ready_from(x for x in ready_serials(ready) if x != serial))
    st = c.stages[s]
    it = st.iteration
    c = _set_stages(c, replace_at(c.stages, s, _set_iteration(st, _set_admitted(it, it.admitted + (serial,)))))
    return run_session(m, c, serial)


# -- pool/admit ----------------------------------------------------------------------------------------------------


def admit(m: Machine, c: Configuration, p: int, a) -> Configuration:
    """pool/admit (pools.admit) of ``a``, which fits, when no pool of its hold shares prefixes: the hold
    leaves the queue and takes its units on every pool (its own cached prefix consumed, room made), its
    body runs."""
    waiting, units, reuse = a.waiting, a.units, a.reuse
    serial = waiting.serial
    s = c.sessions[serial]
    pending = s.pending
    pools = c.pools
    if not m.fast_pools or any(pools[q].table is not None for q in pending.pools):
        return definition_pools.admit(m, c, p, a)
    hold = m.holds[pending.stmt]
    pool = pools[p]
    k = pool.queue.index(waiting)
    admission = c.sequence
    s = _set_holds(s, s.holds + (build(ActiveHold, (admission, pending.stmt, ())),))
    c = _set_pools_sessions_sequence(c, replace_at(pools, p, _set_queue(pool, pool.queue[:k] + pool.queue[k + 1:])),
                                     c.sessions.set(serial, s), admission + 1)
    cached = 0.0
    warm = c.time >= m.warmup
    for q, u in zip(pending.pools, units):
        consumed = 0.0
        if hold.cache is not None:
            c, consumed = consume_prefix(m, c, q, serial, reuse)
            cached = max(cached, consumed)
        need = m.round_up(q, u)
        if need == math.inf:
            fail_infinite(m, c, q, "the hold's units", pending.stmt)
        c = m.make_room(m, c, q, need, pending.stmt)
        pool = c.pools[q]
        c = _set_pools(c, replace_at(c.pools, q, _set_allocated_holders(
            pool, pool.allocated + need,
            pool.holders + (build(Holding, (admission, serial, admission, need, False) + _HOLDING_DEFAULTS),))))
        c = mark_dirty(m, count_pool(c, q, admissions=1), q) if warm else mark_dirty(m, c, q)
        s = c.sessions[serial]
        active = s.holds[-1]
        active = _set_allocations(active, active.allocations + (build(Allocation, (q, need, min(consumed, need),
                                                                                   False)),))
        c = _set_sessions(c, c.sessions.set(serial, _set_holds(s, s.holds[:-1] + (active,))))
    if warm:
        c = count_pool(c, p, wait_sum=c.time - pending.joined, wait_count=1)
    s = c.sessions[serial]
    attrs = list(s.attrs)
    attrs[m.program.slot_cached] = cached
    s = _set_attrs_frames_pc_admission(s, tuple(attrs), s.frames + (build(Frame, (hold.body, HOLD, pending.stmt,
                                                                                   s.pc)),), 0, admission)
    return make_ready(m, c, s)


# -- pool/release --------------------------------------------------------------------------------------------------


def release_next(m: Machine, c: Configuration, serial: int, hold_id: int, lease_pool: int | None = None,
                 preempted: bool = False, unhashed: tuple[int, float] | None = None, after=KEEP) -> Configuration:
    """pool/release (pools.release_next, release_units, give_back) of the hold's first allocation, on a pool
    that shares no prefix and that it does not lease; else the definition."""
    if not m.fast_pools:
        return definition_pools.release_next(m, c, serial, hold_id, lease_pool, preempted, unhashed, after)
    s = c.sessions[serial]
    holds = s.holds
    h = 0
    while holds[h].hold_id != hold_id:
        h += 1
    hold = holds[h]
    if not hold.allocations:
        return definition_pools.release_next(m, c, serial, hold_id, lease_pool, preempted, unhashed, after)
    a = hold.allocations[0]
    q = a.pool
    pool = c.pools[q]
    if q == lease_pool or pool.table is not None:
        return definition_pools.release_next(m, c, serial, hold_id, lease_pool, preempted, unhashed, after)
    s = _set_holds(s, replace_at(holds, h, _set_allocations(hold, hold.allocations[1:])))
    computed = a.position if preempted else _computed(a)
    if unhashed is not None and q == unhashed[0]:
        computed -= unhashed[1]
    # give_back, on a pool that shares nothing
    units = a.units
    holder_id = hold.hold_id
    allocated = pool.allocated - units
    holders = tuple([x for x in pool.holders if not (x.serial == serial and x.hold_id == holder_id)])
    entries, cached = pool.entries, pool.cached
    compiled = m.holds[hold.stmt]
    sequence = c.sequence
    if compiled.cache is not None:  # read with the configuration give_back reads it in: the session's allocation gone
        c = _set_sessions(c, c.sessions.set(serial, s))
        env = Env(c, s.attrs, s.serial, s.stream, s.draws, hold.stmt)  # session_env
        want = max(0.0, compiled.cache(env))
        if env.draws != s.draws:  # with_draws
            s = _set_draws(s, env.draws)
        kept = m.round_down(q, min(want, computed))
        if kept > 0:
            k = own_entry_index(entries, serial)
            if k >= 0:
                cached -= entries[k].units
                entries = entries[:k] + entries[k + 1:]
            entries = entries + (build(CacheEntry, (serial, serial, kept, c.time, sequence)),)
            cached = cached + kept
            sequence += 1
    pool = _set_allocated_holders_entries_cached(pool, allocated, holders, entries, cached)
    c = _set_pools_sessions_sequence(c, replace_at(c.pools, q, pool), c.sessions.set(serial, s), sequence)
    if m.keeps_ended_attrs:
        c = _set_ended_attrs(c, c.ended_attrs.set(serial, s.attrs))
    c = mark_dirty(m, c, q)
    if after is KEEP or len(hold.allocations) > 1:
        return c
    s = c.sessions[serial]
    frames, pc = s.frames, s.pc
    if after == UNWIND:
        while not (frames[-1].kind == HOLD and frames[-1].origin == hold.stmt):
            frames = frames[:-1]
        frames, pc = frames[:-1], frames[-1].resume
    return _set_sessions(c, c.sessions.set(serial, _set_holds_frames_pc(s, s.holds[:-1], frames, pc)))


#: settle.FOLLOW_UPS with this module's forms in place
FOLLOW_UPS = {**definition_settle.FOLLOW_UPS,
              "run-session": run_session,
              "pool/admit": lambda m, c, q, a: admit(m, definition_pools.header_drawn(c, a), q, a),
              "pool/release": release_next}
