"""Lowering: the kernel program to IR version 13, and its SourceMap.

Names are resolved here (seed 002, section 2): an attribute is every name a
``set`` or ``choose`` assigns, in slot order after the nine built-ins (first
appearance in init, turn, then the session, pre-order); a ``let`` is its
folded number; a context variable and ``inf`` are the language's. A pool or
stage reference is ``{base, count, index}``, a constant index folded to a
number and checked against the family. Aggregates are written out term by
term. Blocks go to the arena in pre-order (init 0, turn 1, session 2), and
observations take indices in the order they are met.

As the reference implementation writes them: a run's work is a ``Cost`` of
its stages, a hold's units and reserve a ``Cost`` of their pool, its reuse
and cache a ``Cost`` of all its pools (a joint target when there are several),
a grow's or load's amount a ``Cost`` of its pool. ``attr_types``: the
built-ins serial..forced and every attribute the workload side assigns are
``Size``, every other ``Value``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Mapping

from .. import arithmetic, ir
from ..errors import ErrorLog, ProgramError, Span
from ..sourcemap import SourceMap
from . import ast
from .constants import NotConstant, evaluate_constant, evaluate_count, evaluate_seed, fold, format_number, is_whole
from .empirical import read_column
from .desugar import CONTEXT_NAMES, Kernel, PoolSpec, StageSpec, has_draw, substitute, walk_stmts

CONTEXT_BY_NAME = {source: name for name, source in ir.CONTEXT_VARIABLES.items()}
FUNCTION_BY_NAME = {source: (name, kinds) for name, (source, kinds) in ir.FUNCTIONS.items()}
DISTRIBUTION_BY_NAME = {source: (name, arity) for name, (source, arity) in ir.DISTRIBUTIONS.items()}
#: The most terms the aggregates of one program write out.
MAX_AGGREGATE_TERMS = 4096


@dataclass(frozen=True, slots=True)
class Family:
    """A pool or stage family in the IR's list: ``count`` entries from ``base``."""

    base: int
    count: int


def get_target_key(target: ir.CostTarget) -> tuple:
    """The order of a joint target's parts: pools before stages, then base, count."""
    return (0 if target.kind == "Pool" else 1, target.base, target.count)


def make_joint_target(targets: list[ir.CostTarget]) -> ir.Target:
    """Distinct targets sorted; one target stands for itself."""
    unique = sorted(set(targets), key=get_target_key)
    return unique[0] if len(unique) == 1 else ir.JointTarget(tuple(unique))


