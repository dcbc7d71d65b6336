"""The step engine: ``step { budget B; cost C; chunk K; serve ...; memory P; }``
(seed 002 §2 kind, §3 Stages and Pools, §7 the vLLM correspondence).

"step { budget B; cost C; }: an engine that runs iterations. ... a step
engine's prefill and decode work is in the unit of B, tokens." A run on it is
a resident (``stage/step-enter``). When the stage is idle and has residents or
a waiting queue it serves, settle starts an iteration
(``step/iteration-start``), "provided no other event is pending at the same
instant". The iteration being formed is part of the stage's state
(``Iteration``: the budget left, the residents already served, what each was
given, whether it preempted, whether it still takes residents), and each turn
of forming it is a rule that takes a configuration and returns one:

- ``step/schedule``: the next resident in the serving order is served: "One
  token to a decoding job, up to chunk to a prefilling one, until the budget
  is spent"; a growing run whose hold must grow first waits for step/grow;
- ``step/grow``: "a growing job first grows its hold to the position it will
  reach (block by block, preempting if needed)"; a grower that preempts
  itself ends the pass (under ``self preemption continue``, vLLM 0.33.0's
  priority path, the pass goes on with the next resident, admitting nothing);
- ``step/withdraw`` (inside a preemption): a victim already served in the
  iteration gives its tokens back;
- ``step/admit`` / ``step/admit-stop``: "then the stage admits from the queues
  it serves", in pool declaration order, "while the iteration has budget
  left, and not in an iteration that preempted"; the admitted session runs
  at once, and joins the residents to be served; the first head that does not
  fit stops the iteration's admissions;
- ``step/select-prefill`` (``serve exclusive prefill`` only): "serve exclusive
  prefill selects either one prefill alone or a decode-only batch". The
  iteration's decodes are tentative (``Iteration.tentative``) until a prefill
  is served: a resident's first (it takes precedence), else one the iteration
  admitted (whose header read the whole budget); that prefill, its hold
  grown, is selected with its chunk of the whole budget, the tentative
  decodes are displaced, and the iteration serves and admits no more;
- ``step/iteration`` (or ``step/idle`` when it scheduled no token and did not
  preempt): the cost C is read and the iteration's end is an event at now + C;
- ``step/iteration-end``: "its tokens are applied when it ends"; the runs that
  are done complete (``stage/step-complete``).

Serving order (Ties): "A step stage's residents: the serve by keys, then
admission order" (the session's latest admission, then the job's sequence
number). The preemption victim is the pool's rule (pools.choose_victim: the
resident of the engine whose session was admitted last). Decisions where the
seed and the reference implementation read differently are in
docs/semantics.md ("The step engine").
"""

from __future__ import annotations

import bisect
import math
from typing import NamedTuple

import immutables

from ...errors import RunError
from ..configuration import (AT_STAGE, DECODE, FINISHING, GROWING, LOADING, PREFILL, Configuration, Statistics, build, innermost_hold,
                             insert_event,
                             ready_from, ready_serials, replace_at, setter)
from ..machine import EPSILON, Machine, count_pool, follow_up, make_ready, runner_up
from ..pools import DEFERRED, GREW, PREEMPTED, WAITS, admissible, advance_position, grow_fits, growth_need, header_drawn
from ..rules import rule
from .. import sharing
from ..values import Env
from .jobs import at_stage, finish_job

KIND = "step"
EVENT = "iteration"  # an iteration's end (a = stage)

# PREFILL, DECODE: a run's modes (configuration.py)


class Resident(NamedTuple):
    """A run on the step stage (a job: the five fields every kind shares, then its own)."""

    job_id: int  # its sequence number
    owner: int  # the session's serial
    arrived: float
    started: float  # = arrived: a resident never waits to be a resident
    spill: None  # a step stage takes no spill writes
    mode: str  # PREFILL or DECODE
    remaining: float  # tokens its run has left (lowered when an iteration that served it ends)
    growing: int | None  # the pool its run grows (``growing P``, resolved when it joined), or None


class Assignment(NamedTuple):
    """What one iteration gives one resident."""

    job_id: int
    serial: int
    mode: str
    tokens: float
    position: float  # the growing hold's position before the chunk (K in attention); 0 without growing
    #: ``speculate``: the draft tokens among ``tokens`` (a decode's, beyond its one token), and how many of them
    #: the iteration accepts, fixed when it is served (docs/design/speculative-decoding.md); 0 without
    drafts: float = 0.0
    accepted: float = 0.0


class Iteration(NamedTuple):
    """An iteration: formed by the rules above (``due`` None), then in flight
    until its end event (``due`` its key)."""

    number: int  # 1, 2, ... on its stage
    started: float
    budget: float  # B, read at its start (below 0: 0)
    chunk: float  # K, read at its start (0: no per-request cap)
    left: float  # the budget not yet given
    served: tuple[int, ...]  # the residents (job ids) already considered, in order
    assigned: tuple[Assignment, ...]  # what it gives, in the order it served them
    pending: Assignment | None  # a growing resident's chunk, waiting for its growth (step/grow), or a prefill's waiting to be selected (step/select-prefill)
    preempted: bool  # it preempted a resident (then it admits nothing)
    open: bool  # it still serves residents and admits (a self-preempting grower, a head that does not fit or a selected prefill closes it)
    tentative: bool  # serve exclusive prefill, no prefill selected yet: the decodes it gives are tentative, a prefill takes the whole budget
    selected: int | None  # serve exclusive prefill: the prefill (job id) selected to run alone, once one is
    context: tuple[float, float, float, float]  # residents, decoders, kv_decode, kv_prefill before it
    due: tuple[float, int] | None  # its end event, once formed
    #: the sessions it admitted (step/admit), in order: under speculate, their runs are the ones step/pad pads
    admitted: tuple[int, ...] = ()
    #: speculate's draft slots D: every resident served takes its tokens and D of the budget, and ``left`` is
    #: the budget less D less what they took (vLLM's input budget less D, below 0 once it is under D)
    slots: float = 0.0
    #: ``defer free``: the session whose growth step/defer refused (its victim in flight), and whether the
    #: iteration serves no more residents (those it admits it still serves); None and False without
    deferred: int | None = None
    halted: bool = False
    #: ``load remote``: the sessions it promoted (step/promote), in order: in-flight prefills until it is formed
    promoted: tuple[int, ...] = ()
    #: ``offload to``: the sessions offload/wait passed over in it (their heads wait for the next iteration)
    skipped: tuple[int, ...] = ()


class StepState(NamedTuple):
    jobs: tuple[Resident, ...]  # the residents, by (their session's latest admission, job id)
    iteration: Iteration | None  # forming or in flight; None: idle
    count: int  # iterations so far
    #: schedule ahead only: the sessions whose run here completed at the end of the last iteration, until the
    #: next one is formed (step/iteration-end), and those of them parked at the exit of their hold on the
    #: memory, in the order they parked (step/park), until then (step/apply)
    finishing: tuple[int, ...] = ()
    parked: tuple[int, ...] = ()
    #: schedule ahead only: the sessions the last ended iteration gave a decode token (their position's last
    #: token is not cached yet while the next iteration is formed: pools._in_flight_decode)
    decoded: tuple[int, ...] = ()
    #: schedule ahead and speculate only: the last ended iteration's step/reject work, (assignment, pool,
    #: rollback, hold id), applied once the next iteration is formed (step/apply: vLLM rolls rejected drafts
    #: back when it applies a batch's output), and the tokens it gave each decode, (serial, tokens), which a
    #: victim's cache leaves out while the next is formed (pools._in_flight_decode)
    rejects: tuple = ()
    given: tuple = ()
    #: schedule ahead and speculate only: the sessions the last ended iteration finished with accepted drafts,
    #: though they had two tokens or more left before it: vLLM cannot know they are done and serves them once
    #: more in the next batch (step/schedule of a parked session; docs/design/speculative-decoding.md)
    overrun: tuple[int, ...] = ()
    #: schedule ahead with a memory of KV cache groups only: the tokens the last ended iteration gave each
    #: session, (serial, tokens), still in flight while the next is formed (pool/slide frees on the processed
    #: tokens: kv_cache_manager.py:556-568, num_in_flight_tokens, scheduler.py:1859, 2318)
    flying: tuple = ()
    #: schedule ahead and defer free only: the sessions the last ended iteration gave tokens, until the next
    #: iteration is formed (step/iteration, step/idle): no victim meanwhile (step/defer)
    flight: tuple[int, ...] = ()
    #: load remote only: the parked loads (Load), in the order they parked (vLLM's kv_holding_waiting), and
    #: the sessions whose load is consumed (one load per session: a victim computes what it would have loaded)
    loads: tuple = ()
    consumed: frozenset = frozenset()
    #: ``offload to`` only: the CPU tier (stages/offload.Tier; docs/design/cpu-offloading.md), None without
    tier: object = None


class Load(NamedTuple):
    """A session parked while its remote prefill's KV is transferred (step/load)."""

    serial: int
    due: int  # the first iteration (its number) that may promote it (step/promote)
    full: float  # the memory units its whole sequence needs (its hold's reserve there)
    units: tuple[float, ...]  # what its hold takes on each of its pools once promoted (the header's units)


