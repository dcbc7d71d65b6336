"""A hold without a cache clause takes no part in the prefix cache.

Seed 002 §3, Pools: "Without it the hold is memory alone: it leaves the
session's cached blocks where they are, evictable as before, and cached is 0
in its body (the linker rejects a body that reads it there, and a reuse
there; cache (0) is the hold that consumes the prefix and keeps nothing)."

The body of a hold is its block and the blocks nested in it, down to a nested
hold, whose own clause decides for its body; a nested hold's header is read
in the outer body (before its own admission), so it counts there.
"""

from __future__ import annotations

from .. import ir
from ..errors import ErrorLog
from ..sourcemap import SourceMap
from .names import locate_pool, locate_stage, locate_statement, make_error
from .moments import describe_hold
from .walk import HEADER, Visit, list_parts, list_subexpressions, visit_session


def reads_slot(e: ir.Expr, slot: int) -> bool:
    return any(isinstance(sub, ir.Attr) and sub.slot == slot for sub in list_subexpressions(e))


def list_body_reads(stmt: ir.Stmt) -> list[ir.Expr]:
    """The expressions of ``stmt`` that are read in the body it stands in:
    all of them, except a hold's own cache clause (read at its release, with
    its own admission's ``cached``) and its lease (read at its scope's end)."""
    if isinstance(stmt, ir.Hold):
        return [part.expr for part in list_parts(stmt) if part.moment == HEADER or part.role == "a pool or stage index"]
    return [part.expr for part in list_parts(stmt)]


def check_caching(program: ir.Program, smap: SourceMap, log: ErrorLog) -> None:
    """`cached` and `reuse` only where a cache clause gives them a meaning (check 4); a pool that shares
    prefixes, and a hold's content, where they have one (docs/design/shared-prefixes.md)."""
    for p, pool in enumerate(program.pools):
        with log.recover():
            check_sharing_pool(program, smap, p, pool)
    for s, stage in enumerate(program.stages):
        with log.recover():
            check_offload_stage(program, smap, s, stage)
    for visit in visit_session(program):
        with log.recover():
            check_statement(program, smap, visit)
            check_content(program, smap, visit)


def check_sharing_pool(program: ir.Program, smap: SourceMap, p: int, pool: ir.Pool) -> None:
    """`share prefixes` makes the cache a table of blocks evicted from the head of the free order: the pool
    needs a block size and `evict lru` (docs/design/shared-prefixes.md, section 3)."""
    if not pool.share_prefixes:
        return
    missing = [what for what, absent in (("`block`", pool.block is None), ("`evict lru`", pool.evict is not None))
               if absent]
    if pool.spill is not None:
        missing.append("no `spill` (a shared block is no session's piece to write to a tier)")
    if missing:
        raise make_error(smap, locate_pool(program, smap, p),
                         f"pool `{pool.name}` shares prefixes and needs {' and '.join(missing)}: its cache is a "
                         f"table of blocks, freed blocks reused least recently freed first")
    for stage in program.stages:
        kind = stage.kind
        if not isinstance(kind, ir.Step) or kind.memory != p:
            continue
        beyond = [what for what, present in (("`speculate`", kind.spec_tokens > 0),
                                             ("`serve exclusive prefill`", kind.serve is None)) if present]
        if beyond:
            raise make_error(smap, locate_pool(program, smap, p),
                             f"pool `{pool.name}` shares prefixes and is the memory of step stage `{stage.name}`, "
                             f"which has {' and '.join(beyond)}: the sharing is modelled without drafts, and "
                             f"with an engine that serves the decodes as they come (docs/design/shared-prefixes.md)")


