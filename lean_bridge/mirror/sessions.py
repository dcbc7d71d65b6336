"""Session rules (lean/SerqRef/Sessions.lean): one per statement, the end of
a block, the end of a session, joining a hold's queue and preemption.

A ready session runs until it blocks: it joins a queue (``enter_hold``),
becomes a resident of the engine (``enter_engine``), starts a delay, or ends.
"""

from __future__ import annotations

from typing import Any

from ..arith import holds, monus, nmax
from ..syntax import (Branch, Delay, Finish, Hold, Mode, Observe, Program, Set, Step, Turn)
from .expr import Planned, env_with, eval_expr, session_env
from .pools import (computed_units, find_holder, innermost_hold, kept_blocks, release_units)
from .state import (ActiveHold, Frame, FrameKind, Machine, Resident, Sample, Session, Status, blocks_for, get_d,
                    list_set, pool_of, pool_spec, put_pool, put_session, session_of, stmt_at, replace)


def cache_of(p: Program, stmt: tuple[int, int]):
    """``cacheOf``: the cache clause of the hold statement at ``stmt``."""
    hold = stmt_at(p, stmt[0], stmt[1])
    return hold.cache if type(hold) is Hold else None


def release_pool(p: Program, m: Machine, s: Session, h: ActiveHold, q: int, preempted: bool,
                 unhashed: int = 0) -> Machine:
    """``releasePool`` (pool/release): the hold's allocation on ``q`` goes
    back; with a cache clause, min(cache, computed) units stay cached; on
    the engine's memory ``unhashed`` units at the end of the position are
    not (schedule ahead: a preempted decode's token in flight, ``inFlight``)."""
    pool = pool_spec(p, q)
    ps = pool_of(m, q)
    a = find_holder(s.serial, h.id, ps.holders)
    if a is None:
        return m
    computed = monus(computed_units(pool, a, preempted), unhashed if q == p.engine.memory else 0)
    cache = cache_of(p, h.stmt)
    kept = 0 if cache is None else kept_blocks(pool, a, eval_expr(p, m, session_env(m, s, Planned(p, m)), cache), computed)
    return put_pool(m, q, release_units(ps, s.serial, h.id, kept))


def release_hold(p: Program, m: Machine, s: Session, h: ActiveHold, preempted: bool, unhashed: int = 0) -> Machine:
    """``releaseHold``: every pool of the hold, in the hold's order."""
    for q in h.pools:
        m = release_pool(p, m, s, h, q, preempted, unhashed)
    return m


def end_session(p: Program, m: Machine, s: Session) -> Machine:
    """``endSession`` (session/end): every hold released, innermost first;
    cached prefixes stay."""
    for h in s.holds:
        m = release_hold(p, m, s, h, False)
    return put_session(m, replace(s, status=Status.ENDED, frames=(), holds=(), pending=None))


def parks(p: Program, m: Machine, s: Session, h: ActiveHold) -> bool:
    """``parks`` (the premise of step/park): under schedule ahead, the
    session's run completed at the end of the last iteration and the hold it
    exits holds the engine's memory."""
    return p.engine.ahead and s.serial in m.finishing and p.engine.memory in h.pools


def park(m: Machine, s: Session) -> Machine:
    """``park`` (step/park): the session waits at the exit of its hold, its
    units held, until the next iteration is formed (step/apply): it counts
    among the residents that iteration is formed with, is not served, and
    can be a victim (vLLM 0.33.0 forms batch k+1 before applying batch k's
    output, vllm/v1/engine/core.py:708-825: a request whose last token batch
    k sampled is skipped, scheduler.py:800-814, and keeps its blocks and its
    running slot until update_from_output frees it, scheduler.py:2476,
    2543-2544)."""
    m = replace(m, finishing=tuple(x for x in m.finishing if x != s.serial), parked=m.parked + (s.serial,))
    return put_session(m, replace(s, status=Status.PARKED))


def exit_hold(p: Program, m: Machine, s: Session) -> Machine:
    """``exitHold`` (session/hold-exit): the body ended: the hold is released
    with its cache clause, ``computed`` is 0 again (unless it parks)."""
    if not s.holds or not s.frames:
        return put_session(m, replace(s, frames=s.frames[1:]))
    h, hs = s.holds[0], s.holds[1:]
    if parks(p, m, s, h):
        return park(m, s)
    m = release_hold(p, m, s, h, False)
    return put_session(m, replace(s, frames=s.frames[1:], holds=hs, attrs=list_set(s.attrs, p.slots.computed, 0)))


def reserve_of(p: Program, m: Machine, v, u) -> Any:
    """``reserveOf``: a use's reserve (0 without one)."""
    return 0 if u.reserve is None else eval_expr(p, m, v, u.reserve)


