"""The serQ IR, version 13, as immutable Python values.

The definition of a serQ program is its IR (seed 002, preamble). These frozen
dataclasses mirror the reference implementation's encoding field for field
(``../shared/ir/FORMAT.md``); ``semantics.codec`` turns them into JSON and back.
Every collection is a tuple, so an IR value is hashable and can be shared by
every configuration of a run.

Each class is declared once: the ``@node(...)`` above it gives its JSON form
(its shape and each field's JSON type, in the vocabulary of
``semantics.irspec``), and ``union(...)`` after each ``typing.Union`` declares
the union. ``semantics.codec`` (both ways) and ``ir_schema/ir.schema.json``
(``python -m ir_schema.generate``) are derived from these declarations alone:
adding a node is this file (docs/ir.md).

Naming: a class per IR node, named as the IR names it; a field per JSON field,
named as the JSON names it, except where the JSON name is a Python keyword or
positional (``Cond.then``/``Cond.otherwise``, ``Branch.then_block``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass
from typing import Union

from .irspec import (BOOL, INDEX, NEWTYPE, NUMBER, STR, STRUCT, TUPLE, UNIT, Absent, Const, Def, Enum, List, Opt,
                     Tuple, UnitOr, Wrap, named, node, union)

IR_VERSION = 13

# --------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------

#: Context variables: IR name -> source spelling (FORMAT.md, Expressions).
CONTEXT_VARIABLES: dict[str, str] = {
    "Now": "now",
    "Waited": "waited",
    "Size": "size",
    "Age": "age",
    "Last": "last",
    "Queued": "waiting",
    "N": "present",
    "Ntok": "tokens",
    "Ndec": "decoders",
    "Npre": "prefilled",
    "Nres": "residents",
    "Kvb": "kv_decode",
    "Kvp": "kv_prefill",
    "Attn": "attention",
    "Decoding": "decoding",
    "Admission": "admission",
    "Remaining": "remaining",
}

#: Distributions of ``~name(args)``: IR name -> (source spelling, arity).
DISTRIBUTIONS: dict[str, tuple[str, int]] = {
    "Exp": ("exp", 1),
    "Det": ("det", 1),
    "Uniform": ("uniform", 2),
    "Erlang": ("erlang", 2),
    "H2": ("h2", 2),
    "Bernoulli": ("bernoulli", 1),
    # serq-ref's extension of IR v13 (docs/design/draws.md): not in seed 002's list
    "Lognormal": ("lognormal", 2),
    "Normal": ("normal", 2),
    # ~empirical("FILE", "COLUMN"): the column's values, read when the program is compiled, are its arguments
    # (numbers, one or more: the arity None)
    "Empirical": ("empirical", None),
}

#: The draws serq-ref adds to seed 002's (docs/design/draws.md): pyserq and the Lean fragment have none of them.
EXTENSION_DISTRIBUTIONS = ("Lognormal", "Normal", "Empirical")

#: Functions of ``Call``: IR name -> (source spelling, argument kinds).
#: A kind is "e" (an expression), "p" (a pool reference) or "s" (a stage reference).
FUNCTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Min": ("min", ("e", "e")),
    "Max": ("max", ("e", "e")),
    "Abs": ("abs", ("e",)),
    "Floor": ("floor", ("e",)),
    "Ceil": ("ceil", ("e",)),
    "Sqrt": ("sqrt", ("e",)),
    "Exp": ("exp", ("e",)),
    "Ln": ("ln", ("e",)),
    "Pow": ("pow", ("e", "e")),
    "Queue": ("queue", ("s",)),
    "Busy": ("busy", ("s",)),
    "Work": ("work", ("s",)),
    "Used": ("used", ("p",)),
    "Free": ("free", ("p",)),
    "CachedIn": ("cachedin", ("p",)),
    "Holders": ("holders", ("p",)),
    "Queued": ("queued", ("p",)),
    "Price": ("price", ("s", "e", "e")),
    "BudgetLeft": ("budget_left", ("s",)),
    "EstLambda": ("est_lambda", ("s",)),
    "EstRho": ("est_rho", ("s",)),
    "EstWait": ("est_wait", ("s",)),
}

UNARY_OPS = ("Neg", "Not")
BINARY_OPS = ("Add", "Sub", "Mul", "Div", "Pow", "Lt", "Le", "Gt", "Ge", "Eq", "Ne", "And", "Or")
#: Operators whose value is a test (0 or 1): the statistics note (seed 002, Statistics).
TEST_OPS = ("Lt", "Le", "Gt", "Ge", "Eq", "Ne", "And", "Or")
RUN_MODES = ("Plain", "Prefill", "Decode")
#: What a step stage's pass does after a grower preempted itself (a serq-ref
#: extension of version 13, ``Step.self_preemption``; docs/architecture.md):
#: "End" the pass (seed 001/002, vLLM 0c87a197; the default, never written) or
#: "Continue" with the next resident (vLLM 0.33.0's priority path).
SELF_PREEMPTION = ("End", "Continue")
#: Where a preempted hold re-enters its queue (a serq-ref extension of
#: version 13, ``Pool.requeue``; docs/design/priorities-and-limits.md): at the
#: "Head" (seed 002 §3 Ties; the default, never written) or by the queue's
#: keys, as any hold joining ("Key": vLLM 0.33.0's priority heap,
#: request_queue.py:160-166).
REQUEUE = ("Head", "Key")
SIDES = ("Workload", "Server")

# --------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------


@node(STRUCT, define="Ref", base=INDEX, count=INDEX, index=Opt(Def("Expr")), description=(
    "A family of `count` pools or stages from `base`; `index` selects a member (null for a family of one)."))
@dataclass(frozen=True, slots=True)
class Ref:
    """A family of ``count`` pools or stages starting at ``base``; ``index``
    selects a member (None for a family of one)."""

    base: int
    count: int
    index: "Expr | None"


@node(STRUCT, define="Family", tag_field="kind", tags=("Pool", "Stage"), base=INDEX, count=INDEX)
@dataclass(frozen=True, slots=True)
class CostTarget:
    """What a ``Cost`` expression is measured in: ``kind`` is "Pool" or "Stage"."""

    kind: str
    base: int
    count: int


@node(NEWTYPE, tag="Joint", parts=List(Def("Target")))
@dataclass(frozen=True, slots=True)
class JointTarget:
    """A quantity measured in several resources at once (``{"Joint": [targets]}``)."""

    parts: tuple["CostTarget | JointTarget", ...]


Target = Union[CostTarget, JointTarget]
union("Target", Target, title="cost target", what="cost target", description="What a cost is measured in.")


# --------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------


@node(NEWTYPE, value=NUMBER)
@dataclass(frozen=True, slots=True)
class Num:
    value: float


@node(NEWTYPE, slot=INDEX)
@dataclass(frozen=True, slots=True)
class Attr:
    slot: int


@node(NEWTYPE, var=Enum(tuple(CONTEXT_VARIABLES), "context variable"))
@dataclass(frozen=True, slots=True)
class Ctx:
    var: str  # a key of CONTEXT_VARIABLES


@node(TUPLE, dist=Enum(tuple(DISTRIBUTIONS), "distribution"), args=List(Def("Expr")))
@dataclass(frozen=True, slots=True)
class Sample:
    dist: str  # a key of DISTRIBUTIONS
    args: tuple["Expr", ...]


@node(NEWTYPE, tag="Expr", expr=Def("Expr"))
@dataclass(frozen=True, slots=True)
class ExprArg:
    expr: "Expr"


@node(NEWTYPE, tag="Pool", ref=Def("Ref"))
@dataclass(frozen=True, slots=True)
class PoolArg:
    ref: Ref


@node(NEWTYPE, tag="Stage", ref=Def("Ref"))
@dataclass(frozen=True, slots=True)
class StageArg:
    ref: Ref


Arg = Union[ExprArg, PoolArg, StageArg]
union("Arg", Arg, title="argument", what="argument kind")


@node(TUPLE, fun=Enum(tuple(FUNCTIONS), "function"), args=List(Def("Arg")))
@dataclass(frozen=True, slots=True)
class Call:
    fun: str  # a key of FUNCTIONS
    args: tuple[Arg, ...]


@node(TUPLE, op=Enum(UNARY_OPS, "unary operator"), operand=Def("Expr"))
@dataclass(frozen=True, slots=True)
class Unary:
    op: str
    operand: "Expr"


@node(TUPLE, op=Enum(BINARY_OPS, "binary operator"), left=Def("Expr"), right=Def("Expr"))
@dataclass(frozen=True, slots=True)
class Binary:
    op: str
    left: "Expr"
    right: "Expr"


@node(TUPLE, test=Def("Expr"), then=Def("Expr"), otherwise=Def("Expr"))
@dataclass(frozen=True, slots=True)
class Cond:
    test: "Expr"
    then: "Expr"
    otherwise: "Expr"


@node(TUPLE, target=Def("Target"), expr=Def("Expr"))
@dataclass(frozen=True, slots=True)
class Cost:
    """Keeps ``expr``'s value and records the resource it is measured in."""

    target: Target
    expr: "Expr"


