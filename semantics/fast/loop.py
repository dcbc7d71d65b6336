"""The fast engine's own loop for the commonest shape of program: a workload
of sessions (``arrive poisson``, ``renewal``, ``closed`` or ``batch``, no
init block, no trace) whose statements are set, observe, run (at one fifo,
delay or ps stage), end and the local ones (branch, loop, while, choose), with
no pool, no gauge, no flow and no query of the state (queue(s), used(p),
est_rho(s), ...). The M/M/1 queue and the population
benchmarks are programs of this shape (benchmarks/README.md, issue 22).

The definition (semantics/smallstep) builds one immutable configuration per
rule; here one run keeps the same facts in mutable state of its own: the
pending events in a binary heap on their (time, sequence number) keys, the
live sessions in a dict, each stage's jobs in a dict (in service, in start
order), a deque (a fifo stage's waiting line) or a heap (a ps stage's, by
finish tag then start order), the statistics and areas in lists. Every rule it applies is the definition's, written out on that
state with the same arithmetic in the same order:

| here | the definition's rules |
|---|---|
| taking an event | time/advance (measure.integrate: each area plus its level times dt) and the event taken off (driver.walk) |
| ``arrive`` | the arrival event (workload.arrival_event, draw_gap) and workload/arrive |
| ``job`` | stage/fifo-complete (jobs.finish_job, machine.ready_session) and stage/fifo-start |
| ``delay`` | stage/delay-complete |
| ``ps`` | stage/ps-complete (ps.reschedule: a completion event taken off is marked, and skipped when it comes first) |
| running the ready sessions | settle's first loop and settle.run_session: session/set, session/observe, session/run with stage/fifo-enter, stage/fifo-start, stage/delay-enter or stage/ps-enter, session/end (and workload/arrive under ``closed``); the local rules (branch, loop, while, choose, a block's end) are the definition's own functions |

The session records are the definition's (sessions.Session), updated as its
rules update them. At the end of the run the configuration is built from
this state (``configuration``) and the definition's measure.advance_time and
build_result give the RunResult; a RunError is raised with the message,
statement and time the definition's rule raises it with (its rule reads the
time of the configuration only: the ``clock`` stands for it). A program of
another shape runs on the fast forms (engine.py). tests/test_fast_loop.py,
the digest (tests/digest) and tests/test_engines_equal.py hold the two
engines equal.
"""

from __future__ import annotations

import gc
import math
from collections import deque
from heapq import heappop, heappush

import immutables

from .. import ir
from ..errors import RunError
from ..results import RunResult
from ..smallstep.configuration import AT_STAGE, EMPTY_READY, READY, Session, StageStats, Workload
from ..smallstep.driver import PROGRESS_EVERY, initial_configuration
from ..smallstep.machine import MAX_QUIET_STATEMENTS, MAX_READIES_PER_INSTANT, Machine, fail, ready_session
from ..smallstep.measure import advance_time, build_result
from ..smallstep.rng import member_stream, sample_exp
from ..smallstep.sessions import check_turn_number, end_session
from ..smallstep.stages.delay import DelayJob, DelayState
from ..smallstep.stages.fifo import FifoJob, FifoState
from ..smallstep.stages.ps import NO_JOBS, PsJob, PsState
from ..smallstep.values import CONTEXT_FIELDS, Env
from .records import build, setter

#: the stage kinds the loop runs
FIFO, DELAY, PS = "fifo", "delay", "ps"

#: the statements the loop runs itself (the local ones it hands to their rules)
_SET, _OBSERVE, _RUN, _END, _LOCAL = range(5)
_STATEMENTS = {ir.Set: _SET, ir.Observe: _OBSERVE, ir.Run: _RUN, ir.End: _END,
               ir.Branch: _LOCAL, ir.Loop: _LOCAL, ir.While: _LOCAL, ir.Choose: _LOCAL}

#: the functions an expression may call here: they read their arguments only (the others read the
#: configuration: queue(s), used(p), est_rho(s), ...)
PURE_CALLS = frozenset({"Min", "Max", "Pow", "Abs", "Floor", "Ceil", "Sqrt", "Exp", "Ln"})

