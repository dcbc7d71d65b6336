"""settle: the clean-up after every event (seed 002 §3, Configuration).

"After every event the interpreter settles: it runs every ready session,
then retries growers and admissions at every pool not served by a stage,
until nothing changes; then it starts an iteration on every idle step stage
that has residents or a waiting queue it serves, provided no other event is
pending at the same instant (a scheduler step sees every arrival up to it)."

Step stages are tried in declaration order, each at most once per settle
(so settle ends); forming an iteration can make sessions ready or pools
dirty (an admitted session's body), and then settle runs its loop again.
Sessions run in the order they became ready. Pools are tried in declaration
order ("the pool declared first is served first"). A pool is tried when it is
dirty (its state, or that of a pool its waiting holds need, changed since it
was last tried) or volatile (its queue keys or a waiting hold's header read
the time, a draw, or state outside its own pools); every other pool's attempt
would change nothing, so skipping it is the same settle, faster. settle is
idempotent: settle(settle(c)) == settle(c) (tests/test_smallstep_properties.py),
except for a program whose admission headers draw, where every attempt draws.

This module is also where rules are applied one at a time by loops: a
session's run (``run_session``: a statement's rule, then the next), the
pools' retries, the forming of an iteration, and ``drain``, which applies
the follow-up work rules leave in the configuration (``Configuration.work``:
the session to end, the hold to release, the job to take off its stage, the
arrival to make), each item by its rule (``FOLLOW_UPS``), depth first. A
rule never calls a rule of another family; the loops here do the applying,
and each rule emits its own step-trace record (docs/semantics.md,
"Follow-up work"). settle first drains what the event's rule left.
"""

from __future__ import annotations

from . import pools, sessions, window_sharing, workload
from .configuration import EMPTY_READY, READY, Configuration, Session, ready_pop, setter
from .machine import EPSILON, MAX_QUIET_STATEMENTS, Machine, fail, follow_up
from .stages import enter_stage, leave_stage, offload, step
from .values import Env

_new = object.__new__
_set_ready = setter(Configuration, "ready")
_set_work = setter(Configuration, "work")


# -- the follow-up work ------------------------------------------------------------------------------------------


def run_at_once(m: Machine, c: Configuration, serial: int) -> Configuration:
    """``run-session``: a session that is to run at once, not in its turn among the ready (one the step
    stage admitted, a parked victim whose hold exits), runs (its rule took it off the ready sequence)."""
    return run_session(m, c, serial)


#: Each follow-up item's rule by the item's name (Configuration.work): the item is (name, arguments...), and
#: ``FOLLOW_UPS[name](m, c, *arguments)`` applies it. Most items are named by the rule they apply; a
#: ``pool/release`` item applies pool/release or, on a leased pool, pool/lease (pools.release_next); a
#: ``pool/grow`` item applies pool/grow, pool/grow-wait or pool/preempt (pools.grow); ``session/end``
#: leaves the session's releases first while it holds anything (sessions.end_session); ``run-session``
#: runs a session's statements, each its own rule.
FOLLOW_UPS = {
    "session/end": lambda m, c, serial: sessions.end_session(m, c, c.sessions[serial]),
    "session/hold-enter": pools.enter_hold,
    "session/hold-exit": sessions.exit_hold,
    "run-session": run_at_once,
    "pool/admit": lambda m, c, q, a: pools.admit(m, pools.header_drawn(c, a), q, a),
    "pool/grow": pools.grow,
    "pool/lease-end": pools.end_lease,
    "pool/release": pools.release_next,
    "pool/spill-land": pools.land_spill,
    "pool/register": window_sharing.register_served,
    "pool/slide": window_sharing.slide_any,
    "enter-stage": lambda m, c, stages, work, spill: enter_stage(m, c, stages, None, work, spill=spill),
    "stage/leave": leave_stage,
    "stage/step-complete": step.complete_run,
    "step/admit": step.admit,
    "step/defer": step.defer,
    "step/load": step.load,
    "step/grow": step.grow_for,
    "step/park": step.park,
    "step/preempt-parked": step.preempt_parked,
    "step/reject": step.reject,
    "step/withdraw": step.withdraw,
    "workload/arrive": lambda m, c: workload.replace_closed(m, c),
}