class StepStats(NamedTuple):
    """A step stage's iteration counts (at or after the warm-up), and what the
    inter-token latency needs."""

    iterations: int
    prefill_only: int
    decode_only: int
    mixed: int
    empty: int  # the iterations that only preempted
    tokens: float
    decodes: int  # decode tokens given
    last_token: object  # immutables.Map: session serial -> when its run here last produced a token
    gaps: tuple | None  # the inter-token gaps, a cons list, newest first
    #: the engine's figures (docs/reports.md, "The engine and saturation"), at or after the warm-up: the
    #: residents the iterations served (the batches' sizes, summed), the budgets they were given (summed),
    #: and the residents preempted while an iteration formed (step/grow's victims, step/preempt-parked's)
    scheduled: int = 0
    offered: float = 0.0
    preemptions: int = 0


EMPTY = StepState((), None, 0)
EMPTY_STATS = StepStats(0, 0, 0, 0, 0, 0.0, 0, immutables.Map(), None)

_set_iteration = setter(StepState, "iteration")
_set_stages = setter(Configuration, "stages")
_set_engines = setter(Statistics, "engines")


def initial_state(m: Machine, s: int) -> StepState:
    if m.steps[s].offload_chunks:  # offload to (N): the CPU tier, empty
        from . import offload
        return EMPTY._replace(tier=offload.EMPTY._replace(size=m.steps[s].offload_chunks))
    return EMPTY


def _state(c: Configuration, s: int) -> StepState:
    return c.stages[s]


def _with_state(c: Configuration, s: int, st: StepState) -> Configuration:
    return _set_stages(c, replace_at(c.stages, s, st))


def _with_iteration(c: Configuration, s: int, it: Iteration | None) -> Configuration:
    return _set_stages(c, replace_at(c.stages, s, _set_iteration(c.stages[s], it)))


# -- the state as expressions read it ----------------------------------------------


def present(m: Machine, c: Configuration, s: int) -> int:
    """``queue(s)``: the residents."""
    return len(c.stages[s].jobs)


def busy(m: Machine, c: Configuration, s: int) -> float:
    """``busy(s)``: the residents the iteration in flight serves."""
    it = c.stages[s].iteration
    return float(len(it.assigned)) if it is not None else 0.0


def level(m: Machine, c: Configuration, s: int) -> float:
    """Utilisation now: 1 while an iteration is in flight."""
    return 1.0 if c.stages[s].iteration is not None else 0.0


def work(m: Machine, c: Configuration, s: int) -> float:
    """``work(s)``: the tokens the residents' runs have left."""
    return sum(r.remaining for r in c.stages[s].jobs)


def memory_of(m: Machine, c: Configuration, s: int, serial: int) -> float:
    """The units session ``serial`` holds on stage ``s``'s memory pool, over all its holds (0 without memory)."""
    p = m.steps[s].memory
    if p is None:
        return 0.0
    return sum(a.units for h in c.sessions[serial].holds for a in h.allocations if a.pool == p)


def context_before(m: Machine, c: Configuration, s: int) -> tuple[float, float, float, float]:
    """residents, decoders, kv_decode, kv_prefill: "the residents before the
    iteration" (seed 002 §2), which its budget, chunk, serve keys and cost read."""
    residents = c.stages[s].jobs
    decoders = kv_decode = kv_prefill = 0.0
    for r in residents:
        units = memory_of(m, c, s, r.owner)
        if r.mode == DECODE:
            decoders += 1.0
            kv_decode += units
        else:
            kv_prefill += units
    # schedule ahead: a parked session is still running (its hold has not exited), as a finished request is in
    # vLLM's running list until its batch's output is applied (docs/design/async-scheduling.md)
    # load remote: a parked load is a request the engine holds (vLLM's kv_holding_waiting, counted with the
    # running and waiting requests, scheduler.py:757-763, 2920-2922)
    return float(len(residents) + len(c.stages[s].parked) + len(c.stages[s].loads)), decoders, kv_decode, kv_prefill


def _stage_env(c: Configuration, context) -> Env:
    env = Env(c)
    env.residents, env.decoders, env.kv_decode, env.kv_prefill = context
    return env


def _read(m: Machine, c: Configuration, s: int, what: str, f, env: Env) -> float:
    """A budget, chunk or cost: a number (NaN or infinite is a RunError naming the stage)."""
    value = f(env)
    if not math.isfinite(value):
        raise RunError(f"step stage {m.stage_name(s)}: its {what} is {value:g}; it must be a finite number", time=c.time)
    return value


def want_of(r: Resident, chunk: float, spec: float = 0.0) -> float:
    """What a resident asks of an iteration: one token to a decode, up to the chunk (0: no cap) to a prefill.
    Under ``speculate (K)`` a decode asks its token and K drafts, clamped by the chunk (vLLM's running request
    asks num_tokens_with_spec less what it computed, then the long-prefill threshold clamps it:
    scheduler.py:839-846)."""
    if r.mode == DECODE:
        if spec > 0:
            return min(1.0 + spec, chunk) if chunk > 0 else 1.0 + spec
        return min(1.0, r.remaining)
    return min(r.remaining, chunk) if chunk > 0 else r.remaining


def budget_plan(m: Machine, c: Configuration, s: int) -> float:
    """``budget_left(s)`` read outside the stage's admissions (a session
    joining a queue judges whether it can ever fit, a set): the budget an
    iteration starting now would leave after its residents, max(0, B − Σ
    what each asks), with the context before the iteration."""
    facts = m.steps[s]
    env = _stage_env(c, context_before(m, c, s))
    budget = max(0.0, _read(m, c, s, "budget", facts.budget, env))
    chunk = max(0.0, _read(m, c, s, "chunk", facts.chunk, env))
    slots = facts.slots  # speculate's draft slots: each resident's tokens and D more, and D for the next (vLLM's input budget)
    return max(0.0, budget - slots - sum(want_of(r, chunk, facts.spec) + slots for r in c.stages[s].jobs))


# -- a run joins -------------------------------------------------------------------


@rule("stage/step-enter", "a run on a step stage (prefill or decode, of so many tokens, growing a pool or not) becomes a resident, in the residents' admission order",
      "002 §3 Stages: a step engine's prefill and decode work is in the unit of B, tokens; Ties: A step stage's residents: the serve by keys, then admission order")
def enter(m: Machine, c: Configuration, stages: tuple[int, ...], owner, past, work: float, spill,
          job_id: int, how=None) -> Configuration:
    s = stages[0]
    mode, growing = how
    st = c.stages[s]
    job = Resident(job_id, owner.serial, c.time, c.time, None, mode, work, growing)
    sessions = c.sessions
    key = (owner.admission, job_id)
    i = bisect.bisect_right(st.jobs, key, key=lambda r: (sessions[r.owner].admission, r.job_id))
    st = st._replace(jobs=st.jobs[:i] + (job,) + st.jobs[i:])
    c = c._replace(stages=replace_at(c.stages, s, st), sessions=at_stage(c, owner, past, s, job_id), sequence=job_id + 1)
    if m.observer:
        m.notify("stage/step-enter", c, {"stage": m.stage_name(s), "job": job_id, "session": owner.serial,
                                         "mode": mode.lower(), "work": work})
    return c


def leave(m: Machine, c: Configuration, s: int, job_id: int) -> Configuration:
    """The kind's part of stage/leave: the resident is taken off the stage; a
    chunk an iteration gave it is withdrawn (the follow-up step/withdraw)."""
    st = c.stages[s]
    st = st._replace(jobs=tuple(r for r in st.jobs if r.job_id != job_id))
    c = _with_state(c, s, st)
    it = st.iteration
    if it is None:
        return c
    if it.due is None:  # forming: "no admission in a step that preempted"
        it = it._replace(preempted=True,
                         pending=None if it.pending is not None and it.pending.job_id == job_id else it.pending)
        c = _count_preemption(m, _with_iteration(c, s, it), s)
    if any(a.job_id == job_id for a in it.assigned):
        c = follow_up(c, ("step/withdraw", s, job_id))
    return c


@rule("step/withdraw", "a preempted resident that an iteration had already served gives its tokens back: while the iteration forms, to the budget it has left",
      "001: the victim ... already scheduled earlier in this same pass ... give its tokens back to token_budget with +=; 002 §3: its job leaves its stage")
def withdraw(m: Machine, c: Configuration, s: int, job_id: int) -> Configuration:
    it = c.stages[s].iteration
    k = next(k for k, a in enumerate(it.assigned) if a.job_id == job_id)
    a = it.assigned[k]
    assigned = it.assigned[:k] + it.assigned[k + 1:]
    it = it._replace(assigned=assigned, left=it.left + a.tokens + m.steps[s].slots if it.due is None else it.left)
    c = _with_iteration(c, s, it)
    if m.observer:
        m.notify("step/withdraw", c, {"stage": m.stage_name(s), "job": job_id, "session": a.serial,
                                      "tokens": a.tokens, "left": it.left})
    return c


# -- forming an iteration ------------------------------------------------------------


def idle_with_work(m: Machine, c: Configuration, s: int) -> bool:
    """The premise of step/iteration-start but for the instant: the stage is
    idle and has residents or a waiting queue it serves."""
    st = c.stages[s]
    if st.iteration is not None:
        return False
    if st.tier is not None:  # offload to: a transfer in flight or a finish to process keeps the engine stepping
        from . import offload
        if offload.busy(m, c, s):
            return True
    return bool(st.jobs) or bool(st.parked) or bool(st.loads) or any(c.pools[p].queue for p in m.steps[s].served)


@rule("step/iteration-start", "an idle step stage with residents or a waiting queue it serves starts an iteration: its budget and chunk are read with the residents before it",
      "002 §3: then it starts an iteration on every idle step stage that has residents or a waiting queue it serves, provided no other event is pending at the same instant (schedule ahead: or a parked session, docs/design/async-scheduling.md)")