Expr = Union[Num, Attr, Ctx, Sample, Call, Unary, Binary, Cond, Cost]
union("Expr", Expr, title="expression", what="expression", description="An expression, externally tagged.", later=True)
#: A list of keys (``queue by``, ``evict by``, ``serve by``, ``choose``'s order).
named("Keys", List(Def("Expr")))

# --------------------------------------------------------------------------
# Statements
# --------------------------------------------------------------------------


@node(UNIT)
@dataclass(frozen=True, slots=True)
class Turn:
    pass


@node(TUPLE, slot=INDEX, expr=Def("Expr"))
@dataclass(frozen=True, slots=True)
class Set:
    slot: int
    expr: Expr


@node(TUPLE, index=INDEX, expr=Def("Expr"))
@dataclass(frozen=True, slots=True)
class Observe:
    index: int  # into Program.observes
    expr: Expr


@node(TUPLE, ref=Def("Ref"), units=Def("Expr"), reserve=Opt(Def("Expr")))
@dataclass(frozen=True, slots=True)
class HoldPool:
    """One pool of a hold: ``pool (units) [reserve (reserve)]``."""

    ref: Ref
    units: Expr
    reserve: Expr | None


@node(TUPLE, ref=Def("Ref"), duration=Def("Expr"))
@dataclass(frozen=True, slots=True)
class Lease:
    ref: Ref
    duration: Expr


