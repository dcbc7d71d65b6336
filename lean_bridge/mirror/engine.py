"""The step engine's iteration (lean/SerqRef/Engine.lean): start, the
serving loop (schedule, grow, withdraw, admit) and the end.

One iteration, at time t, on the step clock (cost 1):
``start_iteration`` reads the budget and the chunk once; ``serve`` applies
one rule a turn: it gives tokens to the residents in serving order
(``pick_next``, ``schedule``; a growing run's tokens wait for ``grow_turn``,
which grows its hold or preempts the last resident holding the pool,
``withdraw`` taking back a victim's tokens), then admits heads of the queues
the engine serves (``admit_head``) while budget is left, never in an
iteration that preempted; ``end_iteration`` at t + 1 applies the tokens.
"""

from __future__ import annotations

from typing import Any

from ..arith import holds, monus, ndiv, nmax, nmin, nmul
from ..syntax import Hold, Mode, Order, Program, SelfPreemption, ServeKey
from .expr import Env, count_decoders, engine_env, eval_expr, session_env, want
from .pools import consume_entries, evict, grow_holder, innermost_holder
from .sessions import preempt, program_fuel, reserve_of, run_session
from .state import (ActiveHold, Assignment, Frame, FrameKind, Holder, Iteration, Machine, Resident, Status, blocks_for,
                    held_blocks, list_set, pool_of, pool_spec, put_pool, put_session, session_of, stmt_at, replace)


def start_iteration(p: Program, m: Machine) -> Iteration:
    """``startIteration`` (step/iteration-start): the budget and the chunk,
    read once with the residents before the iteration."""
    v = engine_env(m)
    budget = eval_expr(p, m, v, p.engine.budget)
    return Iteration(budget, eval_expr(p, m, v, p.engine.chunk), len(m.residents) + len(m.parked),
                     count_decoders(m.residents), budget, (), (), False, False, False, None)


def resident_env(m: Machine, it: Iteration, r: Resident) -> Env:
    """``residentEnv``: what a serve key reads for a resident."""
    return Env(session_of(m, r.serial).attrs, r.serial, m.time, it.residents, it.decoders,
               1 if r.mode is Mode.DECODE else 0, r.admission, r.remaining, 0)


def serve_keys_of(p: Program, m: Machine, it: Iteration, r: Resident) -> tuple:
    """``serveKeysOf``."""
    return tuple(eval_expr(p, m, resident_env(m, it, r), k.key) for k in p.engine.serve)


def key_before(keys: tuple[ServeKey, ...], a: tuple, b: tuple) -> bool:
    """``keyBefore``: ``a`` strictly before ``b`` (ascending, or descending for a negated key)."""
    if not keys or not a or not b:
        return False
    k, x, y = keys[0], a[0], b[0]
    first = x < y if k.order is Order.ASC else y < x
    return holds(first) or (holds(x == y) and key_before(keys[1:], a[1:], b[1:]))


def pick_next(p: Program, m: Machine, it: Iteration, residents: tuple[Resident, ...],
              best: Resident | None) -> Resident | None:
    """``pickNext``: the first unserved resident in serving order (the serve
    keys, then the residents' order)."""
    for r in residents:
        if r.serial in it.served:
            continue
        if best is None or key_before(p.engine.serve, serve_keys_of(p, m, it, r), serve_keys_of(p, m, it, best)):
            best = r
    return best


def assign(it: Iteration, serial: int, tokens: Any) -> Iteration:
    """``assign``: the resident's tokens, taken from the budget left."""
    return replace(it, assigned=it.assigned + (Assignment(serial, tokens),), left=monus(it.left, tokens))


def tokens_of(serial: int, assigned: tuple[Assignment, ...]) -> Any:
    """``tokensOf``: the tokens the iteration gave the session."""
    total = 0
    for a in reversed(assigned):
        total = (a.tokens if a.serial == serial else 0) + total
    return total


def resident_mode(m: Machine, serial: int) -> Mode | None:
    """``residentMode``: the mode of the session's run on the engine (None: not a resident)."""
    for r in m.residents:
        if r.serial == serial:
            return r.mode
    return None


def candidate(m: Machine, serial: int) -> bool:
    """``candidate``: a resident of the engine, or (schedule ahead) parked
    there: vLLM's running list, where a finished request stays until its
    batch's output is applied (scheduler.py:938, 970)."""
    return resident_mode(m, serial) is not None or serial in m.parked


def victim_env(m: Machine, serial: int) -> Env:
    """``victimEnv``: what a ``preempt by`` key reads for a candidate: its
    attributes, its latest admission, whether it decodes (a parked session
    has run its last decode)."""
    s = session_of(m, serial)
    decoding = 0 if resident_mode(m, serial) is Mode.PREFILL else 1
    return Env(s.attrs, serial, m.time, len(m.residents) + len(m.parked), count_decoders(m.residents), decoding,
               s.admission, 0, 0)


