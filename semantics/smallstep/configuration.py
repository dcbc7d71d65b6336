"""The configuration: one immutable value per point of a run (seed 002 §3,
Configuration).

"Time; the live sessions with their attributes, continuation (a stack of
block frames), status (ready, queued at a pool, at a stage, waiting to grow,
ended) and active holds; for each pool its capacity, the allocations of its
holders (in admission order), its cache (entries of units, release time and
release order, per session or dead), its admission queue and its growers;
for each stage its jobs."

Every record is a NamedTuple (cheap to build, immutable); the live sessions
are an ``immutables.Map`` from serial to session; other collections are
tuples kept in a declared order. Pending events are a tuple sorted by
(time, sequence number): a value, whose insertion copies the tuple (cheap in
C for the tens to hundreds of events a program has pending; the trade-off is
documented in docs/semantics.md). Growing records (observation samples, gauge
change points) are persistent cons lists ``(item, rest)``.
"""

from __future__ import annotations

import bisect
import operator
from typing import NamedTuple

import immutables

# Session statuses (seed 002 §3: ready, queued at a pool, at a stage, waiting to grow, ended).
READY = "ready"
QUEUED = "queued"
AT_STAGE = "stage"
GROWING = "growing"
ENDED = "ended"
#: schedule ahead: parked at the exit of its hold on an engine's memory until the engine's next iteration is formed (step/park)
FINISHING = "finishing"
#: load remote: a session parked at a step stage while its remote prefill's KV is transferred (step/load)
LOADING = "loading"

# A run's mode on a step stage (stages/step.py): prefilling, or decoding one token an iteration.
PREFILL = "Prefill"
DECODE = "Decode"

# Frame kinds: a plain block (the session's, a branch's), a loop's body, a
# while's body (its guard re-read at the end), a hold's body.
PLAIN = "plain"
LOOP = "loop"
WHILE = "while"
HOLD = "hold"


class Frame(NamedTuple):
    """One block of a continuation: ``origin`` the (block, index) of the
    statement that opened it; ``resume`` the statement the enclosing block
    continues at when it ends (a session's ``pc`` is the next statement of its
    innermost frame, so running a statement changes the session, not a frame)."""

    block: int
    kind: str
    origin: tuple[int, int] | None
    resume: int


class Allocation(NamedTuple):
    """A hold's allocation on one pool: ``position`` is what has been
    computed (it starts at the consumed cached prefix); ``advanced`` says a
    load moved it, so that it, not the allocation, is what is computed."""

    pool: int
    units: float
    position: float
    advanced: bool


class ActiveHold(NamedTuple):
    hold_id: int  # the sequence number of its admission
    stmt: tuple[int, int]  # the Hold statement (block, index)
    allocations: tuple[Allocation, ...]


class LeaseState(NamedTuple):
    """An allocation that outlived its hold's scope (``lease P (t)``)."""

    lease_id: int
    pool: int
    units: float
    computed: float
    stmt: tuple[int, int]  # the Hold statement, whose cache clause applies at the end
    due: tuple[float, int] | None  # the expiry event's key, None for inf


class PendingHold(NamedTuple):
    """A hold waiting in its first pool's queue."""

    stmt: tuple[int, int]
    pools: tuple[int, ...]  # the pool indices, resolved when the session joined
    joined: float  # the time it entered the queue (``waited`` counts from here)


class Session(NamedTuple):
    serial: int
    attrs: tuple[float, ...]
    frames: tuple[Frame, ...]  # innermost last
    pc: int  # the next statement of the innermost frame
    status: str
    holds: tuple[ActiveHold, ...]  # innermost last
    leases: tuple[LeaseState, ...]
    pending: PendingHold | None
    job: tuple[int, int] | None  # (stage, job id) while at a stage
    growth: tuple[int, float] | None  # (pool, units asked) while waiting to grow
    admission: int  # sequence number of its latest admission (-1: none yet)
    preempted_at: tuple[tuple[int, float], ...]  # per pool: position at its last preemption
    stuck: int  # the pool it was counted stuck in (seed 002 §3 Statistics; pools.preempt), -1: none
    stream: int  # the key of the session's stream (rng.member_stream of its serial)
    draws: int  # position of the session's stream
    script: int  # explicit session index or trace session index, -1 for none
    script_turn: int  # the next turn of the script to load
    readies: tuple[float, int]  # (instant, times it became ready at that instant)


def innermost_hold(s: Session, p: int) -> tuple[int, int]:
    """(hold index, allocation index) of the innermost hold of ``s`` on pool ``p``, or (-1, -1)."""
    for h in range(len(s.holds) - 1, -1, -1):
        for k, a in enumerate(s.holds[h].allocations):
            if a.pool == p:
                return h, k
    return -1, -1


class CacheEntry(NamedTuple):
    """A cached prefix: ``owner`` the session it belongs to (None: dead),
    ``source`` the session that released it (whose attributes eviction keys
    read)."""

    owner: int | None
    source: int
    units: float
    released: float  # release time
    order: int  # release order


