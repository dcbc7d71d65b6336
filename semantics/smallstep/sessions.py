"""Session rules: one per statement (seed 002 §3; FORMAT.md, Statements).

Commands take no time; a ready session runs until it blocks (joins a queue,
starts a job, waits to grow) or ends. Each statement is one named rule:
``session/set``, ``session/observe``, ``session/turn``, ``session/branch``,
``session/loop``, ``session/while``, ``session/choose``, ``session/run``,
``session/end``; leaving a block is ``session/block-exit`` (a loop's body
restarts: ``session/loop-again``; a while re-reads its guard; a hold's body
ends: ``session/hold-exit``). The rules for hold, grow, release, drop and
load are pool rules (pools.py).
"""

from __future__ import annotations

from .. import ir
from .configuration import HOLD, LOOP, PLAIN, READY, WHILE, Configuration, Frame, Session
from .machine import MAX_QUIET_STATEMENTS, Machine, fail, is_warm, session_env, with_draws
from . import pools, stages, workload
from .values import resolve_index


def run_session(m: Machine, c: Configuration, serial: int) -> Configuration:
    """Run the ready session ``serial`` until it blocks or ends.

    A rule that changes only its session (set, branch, loop, while, choose,
    leaving a plain, loop or while block: LOCAL) is a function to the new
    session; the configuration it stands for is ``c`` with that session, which
    is stored before the next rule that reads anything else (and after every
    rule when a step trace observes the run)."""
    blocks = m.program.blocks
    quiet = 0  # statements since the session became ready: it has not blocked
    s = c.sessions.get(serial)
    while s is not None and s.status == READY:
        quiet += 1
        if quiet > MAX_QUIET_STATEMENTS:
            fail(f"{MAX_QUIET_STATEMENTS} statements ran at time {c.time:g} without anything blocking: "
                 f"the program loops without letting time pass", c, _current_stmt(s))
        frames = s.frames
        if not frames:
            c = end_session(m, _store(c, s), serial)
        else:
            frame = frames[-1]
            block_index, index, kind, origin = frame
            block = blocks[block_index]
            if index >= len(block):
                if kind == HOLD:
                    c = exit_hold(m, _store(c, s), s)
                else:
                    s = exit_block(m, c, s, frame)
                    continue
            else:
                stmt = block[index]
                at = (block_index, index)
                frames = frames[:-1] + (Frame(block_index, index + 1, kind, origin),)
                local = LOCAL.get(type(stmt))
                if local is not None:
                    s = local(m, c, s, frames, stmt, at)
                    continue
                c = EXECUTE[type(stmt)](m, c, s._replace(frames=frames), stmt, at)
        s = c.sessions.get(serial)
    return c


def _current_stmt(s: Session):
    if not s.frames:
        return None
    f = s.frames[-1]
    return (f.block, max(0, f.index - 1))


def _store(c: Configuration, s: Session) -> Configuration:
    return c._replace(sessions=c.sessions.set(s.serial, s))


# -- leaving a block -------------------------------------------------------------


def exit_block(m: Machine, c: Configuration, s: Session, frame: Frame) -> Session:
    """session/loop-again, session/while, session/block-exit (local): a
    loop's body restarts, a while re-reads its guard, a plain block's frame goes."""
    if frame.kind == LOOP:
        s = s._replace(frames=s.frames[:-1] + (frame._replace(index=0),))
        return _note_local(m, c, s, "session/loop-again")
    if frame.kind == WHILE:
        stmt = m.program.blocks[frame.origin[0]][frame.origin[1]]
        env = session_env(m, c, s, frame.origin)
        again = _test(m, c, stmt.guard, env, frame.origin, "while")
        frames = s.frames[:-1] + ((frame._replace(index=0),) if again else ())
        s = s._replace(frames=frames, draws=env.draws)
        return _note_local(m, c, s, "session/while", again=again)
    s = s._replace(frames=s.frames[:-1])
    return _note_local(m, c, s, "session/block-exit")


def exit_hold(m: Machine, c: Configuration, s: Session) -> Configuration:
    """session/hold-exit: the body ended: every allocation goes back with
    min(cache, computed) cached, except a leased one; ``computed`` is 0 again."""
    hold = s.holds[-1]
    compiled = m.holds[hold.stmt]
    lease_pool = None
    if compiled.lease_ref is not None:
        env = session_env(m, c, s, hold.stmt)
        lease_pool = resolve_index(compiled.lease_ref, compiled.lease_index, env, "pool")
    done = {a.pool for a in hold.allocations}
    c = pools.release_hold(m, c, s.serial, hold.hold_id, lease_pool)
    s = c.sessions[s.serial]
    attrs = list(s.attrs)
    attrs[m.program.slot_computed] = 0.0
    s = s._replace(frames=s.frames[:-1], holds=s.holds[:-1], attrs=tuple(attrs),
                   preempted_at=tuple((q, x) for q, x in s.preempted_at if q not in done))
    c = _store(c, s)
    return _note(m, c, "session/hold-exit", c.sessions[s.serial])