_set_attrs_pc_draws = setter(Session, "attrs", "pc", "draws")
_set_at_stage = setter(Session, "attrs", "status", "job", "pc", "draws")
_set_attrs = setter(Session, "attrs")
_set_ready = setter(Session, "status", "readies", "job", "growth", "pending")
_set_started = setter(FifoJob, "started", "due")
_NAN = math.nan
_INF = math.inf
_new = object.__new__


class Clock:
    """What the loop hands the definition's functions for the configuration
    (a local rule, an expression reading ``now``, ``fail``): its time."""

    __slots__ = ("time",)

    def __init__(self, time: float = 0.0):
        self.time = time


def applies(m: Machine) -> bool:
    """Whether ``m``'s program is of the shape the loop runs (the module's docstring)."""
    program = m.program
    if (program.pools or program.gauges or m.observer or m.trace_sessions or m.has_init or m.reads_estimates
            or m.flow_stages or m.engines):
        return False
    if any(name not in (FIFO, DELAY, PS) for name in m.kind_names):
        return False
    if not all(_pure(stage.kind) for stage in program.stages):
        return False  # a ps stage's capacity reads the jobs present and the time only
    if not isinstance(program.arrival, (ir.Poisson, ir.Renewal, ir.Closed, ir.Batch)):
        return False
    if isinstance(program.arrival, ir.Renewal) and not _pure(program.arrival.gap):
        return False
    for b, block in enumerate(program.blocks):
        if b in (program.init, program.turn):
            continue  # not run: no init block, and no turn statement below
        for stmt in block:
            kind = _STATEMENTS.get(type(stmt))
            if kind is None:
                return False
            if kind == _RUN and (stmt.also or stmt.mode != "Plain" or stmt.growing is not None
                                 or stmt.stage.index is not None):
                return False
            if not _pure(stmt):
                return False
    return True


def _pure(node) -> bool:
    """Whether no expression in ``node`` (an IR value) reads the configuration but its time."""
    if isinstance(node, ir.Call):
        return node.fun in PURE_CALLS and all(_pure(a) for a in node.args)
    if isinstance(node, ir.Ctx):
        return node.var in CONTEXT_FIELDS
    if isinstance(node, (tuple, list)):
        return all(_pure(x) for x in node)
    fields = getattr(node, "__dataclass_fields__", None)
    if fields is None:
        return True
    return all(_pure(getattr(node, name)) for name in fields)


def run(m: Machine, progress=None) -> RunResult:
    """Run ``m``'s program (``applies(m)``) to its end: the RunResult the definition's run gives."""
    return run_walk(m, progress, _walk)


