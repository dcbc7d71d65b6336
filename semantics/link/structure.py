"""The IR's shape: every index in range, the blocks a tree, runs in their modes.

An IR file can come from another tool and be malformed in ways its JSON
Schema cannot see: a pool index past the last pool, a block that contains
itself. Each is a ProgramError here, so that no later check (and no run)
meets an IndexError. Then the rules of seed 002 about stages:

- a run on a step stage names its mode (prefill or decode), a run elsewhere
  is plain, and ``growing`` needs a step stage (§2, Which stage: "the mode is
  required on a step stage and forbidden elsewhere");
- a run over several stages holds ps stages of constant capacity above 0,
  names each stage array once, and the program declares its share (§3, Stages);
- ``admit via`` names a step stage, and a step stage's memory is a pool (§3, Pools).

And one warning (``list_inert_self_preemption``): ``self preemption
continue`` on a step stage where no run can preempt itself (no memory, or a
memory that does not preempt) changes nothing in any run.
"""

from __future__ import annotations

import math

from .. import arithmetic, ir
from ..errors import ErrorLog, Warning_
from ..sourcemap import SourceMap
from .constants import evaluate_constant
from .names import (
    Site,
    describe_stage_kind,
    format_number,
    locate_gauge,
    locate_pool,
    locate_program,
    locate_stage,
    locate_statement,
    make_error,
    make_warning,
    name_attribute,
    name_stage,
    show_stage_ref,
)
from .walk import list_child_blocks, list_parts, list_roots, list_statement_refs, list_subexpressions, visit_session

KIND_WORDS = {"p": ("pool", "pools"), "s": ("stage", "stages")}

#: The most sessions `arrive batch (n)` or `arrive closed (n)` starts at once:
#: every session is held in memory, so a population past this (1e12, 1e308)
#: would run out of memory or time before the run's first event.
MAX_POPULATION = 10_000_000
#: The most members `choose x in n by (…)` weighs: every member's keys are
#: evaluated each time the statement runs.
MAX_CHOOSE_MEMBERS = 10_000_000


def format_count(n: int) -> str:
    """A whole number as a person reads it: 20,000,000, or about 10^308 when it is longer."""
    return f"{n:,}" if n < 10**15 else f"about 10^{len(str(n)) - 1}"


def describe_range_problem(program: ir.Program, kind: str, base: int, count: int) -> str | None:
    """Why a reference to ``count`` pools or stages from ``base`` is out of range, or None."""
    declared = len(program.pools) if kind == "p" else len(program.stages)
    one, many = KIND_WORDS[kind]
    if count < 1:
        return f"names a family of {count} {many}"
    if base + count > declared:
        named = f"{one} #{base}" if count == 1 else f"{many} #{base}..#{base + count - 1}"
        return f"names {named}, but the program declares {declared} {many if declared != 1 else one}"
    return None


def describe_target_problem(program: ir.Program, target: ir.Target) -> str | None:
    if isinstance(target, ir.JointTarget):
        for part in target.parts:
            problem = describe_target_problem(program, part)
            if problem is not None:
                return problem
        return None
    return describe_range_problem(program, "p" if target.kind == "Pool" else "s", target.base, target.count)


def describe_expression_problem(program: ir.Program, e: ir.Expr) -> str | None:
    """The first malformed part of ``e`` (an attribute slot, a call's
    arguments, a reference out of range), or None."""
    for sub in list_subexpressions(e):
        if isinstance(sub, ir.Attr) and not 0 <= sub.slot < len(program.attrs):
            return f"reads attribute #{sub.slot}, but the program has {len(program.attrs)} attributes"
        if isinstance(sub, ir.Sample) and ir.DISTRIBUTIONS[sub.dist][1] is None:  # ~empirical: its values
            if not sub.args or not all(isinstance(a, ir.Num) and math.isfinite(a.value) for a in sub.args):
                return f"~{ir.DISTRIBUTIONS[sub.dist][0]} takes one or more finite numbers (a column's values)"
        elif isinstance(sub, ir.Sample) and len(sub.args) != ir.DISTRIBUTIONS[sub.dist][1]:
            spelling, arity = ir.DISTRIBUTIONS[sub.dist]
            return f"~{spelling} takes {arity} argument(s), not {len(sub.args)}"
        if isinstance(sub, ir.Call):
            spelling, kinds = ir.FUNCTIONS[sub.fun]
            given = tuple(
                "e" if isinstance(a, ir.ExprArg) else "p" if isinstance(a, ir.PoolArg) else "s" for a in sub.args
            )
            if given != kinds:
                wanted = ", ".join({"e": "an expression", "p": "a pool", "s": "a stage"}[k] for k in kinds)
                return f"{spelling}(…) takes ({wanted})"
            for arg in sub.args:
                if isinstance(arg, (ir.PoolArg, ir.StageArg)):
                    kind = "p" if isinstance(arg, ir.PoolArg) else "s"
                    problem = describe_range_problem(program, kind, arg.ref.base, arg.ref.count)
                    if problem is not None:
                        return f"{spelling}(…) {problem}"
        if isinstance(sub, ir.Cost):
            problem = describe_target_problem(program, sub.target)
            if problem is not None:
                return f"a cost annotation {problem}"
    return None