def start_iteration(m: Machine, c: Configuration, s: int) -> Configuration:
    assert idle_with_work(m, c, s) and not (c.events and c.events[0][0] == c.time)
    facts = m.steps[s]
    context = context_before(m, c, s)
    env = _stage_env(c, context)
    budget = max(0.0, _read(m, c, s, "budget", facts.budget, env))
    chunk = max(0.0, _read(m, c, s, "chunk", facts.chunk, env))
    st = c.stages[s]
    # speculate's draft slots: the budget left is what the next resident may take (vLLM's input budget less D)
    it = Iteration(st.count + 1, c.time, budget, chunk, budget - facts.slots, (), (), None, False, True,
                   facts.exclusive, None, context, None, slots=facts.slots)
    if st.finishing:  # schedule ahead: the next iteration is being formed; a session that did not park goes on
        c = _with_state(c, s, st._replace(finishing=()))
    c = _with_iteration(c, s, it)
    if m.observer:
        m.notify("step/iteration-start", c, {"stage": m.stage_name(s), "iteration": it.number, "budget": budget,
                                             "chunk": chunk, "residents": len(st.jobs)})
    return c


def next_resident(m: Machine, c: Configuration, s: int) -> tuple[Resident, tuple | None] | None:
    """The first resident not yet served, in the serving order: the serve by
    keys (read for each resident with the context before the iteration and
    its own decoding, admission and remaining), then its session's latest
    admission, then its job id (seed 002 §3, Ties). Under serve exclusive
    prefill, which has no keys, the first prefill in that order comes before
    every decode ("A resident prefill takes precedence"; of two, the first
    runs alone), and a session the iteration admitted is a resident like any
    other (its decode tentative, its prefill the waiting prefill that can
    replace the decodes). With it, when a step trace observes the run, why
    (the order, its keys, the resident that would come next), else None."""
    st = c.stages[s]
    served = st.iteration.served
    unserved = [r for r in st.jobs if r.job_id not in served]
    if st.iteration.halted:  # defer free: the pass serves no more residents but those it admits (step/defer)
        unserved = [r for r in unserved if r.owner in st.iteration.admitted or r.owner in st.iteration.promoted]
    if st.overrun:  # speculate under schedule ahead: a parked session vLLM serves once more, in admission order
        extra = [r for r in overrun_residents(m, c, s) if r.job_id not in served]
        if extra:
            sessions = c.sessions
            unserved = sorted(unserved + extra, key=lambda r: (sessions[r.owner].admission, r.job_id))
    if not unserved:
        return None
    if st.iteration.tentative:  # serve exclusive prefill (no keys): "A resident prefill takes precedence."
        chosen = next((r for r in unserved if r.mode == PREFILL), unserved[0])
        why = None
        if m.observer:
            rest = [r for r in unserved if r is not chosen]
            runner = next((r for r in rest if r.mode == PREFILL), rest[0] if rest else None)
            why = ("prefill-first", (), None if runner is None else (runner.owner, runner.job_id, ()))
        return chosen, why
    keys = m.steps[s].keys
    if not keys:
        why = None
        if m.observer:
            why = ("admission", (), (unserved[1].owner, unserved[1].job_id, ()) if len(unserved) > 1 else None)
        return unserved[0], why  # the residents are kept in admission order
    ranked = [] if m.observer else None  # with an observer: every resident's key, for the record (runner_up)
    env = _stage_env(c, st.iteration.context)
    best, best_key = None, None
    for r in unserved:
        session = c.sessions[r.owner]
        env.attrs, env.serial, env.stream, env.draws = session.attrs, r.owner, session.stream, session.draws
        env.decoding = 1.0 if r.mode == DECODE else 0.0
        env.admission = float(session.admission)
        env.remaining = r.remaining
        key = [k(env) for k in keys] + [session.admission, r.job_id]
        if ranked is not None:
            ranked.append((key, r))
        if best is None or key < best_key:
            best, best_key = r, key
    why = None
    if ranked is not None:
        n = len(keys)
        runner = runner_up(ranked, best)
        why = ("keys", tuple(best_key[:n]), None if runner is None else
               (runner[1].owner, runner[1].job_id, tuple(runner[0][:n])))
    return best, why


def overrun_residents(m: Machine, c: Configuration, s: int) -> list[Resident]:
    """Under schedule ahead and speculate: the parked sessions the ended iteration finished with accepted drafts
    that vLLM serves once more (``StepState.overrun``), each as a decoding resident with nothing left (job id
    -1 - serial), growing the stage's memory: vLLM's skip of a request whose previous batch was sure to finish
    it (num_computed_tokens + 2 - num_output_placeholders >= prompt + max_tokens, scheduler.py:800-814) cannot
    know that accepted drafts finished it."""
    st = c.stages[s]
    p = m.steps[s].memory
    return [Resident(-1 - serial, serial, c.time, c.time, None, DECODE, 0.0, p)
            for serial in st.overrun if serial in st.parked]


def resident_of(m: Machine, c: Configuration, s: int, job_id: int) -> Resident | None:
    """The resident ``job_id`` of stage ``s``, or the parked session served once more that it names (a negative
    id: overrun_residents); None if it is gone."""
    if job_id < 0:
        return next((r for r in overrun_residents(m, c, s) if r.job_id == job_id), None)
    return next((r for r in c.stages[s].jobs if r.job_id == job_id), None)


def _growing_position(m: Machine, c: Configuration, r: Resident) -> tuple[float, float]:
    """(position, allocation) of the innermost hold on the pool ``r`` grows."""
    session = c.sessions[r.owner]
    h, k = innermost_hold(session, r.growing)
    if h < 0:
        raise RunError(f"a run growing {m.pool_name(r.growing)} outside a hold of {m.pool_name(r.growing)}",
                       time=c.time)
    a = session.holds[h].allocations[k]
    return a.position, a.units


@rule("step/schedule", "the next resident in the serving order is served: one token to a decode, up to the chunk to a prefill, within the budget left; a growing run whose hold must grow first waits for step/grow; a resident whose growth waits gets nothing; under serve exclusive prefill a decode's token is tentative, and a prefill asks up to the chunk of the whole budget and waits to be selected (step/select-prefill); under speculate ... within (L) a growing resident's tokens keep its position below L - 1 (none: it is passed over), its hold covers them and the lookahead slots (at most L), and it takes the draft slots from the budget too",
      "002 §3 Stages: One token to a decoding job, up to chunk to a prefilling one, until the budget is spent; serve exclusive prefill: resident decodes are tentative: ... a waiting prefill that fits can replace them and use the full budget")
def schedule(m: Machine, c: Configuration, s: int, r: Resident, why: tuple | None = None) -> Configuration:
    it = c.stages[s].iteration
    served = it.served + (r.job_id,)
    alone = it.tentative and r.mode == PREFILL  # it would run alone, so the decodes' tokens do not count
    spec = m.steps[s].spec
    tokens = min(want_of(r, it.chunk, spec), it.budget if alone else it.left)
    waits = c.sessions[r.owner].status == GROWING
    position = need = 0.0
    if not waits and r.growing is not None:
        position, units = _growing_position(m, c, r)
        tokens = within_length(m, s, position, tokens)
        if tokens > 0.0 and m.kv_groups[r.growing] is not None:  # pool/slide, at the hold's turn, before its growth
            c = follow_up(c, _slide(m, c, s, r, position, units))
        need = slots_target(m, s, position, tokens) - units
    if tokens <= 0.0:  # speculate within (L): at the model length, nothing (vLLM: num_new_tokens == 0, the next)
        waits = True
    a = Assignment(r.job_id, r.owner, r.mode, tokens, position)
    if spec > 0 and r.mode == DECODE and tokens > 1.0:  # speculate: its drafts, and those the iteration accepts
        a = a._replace(drafts=tokens - 1.0, accepted=_accepted(m, c, s, r, tokens - 1.0))
    if waits:
        it = it._replace(served=served)
    elif need > EPSILON or alone:
        it = it._replace(served=served, pending=a)
    else:
        it = it._replace(served=served, assigned=it.assigned + (a,), left=it.left - tokens - m.steps[s].slots)
    c = _with_iteration(c, s, it)
    if m.observer:
        order, key, runner = why
        m.notify("step/schedule", c, {"stage": m.stage_name(s), "job": r.job_id, "session": r.owner,
                                      "mode": r.mode.lower(), "tokens": 0.0 if waits else tokens,
                                      "grow": max(0.0, need), "left": it.left, "order": order, "key": key,
                                      "runner_up": runner})
    if not waits and not need > EPSILON and not alone:  # given its tokens: a pool that shares registers them
        c = _registers(m, c, s, r, r.growing, r.owner, position, tokens - a.drafts)
    return c


def _slide(m: Machine, c: Configuration, s: int, r: Resident, position: float, coverage: float) -> tuple:
    """The follow-up ``pool/slide`` of the hold resident ``r`` grows, on its processed tokens: its position
    less the tokens the last ended iteration gave it, still in flight under schedule ahead (``flying``). It is
    drained before the iteration goes on, so before the hold's growth (settle.form_iteration)."""
    session = c.sessions[r.owner]
    h, _ = innermost_hold(session, r.growing)
    flying = next((tokens for x, tokens in c.stages[s].flying if x == r.owner), 0.0)
    return ("pool/slide", r.growing, r.owner, session.holds[h].hold_id, coverage, max(0.0, position - flying))