@node(TUPLE, description=(
    "serq-ref's extension of version 13 (docs/design/shared-prefixes.md): `length` units of the content of `key`"),
      key=Def("Expr"), length=Def("Expr"))
@dataclass(frozen=True, slots=True)
class Segment:
    """One segment of a hold's ``content (K : L, ...)``: the next ``length``
    units of the hold are the content of ``key`` (both evaluated at
    admission, as the hold's units are)."""

    key: Expr
    length: Expr


@node(STRUCT, pools=List(Def("HoldPool")), reuse=Opt(Def("Expr")), body=INDEX, cache=Opt(Def("Expr")),
      lease=Opt(Def("Lease")),
      content=Absent(List(Def("Segment")), (), description=(
          "serq-ref's extension of version 13 (docs/design/shared-prefixes.md): what the hold's first units are, "
          "segment by segment, in a pool that shares prefixes; empty, the default when absent, all its own")))
@dataclass(frozen=True, slots=True)
class Hold:
    pools: tuple[HoldPool, ...]
    reuse: Expr | None
    body: int  # a block id
    cache: Expr | None
    lease: Lease | None
    #: ``content (K : L, ...)``: a serq-ref extension of version 13 (docs/design/shared-prefixes.md), absent from
    #: the JSON when empty (so files without it load, and mean what they meant)
    content: tuple[Segment, ...] = ()