def raise_if_malformed(program: ir.Program, smap: SourceMap, site: Site, expressions: list[ir.Expr]) -> None:
    for e in expressions:
        problem = describe_expression_problem(program, e)
        if problem is not None:
            raise make_error(smap, site, f"malformed IR: {problem}")
    for e in expressions:
        problem = describe_draw_problem(e)
        if problem is not None:
            raise make_error(smap, site, problem)


def describe_draw_problem(e: ir.Expr) -> str | None:
    """The first draw of ``e`` with a constant argument its distribution is not defined for
    (arithmetic.describe_draw_problem; issue 23), or None. The run checks the arguments that are not
    constant as it draws."""
    for sub in list_subexpressions(e):
        if isinstance(sub, ir.Sample):
            problem = arithmetic.describe_draw_problem(sub.dist, [evaluate_constant(a) for a in sub.args])
            if problem is not None:
                return problem
    return None


# --------------------------------------------------------------------------
# The program's fields, the blocks
# --------------------------------------------------------------------------

BUILTIN_SLOT_FIELDS = (
    "slot_cached",
    "slot_serial",
    "slot_turn",
    "slot_new",
    "slot_out",
    "slot_think",
    "slot_more",
    "slot_forced",
    "slot_computed",
)


def check_program_fields(program: ir.Program, smap: SourceMap, log: ErrorLog, local: ErrorLog | None = None) -> None:
    n_attrs = len(program.attrs)
    for name in BUILTIN_SLOT_FIELDS:
        slot = getattr(program, name)
        if not 0 <= slot < n_attrs:
            log.add(make_error(smap, locate_program(name), f"malformed IR: attribute #{slot} of {n_attrs}"))
    for slot in program.hidden:
        if not 0 <= slot < n_attrs:
            log.add(make_error(smap, locate_program("hidden"), f"malformed IR: attribute #{slot} of {n_attrs}"))
    for name in ("init", "turn", "session"):
        block = getattr(program, name)
        if not 0 <= block < len(program.blocks):
            log.add(make_error(
                smap, locate_program(name), f"malformed IR: block {block}, but the program has {len(program.blocks)} blocks"
            ))
    if isinstance(program.arrival, ir.Sessions):
        for i, spec in enumerate(program.arrival.sessions):
            for slot, _ in spec.attrs + tuple(pair for turn in spec.turns or () for pair in turn):
                if not 0 <= slot < n_attrs:
                    site = locate_program(f"arrival.Sessions[{i}]", smap.arrival)
                    log.add(make_error(smap, site, f"malformed IR: attribute #{slot} of {n_attrs}"))
                    break
    if isinstance(program.arrival, ir.Renewal):
        with log.recover():
            raise_if_malformed(program, smap, locate_program("arrival.Renewal", smap.arrival), [program.arrival.gap])
    settings = smap.settings or {}  # each at its own place in the run block
    local = log if local is None else local  # (the errors no later check is misled by: check_structure)
    if not program.horizon > 0:
        local.add(make_error(smap, locate_program("horizon", settings.get("horizon", smap.run)),
                           f"the horizon is {format_number(program.horizon)}: a run's horizon is a positive time "
                           "(or inf with `arrivals N`; `run { horizon …; }` or --horizon)"))
    if not program.warmup >= 0:
        local.add(make_error(smap, locate_program("warmup", settings.get("warmup", smap.run)),
                           f"the warm-up is {format_number(program.warmup)}: it is the time the statistics start, 0 "
                           "or later (`run { warmup …; }` or --warmup)"))
    if isinstance(program.arrival, (ir.Closed, ir.Batch)) and program.arrival.n > MAX_POPULATION:
        word = "closed population" if isinstance(program.arrival, ir.Closed) else "batch size"
        local.add(make_error(smap, locate_program(f"arrival.{type(program.arrival).__name__}", smap.arrival),
                           f"the {word} is {format_count(program.arrival.n)}: serq-ref holds every session in memory "
                           f"and starts at most {MAX_POPULATION:,} at once"))
    if isinstance(program.arrival, ir.Poisson) and not (0 < program.arrival.rate < math.inf):
        local.add(make_error(smap, locate_program("arrival.Poisson", smap.arrival),
                           f"arrive poisson: the rate is {format_number(program.arrival.rate)}; a rate of arrivals is "
                           "a positive, finite number per unit of time"))