class Holding(NamedTuple):
    """An allocation as its pool sees it, in admission order."""

    admission: int
    serial: int
    hold_id: int  # the hold's id, or the lease's id when ``leased``
    units: float
    leased: bool
    #: in a pool with KV cache groups, the blocks of its window group that have left the window (pool/slide):
    #: ``units`` is every group's table less them (docs/design/sliding-window.md); 0 in any other pool
    skipped: int = 0


class Waiting(NamedTuple):
    serial: int
    join: int  # the sequence number of joining the queue
    preempted: bool  # re-entered at the head after a preemption


class PoolState(NamedTuple):
    cap: float  # capacity in units
    block: float | None  # the allocation and caching granularity
    allocated: float
    cached: float
    holders: tuple[Holding, ...]  # admission order
    entries: tuple[CacheEntry, ...]  # release order
    queue: tuple[Waiting, ...]  # preempted holds first (latest first), then join order
    growers: tuple[int, ...]  # serials in the order they stalled
    #: ``share prefixes``: the cache as a table of blocks (sharing.SharedTable; docs/design/shared-prefixes.md);
    #: None for every other pool, whose cache is its entries
    table: object = None
    #: ``groups (full, window (W))``: the groups each hold takes its coverage in (2 hybrid, 1 a window alone);
    #: 0 for a pool without the option (docs/design/sliding-window.md), whose holders take their allocation
    groups: int = 0


class PoolStats(NamedTuple):
    wait_sum: float
    wait_count: int
    admissions: int
    evicted_entries: int
    evicted_units: float
    preemptions: int
    spills: int
    rejected: int
    stuck: int
    explanations: tuple[str, ...]


class StageStats(NamedTuple):
    completed: int
    wait_sum: float
    service_sum: float


class Statistics(NamedTuple):
    pools: tuple[PoolStats, ...]
    stages: tuple[StageStats, ...]
    engines: tuple  # per stage: a step stage's iteration counts (stages/step.StepStats), None for another kind
    ended: int
    turns: int
    gauges: tuple  # per gauge: a cons list of (time, value) change points, newest first


class Workload(NamedTuple):
    next_serial: int  # also the number of sessions that arrived
    generated: int  # open-workload arrivals so far
    arrivals_draws: int  # position of the arrivals stream
    workload_draws: int  # position of the workload stream (trace choice)
    machine_draws: int  # position of the machine's stream (eviction, spill, capacities)
    replaced: tuple[float, int]  # (instant, closed-workload replacements at that instant)


class Configuration(NamedTuple):
    time: float
    sessions: immutables.Map  # serial -> Session (live sessions only)
    ready: tuple  # serials in the order they became ready: a queue (ready_push, ready_pop; EMPTY_READY)
    pools: tuple[PoolState, ...]
    stages: tuple  # per stage, its kind's state record (stages/: fifo.FifoState, ps.PsState; None for a stage of flows)
    flows: tuple  # the flows of every stage shared by flows (stages/flows.FlowState)
    #: pending events (time, sequence number, kind, a, b), sorted by (time, sequence number); kinds:
    #: "arrive", "job" (a, b = stage, job), "ps" (a = stage), "flow", "lease" (a, b = serial, lease)
    events: tuple[tuple[float, int, str, int, int], ...]
    sequence: int  # the next sequence number (events, joins, releases, admissions, jobs)
    workload: Workload
    statistics: Statistics
    #: the areas under every level since the warm-up, in one tuple: per pool
    #: used, cached, queue, holders; per stage present, busy; live sessions
    #: (time/advance changes them with the time, so they sit beside it)
    areas: tuple[float, ...]
    #: every observation's samples (observe index, time, serial, turn, value),
    #: a cons list, newest first (observing adds one: it sits beside the time too)
    samples: tuple | None
    #: per stage, the online estimates' accumulators (estimates.Estimator),
    #: fed by its completions; kept only when the program reads them (price, est_*)
    estimates: tuple
    taken: int  # events taken so far
    dirty: frozenset  # pools whose state changed since they were last tried
    ended_attrs: immutables.Map  # serial -> attributes at its last release, for ended sessions
    #: the follow-up work: what the rules applied so far have left to apply (the hold to release, the job to
    #: take off its stage, the session to end, the arrival to make), each item (its rule's name, its
    #: arguments), first first. A rule that leaves work puts its items, in the order it lists them, in front
    #: of those already waiting; settle (and a session's run, and the forming of an iteration) takes the
    #: first item and applies its rule until the items it found are done (settle.drain). So an item's place is
    #: its key in the tree of follow-ups (the ordinals of the items that led to it, from the event): the
    #: work a rule leaves is done before the work its caller left, in the order it was left
    #: (docs/semantics.md, "Follow-up work"). Empty between events.
    work: tuple = ()