@node(TUPLE, ref=Def("Ref"), amount=Def("Expr"))
@dataclass(frozen=True, slots=True)
class Grow:
    ref: Ref
    amount: Expr


@node(NEWTYPE, ref=Def("Ref"))
@dataclass(frozen=True, slots=True)
class Drop:
    ref: Ref


@node(NEWTYPE, ref=Def("Ref"))
@dataclass(frozen=True, slots=True)
class Release:
    ref: Ref


@node(TUPLE, ref=Def("Ref"), amount=Def("Expr"))
@dataclass(frozen=True, slots=True)
class Load:
    ref: Ref
    amount: Expr


@node(STRUCT, stage=Def("Ref"), mode=Enum(RUN_MODES, "run mode"), work=Def("Expr"), growing=Opt(Def("Ref")),
      also=Absent(List(Def("Ref"))))
@dataclass(frozen=True, slots=True)
class Run:
    stage: Ref
    mode: str  # one of RUN_MODES
    work: Expr
    growing: Ref | None
    also: tuple[Ref, ...] | None = None  # further stages of one flow; None when absent


@node(TUPLE, guard=Def("Expr"), then_block=INDEX, else_block=INDEX)
@dataclass(frozen=True, slots=True)
class Branch:
    guard: Expr
    then_block: int
    else_block: int


@node(NEWTYPE, block=INDEX)
@dataclass(frozen=True, slots=True)
class Loop:
    block: int


@node(TUPLE, description="Not in the seed's syntax; version-13 files compiled elsewhere use it.", guard=Def("Expr"),
      block=INDEX)
@dataclass(frozen=True, slots=True)
class While:
    """``{"While": [guard, block]}``: the block again while the guard is 1.
    Not in the seed's syntax; version-13 files compiled elsewhere use it
    (the oracle's multi-turn replay loops ``while more``)."""

    guard: Expr
    block: int


@node(STRUCT, var=INDEX, count=INDEX, key=Def("Keys"))
@dataclass(frozen=True, slots=True)
class Choose:
    var: int  # the attribute slot the index is written to
    count: int
    key: tuple[Expr, ...]


@node(UNIT)
@dataclass(frozen=True, slots=True)
class End:
    pass


Stmt = Union[Turn, Set, Observe, Hold, Grow, Drop, Release, Load, Run, Branch, Loop, While, Choose, End]
union("Stmt", Stmt, title="statement", what="statement", later=True,
      description="A statement, externally tagged; a nested block is named by its index in `blocks`.")

# --------------------------------------------------------------------------
# Pools and stages
# --------------------------------------------------------------------------


@node(STRUCT, define="Spill", to=INDEX, via=INDEX, work=Def("Expr"), when=Def("Expr"))
@dataclass(frozen=True, slots=True)
class Spill:
    to: int  # pool index
    via: int  # stage index
    work: Expr
    when: Expr


KV_GROUP_KINDS = ("Full", "Window")


@node(STRUCT, define="KvGroup", kind=Enum(KV_GROUP_KINDS), window=Absent(NUMBER, None, null=True), description=(
    "serq-ref's extension of version 13 (docs/design/sliding-window.md): one KV cache group of a pool, full "
    "attention (Full) or a sliding window of `window` units (Window)"))
@dataclass(frozen=True, slots=True)
class KvGroup:
    """One group of a pool's ``groups (full, window (W))``: ``kind`` Full or
    Window, ``window`` the window in units (a Window group's only)."""

    kind: str
    window: float | None = None