def describe_statement_problem(program: ir.Program, stmt: ir.Stmt) -> str | None:
    if isinstance(stmt, (ir.Set, ir.Choose)):
        slot = stmt.slot if isinstance(stmt, ir.Set) else stmt.var
        if not 0 <= slot < len(program.attrs):
            return f"assigns attribute #{slot}, but the program has {len(program.attrs)} attributes"
    if isinstance(stmt, ir.Choose) and stmt.count < 1:
        return f"chooses among {stmt.count} members"
    if isinstance(stmt, ir.Observe) and not 0 <= stmt.index < len(program.observes):
        return f"records observation #{stmt.index}, but the program has {len(program.observes)}"
    for kind, ref in list_statement_refs(stmt):
        problem = describe_range_problem(program, kind, ref.base, ref.count)
        if problem is not None:
            return problem
    for child in list_child_blocks(stmt):
        if not 0 <= child < len(program.blocks):
            return f"nests block {child}, but the program has {len(program.blocks)} blocks"
    for part in list_parts(stmt):
        problem = describe_expression_problem(program, part.expr)
        if problem is not None:
            return problem
    return None


def check_blocks(program: ir.Program, smap: SourceMap, log: ErrorLog, local: ErrorLog | None = None) -> None:
    """The blocks reachable from init, turn and session: indices in range, no
    block inside itself (they form a tree). A statement with a problem is not
    looked into (its blocks may not exist); the next one is checked."""

    def check(block: int, path: tuple[int, ...]) -> None:
        for index, stmt in enumerate(program.blocks[block]):
            site = locate_statement(program, smap, block, index)
            problem = describe_statement_problem(program, stmt)
            if problem is not None:
                log.add(make_error(smap, site, f"malformed IR: {problem}"))
                continue
            for part in list_parts(stmt):
                problem = describe_draw_problem(part.expr)
                if problem is not None:
                    local.add(make_error(smap, site, problem))
                    break
            if isinstance(stmt, (ir.Set, ir.Choose)) and (stmt.slot if isinstance(stmt, ir.Set) else stmt.var) in owned:
                slot = stmt.slot if isinstance(stmt, ir.Set) else stmt.var
                local.add(make_error(smap, site, f"assigns `{name_attribute(program, slot)}`, a built-in attribute the "
                                               "semantics sets; a program reads it and does not assign it"))
            if isinstance(stmt, ir.Choose) and stmt.count > MAX_CHOOSE_MEMBERS:
                local.add(make_error(smap, site, f"`choose` among {format_count(stmt.count)} members: each run of it "
                                               f"weighs every member's keys, and serq-ref weighs at most "
                                               f"{MAX_CHOOSE_MEMBERS:,}"))
            for child in list_child_blocks(stmt):
                if child in path + (block,):
                    log.add(make_error(smap, site, f"malformed IR: block {child} contains itself"))
                    continue
                check(child, path + (block,))

    local = log if local is None else local  # (the errors no later check is misled by: check_structure)
    # seed 002 §2, Built-in session attributes: the ones the semantics sets (the trace's columns with a trace)
    owned = {program.slot_serial, program.slot_turn, program.slot_cached, program.slot_computed}
    if program.trace is not None:
        owned |= {program.slot_new, program.slot_out, program.slot_think, program.slot_more, program.slot_forced}
    for root in list_roots(program):
        if 0 <= root < len(program.blocks):
            check(root, ())
    for name in ("init", "turn"):
        block = getattr(program, name)
        for index, stmt in enumerate(program.blocks[block] if 0 <= block < len(program.blocks) else ()):
            if not isinstance(stmt, (ir.Set, ir.Observe)):
                log.add(make_error(
                    smap,
                    locate_statement(program, smap, block, index),
                    f"the workload's {name} block holds only `set` and `observe`, not {type(stmt).__name__}",
                ))