def within_length(m: Machine, s: int, position: float, tokens: float) -> float:
    """Under ``speculate ... within (L)``: the tokens a resident at ``position`` is given, so that its position
    after them stays below L less the token it samples (vLLM 0.33.0: num_new_tokens = min(num_new_tokens,
    max_model_len - num_computed_tokens - 1), scheduler.py:851-857; its drafts are what it clamps); ``tokens``
    without L."""
    within = m.steps[s].within
    return tokens if within <= 0.0 else min(tokens, within - position - 1.0)


def slots_target(m: Machine, s: int, position: float, tokens: float) -> float:
    """The position a growing resident's hold must cover to be given ``tokens`` at ``position``: under
    ``speculate ... lookahead (A)`` A more, at most the model length L when given (vLLM 0.33.0's allocate_slots:
    num_tokens_need_slot = min(computed + new + num_lookahead_tokens, max_model_len), kv_cache_manager.py:549-552,
    called with num_lookahead_tokens at scheduler.py:914-918)."""
    facts = m.steps[s]
    if facts.lookahead <= 0.0:
        return position + tokens
    target = position + tokens + facts.lookahead
    return min(target, facts.within) if facts.within > 0.0 else target


def pads(m: Machine, c: Configuration, s: int, r: Resident) -> bool:
    """The premise of step/pad: under speculate, resident ``r`` is the prefill of a session the iteration admitted
    with one token left to compute, no resident the iteration did not admit was served a prefill, and one of
    them was served or ``r``'s hold has computed tokens, and its padded position plus the token it samples stays
    within the model length (vLLM 0.33.0, scheduler.py:1308-1330: a waiting request with num_new_tokens == 1,
    not prefill_scheduled, scheduled_running_reqs or num_computed_tokens > 0)."""
    facts = m.steps[s]
    it = c.stages[s].iteration
    if facts.spec <= 0 or r.mode != PREFILL or r.growing is None or abs(r.remaining - 1.0) > EPSILON \
            or r.owner not in it.admitted or c.sessions[r.owner].status == GROWING:
        return False
    running = [a for a in it.assigned if a.serial not in it.admitted]
    if any(a.mode == PREFILL for a in running):
        return False
    position, _ = _growing_position(m, c, r)
    if not running and position <= EPSILON:
        return False
    return facts.within <= 0 or position + 1.0 + facts.spec + 1.0 <= facts.within + EPSILON


@rule("step/pad", "under speculate, the prefill of a session the iteration admitted with one token left to compute is padded to its token and K drafts, none of them accepted, when no running resident was served a prefill and one was served or its hold has computed tokens (within the model length): its hold grows for them (step/grow), the budget left loses them (and the draft slots)",
      "serq-ref extension (docs/design/speculative-decoding.md, section 8): vLLM 0.33.0 pads a new decode request to uniform spec decoding size, num_new_tokens = 1 + num_spec_tokens with placeholder drafts (vllm/v1/core/sched/scheduler.py:1308-1330, 1578-1582), allocates slots for them (:1429-1446) and rolls the rejected ones back (:2346-2364)")
def pad(m: Machine, c: Configuration, s: int, r: Resident, why: tuple | None = None) -> Configuration:
    facts = m.steps[s]
    it = c.stages[s].iteration
    served = it.served + (r.job_id,)
    tokens = 1.0 + facts.spec
    position, units = _growing_position(m, c, r)
    if m.kv_groups[r.growing] is not None:  # pool/slide, at the hold's turn, before its growth
        c = follow_up(c, _slide(m, c, s, r, position, units))
    need = slots_target(m, s, position, tokens) - units
    a = Assignment(r.job_id, r.owner, PREFILL, tokens, position, drafts=facts.spec, accepted=0.0)
    if need > EPSILON:
        it = it._replace(served=served, pending=a)
    else:
        it = it._replace(served=served, assigned=it.assigned + (a,), left=it.left - tokens - facts.slots)
    c = _with_iteration(c, s, it)
    if m.observer:
        m.notify("step/pad", c, {"stage": m.stage_name(s), "job": r.job_id, "session": r.owner,
                                 "tokens": tokens, "drafts": facts.spec, "grow": max(0.0, need), "left": it.left})
    return c


def pad_refused(m: Machine, after: Configuration, s: int, serial: int) -> bool:
    """The premise of step/pad-stop, read in ``after``, the configuration the admission of session ``serial``
    would make: its run is one step/pad would pad, and its token and K drafts are above the budget left, or its
    hold's growth for them (and the lookahead) does not fit the pool (vLLM 0.33.0: "prefer to not schedule than
    schedule un-padded", scheduler.py:1325-1328; allocate_slots returns None and the waiting loop ends,
    :1454-1461)."""
    r = next((x for x in after.stages[s].jobs if x.owner == serial), None)
    if r is None or not pads(m, after, s, r):
        return False
    tokens = 1.0 + m.steps[s].spec
    if tokens > after.stages[s].iteration.left + EPSILON:
        return True
    position, units = _growing_position(m, after, r)
    need = slots_target(m, s, position, tokens) - units
    if need <= EPSILON:
        return False
    need = growth_need(m, after, serial, r.growing, need, None)
    return need > EPSILON and not grow_fits(m, after, r.growing, need)


@rule("step/pad-stop", "under speculate, the head of the first queue the stage serves fits, but its admission would give it one token to compute that step/pad would pad beyond the budget left or the memory's room: it is not admitted and the iteration admits no more",
      "serq-ref extension (docs/design/speculative-decoding.md, section 8): vLLM 0.33.0 scheduler.py:1325-1328 (padded_num_tokens > request_token_budget: break) and :1454-1461 (allocate_slots returns None: break)")
def pad_stop(m: Machine, c: Configuration, s: int, q: int, a) -> Configuration:
    c = header_drawn(c, a)
    c = _with_iteration(c, s, c.stages[s].iteration._replace(open=False))
    if m.observer:
        m.notify("step/pad-stop", c, {"stage": m.stage_name(s), "pool": m.pool_name(q), "session": a.waiting.serial})
    return c
def _registers(m: Machine, c: Configuration, s: int, r: Resident | None, p: int | None, serial: int,
               position: float, tokens: float) -> Configuration:
    """``c`` with the follow-up ``pool/register`` of the tokens an iteration gave a run growing ``p`` from
    ``position``, when ``p`` shares prefixes (docs/design/shared-prefixes.md; under schedule ahead less the
    token in flight: _in_flight)."""
    if p is None or c.pools[p].table is None:
        return c
    return follow_up(c, ("pool/register", p, serial, position, tokens - _in_flight(m, c, s, r)))


def _in_flight(m: Machine, c: Configuration, s: int, r: Resident | None) -> float:
    """Under schedule ahead: 1 when decoding resident ``r`` feeds a token the last ended iteration sampled
    (it gave it a decode token, or its prefill completed then: its run entered now), whose id is not known
    while this iteration is formed, so that its block is not cached yet (kv_cache_manager.py:621-625 caps
    the cached tokens at the request's known ones); else 0."""
    if r is None or not m.steps[s].ahead or r.mode != DECODE:
        return 0.0
    return 1.0 if r.owner in c.stages[s].decoded or r.arrived == c.time else 0.0


def _accepted(m: Machine, c: Configuration, s: int, r: Resident, drafts: float) -> float:
    """``speculate (K) accept (e)``: the drafts of ``drafts`` the iteration accepts of decoding resident ``r``,
    min(drafts, max(0, floor(e))), ``e`` read with a serve key's context (the context before the iteration; the
    resident's decoding, admission and remaining) and the session's attributes (docs/design/speculative-decoding.md)."""
    st = c.stages[s]
    session = c.sessions[r.owner]
    env = _stage_env(c, st.iteration.context)
    env.attrs, env.serial, env.stream, env.draws = session.attrs, r.owner, session.stream, session.draws
    env.decoding = 1.0
    env.admission = float(session.admission)
    env.remaining = r.remaining
    value = _read(m, c, s, "acceptance", m.steps[s].accept, env)
    return min(drafts, max(0.0, math.floor(value)))


def growth_for(m: Machine, c: Configuration, s: int) -> tuple:
    """The follow-up work of the served growing run whose chunk waits for
    its growth (the iteration's ``pending``, whose hold lacks room: the
    premise pending_growth > 0): the growth of its hold to the position the
    chunk reaches (``pool/grow``: block by block, preempting while it does
    not fit), then step/grow, which reads what it came to."""
    a = c.stages[s].iteration.pending
    r = resident_of(m, c, s, a.job_id)
    position, units = _growing_position(m, c, r)
    return (("pool/grow", a.serial, r.growing, slots_target(m, s, position, a.tokens) - units, None),
            ("step/grow", s, a, r.growing))


def growth_outcome(c: Configuration, s: int, a: Assignment) -> str:
    """What the growth of ``a``'s hold came to, as the grower shows it: its
    run gone from the stage (it preempted itself: PREEMPTED), its session
    waiting to grow (WAITS), or neither (GREW)."""
    if a.job_id < 0:  # a parked session served once more (overrun_residents): preempted once no longer parked
        if a.serial not in c.stages[s].parked:
            return PREEMPTED
    elif not any(r.job_id == a.job_id for r in c.stages[s].jobs):
        return PREEMPTED
    if c.stages[s].iteration.deferred == a.serial:  # defer free: its victim was in flight (step/defer)
        return DEFERRED
    return WAITS if c.sessions[a.serial].status == GROWING else GREW


