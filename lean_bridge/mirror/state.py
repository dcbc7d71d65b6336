"""The machine's state (lean/SerqRef/State.lean), and the list helpers the
rules share.

Lean structures are frozen dataclasses with the same fields; ``{ m with
time := t }`` is ``replace(m, time=t)``; a ``List`` is a tuple, in the same
order. ``get_d`` and ``list_set`` are Lean's ``List.getD`` and ``List.set``
(an index past the end reads the default and writes nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..syntax import Mode, Pool, Program


def replace(obj: Any, /, **changes: Any) -> Any:
    """(Python only) ``{ obj with field := value, … }``: ``dataclasses.replace`` for the mirror's frozen
    dataclasses, which have no ``__post_init__`` and take every field in ``__init__``: the same value,
    made by copying the fields rather than through ``__init__`` (which sets each one with
    ``object.__setattr__`` and took two fifths of the mirror's time on a scenario)."""
    new = object.__new__(type(obj))
    fields = new.__dict__
    fields.update(obj.__dict__)
    if not changes.keys() <= fields.keys():
        raise TypeError(f"{type(obj).__name__} has no field {sorted(changes.keys() - fields.keys())[0]}")
    fields.update(changes)
    return new

# -- Lean's List helpers -----------------------------------------------------------------


def get_d(xs: tuple, i: int, default: Any) -> Any:
    """``List.getD xs i default``."""
    return xs[i] if 0 <= i < len(xs) else default


def list_set(xs: tuple, i: int, v: Any) -> tuple:
    """``List.set xs i v``: unchanged when ``i`` is past the end."""
    return xs[:i] + (v,) + xs[i + 1:] if 0 <= i < len(xs) else xs


# -- sessions ------------------------------------------------------------------------------


class FrameKind(Enum):
    TOP = "top"      # the session's own block: its end ends the session
    BODY = "body"    # a hold's body: its end exits the hold
    PLAIN = "plain"  # a branch's block: its end returns to the parent


@dataclass(frozen=True)
class Frame:
    """A block being executed; ``pc`` is its next statement (the parent's
    ``pc`` already points past the statement that opened the child)."""

    block: int
    pc: int
    kind: FrameKind


@dataclass(frozen=True)
class ActiveHold:
    """A hold the session is in: ``id`` is its admission number, ``stmt`` the
    hold statement (block, index), ``pools`` the pools it holds."""

    id: int
    stmt: tuple[int, int]
    pools: tuple[int, ...]


class Status(Enum):
    READY = "ready"
    QUEUED = "queued"
    RESIDENT = "resident"
    DELAYED = "delayed"
    ENDED = "ended"
    PARKED = "parked"      # schedule ahead: at the exit of its hold on the memory until the next iteration is formed


@dataclass(frozen=True)
class Session:
    serial: int
    attrs: tuple
    frames: tuple[Frame, ...]         # innermost first
    holds: tuple[ActiveHold, ...]     # innermost first
    pending: tuple[int, int] | None   # the hold statement it waits to be admitted to
    admission: int                    # its latest admission number
    status: Status
    script_turn: int                  # the explicit turns taken


DEFAULT_SESSION = Session(0, (), (), (), None, 0, Status.ENDED, 0)

# -- pools ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Holder:
    """An allocation: ``blocks`` held by the session's hold ``hold``;
    ``position`` the tokens it has computed, ``advanced`` whether a growing
    run moved it (else its computed prefix is the whole allocation)."""

    serial: int
    hold: int
    blocks: Any
    position: Any
    advanced: bool


@dataclass(frozen=True)
class Entry:
    """A cached prefix: its owner (None: dead) and its blocks."""

    owner: int | None
    blocks: Any


@dataclass(frozen=True)
class PoolState:
    holders: tuple[Holder, ...]   # admission order
    entries: tuple[Entry, ...]    # release order: the least recently released first
    queue: tuple[int, ...]        # serials, the head first
    preemptions: int


DEFAULT_POOL_STATE = PoolState((), (), (), 0)
DEFAULT_POOL = Pool(0, 1, False, False)

# -- the engine ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resident:
    """A run on the engine: ``admission`` is its session's latest admission
    number (the residents' order), ``job`` the sequence number it entered with."""

    serial: int
    admission: int
    job: int
    mode: Mode
    remaining: Any
    growing: int | None


@dataclass(frozen=True)
class Assignment:
    serial: int
    tokens: Any


@dataclass(frozen=True)
class Iteration:
    """One iteration while it is scheduled: the budget ``budget`` and chunk
    ``chunk`` read at its start with the ``residents`` and ``decoders`` then,
    the budget ``left``, the residents ``served`` and their tokens
    (``assigned``, in the order served); whether it ``preempted``, whether a
    grower preempted itself (``stopped``: nobody else is served) and whether a
    head did not fit (``blocked``: nobody else is admitted); ``pending`` the
    resident being scheduled whose hold must grow before its tokens count:
    (serial, pool, tokens)."""

    budget: Any
    chunk: Any
    residents: int
    decoders: int
    left: Any
    served: tuple[int, ...]
    assigned: tuple[Assignment, ...]
    preempted: bool
    stopped: bool
    blocked: bool
    pending: tuple[int, int, Any] | None


# -- the machine -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """An observation: its index, the session, the time, the value."""

    index: int
    serial: int
    time: Any
    value: Any


@dataclass(frozen=True)
class Machine:
    time: Any
    seq: int                                 # the next sequence number (admissions, jobs)
    sessions: tuple[Session, ...]            # by serial
    pools: tuple[PoolState, ...]
    residents: tuple[Resident, ...]          # by (admission, job)
    delays: tuple[tuple[Any, int], ...]      # (due, serial), in the order they started
    ready: tuple[int, ...]                   # made ready by the last iteration's end
    samples: tuple[Sample, ...]              # in the order taken
    halted: bool
    #: schedule ahead (docs/design/async-scheduling.md): the sessions whose run completed at the end of the
    #: last iteration, until the next one starts (step/iteration-end); those of them parked at the exit of
    #: their hold on the memory, in the order they parked (step/park), until it is formed (step/apply); the
    #: sessions the last iteration gave a decode token (their last token is not cached yet: pool/preempt)
    finishing: tuple[int, ...] = ()
    parked: tuple[int, ...] = ()
    decoded: tuple[int, ...] = ()


def session_of(m: Machine, serial: int) -> Session:
    """``Machine.session``."""
    return get_d(m.sessions, serial, DEFAULT_SESSION)


def put_session(m: Machine, s: Session) -> Machine:
    """``Machine.putSession``."""
    return replace(m, sessions=list_set(m.sessions, s.serial, s))


def pool_of(m: Machine, q: int) -> PoolState:
    """``Machine.pool``."""
    return get_d(m.pools, q, DEFAULT_POOL_STATE)


def put_pool(m: Machine, q: int, ps: PoolState) -> Machine:
    """``Machine.putPool``."""
    return replace(m, pools=list_set(m.pools, q, ps))


def pool_spec(p: Program, q: int) -> Pool:
    """``Program.pool``."""
    return get_d(p.pools, q, DEFAULT_POOL)


def stmt_at(p: Program, block: int, index: int):
    """``Program.stmtAt``: the statement, or None past the block's end."""
    return get_d(get_d(p.blocks, block, ()), index, None)


def held_blocks(holders: tuple[Holder, ...]) -> Any:
    """``heldBlocks``: the blocks allocated."""
    total = 0
    for h in reversed(holders):  # h₀ + (h₁ + (… + 0)), Lean's structural recursion
        total = h.blocks + total
    return total


def cached_blocks(entries: tuple[Entry, ...]) -> Any:
    """``cachedBlocks``: the blocks cached."""
    total = 0
    for e in reversed(entries):
        total = e.blocks + total
    return total


def blocks_for(units: Any, block: int) -> Any:
    """``blocksFor``: the blocks ``units`` take, rounded up: (units + block - 1) / block."""
    from ..arith import monus, ndiv

    return ndiv(monus(units + block, 1), block)