def better_victim(p: Program, m: Machine, q: int, a: int, b: int) -> bool:
    """``betterVictim``: the candidate ``a`` is chosen before ``b``: under
    ``preempt by`` the least keys (vLLM 0.33.0's priority path: the running
    request with the largest (priority, arrival_time), scheduler.py:932-936,
    is ``preempt by (-priority, -arrival)``), keys that tie and lifo to the
    latest admission (seed 002 §3 Ties)."""
    keys = pool_spec(p, q).victim
    ka = tuple(eval_expr(p, m, victim_env(m, a), k.key) for k in keys)
    kb = tuple(eval_expr(p, m, victim_env(m, b), k.key) for k in keys)
    if key_before(keys, ka, kb):
        return True
    if key_before(keys, kb, ka):
        return False
    return session_of(m, b).admission < session_of(m, a).admission


def victim_of(p: Program, m: Machine, q: int) -> int | None:
    """``victimOf`` (the premise of pool/preempt): of the pool's holders that
    are residents of the engine or parked there, the last admitted (lifo),
    or under ``preempt by`` the one with the least keys."""
    best = None
    for h in pool_of(m, q).holders:
        if candidate(m, h.serial) and (best is None or better_victim(p, m, q, h.serial, best)):
            best = h.serial
    return best


def in_flight(p: Program, m: Machine, it: Iteration, victim: int) -> int:
    """``inFlight``: under schedule ahead, 1 when the last iteration gave the
    victim a decode token and the one being formed has not served it yet:
    that token's id is applied only after this iteration is formed, so its
    position is not cached yet (vLLM hashes a block once its tokens' ids are
    known: kv_cache_manager.py:615-625, scheduler.py:2403-2415); else 0."""
    if p.engine.ahead and victim in m.decoded and not any(a.serial == victim for a in it.assigned):
        return 1
    return 0


def withdraw(p: Program, m: Machine, it: Iteration, victim: int, q: int) -> tuple[Machine, Iteration]:
    """``withdraw`` (step/withdraw, pool/preempt): the victim's tokens go back
    to the budget; it is preempted; the iteration admits nothing more."""
    unhashed = in_flight(p, m, it, victim)
    back = tokens_of(victim, it.assigned)
    it = replace(it, assigned=tuple(a for a in it.assigned if a.serial != victim), left=it.left + back, preempted=True)
    return preempt(p, m, victim, q, unhashed), it


def preempt_parked(p: Program, m: Machine, it: Iteration, victim: int, q: int) -> tuple[Machine, Iteration]:
    """``preemptParked`` (step/preempt-parked): the victim is parked (its
    last token in flight): it is no longer parked, the preemption is counted
    (the iteration admits nothing more), and its hold exits at once, its
    session going on; it never runs again. vLLM 0.33.0 preempts running[-1]
    even when its last token is in flight (scheduler.py:938, 970;
    _preempt_request 1799-1843 frees its blocks) and the stale token then
    stops it while PREEMPTED (scheduler.py:2318-2323, 2494, 2545-2548)."""
    ps = pool_of(m, q)
    m = put_pool(replace(m, parked=tuple(x for x in m.parked if x != victim)), q,
                 replace(ps, preemptions=ps.preemptions + 1))
    m = put_session(m, replace(session_of(m, victim), status=Status.READY))
    return run_session(p, program_fuel(p), m, victim), replace(it, preempted=True)


def grow_turn(p: Program, m: Machine, it: Iteration, serial: int, q: int, tokens: Any) -> tuple[Machine, Iteration]:
    """``growTurn`` (step/grow, one turn): the pending grower's hold on ``q``
    grows to the position its tokens reach (pool/grow), and its tokens are
    assigned; if that does not fit, the last resident holding ``q`` is
    preempted (step/withdraw) and the growth is tried again at the next turn,
    unless the grower was its own victim: then the pass ends (``ends``:
    nobody else is served) or goes on with the next resident (``continues``);
    either way, having preempted, it admits nothing."""
    done = replace(it, pending=None)
    a = innermost_holder(m, serial, q)
    if a is None:
        return m, assign(done, serial, tokens)
    pool = pool_spec(p, q)
    ps = pool_of(m, q)
    need = monus(blocks_for(a.position + tokens, pool.block), a.blocks)
    if holds(need == 0):
        return m, assign(done, serial, tokens)
    if holds(held_blocks(ps.holders) + need <= pool.cap):
        return put_pool(m, q, grow_holder(ps, pool, serial, a.hold, need)), assign(done, serial, tokens)
    victim = victim_of(p, m, q)
    if victim is None:
        return m, replace(done, stopped=True)
    if victim in m.parked:
        return preempt_parked(p, m, it, victim, q)
    m, it = withdraw(p, m, it, victim, q)
    if victim == serial:
        if p.engine.self_preemption is SelfPreemption.ENDS:
            return m, replace(it, pending=None, stopped=True)
        return m, replace(it, pending=None)
    return m, it