# --------------------------------------------------------------------------
# Pools, stages, gauges
# --------------------------------------------------------------------------


def list_pool_expressions(pool: ir.Pool) -> list[ir.Expr]:
    keys = list(pool.queue or ()) + list(pool.evict or ()) + list(pool.preempt or ())
    return keys + ([pool.spill.work, pool.spill.when] if pool.spill is not None else [])


def list_stage_expressions(stage: ir.Stage) -> list[ir.Expr]:
    kind = stage.kind
    if isinstance(kind, ir.Ps):
        return [kind.capacity]
    if isinstance(kind, ir.Step):
        return [kind.budget, kind.cost, kind.chunk] + list(kind.serve or ()) + \
            ([kind.spec_accept] if kind.spec_accept is not None else [])
    return []


def check_pools(program: ir.Program, smap: SourceMap, log: ErrorLog) -> None:
    for i, pool in enumerate(program.pools):
        with log.recover():
            check_pool(program, smap, i, pool)


def check_pool(program: ir.Program, smap: SourceMap, i: int, pool: ir.Pool) -> None:
    site = locate_pool(program, smap, i)
    raise_if_malformed(program, smap, site, list_pool_expressions(pool))
    if math.isnan(pool.cap) or pool.cap < 0:
        raise make_error(smap, site, f"its cap is {format_number(pool.cap)}; a cap is a number of units, at least 0, or inf")
    if pool.block is not None and not (0 < pool.block < math.inf):
        raise make_error(smap, site, f"its block is {format_number(pool.block)}; a block is a positive number of units")
    if pool.spill is not None:
        for kind, index in (("p", pool.spill.to), ("s", pool.spill.via)):
            problem = describe_range_problem(program, kind, index, 1)
            if problem is not None:
                raise make_error(smap, site, f"malformed IR: its spill {problem}")
    if pool.admit_via is not None:
        problem = describe_range_problem(program, "s", pool.admit_via, 1)
        if problem is not None:
            raise make_error(smap, site, f"malformed IR: admit via {problem}")
        stage = program.stages[pool.admit_via]
        if not isinstance(stage.kind, ir.Step):
            raise make_error(
                smap,
                site,
                f"`admit via {name_stage(program, pool.admit_via)}` names {describe_stage_kind(stage)}; "
                "a pool's queue can be handed only to a step stage's scheduler",
            )


def check_stages(program: ir.Program, smap: SourceMap, log: ErrorLog) -> None:
    for i, stage in enumerate(program.stages):
        with log.recover():
            check_stage(program, smap, i, stage)


def check_stage(program: ir.Program, smap: SourceMap, i: int, stage: ir.Stage) -> None:
    site = locate_stage(program, smap, i)
    raise_if_malformed(program, smap, site, list_stage_expressions(stage))
    if isinstance(stage.kind, ir.Fifo) and stage.kind.servers < 1:
        raise make_error(smap, site, f"a fifo stage needs at least one server, not {stage.kind.servers}")
    if isinstance(stage.kind, ir.Step) and stage.kind.memory is not None:
        problem = describe_range_problem(program, "p", stage.kind.memory, 1)
        if problem is not None:
            raise make_error(smap, site, f"malformed IR: its memory {problem}")