@node(STRUCT, define="Pool", name=STR, index=Absent(INDEX, null=True), cap=NUMBER, block=Opt(NUMBER),
      evict=UnitOr(("Lru",), "By", Def("Keys"), title="eviction", what="eviction"),
      preempt=UnitOr(("None",), "By", Wrap("keys", Def("Keys")), title="preemption", what="preemption"),
      queue=Opt(Def("Keys")), spill=Opt(Def("Spill")), admit_via=Opt(INDEX),
      requeue=Absent(Enum(REQUEUE), "Head", description=(
          "serq-ref's extension of version 13 (docs/design/priorities-and-limits.md): a preempted hold re-enters "
          "the queue at its head (Head, the default when absent) or by the queue's keys as any hold joining (Key)")),
      share_prefixes=Absent(BOOL, False, description=(
          "serq-ref's extension of version 13 (docs/design/shared-prefixes.md): true, the pool's cache is a table "
          "of blocks that holds share by their content (vLLM 0.33.0's prefix caching across requests); false, the "
          "default when absent, each session's own prefix")),
      groups=Absent(List(Def("KvGroup")), (), description=(
          "serq-ref's extension of version 13 (docs/design/sliding-window.md): the pool's KV cache groups, each hold "
          "one block table per group over the pool's one capacity (vLLM 0.33.0's hybrid and sliding-window "
          "models); empty, the default when absent, one full-attention group (the seed's pool)")))
@dataclass(frozen=True, slots=True)
class Pool:
    name: str
    index: int | None
    cap: float  # math.inf for no cap
    block: float | None
    evict: tuple[Expr, ...] | None  # None: lru; a tuple: evict by (keys)
    preempt: tuple[Expr, ...] | None  # None: preempt none; keys: victim order (lifo: -admission)
    queue: tuple[Expr, ...] | None  # None: fifo; keys: queue by
    spill: Spill | None
    admit_via: int | None  # stage index
    #: one of REQUEUE; a serq-ref extension of version 13, absent from the
    #: JSON when "Head" (so files without it load, and mean the seed's rule)
    requeue: str = "Head"
    #: ``share prefixes``: a serq-ref extension of version 13 (docs/design/shared-prefixes.md), absent from the
    #: JSON when False (so files without it load, and mean the seed's rule)
    share_prefixes: bool = False
    #: ``groups (full, window (W))``: a serq-ref extension of version 13 (docs/design/sliding-window.md), absent
    #: from the JSON when empty (so files without it load, and mean the seed's pool)
    groups: tuple[KvGroup, ...] = ()


@node(NEWTYPE, servers=INDEX)
@dataclass(frozen=True, slots=True)
class Fifo:
    servers: int


@node(NEWTYPE, capacity=Def("Expr"))
@dataclass(frozen=True, slots=True)
class Ps:
    capacity: Expr


