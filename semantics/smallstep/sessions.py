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

import math
from typing import Callable, NamedTuple

from .. import ir
from .configuration import LOOP, PLAIN, READY, WHILE, Configuration, Frame, Session, Statistics, setter
from .machine import Machine, fail, follow_up, session_env
from . import pools, workload
from .stages.step import parks
from .rules import rule
from .values import Env, resolve_index

class Op(NamedTuple):
    """A statement ready to run: its rule, whether the rule is local (changes
    only its session), the statement, where it is (block, index), and the
    expressions the rule reads, compiled once per program."""

    rule: Callable
    local: bool
    stmt: object
    at: tuple[int, int]
    next: int  # the statement after it in its block
    exprs: tuple


def compile_ops(m: Machine, execute: dict | None = None) -> tuple[tuple[Op, ...], ...]:
    """Every block's statements as Ops, then the Op of the block's end
    (``end_op``); ``execute``: each statement kind's rule (default
    ``EXECUTE``, the definitions; the fast engine's forms: semantics/fast/forms.py).
    The driver installs them in the machine: ``m.ops``."""
    execute = EXECUTE if execute is None else execute
    compile_ = m.compiler.compile
    openers = block_openers(m.program)
    blocks = []
    for b, block in enumerate(m.program.blocks):
        ops = []
        for i, stmt in enumerate(block):
            kind = type(stmt)
            if kind is ir.Set:
                exprs = (compile_(stmt.expr),)
            elif kind is ir.Observe:  # and whether the session ends right after it (its block's end, or `end;`)
                exprs = (compile_(stmt.expr), (b == m.program.session and i == len(block) - 1)
                         or (i + 1 < len(block) and type(block[i + 1]) is ir.End))
            elif kind is ir.Branch or kind is ir.While:
                exprs = (compile_(stmt.guard),)
            elif kind is ir.Choose:
                exprs = tuple(compile_(k) for k in stmt.key)
            elif kind is ir.Run:
                refs = (stmt.stage,) + tuple(stmt.also or ())
                fixed = tuple(r.base for r in refs) if all(r.index is None for r in refs) else None
                growing = None if stmt.growing is None else (stmt.growing, m.compiler.compile_ref_index(stmt.growing))
                exprs = (compile_(stmt.work), refs, fixed, stmt.mode, growing)
            else:
                exprs = ()
            local = LOCAL.get(kind)
            ops.append(Op(local or execute[kind], local is not None, stmt, (b, i), i + 1, exprs))
        ops.append(end_op(m, b, len(block), openers.get(b)))
        blocks.append(tuple(ops))
    return tuple(blocks)


def block_openers(program: ir.Program) -> dict[int, tuple[int, int]]:
    """Each nested block's opening statement (block, index): the Hold,
    Branch, Loop or While it belongs to (the blocks form a tree, FORMAT.md,
    so a block has one)."""
    openers = {}
    for b, block in enumerate(program.blocks):
        for i, stmt in enumerate(block):
            kind = type(stmt)
            if kind is ir.Hold:
                inner = (stmt.body,)
            elif kind is ir.Branch:
                inner = (stmt.then_block, stmt.else_block)
            elif kind is ir.Loop or kind is ir.While:
                inner = (stmt.block,)
            else:
                inner = ()
            for x in inner:
                openers[x] = (b, i)
    return openers


def end_op(m: Machine, b: int, n: int, at: tuple[int, int] | None) -> Op:
    """The Op at the end of block ``b`` (past its ``n`` statements), by what
    opened it (``at``): the session's own block ends the session
    (session/end), a hold's body exits the hold (exit_hold_body, then
    session/hold-exit), a loop's
    body starts again (session/loop-again), a while's re-reads its guard
    (session/while), a branch's block is left (session/block-exit)."""
    if b == m.program.session:
        return Op(end_session, False, None, None, n, ())
    opener = None if at is None else m.program.blocks[at[0]][at[1]]
    kind = type(opener)
    if kind is ir.Hold:
        return Op(exit_hold_body, False, opener, at, n, ())
    if kind is ir.Loop:
        return Op(loop_again, True, opener, at, n, ())
    if kind is ir.While:
        return Op(while_again, True, opener, at, n, (m.compiler.compile(opener.guard),))
    return Op(exit_block, True, opener, at, n, ())