def enter_hold(p: Program, m: Machine, s: Session, stmt: tuple[int, int], head: bool) -> Machine:
    """``enterHold`` (session/hold-enter, pool/reject): the hold joins its
    first pool's queue, at the head after a preemption (under ``requeue by
    key`` at its end, as any hold: vLLM 0.33.0's priority queue pushes a
    preempted request back into its heap, request_queue.py:160-166); a hold
    whose units or reserve, read now, are above a cap can never fit: the
    session ends."""
    hold = stmt_at(p, stmt[0], stmt[1])
    if type(hold) is not Hold:
        return m
    v = session_env(m, s, Planned(p, m))
    if any(holds(pool_spec(p, u.pool).cap < blocks_for(nmax(eval_expr(p, m, v, u.units), reserve_of(p, m, v, u)),
                                                       pool_spec(p, u.pool).block))
           for u in hold.uses):
        return end_session(p, m, s)
    q = hold.uses[0].pool if hold.uses else 0
    ps = pool_of(m, q)
    queue = (s.serial,) + ps.queue if head and not pool_spec(p, q).requeue_key else ps.queue + (s.serial,)
    return put_session(put_pool(m, q, replace(ps, queue=queue)), replace(s, status=Status.QUEUED, pending=stmt))


def take_through(hold_id: int, hs: tuple[ActiveHold, ...]) -> tuple[ActiveHold, ...]:
    """``takeThrough``: the holds from the innermost out to ``hold_id``."""
    out = ()
    for h in hs:
        out = out + (h,)
        if h.id == hold_id:
            return out
    return out