def _note(m: Machine, c: Configuration, rule: str, s: Session, **fields) -> Configuration:
    if m.observer:
        m.notify(rule, c, {"session": s.serial, **fields})
    return c


def _note_local(m: Machine, c: Configuration, s: Session, rule: str, **fields) -> Session:
    """Report a local rule: the configuration it stands for is ``c`` with ``s``."""
    if m.observer:
        m.notify(rule, _store(c, s), {"session": s.serial, **fields})
    return s


def _test(m: Machine, c: Configuration, guard, env, stmt, what: str) -> bool:
    value = m.compiler.compile(guard)(env)
    if value == 1.0:
        return True
    if value == 0.0:
        return False
    fail(f"the {what} guard is {value:g}, not 0 or 1: a guard is a test and a test has two answers "
         f"(a draw is written `branch with (p)`)", c, stmt)


# -- statements --------------------------------------------------------------------


def execute_turn(m, c, s, stmt, at):
    """session/turn: the next turn's attributes."""
    c = workload.take_turn(m, _store(c, s), s.serial)
    return _note(m, c, "session/turn", c.sessions[s.serial])


def execute_set(m, c, s, frames, stmt: ir.Set, at) -> Session:
    """session/set (local): the attribute takes the expression's value."""
    env = session_env(m, c, s, at)
    value = m.compiler.compile(stmt.expr)(env)
    attrs = list(s.attrs)
    attrs[stmt.slot] = value
    s = s._replace(frames=frames, attrs=tuple(attrs), draws=env.draws)
    if m.observer:
        _note_local(m, c, s, "session/set", attribute=m.program.attrs[stmt.slot], value=value)
    return s


def execute_observe(m, c, s, stmt: ir.Observe, at):
    """session/observe: a sample, kept after the warm-up with the time, the session and its turn."""
    env = session_env(m, c, s, at)
    value = m.compiler.compile(stmt.expr)(env)
    s = with_draws(s, env)
    if is_warm(m, c):
        c = workload.record_sample(m, c, s.serial, int(s.attrs[m.program.slot_turn]), stmt.index, value,
                                   sessions=c.sessions.set(s.serial, s))
    else:
        c = _store(c, s)
    if m.observer:
        _note(m, c, "session/observe", s, name=m.program.observes[stmt.index], value=value)
    return c


def execute_hold(m, c, s, stmt: ir.Hold, at):
    return pools.enter_hold(m, _store(c, s), s.serial, at, preempted=False)


def _pool_of(m, c, s, ref: ir.Ref, at) -> tuple[int, Session]:
    env = session_env(m, c, s, at)
    p = resolve_index(ref, m.compiler.compile_ref_index(ref), env, "pool")
    return p, with_draws(s, env)


def execute_grow(m, c, s, stmt: ir.Grow, at):
    p, s = _pool_of(m, c, s, stmt.ref, at)
    env = session_env(m, c, s, at)
    amount = max(0.0, m.compiler.compile(stmt.amount)(env))
    c = _store(c, with_draws(s, env))
    c, _ = pools.grow(m, c, s.serial, p, amount, at)
    return c


def execute_drop(m, c, s, stmt: ir.Drop, at):
    p, s = _pool_of(m, c, s, stmt.ref, at)
    return pools.drop_statement(m, _store(c, s), s.serial, p)


def execute_release(m, c, s, stmt: ir.Release, at):
    p, s = _pool_of(m, c, s, stmt.ref, at)
    return pools.release_statement(m, _store(c, s), s.serial, p)


def execute_load(m, c, s, stmt: ir.Load, at):
    p, s = _pool_of(m, c, s, stmt.ref, at)
    env = session_env(m, c, s, at)
    amount = max(0.0, m.compiler.compile(stmt.amount)(env))
    return pools.load_statement(m, _store(c, with_draws(s, env)), s.serial, p, amount, at)


def execute_run(m, c, s, stmt: ir.Run, at):
    """session/run: a job of ``work`` at the stage (or, with several stages,
    one flow holding them all). A run of zero work completes at once."""
    env = session_env(m, c, s, at)
    targets = []
    for ref in (stmt.stage,) + tuple(stmt.also or ()):
        targets.append(resolve_index(ref, m.compiler.compile_ref_index(ref), env, "stage"))
    for t in targets:
        if m.kinds[t] == "step":
            fail(f"run on step stage {m.stage_name(t)}: step stages are not implemented yet", c, at)
    work = m.compiler.compile(stmt.work)(env)
    if not work == work:
        fail("the run's work is NaN", c, at)
    s = with_draws(s, env)
    if work <= 0:
        return _note(m, _store(c, s), "session/run", s, stages=[m.stage_name(t) for t in targets], work=0.0)
    return stages.enter_stage(m, c, tuple(targets), s, work)