class Lowering:
    def __init__(self, kernel: Kernel, arrivals: int | None):
        self.kernel = kernel
        self.arrivals_override = arrivals
        self.lets = kernel.lets
        self.attrs: list[str] = list(ir.BUILTIN_ATTRS)
        self.observes: list[str] = []
        self.blocks: list[list[ir.Stmt]] = []
        self.sides: list[list[str]] = []
        self.statement_spans: dict[tuple[int, int], Span] = {}
        #: the statements an error left as a placeholder `end;` (SourceMap.holes)
        self.holes: set[tuple[int, int]] = set()
        self.pool_spans: dict[int, Span] = {}
        self.stage_spans: dict[int, Span] = {}
        self.gauge_spans: dict[int, Span] = {}
        self.pools: dict[str, Family] = {}
        self.stages: dict[str, Family] = {}
        self.pool_specs = {p.name: p for p in kernel.pools}
        self.stage_specs = {s.name: s for s in kernel.stages}
        self.aggregate_terms = 0
        #: The pools of the holds enclosing the statement being lowered.
        self.held: list[ir.Ref] = []
        #: The pools some hold of the program leases.
        self.leased: list[ir.Ref] = []
        #: The errors found so far: lowering goes on to the next statement,
        #: declaration or gauge after one, and raises them all at the end.
        self.log = ErrorLog([kernel.file])
        #: The run block's settings as written, by name (horizon, warmup,
        #: seed, arrivals): the span of each.
        self.settings: dict[str, Span] = {}
        #: lower_recovering: errors in statements, gauges and the like leave the IR of the rest (each wrong
        #: statement an `end;`, a wrong gauge left out), returned with them
        self.recovering = False
        self.declarations_failed = False

    # ----------------------------------------------------------- program

    def lower(self) -> tuple[ir.Program, SourceMap]:
        kernel = self.kernel
        base = 0
        for pool in kernel.pools:
            self.pools[pool.name] = Family(base, pool.count)
            base += pool.count
        base = 0
        for stage in kernel.stages:
            self.stages[stage.name] = Family(base, stage.count)
            base += stage.count
        for block in (kernel.init, kernel.turn, kernel.session):
            for stmt in walk_stmts(block):
                if isinstance(stmt, (ast.Set, ast.Choose)):
                    with self.log.recover():
                        self.check_assignable(stmt)
                if isinstance(stmt, (ast.Set, ast.Choose)) and stmt.name not in self.attrs:
                    self.attrs.append(stmt.name)
                    with self.log.recover():
                        self.check_attribute_name(stmt.name, stmt.span)
        for block in (kernel.init, kernel.turn, kernel.session):
            for stmt in walk_stmts(block):
                if isinstance(stmt, ast.Hold) and stmt.lease is not None:
                    with self.log.recover():
                        self.leased.append(self.lower_ref(stmt.lease.pool, "pool"))
        before = len(self.log.errors)
        pools = [member for spec in kernel.pools for member in self.recover(self.lower_pool, spec, [])]
        stages = [member for spec in kernel.stages for member in self.recover(self.lower_stage, spec, [])]
        #: a pool or stage dropped moves the IR's indices: the IR of the rest is then no program to link
        self.declarations_failed = len(self.log.errors) > before
        arrival = self.recover(self.lower_arrival, None, ir.NoArrival())
        init = self.lower_block(kernel.init)
        turn = self.lower_block(kernel.turn)
        session = self.lower_block(kernel.session)
        horizon, warmup, seed, arrivals = self.recover(self.lower_run, None, (math.inf, 0.0, 1, None))
        hidden = []
        for name, span in kernel.hidden:
            # a built-in is an attribute too (the linker refuses the ones the scheduler sets)
            if name not in self.attrs:
                self.log.add(ProgramError(f"hidden `{name}`: no set or choose makes it a session attribute", span))
                continue
            hidden.append(self.attrs.index(name))
        gauges = []
        for index, gauge in enumerate(kernel.gauges):
            self.gauge_spans[index] = gauge.span
            with self.log.recover():
                gauges.append(ir.Gauge(gauge.name, self.lower_expr(gauge.expr)))
        if not self.recovering or self.declarations_failed:
            self.log.raise_errors()
        share = None
        if kernel.share is not None:
            share = kernel.share[0]
        program = ir.Program(
            version=ir.IR_VERSION,
            attrs=tuple(self.attrs),
            attr_types=self.attr_types(),
            sides=tuple(tuple(s) for s in self.sides),
            observes=tuple(self.observes),
            pools=tuple(pools),
            stages=tuple(stages),
            arrival=arrival,
            trace=kernel.trace[0] if kernel.trace else None,
            trace_ordered=bool(kernel.trace and kernel.trace[1]),
            init=init,
            turn=turn,
            session=session,
            blocks=tuple(tuple(b) for b in self.blocks),
            horizon=horizon,
            warmup=warmup,
            seed=seed,
            arrivals=arrivals,
            **ir.BUILTIN_SLOTS,
            hidden=tuple(hidden),
            share=share,
            gauges=tuple(gauges),
        )
        source_map = SourceMap(
            file=kernel.file,
            stmts=self.statement_spans,
            pools=self.pool_spans,
            stages=self.stage_spans,
            gauges=self.gauge_spans,
            arrival=kernel.arrival.span if kernel.arrival is not None else None,
            run=kernel.run_span,
            share=kernel.share[1] if kernel.share is not None else None,
            settings=dict(self.settings),
            trace=kernel.trace_span,
            holes=frozenset(self.holes),
        )
        return program, source_map

    def recover(self, lower, argument, placeholder):
        """``lower(argument)`` (or ``lower()`` when ``argument`` is None), or
        ``placeholder`` after recording the error it raised."""
        try:
            return lower() if argument is None else lower(argument)
        except ProgramError as error:
            self.log.add(error)
            return placeholder

    def check_assignable(self, stmt: ast.Set | ast.Choose) -> None:
        """A built-in attribute the semantics sets is read, never assigned
        (issue 13): serial numbers the session, turn_no its turns, cached
        and computed are what an admission consumed and a preemption left,
        and with a trace the trace's columns are its turns' (seed 002 §2,
        Built-in session attributes). `set serial = 7;` made the session
        another one for the streams it draws from; `set cached = 99;` a
        prefix no pool holds."""
        owners = {"serial": "the session's serial number, given at its arrival",
                  "turn_no": "the turn number, counted by `turn;`",
                  "cached": "what the last admission consumed from the prefix cache",
                  "computed": "the position a preempted hold had computed"}
        if self.kernel.trace is not None:
            owners.update({name: "a column of the trace, loaded at every `turn;`"
                           for name in ("new", "out", "think", "more", "forced")})
        if stmt.name in owners:
            word = "set" if isinstance(stmt, ast.Set) else "choose"
            raise ProgramError(f"`{word} {stmt.name}`: `{stmt.name}` is a built-in attribute the semantics sets "
                               f"({owners[stmt.name]}); a program reads it and does not assign it: give the value "
                               "a name of its own", stmt.span)

    def check_attribute_name(self, name: str, span: Span) -> None:
        """One name, one meaning: an attribute is not a let, a context variable or inf."""
        if name in CONTEXT_NAMES or name == "inf":
            raise ProgramError(f"`{name}` is a name the language supplies; a session attribute named `{name}` would "
                               f"be read where the language's `{name}` was meant: give it a name of its own", span)
        if name in self.lets:
            raise ProgramError(f"`{name}` is both a let constant and a session attribute: give one of them another "
                               f"name", span)

    def attr_types(self) -> tuple[ir.AttrType, ...]:
        types: list[ir.AttrType] = ["Value"] * len(self.attrs)
        for slot in range(1, 8):  # serial, turn_no, new, out, think, more, forced
            types[slot] = "Size"
        for block, sides in zip(self.blocks, self.sides):
            for stmt, side in zip(block, sides):
                if side == ast.WORKLOAD and isinstance(stmt, (ir.Set, ir.Choose)):
                    types[stmt.slot if isinstance(stmt, ir.Set) else stmt.var] = "Size"
        return tuple(types)

    # ------------------------------------------------------ declarations

    def lower_pool(self, spec: PoolSpec) -> list[ir.Pool]:
        """One IR pool per member of the family, its options folded."""
        family = self.pools[spec.name]
        for index in range(family.base, family.base + family.count):
            self.pool_spans[index] = spec.span
        options = {}
        for option in spec.options:
            group = option.kind.split("_")[0]
            if group in options:
                raise ProgramError(f"pool `{spec.name}`: a second `{group}` option", option.span)
            options[group] = option
        cap = math.inf
        if "cap" in options:
            cap = evaluate_constant(options["cap"].values[0], self.lets, f"pool `{spec.name}`'s cap")
        block = None
        if "block" in options:
            block = evaluate_constant(options["block"].values[0], self.lets, f"pool `{spec.name}`'s block")
            if not block > 0:
                raise ProgramError(f"pool `{spec.name}`'s block is {format_number(block)}: a block is positive",
                                   options["block"].span)
        evict = None
        if "evict" in options and options["evict"].kind == "evict_by":
            evict = tuple(self.lower_expr(k) for k in options["evict"].values)
        preempt = None
        if "preempt" in options and options["preempt"].kind == "preempt_lifo":
            # FORMAT.md: preempt lifo is the keys [-admission], the last admitted first
            preempt = ir.LIFO_KEYS
        elif "preempt" in options and options["preempt"].kind == "preempt_by":
            # a serq-ref form of IR v13's preemption keys: the victim has the least keys
            preempt = tuple(self.lower_expr(k) for k in options["preempt"].values)
        queue = None
        if "queue" in options and options["queue"].kind == "queue_by":
            queue = tuple(self.lower_expr(k) for k in options["queue"].values)
        spill = None
        if "spill" in options:
            tier, link, work, when = options["spill"].values
            to = self.family_of(tier, self.pools, "pool")
            via = self.family_of(link, self.stages, "stage")
            spill = ir.Spill(to.base, via.base, self.lower_expr(work), self.lower_expr(when))
        admit = None
        if "admit" in options:
            path = options["admit"].values[0]
            admit = self.family_of(path, self.stages, "stage")
            stage_spec = self.stage_specs[path.dotted]
            if not stage_spec.is_step:
                raise ProgramError(f"pool `{spec.name}`: `admit via {path.dotted}` needs a step stage, and "
                                   f"`{path.dotted}` is a {stage_spec.kind.kind} stage", path.span)
        shares = False
        if "share" in options:  # ``share prefixes [when (e)];``: on, or, with a constant condition that is 0, off
            (condition,) = options["share"].values
            shares = condition is None or bool(arithmetic.is_true(evaluate_constant(
                condition, self.lets, f"pool `{spec.name}`: the condition of `share prefixes`")))
        groups = self.lower_groups(spec.name, options["groups"], block, shares) \
            if "groups" in options else ()
        members = []
        for member in range(spec.count):
            admit_via = None
            if admit is not None:
                admit_via = self.pair_member(admit, member, spec.count, spec.name, "admit via", options["admit"].span)
            members.append(ir.Pool(spec.name, member if spec.family else None, cap, block, evict, preempt, queue,
                                   spill, admit_via, "Key" if "requeue" in options else "Head",
                                   shares, groups))
        return members

    def lower_groups(self, pool: str, option: ast.Option, block: float | None, shares: bool) -> tuple[ir.KvGroup, ...]:
        """``groups (full, window (W));`` (docs/design/sliding-window.md): the
        groups whose condition is not 0, each window a constant natural number
        of units >= 1; only with a block size, at most one group of each kind.
        The groups left are () when they are one full group or none (every
        condition 0): the seed's pool, so a let (and --set) can switch the
        window off (examples/lib/vllm.sq, examples/pools/sliding_window.sq)."""
        if block is None:
            raise ProgramError(f"pool `{pool}`: `groups` needs `block`: each group is a table of blocks",
                               option.span)
        groups, seen = [], {}
        for g in option.values:
            kind = "Full" if g.kind == "full" else "Window"
            if kind in seen:
                raise ProgramError(f"pool `{pool}`: a second `{g.kind}` group (a pool has at most one full and one "
                                   f"window group)", g.span)
            seen[kind] = g
            condition = g.values[-1]
            if condition is not None and not arithmetic.is_true(
                    evaluate_constant(condition, self.lets, f"pool `{pool}`: the condition of its `{g.kind}` group")):
                continue
            window = None
            if kind == "Window":
                window = evaluate_constant(g.values[0], self.lets, f"pool `{pool}`: the window of its group")
                if not (window >= 1 and math.isfinite(window) and float(window).is_integer()):
                    raise ProgramError(f"pool `{pool}`: `window ({format_number(window)})`: a window is a whole "
                                       f"number of units, at least 1", g.values[0].span)
            groups.append(ir.KvGroup(kind, window))
        if not groups or len(groups) == 1 and groups[0].kind == "Full":
            return ()
        return tuple(groups)

    def pair_member(self, target: Family, member: int, count: int, who: str, what: str, span: Span) -> int:
        """Families join member for member; a family of one serves every member."""
        if target.count == count:
            return target.base + member
        if target.count == 1:
            return target.base
        raise ProgramError(f"`{who}`: `{what}` names a family of {target.count}, and `{who}` is a family of "
                           f"{count}: pair them one for one, or one for all", span)

    def family_of(self, path: ast.Path, table: Mapping[str, Family], kind: str) -> Family:
        if path.indices:
            raise ProgramError(f"`{path.dotted}`: name the whole {kind} family here, without an index", path.span)
        family = table.get(path.dotted)
        if family is None:
            raise self.unknown(kind, path.dotted, path.span)
        return family

    def lower_stage(self, spec: StageSpec) -> list[ir.Stage]:
        """One IR stage per member; delay is ps(present), the serve orders are keys."""
        family = self.stages[spec.name]
        for index in range(family.base, family.base + family.count):
            self.stage_spans[index] = spec.span
        kind = spec.kind
        memory = None
        memory_span = None
        if kind.kind == "fifo":
            servers = 1
            if kind.values:
                servers = evaluate_count(kind.values[0], self.lets, f"stage `{spec.name}`'s fifo server count", 1)
            lowered = ir.Fifo(servers)
        elif kind.kind == "ps":
            lowered = ir.Ps(self.lower_expr(kind.values[0]))
        elif kind.kind == "delay":
            # FORMAT.md: version 13 has no delay kind; capacity = jobs present
            lowered = ir.Ps(ir.Ctx("N"))
        else:
            options = {}
            for option in kind.values:
                group = "serve" if option.kind.startswith("serve") else option.kind
                if group in options:
                    raise ProgramError(f"stage `{spec.name}`: a second `{group}`", option.span)
                options[group] = option
            for required in ("budget", "cost"):
                if required not in options:
                    raise ProgramError(f"step stage `{spec.name}` has no `{required}`", kind.span)
            serve: tuple[ir.Expr, ...] | None = ()
            if "serve" in options:
                serve_kind = options["serve"].kind
                if serve_kind == "serve_by":
                    serve = tuple(self.lower_expr(k) for k in options["serve"].values)
                elif serve_kind == "serve_decode_first":
                    serve = (ir.Cond(ir.Ctx("Decoding"), ir.Num(0.0), ir.Num(1.0)),)
                elif serve_kind == "serve_exclusive":
                    serve = None
            chunk = ir.Num(0.0) if "chunk" not in options else self.lower_expr(options["chunk"].values[0])
            if "memory" in options:
                memory = self.family_of(options["memory"].values[0], self.pools, "pool")
                memory_span = options["memory"].span
            self_preemption = "End"
            if "self_preemption" in options:
                self_preemption = self.lower_self_preemption(spec.name, options["self_preemption"])
            schedule_ahead = False
            if "schedule_ahead" in options:
                schedule_ahead = self.lower_schedule_ahead(spec.name, options["schedule_ahead"])
            spec_tokens, spec_accept = 0, None
            if "speculate" in options:
                spec_tokens, spec_accept = self.lower_speculate(spec.name, options["speculate"])
            lowered = ir.Step(self.lower_expr(options["budget"].values[0]), self.lower_expr(options["cost"].values[0]),
                              chunk, serve, None, self_preemption, schedule_ahead, spec_tokens, spec_accept)
            if spec_tokens:  # speculate's lookahead slots, draft slots and model length (0: none)
                lowered = dataclasses.replace(lowered, **self.lower_spec_slots(spec.name, options["speculate"]))
            if "defer_free" in options:  # docs/design/kv-connector.md
                defer = self.lower_condition(spec.name, options["defer_free"], "defer free")
                if defer and not schedule_ahead:
                    raise ProgramError(f"stage `{spec.name}`: `defer free` without `schedule ahead`: only an "
                                       f"iteration in flight while the next is formed defers a free",
                                       options["defer_free"].span)
                lowered = dataclasses.replace(lowered, defer_free=defer)
            if "load_remote" in options:  # docs/design/kv-connector.md section 5.5
                remote, delay = options["load_remote"].values
                lowered = dataclasses.replace(lowered, load_remote=self.lower_expr(remote),
                                              load_delay=self.lower_expr(delay))
            if "offload" in options:  # docs/design/cpu-offloading.md section 6
                lowered = dataclasses.replace(lowered, **self.lower_offload(spec.name, options["offload"]))
        members = []
        for member in range(spec.count):
            member_kind = lowered
            if memory is not None:
                pool = self.pair_member(memory, member, spec.count, spec.name, "memory", memory_span)
                member_kind = dataclasses.replace(lowered, memory=pool)
            members.append(ir.Stage(spec.name, member if spec.family else None, member_kind))
        return members

    def lower_self_preemption(self, stage: str, option: ast.Option) -> str:
        """``self preemption end|continue [when (e)];``: the rule written, or,
        with a constant condition that is 0, the other one (so a let, and
        --set, can switch it: examples/lib/vllm.sq's older_rule)."""
        written, condition = option.values
        chosen = written
        if condition is not None:
            value = evaluate_constant(condition, self.lets, f"stage `{stage}`: the condition of `self preemption`")
            if not arithmetic.is_true(value):
                chosen = "end" if written == "continue" else "continue"
        return "Continue" if chosen == "continue" else "End"

    def lower_schedule_ahead(self, stage: str, option: ast.Option) -> bool:
        """``schedule ahead [when (e)];``: on, or, with a constant condition
        that is 0, off (so a let, and --set, can switch it:
        examples/lib/vllm.sq's async_scheduling)."""
        (condition,) = option.values
        if condition is None:
            return True
        value = evaluate_constant(condition, self.lets, f"stage `{stage}`: the condition of `schedule ahead`")
        return bool(arithmetic.is_true(value))

    def lower_condition(self, stage: str, option: ast.Option, what: str) -> bool:
        """``WHAT [when (e)];``: on, or, with a constant condition that is 0, off (a let, and --set, switch it)."""
        (condition,) = option.values
        if condition is None:
            return True
        value = evaluate_constant(condition, self.lets, f"stage `{stage}`: the condition of `{what}`")
        return bool(arithmetic.is_true(value))

    def lower_speculate(self, stage: str, option: ast.Option) -> tuple[int, ir.Expr | None]:
        """``speculate (K) accept (e);`` (docs/design/speculative-decoding.md): K a
        constant natural number (a let, so --set switches it: examples/lib/vllm.sq's
        spec_tokens); K = 0 is no clause at all (the stage means what it meant)."""
        tokens, accept = option.values[:2]
        value = evaluate_constant(tokens, self.lets, f"stage `{stage}`: the draft tokens of `speculate`")
        if not (value >= 0 and float(value).is_integer()):
            raise ProgramError(f"stage `{stage}`: `speculate ({value:g})`: the draft tokens are a natural number",
                               option.span)
        if value == 0:
            return 0, None
        return int(value), self.lower_expr(accept)

    def lower_offload(self, stage: str, option: ast.Option) -> dict[str, int]:
        """``offload to (N) load after (L) store after (S);`` (docs/design/cpu-offloading.md, section 6): N, L
        and S constant natural numbers (lets, so --set switches them: examples/lib/vllm.sq's offload_chunks), S
        at least 1 (a store is reported at the earliest by the next iteration: the worker submits a step's
        stores at the start of the next one); N = 0 is no tier at all (the stage means what it meant)."""
        out = {}
        for field, what, least, value in zip(("offload_chunks", "offload_load_delay", "offload_store_delay"),
                                             ("the tier's chunks", "the load delay", "the store delay"),
                                             (0, 0, 1), option.values):
            n = evaluate_constant(value, self.lets, f"stage `{stage}`: {what} of `offload`")
            if not (math.isfinite(n) and n >= least and float(n).is_integer()):
                raise ProgramError(f"stage `{stage}`: {what} of `offload` is {format_number(n)}, not a "
                                   f"natural number at least {least}", value.span or option.span)
            out[field] = int(n)
        if out["offload_chunks"] == 0:
            return {}
        return out

    def lower_spec_slots(self, stage: str, option: ast.Option) -> dict[str, int]:
        """``speculate (K) accept (e) lookahead (A) slots (D) within (L);`` (docs/design/speculative-decoding.md,
        section 8): A, D and L constant natural numbers (lets, so --set switches them), each 0 when not given:
        no lookahead slots, no draft-slot budget, no model length."""
        out = {}
        for field, what, value in zip(("spec_lookahead", "spec_slots", "spec_within"),
                                      ("lookahead slots", "draft slots", "model length"), option.values[2:]):
            if value is None:
                continue
            n = evaluate_constant(value, self.lets, f"stage `{stage}`: the {what} of `speculate`")
            if not (n >= 0 and float(n).is_integer()):
                raise ProgramError(f"stage `{stage}`: `speculate`'s {what} ({n:g}) are a natural number", option.span)
            out[field] = int(n)
        return out

    def lower_arrival(self) -> ir.Arrival:
        option = self.kernel.arrival
        if option is None:
            return ir.NoArrival()
        if option.kind == "poisson":
            return ir.Poisson(evaluate_constant(option.values[0], self.lets, "the poisson rate"))
        if option.kind == "renewal":
            try:
                gap = fold(option.values[0], self.lets)
            except NotConstant:
                return ir.Renewal(self.lower_expr(option.values[0]))
            if not 0.0 < gap < math.inf:  # seed 002 §3 Workload; a NaN (0 / 0) is no number at all
                raise ProgramError(f"arrive renewal: the gap is {format_number(gap)}; gaps must be positive and "
                                   "finite", option.values[0].span, file=self.kernel.file)
            return ir.Renewal(ir.Num(gap))
        if option.kind == "closed":
            return ir.Closed(evaluate_count(option.values[0], self.lets, "the closed population", 0))
        if option.kind == "batch":
            return ir.Batch(evaluate_count(option.values[0], self.lets, "the batch size", 1))
        return ir.NoArrival()

    def lower_run(self) -> tuple[float, float, int, int | None]:
        """The run block's settings. A program may have none (a library; the
        command line can give them all): without a horizon the IR's is inf,
        and a command that runs says "no horizon" unless --horizon gives one
        (semantics/pipeline.py, ``check_run_settings``)."""
        run = self.kernel.run
        self.settings = {name: option.span for name, option in run.items()}
        horizon = math.inf
        if "horizon" in run:
            horizon = evaluate_constant(run["horizon"].values[0], self.lets, "the horizon")
        warmup = 0.0
        if "warmup" in run:
            warmup = evaluate_constant(run["warmup"].values[0], self.lets, "the warmup")
        seed = 1
        if "seed" in run:
            seed = evaluate_seed(run["seed"].values[0], self.lets)
        arrivals = None
        if "arrivals" in run:
            arrivals = evaluate_count(run["arrivals"].values[0], self.lets, "arrivals", 1)
        if self.arrivals_override is not None:
            arrivals = self.arrivals_override
        return horizon, warmup, seed, arrivals

    # -------------------------------------------------------- statements

    def lower_block(self, stmts: tuple[ast.Stmt, ...]) -> int:
        block_id = len(self.blocks)
        self.blocks.append([])
        self.sides.append([])
        lowered: list[ir.Stmt] = []
        sides: list[str] = []
        for stmt in stmts:
            index = len(lowered)
            self.statement_spans[(block_id, index)] = stmt.span
            placeholder = ir.End()  # the IR is not run after an error; the linker reads it as a hole (holes)
            lowered.append(self.recover(self.lower_stmt, stmt, placeholder))
            if lowered[-1] is placeholder:
                self.holes.add((block_id, index))
            sides.append(stmt.side)
        self.blocks[block_id] = lowered
        self.sides[block_id] = sides
        return block_id

    def lower_stmt(self, stmt: ast.Stmt) -> ir.Stmt:
        if isinstance(stmt, ast.Turn):
            return ir.Turn()
        if isinstance(stmt, ast.End):
            return ir.End()
        if isinstance(stmt, ast.Set):
            return ir.Set(self.attrs.index(stmt.name), self.lower_expr(stmt.expr))
        if isinstance(stmt, ast.Observe):
            if stmt.name not in self.observes:
                self.observes.append(stmt.name)
            return ir.Observe(self.observes.index(stmt.name), self.lower_expr(stmt.expr))
        if isinstance(stmt, ast.Hold):
            return self.lower_hold(stmt)
        if isinstance(stmt, ast.Grow):
            ref = self.enclosed_pool(stmt.pool, "grow", leased_too=False)
            return ir.Grow(ref, self.cost_of_pools([ref], self.lower_expr(stmt.amount)))
        if isinstance(stmt, ast.Load):
            ref = self.enclosed_pool(stmt.pool, "load", leased_too=False)
            return ir.Load(ref, self.cost_of_pools([ref], self.lower_expr(stmt.amount)))
        if isinstance(stmt, ast.Drop):
            return ir.Drop(self.lower_ref(stmt.pool, "pool"))
        if isinstance(stmt, ast.Release):
            return ir.Release(self.enclosed_pool(stmt.pool, "release", leased_too=True))
        if isinstance(stmt, ast.Run):
            refs = [self.lower_ref(p, "stage") for p in stmt.stages]
            target = make_joint_target([ir.CostTarget("Stage", r.base, r.count) for r in refs])
            work = ir.Cost(target, self.lower_expr(stmt.work))
            growing = None if stmt.growing is None else self.enclosed_pool(stmt.growing, "growing", leased_too=False)
            also = tuple(refs[1:]) if len(refs) > 1 else None
            return ir.Run(refs[0], stmt.mode, work, growing, also)
        if isinstance(stmt, ast.Branch):
            guard = self.lower_expr(stmt.guard)
            then_block = self.lower_block(stmt.then)
            else_block = self.lower_block(stmt.otherwise)
            return ir.Branch(guard, then_block, else_block)
        if isinstance(stmt, ast.Loop):
            return ir.Loop(self.lower_block(stmt.body))
        if isinstance(stmt, ast.Choose):
            count = evaluate_count(stmt.count, self.lets, f"`choose {stmt.name} in`'s count", 1)
            return ir.Choose(self.attrs.index(stmt.name), count, tuple(self.lower_expr(k) for k in stmt.keys))
        raise AssertionError(f"a statement the desugaring should have removed: {stmt!r}")  # pragma: no cover

    def cost_of_pools(self, refs: list[ir.Ref], expr: ir.Expr) -> ir.Cost:
        return ir.Cost(make_joint_target([ir.CostTarget("Pool", r.base, r.count) for r in refs]), expr)

    def lower_hold(self, hold: ast.Hold) -> ir.Hold:
        pools = []
        refs = []
        for pool in hold.pools:
            ref = self.lower_ref(pool.pool, "pool")
            refs.append(ref)
            units = self.cost_of_pools([ref], self.lower_expr(pool.units))
            reserve = None if pool.reserve is None else self.cost_of_pools([ref], self.lower_expr(pool.reserve))
            pools.append(ir.HoldPool(ref, units, reserve))
        reuse = None if hold.reuse is None else self.cost_of_pools(refs, self.lower_expr(hold.reuse))
        cache = None if hold.cache is None else self.cost_of_pools(refs, self.lower_expr(hold.cache))
        self.held.extend(refs)
        body = self.lower_block(hold.body)
        del self.held[len(self.held) - len(refs):]
        lease = None
        if hold.lease is not None:
            lease_ref = self.lower_ref(hold.lease.pool, "pool")
            if not any(is_same_ref(lease_ref, r) for r in refs):
                raise ProgramError(f"`lease {hold.lease.pool.dotted}`: the hold does not take that pool (write it as "
                                   f"the hold does, index included)", hold.lease.span)
            lease = ir.Lease(lease_ref, self.lower_expr(hold.lease.duration))
        content = tuple(ir.Segment(self.lower_expr(x.key), self.lower_expr(x.length)) for x in hold.content)
        return ir.Hold(tuple(pools), reuse, body, cache, lease, content)

    def enclosed_pool(self, path: ast.Path, word: str, leased_too: bool) -> ir.Ref:
        """A pool a statement acts on through an enclosing hold (grow, load,
        growing, release), written as the hold writes it, index included; a
        release may also end a lease some hold of the program takes."""
        ref = self.lower_ref(path, "pool")
        if any(is_same_ref(ref, held) for held in self.held):
            return ref
        if leased_too and any(is_same_ref(ref, leased) for leased in self.leased):
            return ref
        shown = path.dotted + ("[…]" if path.indices else "")
        if any(held.base == ref.base for held in self.held):
            hint = "write the pool as the hold does, index included"
        elif leased_too:
            hint = "it gives back an enclosing hold's allocation, or ends a lease of it"
        else:
            hint = "it acts on an enclosing hold's allocation"
        raise ProgramError(f"`{word} {shown}` outside a hold of `{shown}`: {hint}", path.span)

    # ------------------------------------------------------- expressions

    def unknown(self, kind: str, name: str, span: Span) -> ProgramError:
        table = {"pool": self.pools, "stage": self.stages}.get(kind)
        known = sorted(table) if table is not None else sorted(set(self.attrs) | set(self.lets))
        near = [k for k in known if are_close_names(k, name)]
        hint = f" (did you mean `{near[0]}`?)" if near else ""
        if kind == "name":
            return ProgramError(f"unknown name `{name}`: not a let constant, a session attribute (set or choose "
                                f"assigns one) or a context variable{hint}", span)
        return ProgramError(f"unknown {kind} `{name}`{hint}", span)

    def lower_ref(self, path: ast.Path, kind: str) -> ir.Ref:
        table = self.pools if kind == "pool" else self.stages
        name = path.dotted
        family = table.get(name)
        if family is None:
            other = self.stages if kind == "pool" else self.pools
            if name in other:
                raise ProgramError(f"`{name}` is a {'stage' if kind == 'pool' else 'pool'}, and a {kind} is needed "
                                   f"here", path.span)
            raise self.unknown(kind, name, path.span)
        indices = path.indices
        if len(indices) > 1:
            raise ProgramError(f"`{name}` is indexed twice: a family has one index", path.span)
        if not indices:
            if family.count != 1:
                raise ProgramError(f"{kind} `{name}` is a family of {family.count}: index it, `{name}[i]`",
                                   path.span)
            return ir.Ref(family.base, family.count, None)
        index_expr = indices[0]
        index = self.lower_expr(index_expr)
        try:
            value = None if has_draw(index_expr) else fold(index_expr, self.lets)
        except NotConstant:
            value = None
        if value is not None:
            if not (is_whole(value) and 0 <= value < family.count):
                raise ProgramError(f"{kind} `{name}[{format_number(value)}]` is out of range: `{name}` has "
                                   f"{family.count} member(s)", index_expr.span)
            index = ir.Num(float(value))
        return ir.Ref(family.base, family.count, index)

    def lower_expr(self, expr: ast.Expr) -> ir.Expr:
        if isinstance(expr, ast.Num):
            return ir.Num(expr.value)
        if isinstance(expr, ast.Name):
            return self.lower_name(expr)
        if isinstance(expr, ast.FunctionCall):
            return self.lower_call(expr)
        if isinstance(expr, ast.Sample):
            if expr.distribution not in DISTRIBUTION_BY_NAME:
                names = ", ".join(f"~{d}" for d in DISTRIBUTION_BY_NAME)
                raise ProgramError(f"unknown distribution `~{expr.distribution}` (the distributions: {names})",
                                   expr.span)
            name, arity = DISTRIBUTION_BY_NAME[expr.distribution]
            if arity is None or expr.source is not None:  # ~empirical("FILE", "COLUMN"): a file's column
                if arity is not None or expr.source is None:
                    raise ProgramError(f"`~{expr.distribution}` takes "
                                       + ("a file and a column: ~empirical(\"FILE\", \"COLUMN\")" if arity is None
                                          else f"{arity} argument(s), not a file and a column (that is ~empirical's)"),
                                       expr.span)
                path, path_span, column, column_span = expr.source
                return ir.Sample(name, tuple(ir.Num(v) for v in read_column(path, path_span, column, column_span)))
            if len(expr.args) != arity:
                raise ProgramError(f"`~{expr.distribution}` takes {arity} argument(s), got {len(expr.args)}",
                                   expr.span)
            return ir.Sample(name, tuple(self.lower_expr(a) for a in expr.args))
        if isinstance(expr, ast.Unary):
            return ir.Unary(expr.op, self.lower_expr(expr.operand))
        if isinstance(expr, ast.Binary):
            return ir.Binary(expr.op, self.lower_expr(expr.left), self.lower_expr(expr.right))
        if isinstance(expr, ast.Cond):
            return ir.Cond(self.lower_expr(expr.test), self.lower_expr(expr.then), self.lower_expr(expr.otherwise))
        if isinstance(expr, ast.Over):
            return self.lower_over(expr)
        raise AssertionError(f"unexpected expression {expr!r}")  # pragma: no cover

    def lower_name(self, expr: ast.Name) -> ir.Expr:
        path = expr.path
        name = path.dotted
        if path.indices:
            what = "pool" if name in self.pools else "stage" if name in self.stages else None
            if what is not None:
                raise ProgramError(f"`{name}[…]` is a {what}: read it through a function, such as "
                                   f"{'used' if what == 'pool' else 'queue'}({name}[…])", expr.span)
            raise ProgramError(f"`{name}` is indexed, and only a pool or stage family is", expr.span)
        if name in self.attrs:
            return ir.Attr(self.attrs.index(name))
        if name in self.lets:
            return ir.Num(self.lets[name])
        if name in CONTEXT_BY_NAME:
            return ir.Ctx(CONTEXT_BY_NAME[name])
        if name == "inf":
            return ir.Num(math.inf)
        if name in self.pools or name in self.stages:
            what = "pool" if name in self.pools else "stage"
            example = f"used({name})" if what == "pool" else f"queue({name})"
            raise ProgramError(f"`{name}` is a {what}, not a value: read it through a function, such as {example}",
                               expr.span)
        raise self.unknown("name", name, expr.span)

    def lower_call(self, expr: ast.FunctionCall) -> ir.Expr:
        if expr.function == "blocksize":
            if len(expr.args) != 1 or not isinstance(expr.args[0], ast.Name):
                raise ProgramError("`blocksize` takes one pool", expr.span)
            path = expr.args[0].path
            self.lower_ref(path, "pool")
            spec = self.pool_specs[path.dotted]
            block = [o for o in spec.options if o.kind == "block"]
            if not block:
                raise ProgramError(f"`blocksize({path.dotted})`: pool `{path.dotted}` has no `block`", expr.span)
            return ir.Num(evaluate_constant(block[0].values[0], self.lets, f"`blocksize({path.dotted})`"))
        if expr.function not in FUNCTION_BY_NAME:
            raise ProgramError(f"unknown function `{expr.function}`", expr.span)
        name, kinds = FUNCTION_BY_NAME[expr.function]
        if len(expr.args) != len(kinds):
            raise ProgramError(f"`{expr.function}` takes {len(kinds)} argument(s), got {len(expr.args)}", expr.span)
        args: list[ir.Arg] = []
        for arg, kind in zip(expr.args, kinds):
            if kind == "e":
                args.append(ir.ExprArg(self.lower_expr(arg)))
                continue
            what = "pool" if kind == "p" else "stage"
            if not isinstance(arg, ast.Name):
                raise ProgramError(f"`{expr.function}` expects a {what} name here", arg.span)
            ref = self.lower_ref(arg.path, what)
            args.append(ir.PoolArg(ref) if kind == "p" else ir.StageArg(ref))
        return ir.Call(name, tuple(args))

    def lower_over(self, expr: ast.Over) -> ir.Expr:
        """``max j in n (e)``: e with j = 0 … n-1, folded by max, min or +."""
        variable = expr.variable
        clash = None
        if variable in self.lets:
            clash = "a let constant"
        elif variable in self.attrs:
            clash = "a session attribute"
        elif variable in self.pools:
            clash = "a pool"
        elif variable in self.stages:
            clash = "a stage"
        elif variable in CONTEXT_NAMES or variable == "inf":
            clash = "a name the language supplies"
        if clash is not None:
            raise ProgramError(f"`{expr.aggregate} {variable} in`: `{variable}` is also {clash}: give the index a "
                               f"name of its own", expr.span)
        count = evaluate_count(expr.count, self.lets, f"`{expr.aggregate} {variable} in`'s count", 1)
        self.aggregate_terms += count
        if self.aggregate_terms > MAX_AGGREGATE_TERMS:
            raise ProgramError(f"the program's aggregates write out more than {MAX_AGGREGATE_TERMS} terms", expr.span)
        terms = [self.lower_expr(substitute(expr.body, {variable: ast.Num(float(k), span=expr.span)}))
                 for k in range(count)]
        total = terms[0]
        for term in terms[1:]:
            if expr.aggregate == "sum":
                total = ir.Binary("Add", total, term)
            else:
                total = ir.Call("Max" if expr.aggregate == "max" else "Min", (ir.ExprArg(total), ir.ExprArg(term)))
        return total


def is_same_ref(a: ir.Ref, b: ir.Ref) -> bool:
    return a.base == b.base and a.count == b.count and a.index == b.index


def are_close_names(a: str, b: str) -> bool:
    """Names one edit apart (a typo), for a did-you-mean hint."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b)) == 1
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return any(long[:k] + long[k + 1:] == short for k in range(len(long)))


def lower_kernel(kernel: Kernel, arrivals: int | None = None) -> tuple[ir.Program, SourceMap]:
    """The IR of a kernel program and the spans of its parts."""
    return Lowering(kernel, arrivals).lower()


def lower_recovering(kernel: Kernel, arrivals: int | None = None) -> tuple[ir.Program, SourceMap, list[ProgramError]]:
    """``lower_kernel``, and the errors of statements, gauges, the arrival, the run block or hidden names,
    with the IR of the rest (each wrong statement lowered as `end;`, a wrong gauge left out), for the linker
    to find the rest's own errors (issue 23); an error in a pool or stage declaration raises them all."""
    lowering = Lowering(kernel, arrivals)
    lowering.recovering = True
    program, smap = lowering.lower()
    return program, smap, lowering.log.sorted_errors()