def schedule(it: Iteration, r: Resident) -> Iteration:
    """``schedule`` (step/schedule): the next resident in serving order is
    served: one token to a decode, up to the chunk to a prefill, within the
    budget left; a growing run's tokens wait for its growth (``pending``)."""
    it = replace(it, served=it.served + (r.serial,))
    tokens = nmin(want(it.chunk, r), it.left)
    if r.growing is None:
        return assign(it, r.serial, tokens)
    return replace(it, pending=(r.serial, r.growing, tokens))


def queue_env(m: Machine, serial: int, left: Any) -> Env:
    """``queueEnv``: what a ``queue by`` key reads for a waiting session (its
    header's environment, budget_left the budget left)."""
    return session_env(m, session_of(m, serial), left)


def head_of(p: Program, m: Machine, q: int, left: Any) -> int | None:
    """``headOf``: the hold the pool tries: the queue's first (fifo), or
    under ``queue by`` the least keys, then the first joined (the queue is
    in join order): vLLM 0.33.0's priority heap on (priority, arrival_time)
    (request_queue.py:131-166, request.py:357-367)."""
    keys = pool_spec(p, q).queue
    best = None
    for serial in pool_of(m, q).queue:
        if best is None:
            best = serial
        elif key_before(keys, tuple(eval_expr(p, m, queue_env(m, serial, left), k.key) for k in keys),
                        tuple(eval_expr(p, m, queue_env(m, best, left), k.key) for k in keys)):
            best = serial
    return best


def first_waiting(p: Program, m: Machine) -> int | None:
    """``firstWaiting``: the first pool (declaration order) the engine admits
    to that has a waiting session."""
    for q in range(len(p.pools)):
        if pool_spec(p, q).via_engine and pool_of(m, q).queue:
            return q
    return None


def fits(p: Program, m: Machine, v: Env, uses: tuple, units: tuple) -> bool:
    """``fits``: every pool has room for the units and for the reserve next
    to what is allocated (cached blocks never block)."""
    for u, x in zip(uses, units):
        pool = pool_spec(p, u.pool)
        held = held_blocks(pool_of(m, u.pool).holders)
        if not (holds(held + blocks_for(x, pool.block) <= pool.cap)
                and holds(held + blocks_for(reserve_of(p, m, v, u), pool.block) <= pool.cap)):
            return False
    return True


def admit_pool(p: Program, serial: int, hold_id: int, caching: bool, reuse: Any | None,
               state: tuple[Machine, Any], use: tuple[int, Any]) -> tuple[Machine, Any]:
    """``admitPool`` (pool/consume, pool/evict-*, pool/admit on one pool):
    with a cache clause the session takes up to ``reuse`` units of its own
    prefix; room is made; the units are allocated in blocks."""
    m, cached = state
    q, units = use
    pool = pool_spec(p, q)
    ps = pool_of(m, q)
    if caching:
        entries, consumed = consume_entries(serial, None if reuse is None else ndiv(reuse, pool.block), ps.entries)
    else:
        entries, consumed = ps.entries, 0
    take = blocks_for(units, pool.block)
    entries = evict(held_blocks(ps.holders), take, pool.cap, entries)
    holder = Holder(serial, hold_id, take, nmin(nmul(consumed, pool.block), nmul(take, pool.block)), False)
    m = put_pool(m, q, replace(ps, entries=entries, holders=ps.holders + (holder,)))
    return m, nmax(cached, nmul(consumed, pool.block))


def admit(p: Program, m: Machine, q: int, serial: int, stmt: tuple[int, int], uses: tuple, body: int, caching: bool,
          units: tuple, reuse: Any | None) -> Machine:
    """``admit`` (pool/admit): the head leaves the queue, takes its units on
    every pool of its hold, and its body starts; ``cached`` is what it consumed."""
    hold_id = m.seq
    ps = pool_of(m, q)
    m = put_pool(m, q, replace(ps, queue=tuple(x for x in ps.queue if x != serial)))
    state = (m, 0)
    for use in zip(tuple(u.pool for u in uses), units):
        state = admit_pool(p, serial, hold_id, caching, reuse, state, use)
    m, cached = state
    s = session_of(m, serial)
    s = replace(s, attrs=list_set(s.attrs, p.slots.cached, cached), frames=(Frame(body, 0, FrameKind.BODY),) + s.frames,
                holds=(ActiveHold(hold_id, stmt, tuple(u.pool for u in uses)),) + s.holds, pending=None,
                admission=hold_id, status=Status.READY)
    return replace(put_session(m, s), seq=hold_id + 1)