def _store(c: Configuration, s: Session) -> Configuration:
    return c._replace(sessions=c.sessions.set(s.serial, s))


# -- leaving a block -------------------------------------------------------------


@rule("session/loop-again", "a loop's body ended: it starts again",
      "002 §2: loop block (forever)")
def loop_again(m, c, s, op, env) -> Session:
    """session/loop-again (local): the loop's body starts again."""
    s = _set_pc(s, 0)
    return _note_local(m, c, s, "session/loop-again")


@rule("session/while-again", "a while's body ended: its guard is read again; 1 runs the body again, 0 goes on after the while",
      "FORMAT.md While: the body again while the guard is 1")
def while_again(m, c, s, op, env) -> Session:
    """session/while (local), at the end of its block: the guard is read
    again; at 1 the block runs again, at 0 the session goes on after the while."""
    again = _test(c, op.exprs[0], env, op.at, "while")
    if again:
        s = _set_pc_draws(s, 0, env.draws)
    else:
        s = _set_frames_pc_draws(s, s.frames[:-1], s.frames[-1].resume, env.draws)
    return _note_local(m, c, s, "session/while-again", again=again)


@rule("session/block-exit", "a branch's block ended: the enclosing block goes on after the branch",
      "002 §3: a continuation is a stack of block frames")
def exit_block(m, c, s, op, env) -> Session:
    """session/block-exit (local): a branch's block ends; the enclosing block goes on after the branch."""
    s = _set_frames_pc(s, s.frames[:-1], s.frames[-1].resume)
    return _note_local(m, c, s, "session/block-exit")


def exit_hold_body(m, c, s, op, env) -> Configuration:
    """The end of a hold's body: under schedule ahead, a session finishing
    at an engine whose memory the hold holds waits at the exit (the
    follow-up step/park: pc stays here until the engine's next iteration is
    formed); else the follow-up work of the hold's exit: every allocation
    goes back (pool/release), a leased one stays (pool/lease), then
    session/hold-exit."""
    c = _store(c, s)
    hold = s.holds[-1]
    done = frozenset(a.pool for a in hold.allocations)
    if m.ahead:
        engine = parks(m, c, s.serial, done)
        if engine is not None:
            return follow_up(c, ("step/park", engine, s.serial))
    compiled = m.holds[hold.stmt]
    lease_pool = None
    if compiled.lease_ref is not None:
        env = session_env(m, c, s, hold.stmt)
        lease_pool = resolve_index(compiled.lease_ref, compiled.lease_index, env, "pool")
    return follow_up(c, *pools.release_items(s.serial, hold, lease_pool), ("session/hold-exit", s.serial, done))


@rule("session/hold-exit", "a hold's body ended: every allocation goes back (pool/release), a leased one stays (pool/lease); computed := 0",
      "002 §3 Pools: At the end of the body the units are released and min(ℓ, computed) units stay cached")
def exit_hold(m: Machine, c: Configuration, serial: int, done: frozenset) -> Configuration:
    """session/hold-exit (after its follow-up work, exit_hold_body's: every
    allocation of the hold on the pools ``done`` went back with min(cache,
    computed) cached, a leased one stayed): the hold and its frame go;
    ``computed`` is 0 again."""
    s = c.sessions[serial]
    attrs = list(s.attrs)
    attrs[m.program.slot_computed] = 0.0
    s = s._replace(frames=s.frames[:-1], pc=s.frames[-1].resume, holds=s.holds[:-1], attrs=tuple(attrs),
                   preempted_at=tuple((q, x) for q, x in s.preempted_at if q not in done))
    c = _store(c, s)
    return _note(m, c, "session/hold-exit", s)


def _note(m: Machine, c: Configuration, rule: str, s: Session, **fields) -> Configuration:
    if m.observer:
        m.notify(rule, c, {"session": s.serial, **fields})
    return c