@rule("step/grow", "a served growing run's hold grows to the position its chunk reaches, block by block, preempting the engine's last-admitted resident while it does not fit; it then gets its chunk (a prefill of serve exclusive prefill: by step/select-prefill), or, when it preempted itself, gets nothing and the pass ends (under self preemption continue: the pass goes on with the next resident; either way it admits nothing), or, under preempt none, it waits and gets nothing (a prefill of serve exclusive prefill is then not selected: the decodes stay)",
      "002 §3 Stages: a growing job first grows its hold to the position it will reach (block by block, preempting if needed); Pools: The grower itself can be the victim; 001: if new_blocks is None: break (vLLM 0.33.0's priority path: continue)")
def grow_for(m: Machine, c: Configuration, s: int, a: Assignment, p: int) -> Configuration:
    """step/grow (after the growth its premise left as follow-up work:
    growth_for): the pending chunk ``a`` of a run growing pool ``p`` is
    given, or not, by what the growth came to."""
    outcome = growth_outcome(c, s, a)
    it = c.stages[s].iteration
    if outcome == GREW and it.tentative and a.mode == PREFILL:
        pass  # the chunk has its room; step/select-prefill gives it
    elif outcome == GREW:
        it = it._replace(pending=None, assigned=it.assigned + (a,), left=it.left - a.tokens - m.steps[s].slots)
    elif outcome == PREEMPTED and m.steps[s].continues:  # self preemption continue: the next resident is served
        it = it._replace(pending=None, preempted=True)
    elif outcome == PREEMPTED:  # "if new_blocks is None: break": this pass schedules nothing further
        it = it._replace(pending=None, open=False, preempted=True)
    elif outcome == DEFERRED:  # defer free: no tokens, its grown units kept (step/defer halted the pass)
        it = it._replace(pending=None, deferred=None)
    else:  # it waits to grow (preempt none): no tokens (nor, under serve exclusive prefill, a selection)
        it = it._replace(pending=None)
    c = _with_iteration(c, s, it)
    if m.observer:
        m.notify("step/grow", c, {"stage": m.stage_name(s), "job": a.job_id, "session": a.serial,
                                  "pool": m.pool_name(p), "outcome": outcome, "left": it.left})
    if outcome == GREW and it.pending is None:  # given its tokens: a pool that shares registers them
        c = _registers(m, c, s, resident_of(m, c, s, a.job_id), p, a.serial, a.position, a.tokens - a.drafts)
    return c


def pending_growth(m: Machine, c: Configuration, s: int) -> float:
    """The units the pending chunk's hold still lacks (0 for a run that grows nothing): the premise that
    tells step/grow (above 0) from step/select-prefill (a prefill of serve exclusive prefill with its room)."""
    a = c.stages[s].iteration.pending
    r = resident_of(m, c, s, a.job_id)
    if r.growing is None:
        return 0.0
    position, units = _growing_position(m, c, r)
    return slots_target(m, s, position, a.tokens) - units


@rule("step/select-prefill", "under serve exclusive prefill, the prefill served (a resident's, or a waiting one the iteration admitted), its hold grown, is selected to run alone with its chunk of the whole budget: the tentative decodes are displaced (they keep what they grew, and neither execute nor advance), and the iteration serves and admits no more",
      "002 §3 Stages: serve exclusive prefill selects either one prefill alone or a decode-only batch. A resident prefill takes precedence. Otherwise resident decodes are tentative: while budget is left, a waiting prefill that fits can replace them and use the full budget. Once a prefill is selected, no further waiting request is admitted in that iteration. Displaced decodes keep any newly acquired allocation but neither execute nor advance computed KV.")
def select_prefill(m: Machine, c: Configuration, s: int) -> Configuration:
    it = c.stages[s].iteration
    a = it.pending
    assert it.tentative and a.mode == PREFILL and all(d.mode == DECODE for d in it.assigned)
    displaced = it.assigned
    it = it._replace(assigned=(a,), left=it.budget - m.steps[s].slots - a.tokens - m.steps[s].slots,
                     pending=None, open=False, tentative=False,
                     selected=a.job_id)
    c = _with_iteration(c, s, it)
    if m.observer:
        m.notify("step/select-prefill", c, {"stage": m.stage_name(s), "job": a.job_id, "session": a.serial,
                                            "tokens": a.tokens, "displaced": [d.job_id for d in displaced],
                                            "left": it.left})
    return c


def next_head(m: Machine, c: Configuration, s: int):
    """(pool, its Admission) of the first queue the stage serves that has a
    waiting hold (pool declaration order), with the header read with the
    budget left; None when every queue it serves is empty. Under serve
    exclusive prefill, while the decodes are tentative, the header reads the
    whole budget: a prefill it admits would replace them and "use the full
    budget, including in budget_left at admission"."""
    it = c.stages[s].iteration
    left = it.budget if it.tentative else it.left
    skip = it.skipped  # offload to: the heads offload/wait passed over in this iteration
    for q in m.steps[s].served:
        queue = c.pools[q].queue
        if queue and (not skip or any(w.serial not in skip for w in queue)):
            return q, admissible(m, c, q, budget=(s, left), skip=skip)
    return None


@rule("step/admit", "while the iteration has budget left and has not preempted, the head of the first queue the stage serves (pool declaration order) is admitted, its header read with budget_left = the budget left; the admitted session runs at once (and joins the residents)",
      "002 §3 Pools: its queue is served by step stage S, at the start of an iteration, after the residents have taken their tokens, while the iteration has budget left, and not in an iteration that preempted")
def admit(m: Machine, c: Configuration, s: int, q: int, serial: int) -> Configuration:
    """step/admit (after pool/admit, the head's admission, which made the
    session ready): the session runs at once (the follow-up ``run-session``),
    not in its turn among the ready."""
    c = c._replace(ready=ready_from(x for x in ready_serials(c.ready) if x != serial))
    it = c.stages[s].iteration
    c = _with_iteration(c, s, it._replace(admitted=it.admitted + (serial,)))
    if m.observer:
        m.notify("step/admit", c, {"stage": m.stage_name(s), "pool": m.pool_name(q), "session": serial,
                                   "left": c.stages[s].iteration.left})
    return follow_up(c, ("run-session", serial))


@rule("step/admit-stop", "the head of the first queue the stage serves does not fit: the iteration admits no more (head-of-line blocking)",
      "002 §3 Pools: the first head that does not fit stops the iteration's admissions")
def admit_stop(m: Machine, c: Configuration, s: int, q: int, a) -> Configuration:
    c = header_drawn(c, a)
    c = _with_iteration(c, s, c.stages[s].iteration._replace(open=False))
    if m.observer:
        m.notify("step/admit-stop", c, {"stage": m.stage_name(s), "pool": m.pool_name(q), "session": a.waiting.serial})
    return c


def cost_context(m: Machine, c: Configuration, s: int, it: Iteration) -> Env:
    """What the cost reads: tokens, prefilled and attention, what the
    iteration scheduled (attention = Σ n (K + n/2) over the prefill chunks, K
    the position before the chunk), and residents, decoders, kv_decode,
    kv_prefill, the residents before the iteration (seed 002 §2)."""
    env = _stage_env(c, it.context)
    env.tokens = sum(a.tokens for a in it.assigned)
    env.prefilled = sum(a.tokens for a in it.assigned if a.mode == PREFILL)
    env.attention = sum(a.tokens * (a.position + a.tokens / 2.0) for a in it.assigned if a.mode == PREFILL)
    return env


@rule("step/iteration", "the iteration is formed (it gave tokens, or it preempted: the step that only preempted; or, under schedule ahead, a session is parked or, under speculate, the ended iteration's rejected drafts are still to roll back: the batch formed before the ended one's results are applied, though empty): its cost C is read and its end is an event at now + C",
      "002 §3 Stages: The iteration advances the clock by C, an expression in tokens, decoders, prefilled, residents, kv_decode, kv_prefill, attention; An iteration that schedules no token is not an iteration, unless it preempted (schedule ahead: docs/design/async-scheduling.md; vLLM 0.33.0 queues an empty batch too, vllm/v1/engine/core.py:745-768)")
def close_iteration(m: Machine, c: Configuration, s: int) -> Configuration:
    it = c.stages[s].iteration
    env = cost_context(m, c, s, it)
    cost = max(0.0, _read(m, c, s, "cost", m.steps[s].cost, env))
    if cost == 0.0 and env.tokens > 0:
        raise RunError(f"step stage {m.stage_name(s)}: an iteration of {env.tokens:g} tokens costs 0: an "
                       f"iteration with tokens must take time", time=c.time)
    due = (c.time + cost, c.sequence)
    it = it._replace(due=due, pending=None)
    st = c.stages[s]._replace(iteration=it, count=it.number)
    if st.flight:  # defer free: the ended iteration is applied once this one is formed
        st = st._replace(flight=())
    if st.tier is not None and st.tier.jobs:  # offload to: the engine steps while a transfer is in flight
        st = st._replace(tier=st.tier._replace(until=due[0]))
    c = c._replace(stages=replace_at(c.stages, s, st), events=insert_event(c.events, due, EVENT, s),
                   sequence=c.sequence + 1)
    if c.time >= m.warmup:
        c = _count_iteration(c, s, it, env)
    if m.observer:
        m.notify("step/iteration", c, {"stage": m.stage_name(s), "iteration": it.number, "tokens": env.tokens,
                                       "decoders": len([a for a in it.assigned if a.mode == DECODE]),
                                       "prefilled": env.prefilled, "attention": env.attention, "cost": cost,
                                       "preempted": it.preempted})
    return c