def pop_bodies(k: int, frames: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """``popBodies``: the frames without the innermost ``k`` hold bodies and
    everything inside them."""
    while k > 0 and frames:
        if frames[0].kind is FrameKind.BODY:
            k -= 1
        frames = frames[1:]
    return frames


def preempt(p: Program, m: Machine, victim: int, q: int, unhashed: int = 0) -> Machine:
    """``preempt`` (pool/preempt): the victim leaves the engine; ``computed``
    is the position its hold on ``q`` reached, or what it was if that is
    further (a hold preempted again while it recomputes keeps the furthest
    position it reached: docs/semantics.md, "computed after a second
    preemption"); that hold and every hold inside it are released with the
    computed prefix cached; it re-enters the head of its hold's queue."""
    s = session_of(m, victim)
    target = innermost_hold(s, q)
    if target is None:
        return m
    a = find_holder(victim, target.id, pool_of(m, q).holders)
    position = 0 if a is None else a.position
    s = replace(s, attrs=list_set(s.attrs, p.slots.computed, nmax(position, get_d(s.attrs, p.slots.computed, 0))))
    m = replace(m, residents=tuple(r for r in m.residents if r.serial != victim))
    releasing = take_through(target.id, s.holds)
    for h in releasing:
        m = release_hold(p, m, s, h, True, unhashed)
    s = replace(s, holds=s.holds[len(releasing):], frames=pop_bodies(len(releasing), s.frames), status=Status.READY)
    ps = pool_of(m, q)
    m = put_pool(m, q, replace(ps, preemptions=ps.preemptions + 1))
    return enter_hold(p, put_session(m, s), s, target.stmt, True)


def overwrite(attrs: tuple, pairs: tuple[tuple[int, Any], ...]) -> tuple:
    """``overwrite``: each (slot, value) in turn."""
    for k, x in pairs:
        attrs = list_set(attrs, k, x)
    return attrs


def workload_stmt(p: Program, serial: int, state: tuple[Machine, tuple], st) -> tuple[Machine, tuple]:
    """``workloadStmt``: a statement of init or turn (set and observe)."""
    m, attrs = state
    v = env_with(m, attrs, serial, 0)
    if type(st) is Set:
        return m, list_set(attrs, st.slot, eval_expr(p, m, v, st.e))
    if type(st) is Observe:
        return replace(m, samples=m.samples + ((Sample(st.index, serial, m.time, eval_expr(p, m, v, st.e))),)), attrs
    return state


def run_workload_block(p: Program, m: Machine, block: int, serial: int, attrs: tuple) -> tuple[Machine, tuple]:
    """``runWorkloadBlock``: init or turn, statement by statement."""
    state = (m, attrs)
    for st in get_d(p.blocks, block, ()):
        state = workload_stmt(p, serial, state, st)
    return state


def take_turn(p: Program, m: Machine, s: Session) -> Machine:
    """``takeTurn`` (session/turn): turn_no counts, the next explicit turn's
    attributes, ``more``, then the turn block."""
    attrs = list_set(s.attrs, p.slots.turn_no, get_d(s.attrs, p.slots.turn_no, 0) + 1)
    spec = get_d(p.sessions, s.serial, None)
    turns = spec.turns if spec is not None else ()
    if s.script_turn < len(turns):
        attrs, following = overwrite(attrs, turns[s.script_turn]), s.script_turn + 1
    else:
        following = s.script_turn
    attrs = list_set(attrs, p.slots.more, 1 if following < len(turns) else 0)
    m, attrs = run_workload_block(p, m, p.turn, s.serial, attrs)
    return put_session(m, replace(s, attrs=attrs, script_turn=following))


def resident_before(a: Resident, b: Resident) -> bool:
    """``residentBefore``: the residents' order, (admission, job)."""
    return a.admission < b.admission or (a.admission == b.admission and a.job < b.job)


def insert_resident(r: Resident, residents: tuple[Resident, ...]) -> tuple[Resident, ...]:
    """``insertResident``."""
    for i, x in enumerate(residents):
        if resident_before(r, x):
            return residents[:i] + (r,) + residents[i:]
    return residents + (r,)


def enter_engine(m: Machine, s: Session, mode: Mode, work: Any, growing: int | None) -> Machine:
    """``enterEngine`` (stage/step-enter): a resident of the engine with ``work`` tokens to run."""
    r = Resident(s.serial, s.admission, m.seq, mode, work, growing)
    m = put_session(m, replace(s, status=Status.RESIDENT))
    return replace(m, residents=insert_resident(r, m.residents), seq=m.seq + 1)


def execute_stmt(p: Program, m: Machine, s: Session, stmt: tuple[int, int], st) -> Machine:
    """``executeStmt``: the statement's rule (``s`` already points past it)."""
    kind = type(st)
    if kind is Set:
        return put_session(m, replace(s, attrs=list_set(s.attrs, st.slot,
                                                        eval_expr(p, m, session_env(m, s, Planned(p, m)), st.e))))
    if kind is Observe:
        value = eval_expr(p, m, session_env(m, s, Planned(p, m)), st.e)
        m = put_session(m, s)
        return replace(m, samples=m.samples + (Sample(st.index, s.serial, m.time, value),))
    if kind is Turn:
        return take_turn(p, m, s)
    if kind is Hold:
        return enter_hold(p, m, s, stmt, False)
    if kind is Step:
        w = eval_expr(p, m, session_env(m, s, Planned(p, m)), st.work)
        if holds(w == 0):
            return put_session(m, s)
        return enter_engine(m, s, st.mode, w, st.growing)
    if kind is Delay:
        w = eval_expr(p, m, session_env(m, s, Planned(p, m)), st.work)
        if holds(w == 0):
            return put_session(m, s)
        m = put_session(m, replace(s, status=Status.DELAYED))
        return replace(m, delays=m.delays + ((m.time + w, s.serial),))
    if kind is Branch:
        taken = st.then_block if holds(eval_expr(p, m, session_env(m, s, Planned(p, m)), st.guard) == 1) else st.else_block
        return put_session(m, replace(s, frames=(Frame(taken, 0, FrameKind.PLAIN),) + s.frames))
    assert kind is Finish, st
    return end_session(p, m, s)


def execute(p: Program, m: Machine, s: Session) -> Machine:
    """``execute``: the session's next statement, or the end of its innermost block."""
    if not s.frames:
        return end_session(p, m, s)
    f, fs = s.frames[0], s.frames[1:]
    st = stmt_at(p, f.block, f.pc)
    if st is not None:
        return execute_stmt(p, m, replace(s, frames=(replace(f, pc=f.pc + 1),) + fs), (f.block, f.pc), st)
    if f.kind is FrameKind.TOP:
        return end_session(p, m, s)
    if f.kind is FrameKind.BODY:
        return exit_hold(p, m, s)
    return put_session(m, replace(s, frames=fs))


def run_session(p: Program, fuel: int, m: Machine, serial: int) -> Machine:
    """``runSession``: the session runs while it is ready (at most ``fuel`` steps)."""
    while fuel > 0:
        s = session_of(m, serial)
        if s.status is not Status.READY:
            return m
        m = execute(p, m, s)
        fuel -= 1
    return m


def program_fuel(p: Program) -> int:
    """``Program.fuel``: more steps than a session can take at one instant
    (the fragment has no loop: each statement and block end at most once)."""
    return 2 * (sum(len(b) for b in p.blocks) + len(p.blocks)) + 4


def run_ready(p: Program, m: Machine) -> Machine:
    """``runReady`` (settle): every ready session runs, in the order they became ready."""
    ready = m.ready
    m = replace(m, ready=())
    for serial in ready:
        m = run_session(p, program_fuel(p), m, serial)
    return m