@node(STRUCT, budget=Def("Expr"), cost=Def("Expr"), chunk=Def("Expr"),
      serve=UnitOr(("ExclusivePrefill",), "By", Def("Keys"), title="serve order", what="serve"), memory=Opt(INDEX),
      self_preemption=Absent(Enum(SELF_PREEMPTION), "End", description=(
          "serq-ref's extension of version 13 (docs/architecture.md): after a grower preempted itself the pass "
          "ends (End, the default when absent) or goes on with the next resident (Continue)")),
      schedule_ahead=Absent(BOOL, False, description=(
          "serq-ref's extension of version 13 (docs/design/async-scheduling.md): true, the next iteration is "
          "formed before the ended one's results are applied (vLLM 0.33.0's asynchronous scheduling); false, the "
          "default when absent, they are applied first")),
      spec_tokens=Absent(INDEX, 0, description=(
          "serq-ref's extension of version 13 (docs/design/speculative-decoding.md): the draft tokens a decoding "
          "resident is given with its token each iteration (vLLM 0.33.0's num_speculative_tokens); 0, the default "
          "when absent, none")),
      spec_accept=Absent(Opt(Def("Expr")), None, description=(
          "serq-ref's extension of version 13 (docs/design/speculative-decoding.md): with spec_tokens, the drafts "
          "an iteration accepts of a decoding resident, read for it when it is served (at most the drafts given)")),
      spec_lookahead=Absent(INDEX, 0, description=(
          "serq-ref's extension of version 13 (docs/design/speculative-decoding.md, section 8): with spec_tokens, "
          "the units a growing resident's hold takes past the tokens it is given (vLLM 0.33.0's "
          "num_lookahead_tokens); 0, the default when absent, none")),
      spec_slots=Absent(INDEX, 0, description=(
          "serq-ref's extension of version 13 (docs/design/speculative-decoding.md, section 8): with spec_tokens, "
          "the budget each served resident takes beyond its tokens (vLLM 0.33.0's draft slots, "
          "max_num_new_slots_for_drafting); 0, the default when absent, none")),
      spec_within=Absent(INDEX, 0, description=(
          "serq-ref's extension of version 13 (docs/design/speculative-decoding.md, section 8): with spec_tokens, "
          "the model length: a resident's position after its tokens stays below it, and its hold's growth stops "
          "at it (vLLM 0.33.0's max_model_len); 0, the default when absent, none")),
      defer_free=Absent(BOOL, False, description=(
          "serq-ref's extension of version 13 (docs/design/kv-connector.md): with schedule_ahead, true, a "
          "resident the iteration in flight was given tokens is no preemption victim while the next iteration is "
          "formed (its units could not be freed before that iteration is applied): a growth whose victim it would "
          "be gets nothing and the pass serves no more residents (vLLM 0.33.0's defer_block_free under a KV "
          "consumer connector); false, the default when absent, it is preempted")),
      load_remote=Absent(Opt(Def("Expr")), None, description=(
          "serq-ref's extension of version 13 (docs/design/kv-connector.md, section 5.5): the prompt units a "
          "session's first admission loads from a remote prefill instead of computing them, read for the head "
          "of a queue the stage serves; above 0, its hold is admitted as a load (no unit of the served pool, "
          "the loaded units of the memory) and parks until the transfer is done; None, the default when "
          "absent, nothing is loaded")),
      load_delay=Absent(Opt(Def("Expr")), None, description=(
          "serq-ref's extension of version 13 (docs/design/kv-connector.md, section 5.5): with load_remote, the "
          "iterations after the one that started it at which the transfer is reported done")),
      offload_chunks=Absent(INDEX, 0, description=(
          "serq-ref's extension of version 13 (docs/design/cpu-offloading.md, section 6): the chunks (of one "
          "block of the memory each) of a CPU tier written through as prompt blocks are computed and read at "
          "admission past the memory's hit (vLLM 0.33.0's OffloadingConnector); 0, the default when absent, no "
          "tier")),
      offload_load_delay=Absent(INDEX, 0, description=(
          "serq-ref's extension of version 13 (docs/design/cpu-offloading.md, section 6): with offload_chunks, "
          "the iterations after the one that started a load from the tier at which it is reported done")),
      offload_store_delay=Absent(INDEX, 1, description=(
          "serq-ref's extension of version 13 (docs/design/cpu-offloading.md, section 6): with offload_chunks, "
          "the iterations after the one that made a store to the tier at which it is reported done (at least "
          "1; 1, the default when absent)")))