def execute_branch(m, c, s, frames, stmt: ir.Branch, at) -> Session:
    """session/branch (local): the first block when the guard is 1, the second when 0; any other value is a RunError."""
    env = session_env(m, c, s, at)
    taken = _test(m, c, stmt.guard, env, at, "branch")
    block = stmt.then_block if taken else stmt.else_block
    s = s._replace(frames=frames + (Frame(block, 0, PLAIN, at),), draws=env.draws)
    return _note_local(m, c, s, "session/branch", taken=taken)


def execute_loop(m, c, s, frames, stmt: ir.Loop, at) -> Session:
    """session/loop (local): the body, forever."""
    s = s._replace(frames=frames + (Frame(stmt.block, 0, LOOP, at),))
    return _note_local(m, c, s, "session/loop")


def execute_while(m, c, s, frames, stmt: ir.While, at) -> Session:
    """session/while (local): the block, again and again while the guard is 1."""
    env = session_env(m, c, s, at)
    enter = _test(m, c, stmt.guard, env, at, "while")
    frames = frames + (Frame(stmt.block, 0, WHILE, at),) if enter else frames
    s = s._replace(frames=frames, draws=env.draws)
    return _note_local(m, c, s, "session/while", again=enter)


def execute_choose(m, c, s, frames, stmt: ir.Choose, at) -> Session:
    """session/choose (local): the index with the least keys, then the smallest index."""
    keys = [m.compiler.compile(k) for k in stmt.key]
    attrs = list(s.attrs)
    env = session_env(m, c, s, at)
    best = None
    for j in range(stmt.count):
        attrs[stmt.var] = float(j)
        env.attrs = tuple(attrs)
        key = tuple(k(env) for k in keys) + (j,)
        if best is None or key < best:
            best = key
    attrs[stmt.var] = float(best[-1]) if best is not None else 0.0
    s = s._replace(frames=frames, attrs=tuple(attrs), draws=env.draws)
    return _note_local(m, c, s, "session/choose", attribute=m.program.attrs[stmt.var], index=attrs[stmt.var])


def execute_end(m, c, s, stmt, at):
    return end_session(m, _store(c, s), s.serial)


#: Rules that change only their session: (machine, c, session, frames past the statement, stmt, at) -> session.
LOCAL = {ir.Set: execute_set, ir.Branch: execute_branch, ir.Loop: execute_loop, ir.While: execute_while,
         ir.Choose: execute_choose}

#: The other statements' rules: (machine, c, session past the statement, stmt, at) -> configuration.
EXECUTE = {
    ir.Turn: execute_turn, ir.Observe: execute_observe, ir.Hold: execute_hold, ir.Grow: execute_grow,
    ir.Drop: execute_drop, ir.Release: execute_release, ir.Load: execute_load, ir.Run: execute_run,
    ir.End: execute_end,
}


# -- the end ------------------------------------------------------------------------


def end_session(m: Machine, c: Configuration, serial: int) -> Configuration:
    """session/end: every hold is released (cached prefixes stay: the cache
    does not know the session left), every lease ends, the session leaves;
    under ``arrive closed`` a new session arrives at once in its place."""
    s = c.sessions[serial]
    if s.job is not None or s.growth is not None or s.pending is not None:
        c = pools.detach(m, c, serial)
    while c.sessions[serial].holds:
        c = pools.release_hold(m, c, serial, c.sessions[serial].holds[-1].hold_id)
        s = c.sessions[serial]
        c = _store(c, s._replace(holds=s.holds[:-1]))
    while c.sessions[serial].leases:
        c = pools.end_lease(m, c, serial, c.sessions[serial].leases[0].lease_id, expired=False)
    s = c.sessions[serial]
    if m.keeps_ended_attrs:
        c = c._replace(ended_attrs=c.ended_attrs.set(serial, s.attrs))
    stats = c.statistics
    if is_warm(m, c):
        stats = stats._replace(ended=stats.ended + 1)
    c = c._replace(sessions=c.sessions.delete(serial), statistics=stats)
    m.session_streams.pop(serial, None)
    if m.observer:
        m.notify("session/end", c, {"session": serial})
    if isinstance(m.program.arrival, ir.Closed):
        c = workload.replace_closed(m, c)
    return c