def _count_preemption(m: Machine, c: Configuration, s: int) -> Configuration:
    """A resident preempted while the stage's iteration formed, counted at or after the warm-up."""
    if c.time < m.warmup:
        return c
    stats = c.statistics
    old = stats.engines[s]
    return c._replace(statistics=_set_engines(stats, replace_at(stats.engines, s,
                                                                old._replace(preemptions=old.preemptions + 1))))


def _count_iteration(c: Configuration, s: int, it: Iteration, env: Env) -> Configuration:
    stats = c.statistics
    old = stats.engines[s]
    prefills = any(a.mode == PREFILL for a in it.assigned)
    decodes = sum(1 for a in it.assigned if a.mode == DECODE)
    new = old._replace(iterations=old.iterations + 1,
                       prefill_only=old.prefill_only + (1 if prefills and not decodes else 0),
                       decode_only=old.decode_only + (1 if decodes and not prefills else 0),
                       mixed=old.mixed + (1 if prefills and decodes else 0),
                       empty=old.empty + (1 if not it.assigned else 0),
                       tokens=old.tokens + env.tokens, decodes=old.decodes + decodes,
                       scheduled=old.scheduled + len(it.assigned), offered=old.offered + it.budget)
    return c._replace(statistics=_set_engines(stats, replace_at(stats.engines, s, new)))


@rule("step/idle", "an iteration that gave no token, preempted nothing and (under schedule ahead) has no parked session and (under speculate) no roll-back to apply is not an iteration: the stage stays idle until a later settle",
      "002 §3 Stages: An iteration that schedules no token is not an iteration, unless it preempted")
def drop_iteration(m: Machine, c: Configuration, s: int) -> Configuration:
    c = _with_iteration(c, s, None)
    if c.stages[s].flight:  # defer free: the ended iteration is applied once this one is dropped
        c = _with_state(c, s, c.stages[s]._replace(flight=()))
    if m.observer:
        m.notify("step/idle", c, {"stage": m.stage_name(s)})
    return c


# -- the iteration's end -----------------------------------------------------------------


@rule("step/iteration-end", "the iteration ends: each served resident's run is lowered by its tokens, a growing hold's position advances by them; the runs that are done complete (stage/step-complete), in the order served (under schedule ahead their sessions are finishing until the next iteration is formed: step/park)",
      "002 §3 Stages: its tokens are applied when it ends")
def end_iteration(m: Machine, c: Configuration, s: int, _b: int = 0) -> Configuration:
    st = c.stages[s]
    it = st.iteration
    jobs = {r.job_id: r for r in st.jobs}
    sessions = c.sessions
    done = []
    rejects = []
    spec = m.steps[s].spec
    overrun = []
    for a in it.assigned:
        if a.job_id < 0:  # a parked session served once more (overrun_residents): its output is never applied
            continue
        produced = a.tokens
        if spec > 0 and (a.mode == DECODE or a.drafts > 0):  # speculate: its token and the accepted drafts, none past its last (step/pad's: none accepted)
            produced = min(a.tokens - a.drafts + a.accepted, jobs[a.job_id].remaining)
            if a.tokens > produced and jobs[a.job_id].growing is not None:
                rejects.append(("step/reject", s, a, jobs[a.job_id].growing, a.tokens - produced))
            if produced >= jobs[a.job_id].remaining and jobs[a.job_id].remaining >= 2.0:
                overrun.append(a.serial)
        r = jobs[a.job_id]._replace(remaining=jobs[a.job_id].remaining - produced)
        jobs[a.job_id] = r
        if r.growing is not None:
            session = sessions[a.serial]
            h, k = innermost_hold(session, r.growing)
            hold = advance_position(session.holds[h], k, a.tokens)
            sessions = sessions.set(a.serial, session._replace(holds=replace_at(session.holds, h, hold)))
        if r.remaining <= EPSILON:
            done.append(r)
    if rejects and m.steps[s].ahead:  # schedule ahead: the roll-back waits until the next iteration is formed
        rejects = [r + (innermost_hold_id(sessions[r[2].serial], r[3]),) for r in rejects]
    residents = tuple(jobs[r.job_id] for r in st.jobs)
    st = st._replace(jobs=residents, iteration=None)
    if m.steps[s].ahead:  # schedule ahead: their holds on the memory exit after the next iteration is formed
        st = st._replace(finishing=tuple(r.owner for r in done),
                         decoded=tuple(a.serial for a in it.assigned if a.mode == DECODE or a.drafts > 0))
        if m.steps[s].memory is not None and m.kv_groups[m.steps[s].memory] is not None:
            st = st._replace(flying=tuple((a.serial, a.tokens) for a in it.assigned if a.job_id >= 0))
        if m.steps[s].defer:  # defer free: no victim while the next iteration is formed (step/defer)
            st = st._replace(flight=tuple(a.serial for a in it.assigned))
        if spec > 0:
            st = st._replace(rejects=tuple(rejects), given=tuple((a.serial, a.tokens) for a in it.assigned
                                                                 if a.mode == DECODE or a.drafts > 0),
                             overrun=tuple(overrun))
            rejects = []
    c = c._replace(sessions=sessions, stages=replace_at(c.stages, s, st))
    c = _note_tokens(m, c, s, it._replace(assigned=tuple(a for a in it.assigned if a.job_id >= 0)), jobs)
    if m.observer:
        m.notify("step/iteration-end", c, {"stage": m.stage_name(s), "iteration": it.number,
                                           "done": [r.job_id for r in done]})
    if rejects:  # speculate: the rejected drafts roll back before a finished run completes
        return follow_up(c, *rejects, *(("stage/step-complete", s, r) for r in done))
    return follow_up(c, *(("stage/step-complete", s, r) for r in done)) if done else c


@rule("step/reject", "under speculate, a served decode whose iteration scheduled more tokens than it produced (drafts rejected, or tokens past its last) rolls its hold's position back by the difference; the units it grew for them stay",
      "serq-ref extension (docs/design/speculative-decoding.md): vLLM 0.33.0 update_from_output: num_computed_tokens -= num_rejected (vllm/v1/core/sched/scheduler.py:2346-2364); check_stop's trim takes the tokens past the stop back off num_computed_tokens (scheduler.py:2744-2770); the blocks allocated for them stay with the request")
def reject(m: Machine, c: Configuration, s: int, a: Assignment, p: int, rollback: float,
           _hold: int | None = None) -> Configuration:
    session = c.sessions[a.serial]
    h, k = innermost_hold(session, p)
    hold = advance_position(session.holds[h], k, -rollback)
    c = c._replace(sessions=c.sessions.set(a.serial, session._replace(holds=replace_at(session.holds, h, hold))))
    if m.observer:
        m.notify("step/reject", c, {"stage": m.stage_name(s), "job": a.job_id, "session": a.serial,
                                    "drafts": a.drafts, "accepted": a.accepted, "rollback": rollback})
    return c


#: the stage kind's completion event's rule
complete = end_iteration


# -- defer free (a KV consumer connector under schedule ahead; docs/design/kv-connector.md) ----------------------


@rule("step/defer", "under schedule ahead and defer free, a growth that does not fit whose victim the iteration in flight gave tokens preempts nothing: the grower gets nothing (its units kept) and the iteration serves no more residents; it still admits from its queues unless it preempted",
      "serq-ref extension (docs/design/kv-connector.md): vLLM 0.33.0 with a KV consumer connector and more than one batch in flight defers block frees (defer_block_free, vllm/v1/core/sched/scheduler.py:189-195); a running request scheduled in the batch in flight cannot be freed (_request_blocks_can_be_freed, :3077-3082), so the allocation loop breaks without preempting it (:940-942) and the running loop ends (:986-987); the waiting loop runs when nothing was preempted (:1050)")
def defer(m: Machine, c: Configuration, s: int, serial: int, victim: int, p: int,
          why: tuple | None = None) -> Configuration:
    """step/defer (its premise: pools._defers, after choose_victim chose ``victim`` for the growth of ``serial``'s
    hold on ``p``): step/grow then reads the outcome DEFERRED."""
    it = c.stages[s].iteration
    c = _with_iteration(c, s, it._replace(deferred=serial, halted=True))
    if m.observer:
        grower, by, candidates = why
        m.notify("step/defer", c, {"stage": m.stage_name(s), "session": serial, "victim": victim,
                                   "pool": m.pool_name(p), "by": by, "candidates": candidates})
    return c


def _note_tokens(m: Machine, c: Configuration, s: int, it: Iteration, jobs: dict) -> Configuration:
    """The inter-token latency's bookkeeping at an iteration's end (docs/reports.md): a prefill run that
    completes produced its first token now; each decode token is a gap since the session's last token
    here, counted at or after the warm-up; a decode run that completes ends the session's tokens here."""
    stats = c.statistics
    old = stats.engines[s]
    last, gaps = old.last_token, old.gaps
    now, warm = c.time, c.time >= m.warmup
    for a in it.assigned:
        done = jobs[a.job_id].remaining <= EPSILON
        if a.mode == PREFILL:
            if done:
                last = last.set(a.serial, now)
            continue
        previous = last.get(a.serial)
        if previous is not None and warm:
            gaps = (now - previous, gaps)
        last = last.delete(a.serial) if done and a.serial in last else (last if done else last.set(a.serial, now))
    if last is old.last_token and gaps is old.gaps:
        return c
    return c._replace(statistics=_set_engines(stats, replace_at(stats.engines, s, old._replace(last_token=last, gaps=gaps))))