def check_offload_stage(program: ir.Program, smap: SourceMap, s: int, stage: ir.Stage) -> None:
    """`offload to (N) ...` on a step stage whose memory shares prefixes: the CPU tier's keys are the memory's
    content keys (docs/design/cpu-offloading.md, section 6), and it is the engine's one connector (not with
    `load remote`)."""
    kind = stage.kind
    if not isinstance(kind, ir.Step) or kind.offload_chunks == 0:
        return
    if kind.memory is None or not program.pools[kind.memory].share_prefixes:
        raise make_error(smap, locate_stage(program, smap, s),
                         f"step stage `{stage.name}` offloads to a CPU tier and its memory "
                         + (f"`{program.pools[kind.memory].name}` does not share prefixes"
                            if kind.memory is not None else "is not given")
                         + ": the tier's chunks are keyed by the memory's blocks' content (add `share prefixes;` "
                           "to the memory pool; docs/design/cpu-offloading.md)")
    if kind.load_remote is not None:
        raise make_error(smap, locate_stage(program, smap, s),
                         f"step stage `{stage.name}` has both `offload to` and `load remote`: the engine has one "
                         f"KV connector (vLLM 0.33.0's offloading one, or a remote prefill's)")


def check_content(program: ir.Program, smap: SourceMap, visit: Visit) -> None:
    """A hold's `content` clause only in a hold whose pools include one that shares prefixes: anywhere else
    nothing would read it, and the program would mean less than it says."""
    stmt = visit.stmt
    if isinstance(stmt, ir.Drop) and any(program.pools[q].share_prefixes for q in _members(stmt.ref)):
        raise make_error(smap, locate_statement(program, smap, visit.block, visit.index),
                         f"`drop` of a pool that shares prefixes: its cache is no session's own prefix to discard")
    if isinstance(stmt, ir.Hold) and stmt.lease is not None \
            and any(program.pools[q].share_prefixes for q in _members(stmt.lease.ref)):
        raise make_error(smap, locate_statement(program, smap, visit.block, visit.index),
                         f"a lease on a pool that shares prefixes: a leased allocation's blocks are not modelled "
                         f"there (docs/design/shared-prefixes.md)")
    if not isinstance(stmt, ir.Hold) or not stmt.content:
        return
    for segment in stmt.content:
        for e in (segment.key, segment.length):
            for sub in list_subexpressions(e):
                if isinstance(sub, ir.Sample) or isinstance(sub, ir.Call) and sub.fun == "CachedIn":
                    what = "draws" if isinstance(sub, ir.Sample) else "reads `cachedin`"
                    raise make_error(smap, locate_statement(program, smap, visit.block, visit.index),
                                     f"a `content` segment of {describe_hold(program, stmt)} {what}: the content "
                                     f"is what the hit is looked up by, read as often as the hit is (draw into "
                                     f"a set above the hold instead)")
    pools = [q for held in stmt.pools for q in _members(held.ref)]
    if not any(program.pools[q].share_prefixes for q in pools):
        raise make_error(smap, locate_statement(program, smap, visit.block, visit.index),
                         f"`content` on {describe_hold(program, stmt)}, none of whose pools shares prefixes: the "
                         f"content would be dropped (add `share prefixes;` to the pool whose cache it keys)")


def check_statement(program: ir.Program, smap: SourceMap, visit: Visit) -> None:
    """One statement of the session: its `reuse`, and its reads of `cached`."""
    stmt = visit.stmt
    site = locate_statement(program, smap, visit.block, visit.index)
    if isinstance(stmt, ir.Hold) and stmt.reuse is not None and stmt.cache is None:
        raise make_error(
            smap,
            site,
            f"`reuse` on {describe_hold(program, stmt)} without a `cache` clause: such a hold takes no part "
            "in the prefix cache and consumes nothing (add `cache (…)`; `cache (0)` consumes the prefix and keeps nothing)",
        )
    if not visit.holds or visit.holds[-1].cache is not None:
        return
    if any(reads_slot(e, program.slot_cached) for e in list_body_reads(stmt)):
        raise make_error(
            smap,
            site,
            f"`cached` is read in the body of {describe_hold(program, visit.holds[-1])}, which has no `cache` "
            "clause, so `cached` is always 0 there (add `cache (…)` to the hold, or read `cached` after one that has it)",
        )


def _members(ref: ir.Ref) -> range:
    return range(ref.base, ref.base + ref.count)