def drain(m: Machine, c: Configuration) -> Configuration:
    """Apply the follow-up work: the first item each time, its rule applied
    to the configuration with no work waiting, so that the items it leaves
    (in the order it left them) go before the rest. An item's place is thus
    its key in the tree of follow-ups, the ordinals of the items that led to
    it: a rule's work is done before its caller's next item, in the order
    left (depth first, as a call of each rule would do it)."""
    work = c.work
    while work:
        c = FOLLOW_UPS[work[0][0]](m, _set_work(c, ()), *work[0][1:])
        work = c.work + work[1:] if c.work else work[1:]
    return _set_work(c, ()) if c.work else c


# -- a session's run -----------------------------------------------------------------------------------------------


def run_session(m: Machine, c: Configuration, serial: int) -> Configuration:
    """Run the ready session ``serial`` until it blocks or ends.

    Each statement's rule, and the rule of each block's end, gets the
    session, its Op (the rule moves ``pc`` to ``op.next``, into a block it
    enters or out of the block that ends) and an evaluation environment set
    to the moment (``env``, this run's own: the rule writes back the
    stream's position). The follow-up work a statement's rule leaves (a
    rejected hold's end, a hold's releases, a growth's preemptions) is
    drained before the next statement.
    A rule that changes only its session (set, branch, loop, while, choose,
    leaving a plain, loop or while block: local) is a function to the new
    session; the configuration it stands for is ``c`` with that session, which
    is stored before the next rule that reads anything else (and after every
    rule when a step trace observes the run)."""
    ops = m.ops
    quiet = MAX_QUIET_STATEMENTS  # statements it may still run at this instant without blocking
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
                 f"the program loops without letting time pass", c, _current_stmt(s))
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


def _current_stmt(s: Session):
    return (s.frames[-1].block, max(0, s.pc - 1))


# -- the loops of pool rules and of forming an iteration -------------------------------------------------------------


def retry_growers(m: Machine, c: Configuration, p: int) -> Configuration:
    """The growers of ``p`` in stall order, while the head fits (pool/grow-resume); the head blocks the rest."""
    while True:
        grower = pools.fitting_grower(m, c, p)
        if grower is None:
            return c
        c = drain(m, pools.resume_grower(m, c, p, *grower))


def try_admit(m: Machine, c: Configuration, p: int) -> Configuration:
    """Admit heads of pool ``p``'s queue while they fit (pool/admit); the
    first that does not fit blocks the rest (head-of-line)."""
    while True:
        a = pools.admissible(m, c, p)
        if a is None:
            return c
        c = pools.header_drawn(c, a)
        if not a.fits:
            return c
        c = drain(m, pools.admit(m, c, p, a))