def list_inert_self_preemption(program: ir.Program, smap: SourceMap) -> list[Warning_]:
    """A warning per step stage with ``self preemption continue`` whose runs
    cannot preempt themselves, so that the clause is true of no run: a
    grower is its own victim only on the stage's memory under preempt lifo
    (seed 002 §3 Pools; step/grow)."""
    warnings = []
    for i, stage in enumerate(program.stages):
        kind = stage.kind
        if not isinstance(kind, ir.Step) or kind.self_preemption == "End":
            continue
        if kind.memory is None:
            why = "the stage has no memory, so no growth on it preempts"
        elif program.pools[kind.memory].preempt is None:
            why = f"its memory `{program.pools[kind.memory].name}` has no `preempt lifo`, so a growth waits instead"
        else:
            continue
        warnings.append(make_warning(smap, locate_stage(program, smap, i),
                                     f"`self preemption continue` changes nothing: {why} and no run preempts itself"))
    return warnings


def check_gauges(program: ir.Program, smap: SourceMap, log: ErrorLog) -> None:
    for i, gauge in enumerate(program.gauges):
        with log.recover():
            raise_if_malformed(program, smap, locate_gauge(program, smap, i), [gauge.expr])


def check_structure(program: ir.Program, smap: SourceMap, log: ErrorLog, local: ErrorLog | None = None) -> None:
    """Every index in range and the session's blocks a tree (check 6). ``local`` (default ``log``) gets the
    errors that mislead no later check, so that the linker goes on after them (issue 23): a run setting out
    of its range, a statement that assigns a built-in, a choice among too many, a draw's constant argument
    outside its domain."""
    check_program_fields(program, smap, log, local)
    check_blocks(program, smap, log, local)
    check_pools(program, smap, log)
    check_stages(program, smap, log)
    check_gauges(program, smap, log)


# --------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------


def list_members(program: ir.Program, ref: ir.Ref) -> tuple[ir.Stage, ...]:
    """The stages of a reference's family."""
    return program.stages[ref.base : ref.base + ref.count]


def check_run(program: ir.Program, smap: SourceMap, site: Site, run: ir.Run) -> None:
    stage = program.stages[run.stage.base]
    written = show_stage_ref(program, run.stage)
    on_step = any(isinstance(s.kind, ir.Step) for s in list_members(program, run.stage))
    if on_step and run.mode == "Plain":
        raise make_error(
            smap,
            site,
            f"`run {written}` on a step stage needs a mode: `run {written} prefill (…)` or `run {written} decode (…)` "
            "(the serving forms `prefill` and `decode` give it)",
        )
    if not on_step and run.mode != "Plain":
        raise make_error(
            smap,
            site,
            f"`run {written} {run.mode.lower()}` names a mode, but `{written}` is {describe_stage_kind(stage)}; "
            "prefill and decode are modes of a step stage only",
        )
    if run.growing is not None and not on_step:
        raise make_error(
            smap, site, f"`growing` needs a step stage, and `{written}` is {describe_stage_kind(stage)}"
        )
    if not run.also:
        return
    refs = (run.stage,) + run.also
    if program.share is None:
        raise make_error(smap, site, "a run over several stages needs `share maxmin;` or `share bottleneck;`")
    arrays: list[str] = []  # an array's members share its declared name
    for ref in refs:
        name = show_stage_ref(program, ref)
        array = program.stages[ref.base].name
        if array in arrays:
            raise make_error(
                smap, site, f"a run over several stages names each stage array once, and `{array}` is named twice"
            )
        arrays.append(array)
        for member in list_members(program, ref):
            if not isinstance(member.kind, ir.Ps):
                raise make_error(
                    smap,
                    site,
                    f"a run over several stages holds ps stages only, and `{name}` is {describe_stage_kind(member)}",
                )
            capacity = evaluate_constant(member.kind.capacity)
            if capacity is None or not capacity > 0:
                what = "does not have a constant capacity" if capacity is None else "has a capacity that is not above 0"
                raise make_error(
                    smap,
                    site,
                    f"a run over several stages needs every stage ps with a constant capacity above 0, and `{name}` {what} "
                    "(a flow is not described by the jobs present)",
                )


def check_runs(program: ir.Program, smap: SourceMap, log: ErrorLog) -> None:
    """Run modes, ``growing``, runs over several stages (check 5)."""
    for visit in visit_session(program):
        if isinstance(visit.stmt, ir.Run):
            with log.recover():
                check_run(program, smap, locate_statement(program, smap, visit.block, visit.index), visit.stmt)
