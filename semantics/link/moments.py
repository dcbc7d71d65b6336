"""The moment table: which context variables, hidden attributes and draws each place may read.

Seed 002 §2: "Each context variable exists at the one place named in its
parenthesis (now everywhere), and reading it anywhere else is a link error
rather than a 0" (FORMAT.md, Moments, is the table). §3 hidden: "a hidden
attribute may be read in a session statement, a run or a hold's cache, and is
a link error in a hold's units, reserve or reuse, a queue or eviction key, a
spill clause, a ps stage's capacity, or a step stage's budget, cost, chunk or
serve keys"; "An attribute the scheduler itself sets (cached, computed) cannot
be hidden". §3 Waiting selection and Stages: a queue key and a serve key "may
not draw"; a preemption key orders victims the same way. §3 Gauges: a gauge
reads no attribute, no draw, no cachedin, now, work or budget_left, and names
its pools and stages by number.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from ..errors import ErrorLog
from ..sourcemap import SourceMap
from .names import (
    Site,
    locate_gauge,
    locate_pool,
    locate_program,
    locate_stage,
    locate_statement,
    make_error,
    name_attribute,
    name_pool,
    name_stage,
    show_expr,
    show_pool_ref,
)
from .walk import HEADER, list_parts, list_subexpressions, visit_session


@dataclass(frozen=True, slots=True)
class Place:
    """A kind of place an expression is read at.

    ``owner`` and ``part`` spell it (``a step stage's`` ``cost``); ``context``
    is the context variables it supplies; ``scheduler`` says the scheduler
    reads it (so a hidden attribute may not appear); ``draws`` whether it may draw.
    """

    owner: str
    part: str
    context: frozenset[str]
    scheduler: bool
    draws: bool


STEP_TOTALS = frozenset({"Nres", "Ndec", "Kvb", "Kvp"})

SESSION_STATEMENT = Place("", "a session statement", frozenset({"Now"}), scheduler=False, draws=True)
HOLD_HEADER = Place("a hold's", "header (units, reserve, reuse)", frozenset({"Now"}), scheduler=True, draws=True)
ARRIVAL_GAP = Place("the workload's", "arrival gap", frozenset({"Now"}), scheduler=False, draws=True)
QUEUE_KEY = Place("a pool's", "queue keys", frozenset({"Waited", "Now"}), scheduler=True, draws=False)
EVICTION_KEY = Place("a pool's", "eviction keys", frozenset({"Size", "Age", "Last", "Queued", "Now"}), scheduler=True, draws=True)
SPILL_CLAUSE = Place("a pool's", "spill clause", frozenset({"Size", "Age", "Last", "Queued", "Now"}), scheduler=True, draws=True)
PREEMPTION_KEY = Place("a pool's", "preemption keys", frozenset({"Decoding", "Admission", "Now"}), scheduler=True, draws=False)
PS_CAPACITY = Place("a ps stage's", "capacity", frozenset({"N", "Now"}), scheduler=True, draws=True)
STEP_BUDGET = Place("a step stage's", "budget", STEP_TOTALS | {"Now"}, scheduler=True, draws=True)
STEP_CHUNK = Place("a step stage's", "chunk", STEP_TOTALS | {"Now"}, scheduler=True, draws=True)
STEP_COST = Place("a step stage's", "cost", STEP_TOTALS | {"Ntok", "Npre", "Attn", "Now"}, scheduler=True, draws=True)
SERVE_KEY = Place(
    "a step stage's", "serve keys", STEP_TOTALS | {"Decoding", "Admission", "Remaining", "Now"}, scheduler=True, draws=False
)
#: ``speculate (K) accept (e)``: the drafts a resident's iteration accepts, the workload's (the model's), not the
#: scheduler's knowledge, so a hidden attribute may appear (docs/design/speculative-decoding.md)
SPEC_ACCEPT = Place(
    "a step stage's", "acceptance", STEP_TOTALS | {"Decoding", "Admission", "Remaining", "Now"}, scheduler=False, draws=False
)

#: Every place, in the order a message lists them.
PLACES = (
    SESSION_STATEMENT,
    HOLD_HEADER,
    ARRIVAL_GAP,
    QUEUE_KEY,
    EVICTION_KEY,
    SPILL_CLAUSE,
    PREEMPTION_KEY,
    PS_CAPACITY,
    STEP_BUDGET,
    STEP_CHUNK,
    STEP_COST,
    SERVE_KEY,
    SPEC_ACCEPT,
)


def describe_where_supplied(var: str) -> str:
    """The places that supply ``var``, grouped by owner: ``a step stage's
    budget, chunk, cost or serve keys``."""
    groups: list[tuple[str, list[str]]] = []
    for place in PLACES:
        if var not in place.context:
            continue
        if groups and groups[-1][0] == place.owner and place.owner:
            groups[-1][1].append(place.part)
        else:
            groups.append((place.owner, [place.part]))
    phrases = []
    for owner, parts in groups:
        listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]
        phrases.append(f"{owner} {listed}" if owner else listed)
    return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " or " + phrases[-1]


def check_expression(
    program: ir.Program, smap: SourceMap, site: Site, place: Place, where: str, e: ir.Expr
) -> None:
    """``e`` read at ``place`` (``where`` says it in the program's terms)."""
    for sub in list_subexpressions(e):
        if isinstance(sub, ir.Ctx) and sub.var not in place.context:
            name = ir.CONTEXT_VARIABLES[sub.var]
            raise make_error(
                smap, site, f"`{name}` is read in {where}; it exists only in {describe_where_supplied(sub.var)}"
            )
        if isinstance(sub, ir.Attr) and place.scheduler and sub.slot in program.hidden:
            name = name_attribute(program, sub.slot)
            raise make_error(
                smap,
                site,
                f"`{name}` is hidden, and the scheduler reads it here, in {where}; "
                "a hidden attribute is readable only in session statements, runs and a hold's cache",
            )
        if isinstance(sub, ir.Sample) and not place.draws:
            raise make_error(
                smap,
                site,
                f"{where} draw ({show_expr(program, sub)}): a key may not draw; "
                "sample a prediction into a visible session attribute first",
            )


def describe_hold(program: ir.Program, hold: ir.Hold) -> str:
    return "a hold on " + ", ".join(f"`{show_pool_ref(program, held.ref)}`" for held in hold.pools)


def check_session(program: ir.Program, smap: SourceMap, log: ErrorLog) -> None:
    for visit in visit_session(program):
        site = locate_statement(program, smap, visit.block, visit.index)
        with log.recover():
            for part in list_parts(visit.stmt):
                if part.moment == HEADER:
                    assert isinstance(visit.stmt, ir.Hold)
                    where = f"the {part.role} of {describe_hold(program, visit.stmt)} at admission"
                    check_expression(program, smap, site, HOLD_HEADER, where, part.expr)
                else:
                    check_expression(program, smap, site, SESSION_STATEMENT, "a session statement", part.expr)


def check_pools(program: ir.Program, smap: SourceMap, log: ErrorLog) -> None:
    for i, pool in enumerate(program.pools):
        site = locate_pool(program, smap, i)
        name = name_pool(program, i)
        with log.recover():
            for place, keys in ((QUEUE_KEY, pool.queue), (EVICTION_KEY, pool.evict), (PREEMPTION_KEY, pool.preempt)):
                for key in keys or ():
                    check_expression(program, smap, site, place, f"pool `{name}`'s {place.part}", key)
            if pool.spill is not None:
                for e in (pool.spill.work, pool.spill.when):
                    check_expression(program, smap, site, SPILL_CLAUSE, f"pool `{name}`'s spill clause", e)


def check_stages(program: ir.Program, smap: SourceMap, log: ErrorLog) -> None:
    for i, stage in enumerate(program.stages):
        site = locate_stage(program, smap, i)
        name = name_stage(program, i)
        kind = stage.kind
        with log.recover():
            if isinstance(kind, ir.Ps):
                check_expression(program, smap, site, PS_CAPACITY, f"stage `{name}`'s capacity", kind.capacity)
            if isinstance(kind, ir.Step):
                for place, e in ((STEP_BUDGET, kind.budget), (STEP_CHUNK, kind.chunk), (STEP_COST, kind.cost)):
                    check_expression(program, smap, site, place, f"stage `{name}`'s {place.part}", e)
                for key in kind.serve or ():
                    check_expression(program, smap, site, SERVE_KEY, f"stage `{name}`'s serve keys", key)
                if kind.spec_accept is not None:
                    check_expression(program, smap, site, SPEC_ACCEPT, f"stage `{name}`'s acceptance", kind.spec_accept)


#: What a gauge may not call, and why (seed 002 §3, Gauges).
GAUGE_FORBIDDEN_CALLS = {
    "CachedIn": "cachedin is a session's own prefix, and a gauge has no session",
    "Work": "work(…) moves between events, and a gauge is held constant between them",
    "BudgetLeft": "budget_left(…) plans an iteration, which may draw",
}


def check_gauge(program: ir.Program, smap: SourceMap, index: int) -> None:
    gauge = program.gauges[index]
    site = locate_gauge(program, smap, index)
    where = f"gauge `{gauge.name}`"
    for sub in list_subexpressions(gauge.expr):
        if isinstance(sub, ir.Ctx):
            name = ir.CONTEXT_VARIABLES[sub.var]
            raise make_error(
                smap, site, f"`{name}` is read in {where}; a gauge reads no context variable (it is a function of the state)"
            )
        if isinstance(sub, ir.Attr):
            raise make_error(
                smap, site, f"{where} reads the attribute `{name_attribute(program, sub.slot)}`; a gauge has no session"
            )
        if isinstance(sub, ir.Sample):
            raise make_error(smap, site, f"{where} draws ({show_expr(program, sub)}); a gauge may not draw")
        if isinstance(sub, ir.Call):
            if sub.fun in GAUGE_FORBIDDEN_CALLS:
                raise make_error(
                    smap, site, f"{where} reads {show_expr(program, sub)}: {GAUGE_FORBIDDEN_CALLS[sub.fun]}"
                )
            for arg in sub.args:
                if isinstance(arg, (ir.PoolArg, ir.StageArg)) and arg.ref.index is not None:
                    if not isinstance(arg.ref.index, ir.Num):
                        raise make_error(
                            smap,
                            site,
                            f"{where} reads {show_expr(program, sub)}: a gauge names a pool or stage by a number "
                            "(kv[0]), so that reading it cannot fail the run",
                        )


def check_hidden_declaration(program: ir.Program, smap: SourceMap) -> None:
    for slot in program.hidden:
        if slot in (program.slot_cached, program.slot_computed):
            raise make_error(
                smap,
                locate_program("hidden"),
                f"`{name_attribute(program, slot)}` cannot be hidden: the scheduler itself sets it",
            )


def check_moments(program: ir.Program, smap: SourceMap, log: ErrorLog) -> None:
    """Context variables, hidden attributes and draws where they are read (checks 1-3)."""
    with log.recover():
        check_hidden_declaration(program, smap)
    check_session(program, smap, log)
    if isinstance(program.arrival, ir.Renewal):
        site = locate_program("arrival.Renewal", smap.arrival)
        with log.recover():
            check_expression(program, smap, site, ARRIVAL_GAP, "the arrival gap", program.arrival.gap)
    check_pools(program, smap, log)
    check_stages(program, smap, log)
    for index in range(len(program.gauges)):
        with log.recover():
            check_gauge(program, smap, index)