def admit_head(p: Program, m: Machine, it: Iteration) -> tuple[Machine, Iteration, tuple[int, ...]] | None:
    """``admitHead`` (step/admit): the head of the first queue the engine
    serves, its header read with budget_left = the budget left; if it fits it
    is admitted (and returned, to run until it blocks: joining the engine it
    is the next to be scheduled); if not, nothing more is admitted in this
    iteration."""
    q = first_waiting(p, m)
    if q is None:
        return None
    serial = head_of(p, m, q, it.left)
    if serial is None:
        return None
    s = session_of(m, serial)
    if s.pending is None:
        return None
    hold = stmt_at(p, s.pending[0], s.pending[1])
    if type(hold) is not Hold:
        return None
    v = session_env(m, s, it.left)
    units = tuple(eval_expr(p, m, v, u.units) for u in hold.uses)
    if not fits(p, m, v, hold.uses, units):
        return m, replace(it, blocked=True), ()
    reuse = None if hold.reuse is None else eval_expr(p, m, v, hold.reuse)
    return admit(p, m, q, serial, s.pending, hold.uses, hold.body, hold.cache is not None, units, reuse), it, (serial,)


def serve_fuel(p: Program) -> int:
    """``Program.serveFuel``: more turns than one iteration can take (a
    resident is scheduled, grows a turn per victim, or a hold is admitted)."""
    return (len(p.sessions) + 1) * (len(p.sessions) + 2) * program_fuel(p)


def serve(p: Program, fuel: int, m: Machine, it: Iteration) -> tuple[Machine, Iteration]:
    """``serve``: the iteration's loop, one rule a turn: a pending growth
    (step/grow); else, while budget is left and no grower stopped it, the
    next resident in serving order (step/schedule); then admissions
    (step/admit, and the admitted session runs), unless the iteration
    preempted or a head did not fit."""
    while fuel > 0:
        if it.pending is not None:
            serial, q, tokens = it.pending
            m, it = grow_turn(p, m, it, serial, q, tokens)
        elif holds(it.left == 0) or it.stopped:
            return m, it
        else:
            r = pick_next(p, m, it, m.residents, None)
            if r is not None:
                it = schedule(it, r)
            elif it.preempted or it.blocked:
                return m, it
            else:
                admitted = admit_head(p, m, it)
                if admitted is None:
                    return m, it
                m, it, ran = admitted
                for serial in ran:
                    m = run_session(p, program_fuel(p), m, serial)
        fuel -= 1
    return m, it


def apply_tokens(m: Machine, a: Assignment) -> Machine:
    """``applyTokens`` (step/iteration-end, per resident): the run has
    ``tokens`` fewer left; a growing run's hold advances its position."""
    r = next((x for x in m.residents if x.serial == a.serial), None)
    if r is None:
        return m
    m = replace(m, residents=tuple(replace(x, remaining=monus(x.remaining, a.tokens)) if x.serial == a.serial else x
                                   for x in m.residents))
    if r.growing is None:
        return m
    h = innermost_holder(m, a.serial, r.growing)
    if h is None:
        return m
    ps = pool_of(m, r.growing)
    holders = tuple(replace(x, position=x.position + a.tokens, advanced=True)
                    if x.serial == h.serial and x.hold == h.hold else x for x in ps.holders)
    return put_pool(m, r.growing, replace(ps, holders=holders))


def finished_of(m: Machine, assigned: tuple[Assignment, ...]) -> tuple[int, ...]:
    """``finishedOf``: the served runs that have no token left, in the order served."""
    return tuple(a.serial for a in assigned
                 if any(x.serial == a.serial and holds(x.remaining == 0) for x in m.residents))


def decoded_of(m: Machine, assigned: tuple[Assignment, ...]) -> tuple[int, ...]:
    """``decodedOf``: the served runs that decode, in the order served."""
    return tuple(a.serial for a in assigned if resident_mode(m, a.serial) is Mode.DECODE)


def end_iteration(p: Program, m: Machine, it: Iteration) -> Machine:
    """``endIteration`` (step/iteration-end, stage/step-complete): one step
    later the tokens apply; the runs that have none left complete, in the
    order they were served, and their sessions are ready. Under schedule
    ahead their sessions are ``finishing`` until the next iteration starts
    (step/park), and the decodes served are ``decoded``."""
    m = replace(m, time=m.time + 1)
    if p.engine.ahead:
        m = replace(m, decoded=decoded_of(m, it.assigned))
    for a in it.assigned:
        m = apply_tokens(m, a)
    finished = finished_of(m, it.assigned)
    if p.engine.ahead:
        m = replace(m, finishing=finished)
    m = replace(m, residents=tuple(x for x in m.residents if not holds(x.remaining == 0)), ready=m.ready + finished)
    for serial in finished:
        m = put_session(m, replace(session_of(m, serial), status=Status.READY))
    return m