def _note_local(m: Machine, c: Configuration, s: Session, rule: str, **fields) -> Session:
    """Report a local rule: the configuration it stands for is ``c`` with ``s``."""
    if m.observer:
        m.notify(rule, _store(c, s), {"session": s.serial, **fields})
    return s


def _test(c: Configuration, guard, env, stmt, what: str) -> bool:
    value = guard(env)
    if value == 1.0:
        return True
    if value == 0.0:
        return False
    fail(f"the {what} guard is {value:g}, not 0 or 1: a guard is a test and a test has two answers "
         f"(a draw is written `branch with (p)`)", c, stmt)


# -- statements --------------------------------------------------------------------
#
# Every rule is (machine, c, session, op, env): a local rule returns the new
# session, the others the new configuration.


_set_pc = setter(Session, "pc")
_set_pc_draws = setter(Session, "pc", "draws")
_set_frames_pc_draws = setter(Session, "frames", "pc", "draws")
_set_attrs_pc_draws = setter(Session, "attrs", "pc", "draws")
_set_frames_pc = setter(Session, "frames", "pc")
_set_samples_sessions = setter(Configuration, "samples", "sessions")
_set_left = setter(Configuration, "sessions", "statistics", "ended_attrs", "samples")
_set_ended = setter(Statistics, "ended")


def _past(s: Session, op: Op, env) -> Session:
    """The session past its statement, its stream where ``env`` left it."""
    return _set_pc_draws(s, op.next, env.draws)


def check_turn_number(c: Configuration, s: Session, m: Machine, stmt) -> float:
    """The session's turn_no, which numbers its samples and its turns' random streams: a RunError
    when a `set turn_no` made it inf or NaN, which number nothing."""
    turn = s.attrs[m.slot_turn]
    if not math.isfinite(turn):
        fail(f"turn_no is {turn:g}: it numbers the session's turns and samples, so it is a finite number", c, stmt)
    return turn


@rule("session/turn", "turn_no + 1; the next explicit turn or trace row and more; then the turn block",
      "002 §3 Workload: turn at every turn statement; with a trace, turn loads the next turn's new, out, think, forced and sets more")
def execute_turn(m, c, s, op, env):
    """session/turn: the next turn's attributes."""
    check_turn_number(c, s, m, op.at)
    c = workload.take_turn(m, _store(c, _past(s, op, env)), s.serial)
    return _note(m, c, "session/turn", c.sessions[s.serial])


@rule("session/set", "the attribute takes the expression's value",
      "002 §2: set NAME = expr")
def execute_set(m, c, s, op, env) -> Session:
    """session/set (local): the attribute takes the expression's value."""
    value = op.exprs[0](env)
    slot = op.stmt.slot
    attrs = s.attrs
    s = _set_attrs_pc_draws(s, attrs[:slot] + (value,) + attrs[slot + 1:], op.next, env.draws)
    if m.observer:
        _note_local(m, c, s, "session/set", attribute=m.program.attrs[slot], value=value)
    return s


@rule("session/observe", "a sample (time, session, turn_no, value), kept at or after the warm-up",
      "002 §3 Statistics: observe x = e records a sample after warm-up with the time, session and turn")
def execute_observe(m, c, s, op, env):
    """session/observe: a sample, kept after the warm-up with the time, the
    session and its turn."""
    value = op.exprs[0](env)
    samples = _with_sample(m, c, s, op, value)
    s = _set_pc_draws(s, op.next, env.draws)
    c = _set_samples_sessions(c, samples, c.sessions.set(s.serial, s))
    if m.observer:
        _note(m, c, "session/observe", s, name=m.program.observes[op.stmt.index], value=value)
    return c


def _with_sample(m, c, s, op, value):
    """The samples with the observation's sample added, at or after the warm-up."""
    if c.time < m.warmup:
        return c.samples
    turn = s.attrs[m.slot_turn]
    if not -math.inf < turn < math.inf:
        check_turn_number(c, s, m, op.at)
    return workload.record_sample(c, s.serial, int(turn), op.stmt.index, value)


def execute_hold(m, c, s, op, env):
    return pools.enter_hold(m, _store(c, _past(s, op, env)), s.serial, op.at, preempted=False)