@dataclass(frozen=True, slots=True)
class Step:
    budget: Expr
    cost: Expr
    chunk: Expr
    serve: tuple[Expr, ...] | None  # keys of serve by; None: exclusive prefill
    memory: int | None  # pool index
    #: one of SELF_PREEMPTION; a serq-ref extension of version 13, absent from
    #: the JSON when "End" (so files without it load, and mean the seed's rule)
    self_preemption: str = "End"
    #: ``schedule ahead``: the next iteration is formed before the results of
    #: the one that ended are applied (vLLM 0.33.0's asynchronous scheduling;
    #: docs/design/async-scheduling.md); a serq-ref extension of version 13,
    #: absent from the JSON when False (so files without it load, and mean the
    #: seed's engine)
    schedule_ahead: bool = False
    #: ``speculate (K) accept (e)``: K draft tokens per decoding resident and iteration, and the drafts accepted
    #: (docs/design/speculative-decoding.md); a serq-ref extension of version 13, absent from the JSON when K is
    #: 0 (then ``spec_accept`` is None and the stage means what it meant)
    spec_tokens: int = 0
    spec_accept: Expr | None = None
    #: ``speculate ... lookahead (A) slots (D) within (L)``: the lookahead slots, the draft slots and the model
    #: length (docs/design/speculative-decoding.md, section 8); serq-ref extensions of version 13, absent from the
    #: JSON when 0 (none)
    spec_lookahead: int = 0
    spec_slots: int = 0
    spec_within: int = 0
    #: ``defer free``: under schedule ahead, a resident the iteration in flight was given tokens is no victim
    #: while the next iteration is formed (step/defer; docs/design/kv-connector.md); a serq-ref extension of
    #: version 13, absent from the JSON when False (so files without it load, and mean what they meant)
    defer_free: bool = False
    #: ``load remote (R) after (D)``: a remote prefill's KV loaded at a session's first admission (step/load,
    #: step/promote; docs/design/kv-connector.md section 5.5); a serq-ref extension of version 13, absent from
    #: the JSON when None (so files without it load, and mean what they meant)
    load_remote: Expr | None = None
    load_delay: Expr | None = None
    #: ``offload to (N) load after (L) store after (S)``: a CPU tier of N chunks (one block of the memory each),
    #: written through as prompt blocks are computed, read at admission past the memory's hit, loads reported L
    #: iterations and stores S iterations after the one that started them (offload/store, offload/land,
    #: offload/flush, offload/lookup, offload/park, offload/promote; docs/design/cpu-offloading.md section 6); a
    #: serq-ref extension of version 13, absent from the JSON at 0, 0 and 1 (so files without it load, and mean
    #: what they meant)
    offload_chunks: int = 0
    offload_load_delay: int = 0
    offload_store_delay: int = 1


StageKind = Union[Fifo, Ps, Step]
union("StageKind", StageKind, title="stage kind", what="stage kind", define=False,
      refusals={"Delay": "`Delay` is not a stage kind of IR version 13 (a delay stage is `Ps` of `N`)"})


@node(STRUCT, define="Stage", name=STR, index=Absent(INDEX, null=True), kind=Def("StageKind"))
@dataclass(frozen=True, slots=True)
class Stage:
    name: str
    index: int | None
    kind: StageKind


# --------------------------------------------------------------------------
# The workload's arrivals
# --------------------------------------------------------------------------


@node(NEWTYPE, rate=NUMBER)
@dataclass(frozen=True, slots=True)
class Poisson:
    rate: float


@node(NEWTYPE, gap=Def("Expr"))
@dataclass(frozen=True, slots=True)
class Renewal:
    gap: Expr


@node(NEWTYPE, n=INDEX)
@dataclass(frozen=True, slots=True)
class Closed:
    n: int


@node(NEWTYPE, n=INDEX)
@dataclass(frozen=True, slots=True)
class Batch:
    n: int


#: An explicit session's attribute values.
named("Pairs", List(Tuple((INDEX, NUMBER))), description="Attribute values: [slot, value] pairs.")


@node(STRUCT, define="Session", attrs=Def("Pairs"), turns=Absent(List(Def("Pairs"))))
@dataclass(frozen=True, slots=True)
class SessionSpec:
    """An explicit session: its attributes, and optionally its turns."""

    attrs: tuple[tuple[int, float], ...]
    turns: tuple[tuple[tuple[int, float], ...], ...] | None


@node(NEWTYPE, sessions=List(Def("Session")))
@dataclass(frozen=True, slots=True)
class Sessions:
    sessions: tuple[SessionSpec, ...]