def run_walk(m: Machine, progress, walk) -> RunResult | None:
    """The RunResult of the configuration ``walk(m, progress)`` ends in, the collector off while it walks, as
    in driver.run_machine; None when the walk returns None (the step loop met what it does not write out).
    Shared by this loop's run and the step loop's."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        c = walk(m, progress)
        if c is None:
            return None
        result = build_result(m, c, c.time)
    finally:
        if collecting:
            gc.enable()
    if progress is not None:
        progress(1.0)
    return result


def _walk(m: Machine, progress):
    """The run's last configuration (driver.walk's, with every=False)."""
    program = m.program
    horizon = program.horizon
    limit = program.arrivals
    arrival = program.arrival
    if limit is not None and not isinstance(arrival, (ir.Poisson, ir.Renewal)):
        raise RunError("run { arrivals N; } needs an open workload (arrive poisson or arrive renewal)")
    warmup = m.warmup
    closed = m.closed
    table = _table(m)
    slot_serial, slot_turn = m.slot_serial, m.slot_turn
    blank = m.blank_attrs
    blank_head, blank_tail = blank[:slot_serial], blank[slot_serial + 1:]
    frames0 = m.session_frames
    stream_sessions = m.stream_sessions
    stream_arrivals = m.stream_arrivals
    poisson_gap = m.poisson_gap
    renewal_gap = m.compiler.compile(arrival.gap) if isinstance(arrival, ir.Renewal) else None
    clock = Clock(0.0)

    # -- the state (the configuration's fields) --
    c0 = initial_configuration(m)
    n_stages = len(program.stages)
    is_fifo = tuple(name == FIFO for name in m.kind_names)
    is_ps = tuple(name == PS for name in m.kind_names)
    servers = m.servers
    # per stage, its jobs: a fifo stage's in service and a delay stage's (job id -> job, in start order), a ps
    # stage's (a heap of (finish tag, job id, job): PsJobs' order)
    running = [[] if ps else {} for ps in is_ps]
    # a ps stage's virtual time, when it was last advanced, each job's rate, its completion event's key and job
    virtual = [st.virtual if ps else 0.0 for ps, st in zip(is_ps, c0.stages)]
    updated = [st.updated if ps else 0.0 for ps, st in zip(is_ps, c0.stages)]
    rates = [st.rate if ps else 0.0 for ps, st in zip(is_ps, c0.stages)]
    dues = [st.due if ps else None for ps, st in zip(is_ps, c0.stages)]
    due_jobs = [st.due_job if ps else -1 for ps, st in zip(is_ps, c0.stages)]
    cancelled = set()  # the sequence numbers of events taken off the pending ones (still in the heap)
    waiting = [deque() for _ in range(n_stages)]  # a fifo stage's waiting jobs, in arrival order
    completed = [x.completed for x in c0.statistics.stages]
    wait_sum = [x.wait_sum for x in c0.statistics.stages]
    service_sum = [x.service_sum for x in c0.statistics.stages]
    areas = list(c0.areas)
    integrate = _integrator(m, running, waiting)
    events: list = []  # (time, sequence number, kind, a, b), a heap
    sessions: dict = {}
    ready: deque = deque()
    samples: list = []  # oldest first
    now = 0.0
    seq = taken = ended = 0
    next_serial = generated = arrivals_draws = 0
    replaced = c0.workload.replaced

    # (the helpers take the state by their parameters' defaults: no variable of this function is a closure's,
    # which would make every read of it in the loop below one step longer)
    def ps_state(s: int, running=running, virtual=virtual, updated=updated, rates=rates, dues=dues,
                 due_jobs=due_jobs) -> PsState:
        jobs = NO_JOBS
        for _, _, job in sorted(running[s]):
            jobs = jobs.with_job(job)
        return PsState(jobs, virtual[s], updated[s], rates[s], dues[s], due_jobs[s])

    def state(now, seq, taken, ended, next_serial, generated, arrivals_draws, replaced, c0=c0, running=running,
              waiting=waiting, is_fifo=is_fifo, is_ps=is_ps, ps_state=ps_state, samples=samples,
              counts=(completed, wait_sum, service_sum), sessions=sessions, events=events, cancelled=cancelled,
              areas=areas):
        """The configuration of the state now (the loop's counters given)."""
        stages = tuple(FifoState(tuple(running[s].values()) + tuple(waiting[s]), len(running[s])) if is_fifo[s]
                       else ps_state(s) if is_ps[s] else DelayState(tuple(running[s].values()))
                       for s in range(len(running)))
        cons = None
        for sample in samples:
            cons = (sample, cons)
        stats = c0.statistics._replace(stages=tuple(StageStats(*x) for x in zip(*counts)), ended=ended)
        return c0._replace(time=now, sessions=immutables.Map(sessions), ready=EMPTY_READY, stages=stages,
                           events=tuple(sorted(e for e in events if e[1] not in cancelled)), sequence=seq,
                           workload=Workload(next_serial, generated, arrivals_draws, 0, 0, replaced),
                           statistics=stats, areas=tuple(areas), samples=cons, taken=taken)

    def reschedule(s: int, seq: int, running=running, clock=clock, capacities=m.capacities, virtual=virtual,
                   rates=rates, dues=dues, due_jobs=due_jobs, cancelled=cancelled, events=events) -> int:
        """ps.reschedule: ps stage ``s``'s rate for the jobs present and its next completion; the next
        sequence number after it."""
        heap = running[s]
        n = len(heap)
        rate = 0.0
        if n:
            env = Env(clock)
            env.present = float(n)
            rate = capacities[s](env) / n
            first = heap[0][2]
            if dues[s] is not None and rate == rates[s] and first.job_id == due_jobs[s]:
                return seq
        if dues[s] is not None:
            cancelled.add(dues[s][1])
        due = None
        if rate > 0 and math.isfinite(rate):
            due = (clock.time + max(0.0, (first.tag - virtual[s]) / rate), seq)
            heappush(events, (due[0], seq, "ps", s, 0))
            seq += 1
        elif not rate >= 0:
            rate = 0.0
        rates[s], dues[s], due_jobs[s] = rate, due, first.job_id if due is not None else -1
        return seq

    def new_session(serial: int, now: float, head=blank_head, tail=blank_tail, frames0=frames0,
                    stream_sessions=stream_sessions) -> Session:
        """workload/arrive's session: its attributes blank but its serial, ready at ``now``."""
        return build(Session, (serial, head + (float(serial),) + tail, frames0, 0, READY, (), (), None, None, None,
                               -1, (), -1, member_stream(stream_sessions, serial), 0, -1, 0, (now, 1)))

    def gap(position: int, poisson_gap=poisson_gap, stream_arrivals=stream_arrivals, clock=clock,
            renewal_gap=renewal_gap) -> tuple[float, int]:
        """workload.draw_gap: the next gap, and the arrivals stream's position after it."""
        if poisson_gap is not None:
            return sample_exp(poisson_gap, stream_arrivals, position), position + 1
        env = Env(clock, None, -1, stream_arrivals, position)
        value = renewal_gap(env)
        if not (value > 0 and math.isfinite(value)):
            raise RunError(f"arrive renewal: a gap of {value:g}; gaps must be positive and finite", time=clock.time)
        return value, env.draws

    # -- start_workload --
    if isinstance(arrival, (ir.Poisson, ir.Renewal)):
        first = 0.0
        if poisson_gap is None:
            first, arrivals_draws = gap(arrivals_draws)
        if limit is None or generated < limit:
            heappush(events, (now + first, seq, "arrive", 0, 0))
            seq += 1
    else:
        for _ in range(arrival.n):
            sessions[next_serial] = new_session(next_serial, now)
            ready.append(next_serial)
            next_serial += 1

    count = 0
    while True:
        # -- settle: the ready sessions run, in the order they became ready (settle.run_session) --
        while ready:
            serial = ready.popleft()
            s = sessions.get(serial)
            if s is None or s.status != READY:
                continue
            quiet = MAX_QUIET_STATEMENTS
            # the session's attributes, statement and stream position, kept here while it runs (its record is
            # built when it blocks, or for a local rule)
            env = _new(Env)  # Env's fields set here, without a call of its constructor
            env.config = clock
            env.serial = serial
            env.stream = s.stream
            attrs = env.attrs = s.attrs
            env.draws = s.draws
            pc = s.pc
            row = table[s.frames[-1].block]
            while True:
                quiet -= 1
                if quiet < 0:
                    fail(f"{MAX_QUIET_STATEMENTS} statements ran at time {now:g} without anything blocking: "
                         f"the program loops without letting time pass", clock,
                         (s.frames[-1].block, max(0, pc - 1)))
                code, f, nxt, at, aux, op = row[pc]
                env.stmt = at
                if code == _SET:  # session/set
                    value = f(env)
                    attrs = env.attrs = attrs[:aux] + (value,) + attrs[aux + 1:]
                    pc = nxt
                elif code == _RUN:  # session/run, and the stage's enter rule
                    work = f(env)
                    if not 0 < work < _INF:
                        if not work == work:
                            fail("the run's work is NaN", clock, at)
                        if work == _INF:
                            fail("the run's work is inf: the job would never finish", clock, at)
                        pc = nxt  # session/run: zero work completes at once
                        continue
                    job_id = seq
                    sessions[serial] = _set_at_stage(s, attrs, AT_STAGE, (aux, job_id), nxt, env.draws)
                    if is_ps[aux]:  # stage/ps-enter
                        seq = job_id + 1
                        if updated[aux] != now:
                            virtual[aux] = virtual[aux] + rates[aux] * (now - updated[aux])
                            updated[aux] = now
                        tag = virtual[aux] + work
                        heappush(running[aux], (tag, job_id, build(PsJob, (job_id, serial, now, now, None, tag))))
                        seq = reschedule(aux, seq)
                    elif not is_fifo[aux]:  # stage/delay-enter
                        due = (now + work, job_id + 1)
                        running[aux][job_id] = build(DelayJob, (job_id, serial, now, now, None, work, due))
                        heappush(events, (due[0], job_id + 1, "delay", aux, job_id))
                        seq = job_id + 2
                    elif len(running[aux]) < servers[aux]:  # stage/fifo-enter, then stage/fifo-start: a server is free
                        assert not waiting[aux], "a free server and a waiting job"
                        due = (now + work, job_id + 1)
                        running[aux][job_id] = build(FifoJob, (job_id, serial, now, now, None, work, due))
                        heappush(events, (due[0], job_id + 1, "job", aux, job_id))
                        seq = job_id + 2
                    else:  # stage/fifo-enter: the job waits
                        waiting[aux].append(build(FifoJob, (job_id, serial, now, _NAN, None, work, None)))
                        seq = job_id + 1
                    break
                elif code == _OBSERVE:  # session/observe
                    value = f(env)
                    if now >= warmup:
                        turn = attrs[slot_turn]
                        if not -_INF < turn < _INF:
                            check_turn_number(clock, _set_attrs(s, attrs), m, at)
                        samples.append((aux, now, serial, int(turn), value))
                    pc = nxt
                elif code == _END:  # session/end: it holds nothing here
                    del sessions[serial]
                    if now >= warmup:
                        ended += 1
                    if closed:  # workload/arrive in its place (workload.replace_closed)
                        instant, n = replaced
                        n = n + 1 if instant == now else 1
                        if n > MAX_READIES_PER_INSTANT:
                            raise RunError(
                                f"arrive closed: {n - 1} sessions ended at one instant without letting time pass, "
                                "and each is replaced at once, so the run cannot advance", time=now)
                        replaced = (now, n)
                        sessions[next_serial] = new_session(next_serial, now)
                        ready.append(next_serial)
                        next_serial += 1
                    break
                else:  # a local rule: the definition's own function, on the session's record
                    s = op.rule(m, clock, _set_attrs_pc_draws(s, attrs, pc, env.draws), op, env)
                    attrs = env.attrs = s.attrs
                    env.draws = s.draws
                    pc = s.pc
                    row = table[s.frames[-1].block]
        # -- the end (driver.walk) --
        if taken and limit is not None and generated >= limit and not sessions:
            if now <= warmup:
                raise RunError(f"the {limit} arrivals drained at time {now:g}, at or before the warmup "
                               f"{warmup:g}: the measurement interval is empty", time=now)
            return state(now, seq, taken, ended, next_serial, generated, arrivals_draws, replaced)
        if progress is not None and taken:
            count += 1
            if count % PROGRESS_EVERY == 0:
                progress(min(1.0, now / horizon) if horizon > 0 else 1.0)
        if cancelled:
            while events and events[0][1] in cancelled:
                cancelled.discard(heappop(events)[1])
        if not events or events[0][0] > horizon:
            break
        # -- the next event: time/advance, the event taken off, its rule --
        t, _, kind, a, job_id = heappop(events)
        dt = t - (now if now > warmup else warmup)
        if dt > 0:
            integrate(areas, dt, len(sessions))
        now = clock.time = t
        taken += 1
        if kind == "arrive":  # the arrival event: the next one scheduled, workload/arrive
            generated += 1
            if poisson_gap is not None:  # workload.draw_gap, written out
                value = sample_exp(poisson_gap, stream_arrivals, arrivals_draws)
                arrivals_draws += 1
            else:
                value, arrivals_draws = gap(arrivals_draws)
            if limit is None or generated < limit:
                heappush(events, (now + value, seq, "arrive", 0, 0))
                seq += 1
            sessions[next_serial] = build(Session, (  # new_session, written out
                next_serial, blank_head + (float(next_serial),) + blank_tail, frames0, 0, READY, (), (), None, None,
                None, -1, (), -1, member_stream(stream_sessions, next_serial), 0, -1, 0, (now, 1)))
            ready.append(next_serial)
            next_serial += 1
            continue
        # a completion: stage/fifo-complete (then stage/fifo-start), stage/delay-complete or stage/ps-complete
        if kind == "ps":
            dues[a] = None
            if updated[a] != now:
                virtual[a] = virtual[a] + rates[a] * (now - updated[a])
                updated[a] = now
            job = heappop(running[a])[2]
            virtual[a] = max(virtual[a], job.tag)
            seq = reschedule(a, seq)
        else:
            job = running[a].pop(job_id)
        if now >= warmup:
            completed[a] += 1
            wait_sum[a] = wait_sum[a] + job.started - job.arrived
            service_sum[a] = service_sum[a] + now - job.started
        owner = job.owner
        session = sessions[owner]
        instant, n = session.readies  # machine.ready_session
        if instant != now:
            sessions[owner] = _set_ready(session, READY, (now, 1), None, None, None)
        elif n < MAX_READIES_PER_INSTANT:
            sessions[owner] = _set_ready(session, READY, (now, n + 1), None, None, None)
        else:
            ready_session(clock, session)  # the backstop's error
        ready.append(owner)
        if kind == "job":
            line = waiting[a]
            if line:  # stage/fifo-start: the server it freed takes the first waiting job
                nxt = line.popleft()
                due = (now + nxt.work, seq)
                running[a][nxt.job_id] = _set_started(nxt, now, due)
                heappush(events, (due[0], seq, "job", a, nxt.job_id))
                seq += 1

    if limit is not None:
        if generated < limit:
            raise RunError(f"only {generated} of the {limit} arrivals came by the horizon {horizon:g}", time=horizon)
        raise RunError(f"the {limit} arrivals did not drain by the horizon {horizon:g}: "
                       f"{len(sessions)} session(s) still live", time=horizon)
    if not math.isfinite(horizon):
        raise RunError("the run has no horizon and events never stop" if events else
                       "the run has no horizon: give `run { horizon ...; }`")
    c = state(now, seq, taken, ended, next_serial, generated, arrivals_draws, replaced)
    return advance_time(m, c, horizon) if horizon > c.time else c


def _table(m: Machine) -> tuple:
    """Per block, per statement (then the block's end): (what the loop does, its expression, the statement
    after it, where it is, its slot, observation index or stage, its Op)."""
    rows = []
    for block in m.ops:
        row = []
        for op in block:
            code = _END if op.rule is end_session else _STATEMENTS.get(type(op.stmt), _LOCAL)
            assert code != _LOCAL or op.local, "a statement the loop does not run"
            f = op.exprs[0] if code in (_SET, _OBSERVE, _RUN) else None
            aux = {_SET: lambda: op.stmt.slot, _OBSERVE: lambda: op.stmt.index,
                   _RUN: lambda: op.exprs[2][0]}.get(code, lambda: None)()
            row.append((code, f, op.next, op.at, aux, op))
        rows.append(tuple(row))
    return tuple(rows)


def _integrator(m: Machine, running: list, waiting: list):
    """``integrate(areas, dt, live)``: every area plus its level times ``dt``
    (measure.integrate's arithmetic, in the order of Configuration.areas: per
    stage the jobs present and its level, then the live sessions), written
    out for the program's stages as the fast forms' event taker is
    (measure.make_event_taker)."""
    lines = ["def integrate(areas, dt, live):"]
    k = 0
    for s, name in enumerate(m.kind_names):
        lines.append(f"    r{s} = len(running[{s}])")
        if name == FIFO:
            lines.append(f"    areas[{k}] = areas[{k}] + (r{s} + len(waiting[{s}])) * dt")
            lines.append(f"    areas[{k + 1}] = areas[{k + 1}] + (r{s} / {m.servers[s]!r}) * dt")
        else:  # a delay stage's, a ps stage's
            lines.append(f"    areas[{k}] = areas[{k}] + r{s} * dt")
            lines.append(f"    areas[{k + 1}] = areas[{k + 1}] + (1.0 if r{s} else 0.0) * dt")
        k += 2
    lines.append(f"    areas[{k}] = areas[{k}] + live * dt")
    namespace = {"running": running, "waiting": waiting}
    exec("\n".join(lines) + "\n", namespace)
    return namespace["integrate"]