def _pool_of(m, s, ref: ir.Ref, env) -> int:
    return resolve_index(ref, m.compiler.compile_ref_index(ref), env, "pool")


def execute_grow(m, c, s, op, env):
    p = _pool_of(m, s, op.stmt.ref, env)
    amount = max(0.0, m.compiler.compile(op.stmt.amount)(env))
    return pools.grow(m, _store(c, _past(s, op, env)), s.serial, p, amount, op.at)  # it goes on, waits, or re-enters its queue


def execute_drop(m, c, s, op, env):
    p = _pool_of(m, s, op.stmt.ref, env)
    return pools.drop_statement(m, _store(c, _past(s, op, env)), s.serial, p)


def execute_release(m, c, s, op, env):
    p = _pool_of(m, s, op.stmt.ref, env)
    return pools.release_statement(m, _store(c, _past(s, op, env)), s.serial, p)


def execute_load(m, c, s, op, env):
    p = _pool_of(m, s, op.stmt.ref, env)
    amount = max(0.0, m.compiler.compile(op.stmt.amount)(env))
    return pools.load_statement(m, _store(c, _past(s, op, env)), s.serial, p, amount, op.at)


def execute_run(m, c, s, op, env):
    """The run statement: its work is evaluated; a run of zero work
    completes at once (session/run), any other is a job at the stage(s) (the
    stage kind's enter rule: stage/fifo-enter, stage/ps-enter,
    stage/flow-enter, stage/step-enter with its mode and the pool it grows)."""
    work_of, refs, targets, mode, growing = op.exprs
    if targets is None:  # an indexed family member
        targets = tuple(resolve_index(ref, m.compiler.compile_ref_index(ref), env, "stage") for ref in refs)
    work = work_of(env)
    if not 0 < work < math.inf:
        if not work == work:
            fail("the run's work is NaN", c, op.at)
        if work == math.inf:  # the job would hold its stage for ever, and the session never finish
            fail("the run's work is inf: the job would never finish", c, op.at)
        return complete_at_once(m, c, s, op, env, targets)
    how = None
    if mode != "Plain":
        how = (mode, None if growing is None else resolve_index(growing[0], growing[1], env, "pool"))
    # the stage kind's enter rule (stages.enter_stage, called directly: a job's id is the next sequence number)
    return m.stage_kinds[targets[0]].enter(m, c, targets, s, (op.next, env.draws), work, None, c.sequence, how)


@rule("session/run", "a run of zero work (or less) completes at once: the session goes on",
      "002 §3 Stages: A run of zero work completes at once.")
def complete_at_once(m, c, s, op, env, targets):
    s = _past(s, op, env)
    return _note(m, _store(c, s), "session/run", s, stages=[m.stage_name(t) for t in targets], work=0.0)


@rule("session/branch", "the first block when the guard is 1, the second when 0; any other value is a RunError naming the statement",
      "002 §3 Branching: branch (e) takes the first block when e is 1 and the second when it is 0; any other value ... is a run-time error")
def execute_branch(m, c, s, op, env) -> Session:
    """session/branch (local): the first block when the guard is 1, the second when 0; any other value is a RunError."""
    stmt = op.stmt
    taken = _test(c, op.exprs[0], env, op.at, "branch")
    block = stmt.then_block if taken else stmt.else_block
    s = s._replace(frames=s.frames + (Frame(block, PLAIN, op.at, op.next),), pc=0, draws=env.draws)
    return _note_local(m, c, s, "session/branch", taken=taken)


@rule("session/loop", "the body, forever",
      "002 §2: loop block")
def execute_loop(m, c, s, op, env) -> Session:
    """session/loop (local): the body, forever."""
    s = s._replace(frames=s.frames + (Frame(op.stmt.block, LOOP, op.at, op.next),), pc=0)
    return _note_local(m, c, s, "session/loop")


@rule("session/while", "the guard is read: at 1 the body runs, at 0 the session goes on after the while",
      "FORMAT.md While: the body again and again while the guard is 1")