@rule("stage/step-complete", "a resident whose run has no tokens left completes: its session goes on",
      "002 §3 Stages: its tokens are applied when it ends; a run's work is its tokens")
def complete_run(m: Machine, c: Configuration, s: int, r: Resident) -> Configuration:
    st = c.stages[s]
    st = st._replace(jobs=tuple(x for x in st.jobs if x.job_id != r.job_id))
    return finish_job(m, c, s, r, "stage/step-complete", replace_at(c.stages, s, st), c.events, c.sequence)


# -- schedule ahead (vLLM 0.33.0's asynchronous scheduling; docs/design/async-scheduling.md) ------------------


def parks(m: Machine, c: Configuration, serial: int, pools: set) -> int | None:
    """The premise of step/park: the step stage with ``schedule ahead`` at
    which session ``serial`` is finishing (its run there completed at the end
    of the stage's last iteration, and the next is not formed yet) and whose
    memory is one of ``pools`` (the pools of the hold it exits); None if none."""
    for s in m.engines:
        facts = m.steps[s]
        if facts.ahead and facts.memory in pools and serial in c.stages[s].finishing:
            return s
    return None


@rule("step/park", "under schedule ahead, a session whose run on the engine completed at the end of an iteration and that exits its hold on the engine's memory before the next iteration is formed waits at the exit, its units held: it counts among the residents the next iteration is formed with (not served, not a victim) until step/apply",
      "serq-ref extension (docs/design/async-scheduling.md): vLLM 0.33.0 AsyncScheduler: schedule(k+1) runs before update_from_output(k) (vllm/v1/engine/core.py:708-825); a request whose last token batch k sampled is skipped by schedule(k+1) (vllm/v1/core/sched/scheduler.py:800-814) and keeps its blocks and its running slot, counted among the running (get_request_counts, scheduler.py:756-758, 2920-2922), until update_from_output(k) frees it (scheduler.py:2476, 2543-2544)")
def park(m: Machine, c: Configuration, s: int, serial: int) -> Configuration:
    st = c.stages[s]
    c = c._replace(sessions=c.sessions.set(serial, c.sessions[serial]._replace(status=FINISHING)),
                   stages=replace_at(c.stages, s, st._replace(finishing=tuple(x for x in st.finishing if x != serial),
                                                               parked=st.parked + (serial,))))
    if m.observer:
        m.notify("step/park", c, {"stage": m.stage_name(s), "session": serial})
    return c


def innermost_hold_id(session, p: int) -> int | None:
    """The id of ``session``'s innermost hold on pool ``p`` (None: it holds none)."""
    h, _ = innermost_hold(session, p)
    return session.holds[h].hold_id if h >= 0 else None


def deferred_rejects(c: Configuration, s: int) -> tuple:
    """Under schedule ahead and speculate: the ended iteration's step/reject work whose hold is still the one
    its tokens were given to (a victim preempted meanwhile rolls nothing back: vLLM's stale output, scheduler.py
    2357-2364)."""
    out = []
    for item in c.stages[s].rejects:
        name, stage, a, p, rollback, hold = item
        session = c.sessions.get(a.serial)
        if session is not None and hold is not None and innermost_hold_id(session, p) == hold:
            out.append((name, stage, a, p, rollback))
    return tuple(out)


@rule("step/apply", "under schedule ahead, once the next iteration is formed (in flight, or dropped by step/idle), the ended iteration's results are applied: its parked sessions become ready, in the order they parked, and exit their holds (session/hold-exit); no session is finishing any more (step/iteration-start ended the finishing of those that did not park)",
      "serq-ref extension (docs/design/async-scheduling.md): vLLM 0.33.0 EngineCore.step_with_batch_queue pops the oldest batch and applies its output (update_from_output) after it has scheduled the next (vllm/v1/engine/core.py:745-769, 778-796)")
def apply_ended(m: Machine, c: Configuration, s: int) -> Configuration:
    parked = c.stages[s].parked
    rejects = deferred_rejects(c, s)  # speculate: the ended iteration's rejected drafts roll back first
    c = c._replace(stages=replace_at(c.stages, s, c.stages[s]._replace(parked=(), rejects=(), given=(),
                                                                        overrun=(), flying=())))
    for serial in parked:
        c = make_ready(m, c, c.sessions[serial])
    if m.observer:
        m.notify("step/apply", c, {"stage": m.stage_name(s), "sessions": list(parked)})
    return follow_up(c, *rejects) if rejects else c


@rule("step/preempt-parked", "under schedule ahead, a growth that does not fit chooses a parked session as its victim (it was admitted last): it is no longer parked, the preemption is counted (the iteration admits nothing), and its hold exits at once (session/hold-exit: its units go back, its computed prefix cached), its session going on; it is not run again",
      "serq-ref extension (docs/design/async-scheduling.md): vLLM 0.33.0 preempts running[-1] even when its last token is in flight (vllm/v1/core/sched/scheduler.py:938, 970; _preempt_request 1799-1843: blocks freed); update_from_output then delivers the stale token, which stops the request while PREEMPTED (scheduler.py:2318-2323, 2494, 2545-2548)")
def preempt_parked(m: Machine, c: Configuration, serial: int, p: int, why: tuple | None = None) -> Configuration:
    """step/preempt-parked (its premise: pools.choose_victim chose the parked ``serial``, for the reason
    ``why`` with a step trace): its session runs at once (the follow-up ``run-session``): its hold exits."""
    s = next(e for e in m.engines_of_memory[p] if serial in c.stages[e].parked)
    st = c.stages[s]
    st = st._replace(parked=tuple(x for x in st.parked if x != serial))
    if st.iteration is not None and st.iteration.due is None:  # forming: "no admission in a step that preempted"
        it = st.iteration._replace(preempted=True)
        given = [a for a in it.assigned if a.job_id == -1 - serial]  # speculate: served once more, given back
        if given:
            it = it._replace(assigned=tuple(a for a in it.assigned if a.job_id != -1 - serial),
                             left=it.left + given[0].tokens + m.steps[s].slots)
        st = st._replace(iteration=it)
    c = _count_preemption(m, c._replace(stages=replace_at(c.stages, s, st)), s)
    c = count_pool(make_ready(m, c, c.sessions[serial]), p, preemptions=1)
    c = c._replace(ready=ready_from(x for x in ready_serials(c.ready) if x != serial))
    if m.observer:
        grower, by, candidates = why
        m.notify("step/preempt-parked", c, {"stage": m.stage_name(s), "session": serial, "pool": m.pool_name(p),
                                            "grower": grower, "by": by, "candidates": candidates})
    return follow_up(c, ("run-session", serial))


# -- load remote (a KV connector's remote prefill; docs/design/kv-connector.md section 5.5) ---------------------


def load_amount(m: Machine, c: Configuration, s: int, a) -> float:
    """The premise of step/load that the head ``a`` loads: under ``load remote (R) after (D)``, R read with the
    head's attributes, when its session has not loaded yet and its hold holds the stage's memory; else 0 (it is
    admitted as any head: pool/admit, step/admit)."""
    facts = m.steps[s]
    serial = a.waiting.serial
    if facts.remote is None or serial in c.stages[s].consumed:
        return 0.0
    session = c.sessions[serial]
    if facts.memory not in session.pending.pools:
        return 0.0
    env = _stage_env(c, context_before(m, c, s))
    env.attrs, env.serial, env.stream, env.draws = session.attrs, serial, session.stream, session.draws
    value = max(0.0, _read(m, c, s, "remote load", facts.remote, env))
    return value if value > _local_hit(m, c, s, a)[0] else 0.0


def _local_hit(m: Machine, c: Configuration, s: int, a) -> tuple[float, float]:
    """The head's local prefix hit on the stage's memory when it shares prefixes (pool/hit's premise), in units,
    and the units of it another hold references (they take no free unit); (0, 0) otherwise. vLLM 0.33.0 asks the
    connector for the prompt less that hit (scheduler.py:1130-1140)."""
    p = m.steps[s].memory
    if c.pools[p].table is None or m.holds[c.sessions[a.waiting.serial].pending.stmt].cache is None:
        return 0.0, 0.0
    pools = c.sessions[a.waiting.serial].pending.pools
    ids = sharing.hit_blocks(m, c, p, a.waiting.serial, a.content, a.reuse, a.needs[pools.index(p)])
    return len(ids) * m.block_sizes[p], sharing.live_units(m, c, p, ids)


def local_blocks(m: Machine, c: Configuration, s: int, a) -> int:
    """The head's memory hit in blocks (_local_hit), which the CPU tier is looked up past (offload to)."""
    return round(_local_hit(m, c, s, a)[0] / m.block_sizes[m.steps[s].memory])


def _prefilling(m: Machine, c: Configuration, s: int) -> float:
    """The memory units the in-flight prefills lack to hold their whole sequence (vLLM 0.33.0's
    _inflight_prefill_reserved_blocks, scheduler.py:3405-3436): every parked load, every session the iteration
    promoted, every resident still prefilling at the iteration's start, and every session the iteration
    admitted whose prefill its chunk does not complete (:1590-1593)."""
    facts = m.steps[s]
    p = facts.memory
    st = c.stages[s]
    it = st.iteration
    total = 0.0
    for load in st.loads:
        h, k = innermost_hold(c.sessions[load.serial], p)
        total += max(0.0, m.round_up(p, load.full) - c.sessions[load.serial].holds[h].allocations[k].units)
    given = {a.job_id: a.tokens for a in it.assigned}
    for r in st.jobs:
        if r.mode != PREFILL or r.growing != p:
            continue
        if r.owner in it.admitted and given.get(r.job_id, 0.0) >= r.remaining - EPSILON:
            continue  # its chunk completes its prefill: never in flight
        position, units = _growing_position(m, c, r)
        total += max(0.0, m.round_up(p, position + r.remaining) - units)
    return total