@node(UNIT, tag="None")
@dataclass(frozen=True, slots=True)
class NoArrival:
    pass


Arrival = Union[Poisson, Renewal, Closed, Batch, Sessions, NoArrival]
union("Arrival", Arrival, title="arrival", what="arrival")

# --------------------------------------------------------------------------
# Attribute types and the program
# --------------------------------------------------------------------------

#: An attribute's type: "Size", "Value", or a target (``{"Cost": target}``).
AttrType = Union[str, CostTarget, JointTarget]
named("AttrType", UnitOr(("Size", "Value"), "Cost", Def("Target"), title="attribute type", what="attribute type",
                         none=False))


@node(STRUCT, define="Gauge", name=STR, expr=Def("Expr"))
@dataclass(frozen=True, slots=True)
class Gauge:
    name: str
    expr: Expr


@node(STRUCT, version=Const(IR_VERSION), attrs=List(STR), attr_types=List(Def("AttrType")),
      sides=List(List(Enum(SIDES))), observes=List(STR), pools=List(Def("Pool")), stages=List(Def("Stage")),
      arrival=Def("Arrival"), trace=Opt(STR), trace_ordered=BOOL, init=INDEX, turn=INDEX, session=INDEX,
      blocks=List(List(Def("Stmt"))), horizon=NUMBER, warmup=NUMBER, seed=INDEX, arrivals=Absent(INDEX, null=True),
      slot_cached=INDEX, slot_serial=INDEX, slot_turn=INDEX, slot_new=INDEX, slot_out=INDEX, slot_think=INDEX,
      slot_more=INDEX, slot_forced=INDEX, slot_computed=INDEX, hidden=List(INDEX),
      share=Absent(Enum(("MaxMin", "Bottleneck"), "share"), null=True), gauges=Absent(List(Def("Gauge")), ()))
@dataclass(frozen=True, slots=True)
class Program:
    version: int
    attrs: tuple[str, ...]
    attr_types: tuple[AttrType, ...]
    sides: tuple[tuple[str, ...], ...]
    observes: tuple[str, ...]
    pools: tuple[Pool, ...]
    stages: tuple[Stage, ...]
    arrival: Arrival
    trace: str | None
    trace_ordered: bool
    init: int
    turn: int
    session: int
    blocks: tuple[tuple[Stmt, ...], ...]
    horizon: float
    warmup: float
    seed: int
    arrivals: int | None
    slot_cached: int
    slot_serial: int
    slot_turn: int
    slot_new: int
    slot_out: int
    slot_think: int
    slot_more: int
    slot_forced: int
    slot_computed: int
    hidden: tuple[int, ...]
    share: str | None  # "MaxMin", "Bottleneck", or None when no run holds several stages
    gauges: tuple[Gauge, ...]


#: The built-in attributes, in slot order (FORMAT.md, Program).
BUILTIN_ATTRS = ("cached", "serial", "turn_no", "new", "out", "think", "more", "forced", "computed")

#: The Program fields that give the built-ins' slots, as a program compiled
#: here sets them (``Program(..., **BUILTIN_SLOTS)``): slots 0 to 8.
BUILTIN_SLOTS: dict[str, int] = {
    f"slot_{name}": slot
    for slot, name in enumerate(("cached", "serial", "turn", "new", "out", "think", "more", "forced", "computed"))
}


#: ``preempt lifo``'s keys (FORMAT.md): [-admission], the last admitted first.
LIFO_KEYS = (Unary("Neg", Ctx("Admission")),)


def walk(root):
    """Every node under ``root`` (itself included): each IR record, tuple,
    list and dict met, and its fields' values, depth first, the last field
    first (a stack): what a search of the IR for a kind of node reads."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if is_dataclass(node) and not isinstance(node, type):
            stack.extend(getattr(node, f.name) for f in fields(node))
        elif isinstance(node, (tuple, list)):
            stack.extend(node)
        elif isinstance(node, dict):
            stack.extend(node.values())
