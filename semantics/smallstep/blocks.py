"""The table of blocks of a pool that shares prefixes (docs/design/shared-prefixes.md): its values and the
reading of it that needs no rule (a block's identity, a hold's hit), which the rules of sharing.py change and
the pool observables read (``cachedin``)."""

from __future__ import annotations

import math
from typing import NamedTuple

import immutables

from .configuration import records

#: Units compared with this tolerance (the machine's EPSILON).
EPSILON = 1e-9

#: The key of a session's own units: ``(OWN, serial)``, never equal to a content key (a number).
OWN = "own"


class SharedHold(NamedTuple):
    """A hold's part of a sharing pool's table: its content (segments (key, length), lengths positive), its
    session (whose own units follow the content), its blocks in order, how many of them (from the first)
    are registered, and whether it takes part in the cache (a cache clause)."""

    content: tuple[tuple[object, float], ...]
    serial: int
    blocks: tuple[int, ...]
    registered: int
    caching: bool


class SharedTable(NamedTuple):
    """A sharing pool's cache as a table of blocks: ``counts`` every block a hold references or the free order
    keeps (block id -> reference count); ``names`` the registered ones' identities; ``index`` identity -> the
    registered copies, in registration order; ``free`` the free order (registered blocks at count 0, the head
    the next evicted); ``holds`` (serial, hold id) -> SharedHold; ``next_id`` the next block's id."""

    counts: immutables.Map
    names: immutables.Map
    index: immutables.Map
    free: tuple[int, ...]
    holds: immutables.Map
    next_id: int


records(SharedHold, SharedTable)


def empty_table() -> SharedTable:
    return SharedTable(immutables.Map(), immutables.Map(), immutables.Map(), (), immutables.Map(), 0)


# -- identities ------------------------------------------------------------------------------------------------


def evaluate_content(m, stmt: tuple[int, int], env) -> tuple[tuple[object, float], ...]:
    """The hold's content clause read in ``env`` (its admission's): the segments of positive length, each
    (key, length); the link check has made sure the expressions neither draw nor read a pool's hit."""
    out = []
    for key, length in m.holds[stmt].content:
        n = length(env)
        if n > EPSILON:
            out.append((key(env), n))
    return tuple(out)


def identity(content: tuple, serial: int, b: int, bs: float) -> tuple:
    """Block ``b``'s identity: the content cut at (b + 1) x bs, the units past it the session's own."""
    end = (b + 1) * bs
    out = []
    acc = 0.0
    for key, length in content:
        if acc + length >= end - EPSILON:
            out.append((key, end - acc))
            return tuple(out)
        out.append((key, length))
        acc += length
    out.append(((OWN, serial), end - acc))
    return tuple(out)


def hit_run(table: SharedTable, content: tuple, serial: int, bs: float, limit: float) -> int:
    """The longest run of blocks 0, 1, ... of a hold with ``content`` that ``table`` has registered, at most
    ``limit`` blocks (vLLM's find_longest_cache_hit)."""
    b = 0
    index = table.index
    while b < limit and identity(content, serial, b, bs) in index:
        b += 1
    return b


def hold_hit(m, c, q: int, stmt: tuple[int, int], env) -> float:
    """``cachedin(q)`` of the hold ``stmt`` in its admission's ``env``: bs x the run of its blocks the table
    has (the program caps it: reuse)."""
    table = c.pools[q].table
    bs = m.block_sizes[q]
    return bs * hit_run(table, evaluate_content(m, stmt, env), env.serial, bs, math.inf)