def load_fits(m: Machine, c: Configuration, s: int, a, amount: float) -> bool:
    """The premise of step/load (else step/admit-stop): the head's hold finds its units' room on every pool but
    the memory (a request slot it does not take), the memory's free units hold its whole sequence, and, less
    what the in-flight prefills lack (_prefilling), the units it loads (vLLM 0.33.0's allocate_slots with
    full_sequence_must_fit and reserved_blocks, kv_cache_manager.py:527-590; scheduler.py:1421-1461)."""
    p = m.steps[s].memory
    pools = c.sessions[a.waiting.serial].pending.pools
    live = _local_hit(m, c, s, a)[1]  # a shared hit's blocks another hold references take no free unit
    for q, u, need in zip(pools, a.units, a.needs):
        if q == p:
            free = m.caps[q] - c.pools[q].allocated
            if m.round_up(q, need) - live > free + EPSILON:
                return False
            if m.round_up(q, amount) - live > free - _prefilling(m, c, s) + EPSILON:
                return False
        elif c.pools[q].allocated + m.round_up(q, u) > m.caps[q] + EPSILON:
            return False
    return True


def load_admission(m: Machine, a, pools: tuple, amount: float, p: int):
    """The head's Admission as its load takes it: the loaded units on the memory ``p``, none elsewhere."""
    return a._replace(units=tuple(min(amount, u_need) if q == p else 0.0
                                  for q, u_need in zip(pools, a.needs)))


@rule("step/load", "under load remote (R) after (D), the head of the first queue the stage serves, whose session has not loaded yet and reads R above its local hit (pool/hit's, in a pool that shares prefixes), was admitted as a load (pool/admit: R units of the memory, none of its other pools): it is parked, not run, its hold's position R (the whole prompt less its last token when R is all it needs), until the iteration D + 1 after this one (D + 2 under schedule ahead) promotes it (step/promote); it takes no budget and the iteration goes on admitting",
      "serq-ref extension (docs/design/kv-connector.md): vLLM 0.33.0 get_num_new_matched_tokens answers the remote tokens (scheduler.py:1130-1140), the request is given no tokens (:1286-1289), its blocks allocated at once (:1436-1452), WAITING_FOR_REMOTE_KVS, skipped into kv_holding_waiting (:1517-1545, 1054-1060); the transfer reported in step s + D's output (:2581-2582, 3556-3578)")
def load(m: Machine, c: Configuration, s: int, q: int, serial: int, amount: float, full: float,
         units: tuple) -> Configuration:
    """step/load (after pool/admit of the head's load Admission, load_admission): the session leaves the
    ready sequence and parks at the stage."""
    facts = m.steps[s]
    p = facts.memory
    session = c.sessions[serial]
    env = _stage_env(c, context_before(m, c, s))
    env.attrs, env.serial, env.stream, env.draws = session.attrs, serial, session.stream, session.draws
    if facts.remote is not None:
        delay = max(0.0, math.floor(_read(m, c, s, "load delay", facts.remote_delay, env)))
    else:  # offload to (N) load after (L): a load from the CPU tier (docs/design/cpu-offloading.md)
        delay = float(facts.offload_load_delay)
    h, k = innermost_hold(session, p)
    computed = amount if amount < full else max(0.0, full - 1.0)  # a whole prompt: its last token is computed
    hold = advance_position(session.holds[h], k, computed - session.holds[h].allocations[k].position)
    attrs = list(session.attrs)
    attrs[m.program.slot_cached] = computed
    session = session._replace(holds=replace_at(session.holds, h, hold), attrs=tuple(attrs), status=LOADING)
    st = c.stages[s]
    it = st.iteration
    due = it.number + int(delay) + (2 if facts.ahead else 1)
    # load remote: one load per session; offload to: one per admission (a victim looks the tier up again)
    consumed = st.consumed | {serial} if facts.remote is not None else st.consumed
    st = st._replace(loads=st.loads + (Load(serial, due, full, units),), consumed=consumed)
    c = c._replace(sessions=c.sessions.set(serial, session), stages=replace_at(c.stages, s, st),
                   ready=ready_from(x for x in ready_serials(c.ready) if x != serial))
    if m.observer:
        m.notify("step/load", c, {"stage": m.stage_name(s), "pool": m.pool_name(q), "session": serial,
                                  "units": amount, "computed": computed, "due": due})
    return c


def next_promotion(m: Machine, c: Configuration, s: int) -> Load | None:
    """The premise of step/promote and step/promote-stop: the first parked load, in the order they parked,
    whose transfer is done by this iteration (the others are passed over: vLLM's skip of a request still
    WAITING_FOR_REMOTE_KVS, scheduler.py:3519-3535); None if none."""
    number = c.stages[s].iteration.number
    return next((load for load in c.stages[s].loads if load.due <= number), None)


def promotion_fits(m: Machine, c: Configuration, s: int, load: Load) -> bool:
    """The premise of step/promote (else step/promote-stop): its hold's other pools have room for the units
    they take now (a request slot), and the memory's free units hold the rest of its whole sequence (vLLM
    0.33.0 allocate_slots with full_sequence_must_fit, kv_cache_manager.py:527-545; its chunk is within it)."""
    p = m.steps[s].memory
    session = c.sessions[load.serial]
    h, _ = innermost_hold(session, p)
    for alloc, u in zip(session.holds[h].allocations, load.units):
        if alloc.pool == p:
            if m.round_up(p, load.full) - alloc.units > m.caps[p] - c.pools[p].allocated + EPSILON:
                return False
        elif c.pools[alloc.pool].allocated + m.round_up(alloc.pool, u) - alloc.units > m.caps[alloc.pool] + EPSILON:
            return False
    return True


@rule("step/promote", "under load remote, while the iteration has budget left and has not preempted, the first parked load whose transfer is done (those that are not are passed over) is promoted before any queue's head: its hold takes its units on its other pools (a request slot), its session is admitted anew (the last in admission order; in a pool that shares prefixes its loaded blocks are registered: pool/register) and runs at once: its run computes what the load left (the last prompt token when it loaded the whole prompt)",
      "serq-ref extension (docs/design/kv-connector.md): vLLM 0.33.0 drains kv_holding_waiting first (scheduler.py:1062-1068), promotes a request whose transfer finished (_update_waiting_for_remote_kv, :3467-3517: computed = num_tokens - 1 for a whole prompt) and schedules it as a resumed request (:1262-1272, 1307), appended to running (:1548)")
def promote(m: Machine, c: Configuration, s: int, load: Load) -> Configuration:
    p = m.steps[s].memory
    session = c.sessions[load.serial]
    h, _ = innermost_hold(session, p)
    hold = session.holds[h]
    allocations = []
    for alloc, u in zip(hold.allocations, load.units):
        if alloc.pool != p:
            need = m.round_up(alloc.pool, u)
            pool = c.pools[alloc.pool]
            holders = tuple(x._replace(units=need) if x.serial == load.serial and x.hold_id == hold.hold_id else x
                            for x in pool.holders)
            c = c._replace(pools=replace_at(c.pools, alloc.pool, pool._replace(
                allocated=pool.allocated + need - alloc.units, holders=holders)))
            alloc = alloc._replace(units=need)
        allocations.append(alloc)
    session = session._replace(holds=replace_at(session.holds, h, hold._replace(allocations=tuple(allocations))),
                               admission=c.sequence)
    st = c.stages[s]
    it = st.iteration._replace(promoted=st.iteration.promoted + (load.serial,))
    st = st._replace(loads=tuple(x for x in st.loads if x.serial != load.serial), iteration=it)
    c = c._replace(sequence=c.sequence + 1, stages=replace_at(c.stages, s, st))
    c = make_ready(m, c, session)
    c = c._replace(ready=ready_from(x for x in ready_serials(c.ready) if x != load.serial))
    if m.observer:
        m.notify("step/promote", c, {"stage": m.stage_name(s), "session": load.serial, "left": it.left})
    if c.pools[p].table is not None:  # the loaded blocks are cached now (scheduler.py:3509-3511): pool/register
        a = next(x for x in c.sessions[load.serial].holds[h].allocations if x.pool == p)
        return follow_up(c, ("pool/register", p, load.serial, 0.0, a.position), ("run-session", load.serial))
    return follow_up(c, ("run-session", load.serial))


@rule("step/promote-stop", "under load remote, the first parked load whose transfer is done does not find its room (a request slot, or the memory for the rest of its whole sequence): it stays parked and the iteration admits no more",
      "serq-ref extension (docs/design/kv-connector.md): vLLM 0.33.0 scheduler.py:1072-1074 (no request slot: break) and :1454-1461 (allocate_slots returns None: break; the promoted request is in no running list, so nothing is preempted for it)")
def promote_stop(m: Machine, c: Configuration, s: int, load: Load) -> Configuration:
    c = _with_iteration(c, s, c.stages[s].iteration._replace(open=False))
    if m.observer:
        m.notify("step/promote-stop", c, {"stage": m.stage_name(s), "session": load.serial})
    return c
