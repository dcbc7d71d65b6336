"""The run (lean/SerqRef/Exec.lean): the initial machine, the tick,
``Exec.run`` and ``outcome``.

A tick is one instant t of the step clock: the delays due at t end (in the
order they started), then the sessions the iteration ending at t finished;
every ready session runs until it blocks (settle); then the engine, if it
has residents or a waiting queue, runs one iteration, which ends at t + 1
when it gave tokens or preempted. Otherwise the clock moves to the next
delay's end, and with none the machine halts.
"""

from __future__ import annotations


from ..arith import holds
from ..syntax import Program
from .engine import end_iteration, serve, serve_fuel, start_iteration
from .sessions import overwrite, program_fuel, run_ready, run_session, run_workload_block
from .state import (DEFAULT_POOL_STATE, Frame, FrameKind, Machine, Session, Status, get_d, list_set, pool_of,
                    pool_spec, put_session, session_of, replace)


def spawn(p: Program, m: Machine, serial: int) -> Machine:
    """``spawn`` (workload/arrive): an explicit session arrives at time 0:
    init runs, its listed attributes overwrite, it is ready."""
    attrs = list_set((0,) * p.attr_count, p.slots.serial, serial)
    m, attrs = run_workload_block(p, m, p.init, serial, attrs)
    spec = get_d(p.sessions, serial, None)
    attrs = overwrite(attrs, spec.attrs if spec is not None else ())
    s = Session(serial, attrs, (Frame(p.session, 0, FrameKind.TOP),), (), None, 0, Status.READY, 0)
    return replace(m, sessions=m.sessions + (s,), ready=m.ready + (serial,))


def initial(p: Program) -> Machine:
    """``initial``: every explicit session, in serial order."""
    m = Machine(0, 0, (), (DEFAULT_POOL_STATE,) * len(p.pools), (), (), (), (), False)
    for serial in range(len(p.sessions)):
        m = spawn(p, m, serial)
    return m


def engine_wanted(p: Program, m: Machine) -> bool:
    """``engineWanted``: the engine has residents, a parked session (schedule
    ahead) or a waiting queue it serves."""
    return bool(m.residents) or bool(m.parked) or any(pool_spec(p, q).via_engine and pool_of(m, q).queue for q in range(len(p.pools)))


def next_due(delays: tuple) -> object | None:
    """``nextDue``: the earliest end of a delay."""
    best = None
    for due, _ in delays:
        if best is None or holds(due < best):
            best = due
    return best


def idle(m: Machine) -> Machine:
    """``idle`` (step/idle): no iteration: the clock moves to the next
    delay's end; with none, nothing can happen any more."""
    due = next_due(m.delays)
    if due is None:
        return replace(m, halted=True)
    return replace(m, time=due)


def release_due(m: Machine) -> Machine:
    """``releaseDue`` (stage/ps-complete on a delay stage): the delays due
    now end, in the order they started; their sessions are ready, ahead of
    those the last iteration finished (their events were scheduled earlier)."""
    due = tuple(serial for t, serial in m.delays if holds(t <= m.time))
    m = replace(m, delays=tuple(d for d in m.delays if not holds(d[0] <= m.time)), ready=due + m.ready)
    for serial in due:
        m = put_session(m, replace(session_of(m, serial), status=Status.READY))
    return m


def apply_parked(p: Program, m: Machine) -> Machine:
    """``applyParked`` (step/apply): the iteration is formed; the ended one's
    results are applied: the parked sessions become ready, in the order they
    parked, and each runs (its hold exits: they are no longer finishing).
    vLLM 0.33.0 applies batch k's output after forming batch k+1
    (EngineCore.step_with_batch_queue, vllm/v1/engine/core.py:745-769, 778-796)."""
    parked = m.parked
    m = replace(m, parked=())
    for serial in parked:
        m = run_session(p, program_fuel(p), put_session(m, replace(session_of(m, serial), status=Status.READY)), serial)
    return m


def tick(p: Program, m: Machine) -> Machine:
    """``tick``: one instant (module docstring). Under schedule ahead the
    iteration starts with no session finishing any more (those that did not
    park went on); it is formed (an iteration, though empty) while a session
    is parked (vLLM queues the empty batch, vllm/v1/engine/core.py:745-768),
    and then the parked sessions exit (``applyParked``) before it ends."""
    if m.halted:
        return m
    m = run_ready(p, release_due(m))
    if engine_wanted(p, m):
        m, it = serve(p, serve_fuel(p), replace(m, finishing=()), start_iteration(p, m))
        if it.assigned or it.preempted or m.parked:
            return end_iteration(p, apply_parked(p, m), it)
        return idle(m)
    return idle(m)


def run(p: Program, fuel: int, m: Machine) -> Machine:
    """``Exec.run``: at most ``fuel`` ticks, stopping when the machine halts."""
    while fuel > 0 and not m.halted:
        m = tick(p, m)
        fuel -= 1
    return m


def times_of(index: int, m: Machine) -> tuple[tuple[int, int], ...]:
    """``timesOf``: (serial, time) of every sample of observation ``index``, in the order taken."""
    return tuple((x.serial, x.time) for x in m.samples if x.index == index)


def insert_by_serial(x: tuple[int, int], ys: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """``insertBySerial``: before the first pair of a greater serial."""
    for i, y in enumerate(ys):
        if x[0] < y[0]:
            return ys[:i] + (x,) + ys[i:]
    return ys + (x,)


def by_serial(pairs: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """``bySerial``: an insertion sort by serial (equal serials keep their order)."""
    out: tuple = ()
    for x in pairs:
        out = insert_by_serial(x, out)
    return out


def values_of(index: int, m: Machine) -> tuple[tuple[int, int], ...]:
    """``valuesOf``: (serial, value) of every sample of observation ``index``, in the order taken."""
    return tuple((x.serial, x.value) for x in m.samples if x.index == index)


def refusals_of(m: Machine) -> tuple[tuple[int, int], ...]:
    """(Python only) the refusals read off a final machine (``refusals``' body)."""
    return by_serial(values_of(2, m))


def refusals(p: Program, fuel: int) -> tuple[tuple[int, int], ...]:
    """``refusals p fuel``: the value of observation 2 (the oracle harness's
    ``refused``: why a request was refused, 1 the configuration, 2 its
    prompt, 3 it never fits) per request that took it, sorted by serial."""
    return refusals_of(final_machine(p, fuel))


def final_machine(p: Program, fuel: int) -> Machine:
    """(Python only) the machine ``outcome`` reads."""
    return run(p, fuel, initial(p))


def outcome_of(p: Program, m: Machine) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...], int]:
    """(Python only) the outcome read off a final machine (``outcome``'s body)."""
    return by_serial(times_of(0, m)), by_serial(times_of(1, m)), pool_of(m, p.engine.memory).preemptions


def outcome(p: Program, fuel: int) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...], int]:
    """``outcome p fuel``: first-token and last-token step per request
    (observations 0 and 1), sorted by serial, and the engine memory's preemptions."""
    return outcome_of(p, final_machine(p, fuel))


def ticks_to_halt(p: Program, limit: int = 1_000_000) -> int | None:
    """(Python only) how many ticks the run takes to halt (None: not within ``limit``)."""
    m = initial(p)
    for n in range(limit + 1):
        if m.halted:
            return n
        m = tick(p, m)
    return None