def form_iteration(m: Machine, c: Configuration, s: int) -> Configuration:
    """The iteration of stage ``s`` started and formed: the rules of forming
    it applied one at a time, each to the configuration the last one made
    (its follow-up work drained), until it is in flight (step/iteration) or
    dropped (step/idle)."""
    c = step.start_iteration(m, c, s)
    if c.stages[s].tier is not None:  # offload to: the jobs reported by the iterations before it land
        jobs = offload.landing(m, c, s)
        if jobs:
            c = offload.land(m, c, s, jobs)
    while True:
        it = c.stages[s].iteration
        if it.pending is not None:  # a chunk waiting for its growth, or a prefill waiting to be selected
            if step.pending_growth(m, c, s) > EPSILON:  # the growth, then step/grow
                c = drain(m, follow_up(c, *step.growth_for(m, c, s)))
            else:
                c = step.select_prefill(m, c, s)
            continue
        if it.open and it.left > 0:
            chosen = step.next_resident(m, c, s)
            if chosen is not None:
                c = (step.pad if step.pads(m, c, s, chosen[0]) else step.schedule)(m, c, s, *chosen)
                if c.work:  # a pool that shares prefixes registers the tokens given (pool/register)
                    c = drain(m, c)
                continue
            if not it.preempted:
                load = step.next_promotion(m, c, s) if c.stages[s].loads else None
                again = offload.reloads(m, c, s, load) if load is not None else None
                if again is not None and step.promotion_fits(m, c, s, load):
                    # offload to: promoted to no computed token, it is looked up again and loads again
                    c = offload.reload(m, c, s, load, again)
                    continue
                if load is not None:  # load remote: a parked load whose transfer is done, before any queue
                    c = step.promote(m, c, s, load) if step.promotion_fits(m, c, s, load) else \
                        step.promote_stop(m, c, s, load)
                    c = drain(m, c)
                    continue
                head = step.next_head(m, c, s)
                amount = step.load_amount(m, c, s, head[1]) if head is not None and m.steps[s].remote else 0.0
                found = None
                if head is not None and c.stages[s].tier is not None \
                        and m.steps[s].memory in c.sessions[head[1].waiting.serial].pending.pools:
                    # offload to: the head (whose hold takes the memory) looked up in the tier
                    found = offload.find(m, c, s, head[1], step.local_blocks(m, c, s, head[1]))
                    c = offload.lookup(m, c, s, head[1], found)
                    if found.wait:
                        c = offload.wait(m, c, s, head[1].waiting.serial, found.why)
                        continue
                    if found.chunks:
                        amount = (found.local + found.chunks) * m.block_sizes[m.steps[s].memory]
                if amount > 0.0:  # load remote: the head loads (pool/admit of its load, then step/load)
                    q, a = head
                    if step.load_fits(m, c, s, a, amount):
                        pools = c.sessions[a.waiting.serial].pending.pools
                        memory = m.steps[s].memory
                        taken = step.load_admission(m, a, pools, amount, memory)
                        full = a.needs[pools.index(memory)]
                        c = drain(m, follow_up(c, ("pool/admit", q, taken),
                                               ("step/load", s, q, a.waiting.serial, amount, full, a.units)))
                        if found is not None:  # offload to: the chunks it reads pinned, its load job made
                            load = c.stages[s].loads[-1]
                            c = offload.park(m, c, s, a.waiting.serial, found.local, found.chunks, load.due)
                    else:
                        c = step.admit_stop(m, c, s, q, a)
                    continue
                if head is not None:
                    q, a = head
                    if a.fits:  # pool/admit, then step/admit (the session runs at once); speculate: or step/pad-stop
                        c = admit_head(m, c, s, q, a)
                    else:
                        c = step.admit_stop(m, c, s, q, a)
                    continue
        # schedule ahead: a batch, though empty, while a parked session or (speculate) a roll-back waits for it
        # defer free: a batch, though empty, when a growth was deferred (vLLM's schedule() call is a step)
        # load remote: a batch, though empty, while a load is parked (every schedule() call is a step)
        if c.stages[s].tier is not None and offload.store_due(m, c, s):  # offload to: stores, flushes, finishes
            c = offload.store(m, c, s)
        # offload to: a batch, though empty, while a transfer is in flight (has_pending_push_work)
        formed = it.assigned or it.preempted or c.stages[s].parked or c.stages[s].rejects or it.halted \
            or c.stages[s].loads or it.promoted or (c.stages[s].tier is not None and c.stages[s].tier.jobs)
        c = step.close_iteration(m, c, s) if formed else step.drop_iteration(m, c, s)
        if c.stages[s].parked or c.stages[s].rejects or c.stages[s].overrun:  # schedule ahead: the ended iteration's results apply now
            c = drain(m, step.apply_ended(m, c, s))
        return c


def admit_head(m: Machine, c: Configuration, s: int, q: int, a) -> Configuration:
    """The head ``a`` of queue ``q`` fits: pool/admit, then step/admit, the session run at once until it waits;
    under speculate, unless the configuration that admission makes is the premise of step/pad-stop (its run
    would be padded beyond the budget or the memory: step.pad_refused), when step/pad-stop applies to ``c``
    instead. The admission is made once to read the premise, without the step trace, and again with it when
    a trace observes the run."""
    work = follow_up(c, ("pool/admit", q, a), ("step/admit", s, q, a.waiting.serial))
    if not m.steps[s].spec:
        return drain(m, work)
    observer, m.observer = m.observer, None
    try:
        after = drain(m, work)
    finally:
        m.observer = observer
    if step.pad_refused(m, after, s, a.waiting.serial):
        return step.pad_stop(m, c, s, q, a)
    return drain(m, work) if observer is not None else after


# -- settle --------------------------------------------------------------------------------------------------------


def settle(m: Machine, c: Configuration) -> Configuration:
    """Apply the follow-up work the event left; run ready sessions and retry
    pools until nothing changes; then start an iteration on each idle step
    stage with work, once per settle, provided no other event is pending at
    the same instant."""
    volatile = m.volatile
    engines = m.engines
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
            c = c._replace(dirty=frozenset())
            for p in pools_:
                c = retry_growers(m, c, p)
                if not admit_via[p]:
                    c = try_admit(m, c, p)
            if c.ready != EMPTY_READY or c.dirty:
                continue
        if not engines or (c.events and c.events[0][0] == c.time):
            return c
        s = next((s for s in engines if s not in tried and step.idle_with_work(m, c, s)), None)
        if s is None:
            return c
        tried += (s,)
        c = form_iteration(m, c, s)