def execute_while(m, c, s, op, env) -> Session:
    """session/while (local): the block, again and again while the guard is 1."""
    enter = _test(c, op.exprs[0], env, op.at, "while")
    if enter:
        s = s._replace(frames=s.frames + (Frame(op.stmt.block, WHILE, op.at, op.next),), pc=0, draws=env.draws)
    else:
        s = s._replace(pc=op.next, draws=env.draws)
    return _note_local(m, c, s, "session/while", again=enter)


@rule("session/choose", "the index with the least keys, then the smallest index",
      "002 §3 Ties: choose: the keys, in order, then the smallest index")
def execute_choose(m, c, s, op, env) -> Session:
    """session/choose (local): the index with the least keys, then the smallest index."""
    stmt = op.stmt
    keys = op.exprs
    attrs = list(s.attrs)
    best = None
    seen = [] if m.observer else None  # every candidate's keys, for the record
    for j in range(stmt.count):
        attrs[stmt.var] = float(j)
        env.attrs = tuple(attrs)
        key = tuple(k(env) for k in keys) + (j,)
        if seen is not None:
            seen.append(key[:-1])
        if best is None or key < best:
            best = key
    attrs[stmt.var] = float(best[-1]) if best is not None else 0.0
    s = s._replace(pc=op.next, attrs=tuple(attrs), draws=env.draws)
    if seen is None:
        return s
    return _note_local(m, c, s, "session/choose", attribute=m.program.attrs[stmt.var], index=int(attrs[stmt.var]),
                       keys=seen)


def execute_end(m, c, s, op, env):
    return end_session(m, c, _past(s, op, env))


#: Rules that change only their session.
LOCAL = {ir.Set: execute_set, ir.Branch: execute_branch, ir.Loop: execute_loop, ir.While: execute_while,
         ir.Choose: execute_choose}

#: The other statements' rules.
EXECUTE = {
    ir.Turn: execute_turn, ir.Observe: execute_observe, ir.Hold: execute_hold, ir.Grow: execute_grow,
    ir.Drop: execute_drop, ir.Release: execute_release, ir.Load: execute_load, ir.Run: execute_run,
    ir.End: execute_end,
}


# -- the end ------------------------------------------------------------------------


@rule("session/end", "every hold released, every lease ended, cached prefixes kept; the session leaves (under closed(n) a new one arrives at once)",
      "002 §3 Pools: end releases every hold but keeps the session's cached prefixes")
def end_session(m: Machine, c: Configuration, s: Session, op: Op | None = None, env=None,
                samples=None) -> Configuration:
    """session/end (also the rule of the session block's end): its premise,
    the session holds, leases and waits for nothing; while it does, the end
    leaves that as its follow-up work first (its job leaves its stage, every
    hold is released, innermost first: cached prefixes stay, the cache does
    not know the session left; every lease ends), then session/end again.
    The session leaves; under ``arrive closed`` a new session arrives at once
    in its place (the follow-up workload/arrive). ``s`` is the session's
    latest record (``c`` may hold an older one); ``samples``, the samples
    with those of the observe just before, when the two rules are one update
    (execute_observe_then_end)."""
    serial = s.serial
    if s.job is not None or s.growth is not None or s.pending is not None or s.holds or s.leases:
        assert samples is None, "an observe and an end in one update, with holds or leases to release"
        c, items = _store(c, s), ()
        if s.job is not None or s.growth is not None or s.pending is not None:
            c, items = pools.detach(m, c, serial)
        for hold in reversed(s.holds):
            items += pools.release_items(serial, hold, after=pools.POP)
        items += tuple(("pool/lease-end", serial, lease.lease_id, False) for lease in s.leases)
        return follow_up(c, *items, ("session/end", serial))
    ended_attrs = c.ended_attrs.set(serial, s.attrs) if m.keeps_ended_attrs else c.ended_attrs
    stats = c.statistics
    if c.time >= m.warmup:
        stats = _set_ended(stats, stats.ended + 1)
    c = _set_left(c, c.sessions.delete(serial), stats, ended_attrs, c.samples if samples is None else samples)
    if m.observer:
        m.notify("session/end", c, {"session": serial})
    return follow_up(c, ("workload/arrive",)) if m.closed else c