def setter(record_type, *names: str):
    """The function ``(record, value, ...) -> record`` with the fields
    ``names`` set, in that order: ``setter(Configuration, "time", "events")(c, t, e)``
    is ``c._replace(time=t, events=e)``, written with positional arguments.
    (One, two and three fields, the updates the rules make, have a function
    each, without a loop; every one copies the record's fields once.)"""
    fields = record_type._fields
    unknown = [name for name in names if name not in fields]
    assert not unknown, f"{record_type.__name__} has no field {unknown}"
    positions = tuple(fields.index(name) for name in names)
    make = record_type._make

    if len(positions) == 1:
        (i,) = positions

        def set_fields(record, value):
            items = list(record)
            items[i] = value
            return make(items)
    elif len(positions) == 2:
        i, j = positions

        def set_fields(record, first, second):
            items = list(record)
            items[i] = first
            items[j] = second
            return make(items)
    elif len(positions) == 3:
        i, j, k = positions

        def set_fields(record, first, second, third):
            items = list(record)
            items[i] = first
            items[j] = second
            items[k] = third
            return make(items)
    else:
        def set_fields(record, *values):
            items = list(record)
            for position, value in zip(positions, values):
                items[position] = value
            return make(items)

    set_fields.__name__ = set_fields.__qualname__ = f"set_{record_type.__name__}_{'_'.join(names)}"
    return set_fields


def build(record_type, fields: tuple):
    """``build(Record, (field, ...))`` is ``Record(field, ...)``."""
    return record_type._make(fields)


def records(*record_types) -> None:
    """Give each NamedTuple record type the update ``record._replace(field=value, ...)``
    that copies its fields once and sets those named (the standard one looks
    every field of the record up among the names given: twice the time, in a
    semantics whose every step updates a few records). The same values:
    a record with the named fields set, the others its own; an unknown field
    name is a KeyError where it was a ValueError."""
    for record_type in record_types:
        index = {name: i for i, name in enumerate(record_type._fields)}

        def _replace(self, /, _index=index, _make=record_type._make, **changes):
            items = [*self]
            for name in changes:
                items[_index[name]] = changes[name]
            return _make(items)

        _replace.__qualname__ = f"{record_type.__name__}._replace"
        record_type._replace = _replace


records(Frame, Allocation, ActiveHold, LeaseState, PendingHold, Session, CacheEntry, Holding, Waiting, PoolState,
        PoolStats, StageStats, Statistics, Workload, Configuration)


EMPTY_POOL_STATS = PoolStats(0.0, 0, 0, 0, 0.0, 0, 0, 0, 0, ())
EMPTY_STAGE_STATS = StageStats(0, 0.0, 0.0)


def replace_at(items: tuple, index: int, item) -> tuple:
    """``items`` with position ``index`` replaced by ``item``."""
    return items[:index] + (item,) + items[index + 1 :]


def insert_event(events: tuple, key: tuple[float, int], kind: str, a: int = 0, b: int = 0) -> tuple:
    """``events`` with the event (``kind``, ``a``, ``b``) at ``key`` = (time, sequence number)."""
    i = bisect.bisect_right(events, key)
    return events[:i] + ((key[0], key[1], kind, a, b),) + events[i:]


def remove_event(events: tuple, key: tuple[float, int]) -> tuple:
    """``events`` without the event at ``key`` (which must be pending)."""
    i = bisect.bisect_left(events, key)
    assert i < len(events) and events[i][0] == key[0] and events[i][1] == key[1], "no such pending event"
    return events[:i] + events[i + 1 :]


def own_entry_index(entries, serial: int) -> int:
    """The index of ``serial``'s live entry among a pool's ``entries``, -1 for none.
    (The owners are listed by a C-level map and searched by list.index: a
    pool can hold an entry per session that ever released into it.)"""
    try:
        return list(map(_owner, entries)).index(serial)
    except ValueError:
        return -1


_owner = operator.itemgetter(CacheEntry._fields.index("owner"))


#: The ready queue: (front, back), two cons lists, the front oldest first
#: and the back newest first (a functional queue: joining and leaving it are
#: O(1) amortised, where a tuple made a thousand sessions ready at one
#: instant cost a million copies).
EMPTY_READY = (None, None)


def ready_push(ready: tuple, serial: int) -> tuple:
    """The ready queue with ``serial`` at its end."""
    return ready[0], (serial, ready[1])


def ready_pop(ready: tuple) -> tuple[int, tuple]:
    """The first serial of a non-empty ready queue, and the queue without it."""
    front, back = ready
    if front is None:
        while back is not None:
            serial, back = back
            front = (serial, front)
    serial, front = front
    return serial, (front, back)


def ready_serials(ready: tuple) -> list[int]:
    """The serials of the ready queue, first first."""
    front, back = ready
    out = []
    while front is not None:
        serial, front = front
        out.append(serial)
    return out + iterate_cons(back)


def ready_from(serials) -> tuple:
    """The ready queue of ``serials``, first first."""
    front = None
    for serial in reversed(list(serials)):
        front = (serial, front)
    return front, None


def iterate_cons(items) -> list:
    """The items of a cons list, oldest first."""
    out = []
    while items is not None:
        out.append(items[0])
        items = items[1]
    out.reverse()
    return out
