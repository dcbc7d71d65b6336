"""From a serQ IR program to the Lean fragment's syntax (lean_bridge.syntax).

The fragment (docs/lean.md): explicit sessions, pools with a finite capacity
in blocks, LRU eviction, fifo queues admitted by the one step engine,
preempt lifo on the engine's memory; one step engine of cost 1 (the step
clock) serving by keys; delay stages; set, observe, turn, hold (units,
reserve, reuse, cache), run on the engine (prefill/decode, growing) or a
delay, branch on a test, end; values in ℕ.

Anything else is refused with a ProgramError naming the construct and where
it is: the statement's or pool's span in the source for a compiled program,
the line and column of the JSON node for an IR file.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

from semantics import ir
from semantics.errors import ProgramError, Span
from semantics.jsonpos import nearest, positions
from semantics.sourcemap import SourceMap

from . import syntax as L

#: How every refusal of the translation begins.
REFUSED = "outside the Lean fragment"
#: Where a context variable may be read in the fragment.
_CONTEXTS = {
    "Now": ("session", "header", "engine", "serve", "queue", "victim"),
    "Nres": ("engine", "serve"),
    "Ndec": ("engine", "serve"),
    "Decoding": ("serve", "victim"),
    "Admission": ("serve", "victim"),
    "Remaining": ("serve",),
}
_CTX = {"Now": L.Ctx.NOW, "Nres": L.Ctx.RESIDENTS, "Ndec": L.Ctx.DECODERS, "Decoding": L.Ctx.DECODING,
        "Admission": L.Ctx.ADMISSION, "Remaining": L.Ctx.REMAINING}
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Lt": "lt", "Le": "le", "Gt": "gt", "Ge": "ge", "Eq": "eq",
           "Ne": "ne", "And": "and", "Or": "or"}
_TESTS = ("Lt", "Le", "Gt", "Ge", "Eq", "Ne", "And", "Or")
_WHERE = {"session": "a session statement", "header": "a hold's header", "engine": "the engine's budget or chunk",
          "serve": "a serve key", "queue": "a queue key", "victim": "a preempt by key"}


def _closed(e: ir.Expr) -> float | None:
    """The value of an expression that reads nothing (numbers, arithmetic,
    comparisons, min, max, floor, ceil), evaluated as the interpreter does,
    in floats; None if it reads something or divides by 0. A closed term
    whose value is a natural number is that number in the fragment, though
    its parts are not: lib/vllm.sq's `floor(watermark * (blocks + 1))` with
    the scenario's watermark 0.39 is a number of blocks."""
    while isinstance(e, ir.Cost):
        e = e.expr
    if isinstance(e, ir.Num):
        return e.value
    if isinstance(e, ir.Unary):
        x = _closed(e.operand)
        if x is None:
            return None
        return -x if e.op == "Neg" else (1.0 if x == 0.0 else 0.0) if e.op == "Not" else None
    if isinstance(e, ir.Binary):
        a, b = _closed(e.left), _closed(e.right)
        if a is None or b is None:
            return None
        ops = {"Add": lambda: a + b, "Sub": lambda: a - b, "Mul": lambda: a * b,
               "Div": lambda: a / b if b != 0.0 else None,
               "Lt": lambda: float(a < b), "Le": lambda: float(a <= b), "Gt": lambda: float(a > b),
               "Ge": lambda: float(a >= b), "Eq": lambda: float(a == b), "Ne": lambda: float(a != b),
               "And": lambda: float(a != 0.0 and b != 0.0), "Or": lambda: float(a != 0.0 or b != 0.0)}
        return ops[e.op]() if e.op in ops else None
    if isinstance(e, ir.Cond):
        c = _closed(e.test)
        return None if c is None else _closed(e.then if c != 0.0 else e.otherwise)
    if isinstance(e, ir.Call) and e.fun in ("Min", "Max", "Floor", "Ceil"):
        xs = [_closed(a.expr) if isinstance(a, ir.ExprArg) else None for a in e.args]
        if any(x is None or not math.isfinite(x) for x in xs):
            return None
        return {"Min": lambda: min(xs), "Max": lambda: max(xs), "Floor": lambda: float(math.floor(xs[0])),
                "Ceil": lambda: float(math.ceil(xs[0]))}[e.fun]()
    return None


def _foldable(e: ir.Expr, under_floor: bool = False) -> bool:
    """A closed term the fragment could not write as it is, so its value
    stands for it: it has a number that is not a natural, a division
    outside `floor(…)` or a negation (a term the fragment can write is kept
    as written)."""
    e = _unwrap(e)
    if isinstance(e, ir.Num):
        return not _is_natural(e.value)
    if isinstance(e, ir.Unary):
        return e.op == "Neg" or _foldable(e.operand)
    if isinstance(e, ir.Binary):
        return (e.op == "Div" and not under_floor) or _foldable(e.left) or _foldable(e.right)
    if isinstance(e, ir.Cond):
        return _foldable(e.test) or _foldable(e.then) or _foldable(e.otherwise)
    if isinstance(e, ir.Call):
        return any(isinstance(a, ir.ExprArg) and _foldable(a.expr, e.fun == "Floor") for a in e.args)
    return False


def _is_natural(x: float | None) -> bool:
    return x is not None and math.isfinite(x) and x >= 0 and float(x).is_integer()


def _unwrap(e: ir.Expr) -> ir.Expr:
    while isinstance(e, ir.Cost):
        e = e.expr
    return e


def _key_attr(key: ir.Expr) -> int | None:
    """The attribute a key is, alone or negated (``k`` or ``-k``), or None."""
    key = _unwrap(key)
    if isinstance(key, ir.Unary) and key.op == "Neg":
        key = _unwrap(key.operand)
    return key.slot if isinstance(key, ir.Attr) else None


def _attrs_read(node, out: list) -> None:
    """Every attribute slot an IR node reads (a walk over its fields)."""
    if isinstance(node, ir.Attr):
        out.append(node.slot)
        return
    if isinstance(node, (tuple, list)):
        for x in node:
            _attrs_read(x, out)
        return
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            _attrs_read(getattr(node, f.name), out)


def _constant(e: ir.Expr) -> float | None:
    """The value of an iteration cost that is the same on every iteration, or
    None. A term multiplied by the number 0 is 0 whatever it reads: the
    context variables an iteration cost may read are finite counts (seed 002
    section 5), so ``c + 0 * decoders + 0 * prefilled`` is c. This is how
    lib/vllm.sq's cost on the step clock (``c_it = 1``, the other
    coefficients 0: oracle.vllm_sets.step_clock_sets) is 1."""
    while isinstance(e, ir.Cost):
        e = e.expr
    if isinstance(e, ir.Num):
        return e.value
    if isinstance(e, ir.Ctx):
        return None
    if isinstance(e, ir.Binary) and e.op == "Add":
        left, right = _constant(e.left), _constant(e.right)
        return None if left is None or right is None else left + right
    if isinstance(e, ir.Binary) and e.op == "Mul":
        left, right = _constant(e.left), _constant(e.right)
        if (left == 0.0 and _finite_count(e.right)) or (right == 0.0 and _finite_count(e.left)):
            return 0.0
        return None if left is None or right is None else left * right
    return None


def _finite_count(e: ir.Expr) -> bool:
    """A context variable or a finite number: what times 0 is 0."""
    while isinstance(e, ir.Cost):
        e = e.expr
    return isinstance(e, ir.Ctx) or (isinstance(e, ir.Num) and math.isfinite(e.value))


class Locator:
    """Turns the JSON path of an IR node into a Span (or None: the file alone)."""

    def __init__(self, file: str, find: Callable[[tuple], Span | None]):
        self.file = file
        self.find = find

    @staticmethod
    def for_json(file: str, text: str) -> "Locator":
        table = positions(text)

        def find(path: tuple) -> Span | None:
            line_col = nearest(table, path)
            return Span(file, *line_col) if line_col else None

        return Locator(file, find)

    @staticmethod
    def for_source(smap: SourceMap) -> "Locator":
        def find(path: tuple) -> Span | None:
            if len(path) >= 3 and path[0] == "blocks":
                return smap.stmt(path[1], path[2])
            if len(path) >= 2 and path[0] == "pools":
                return smap.pools.get(path[1])
            if len(path) >= 2 and path[0] == "stages":
                return smap.stages.get(path[1])
            if path and path[0] == "arrival":
                return smap.arrival
            return None

        return Locator(smap.file or "<program>", find)


def render_path(path: tuple) -> str:
    """``blocks[2][0].Hold.pools[1]``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


@dataclass(frozen=True)
class Translation:
    """The fragment's program, and the names the emitter writes beside it."""

    program: L.Program
    attrs: tuple[str, ...]
    pools: tuple[str, ...]
    stages: tuple[str, ...]
    observes: tuple[str, ...]  # by the fragment's index
    shifts: tuple[tuple[int, int], ...] = ()  # (slot, the number added to its values): ``shifts``


class _Translator:
    def __init__(self, program: ir.Program, where: Locator, observe_order: tuple[str, ...] = ()):
        self.p = program
        self.where = where
        self.engine = -1
        #: the fragment's observation indices: the names of ``observe_order`` first, in that order, then the
        #: others in the IR's order (``outcome`` reads observation 0 and 1, ``refusals`` 2)
        first = [n for n in observe_order if n in program.observes]
        names = first + [n for n in program.observes if n not in first]
        self.observes = tuple(names)
        self.observe_index = {k: names.index(n) for k, n in enumerate(program.observes)}
        #: per attribute read only as a whole key, the number added to each of its values (``shifts``)
        self.shift: dict[int, int] = {}

    # -- attributes only compared ----------------------------------------------------

    def key_only(self, slot: int) -> bool:
        """Whether the attribute is read only as a whole key (``k`` or
        ``-k`` of a serve, queue or preempt by order) and set only to a
        constant in init: then only how its values compare matters, and the
        same number added to every value changes no decision."""
        p = self.p
        reads: list = []
        for pool in p.pools:
            for keys in (pool.queue, pool.preempt):
                for k in keys or ():
                    if _key_attr(k) is None:
                        _attrs_read(k, reads)
            _attrs_read(dataclasses.replace(pool, queue=None, preempt=None), reads)
        for stage in p.stages:
            if isinstance(stage.kind, ir.Step):
                for k in stage.kind.serve or ():
                    if _key_attr(k) is None:
                        _attrs_read(k, reads)
                _attrs_read(dataclasses.replace(stage.kind, serve=None), reads)
            else:
                _attrs_read(stage, reads)
        for b, block in enumerate(p.blocks):
            for st in block:
                if isinstance(st, ir.Set) and st.slot == slot and (b != p.init or _closed(st.expr) is None):
                    return False
                _attrs_read(st, reads)
        _attrs_read(p.gauges, reads)
        return slot not in reads

    def shifts(self) -> dict[int, int]:
        """The attributes given a negative value by an explicit session that
        are only compared (``key_only``), each with the number that makes
        its least value 0: vLLM's priorities are any integers
        (request.py:357-367); the fragment's values are in ℕ."""
        p = self.p
        values: dict[int, list[float]] = {}
        for spec in p.arrival.sessions:
            for slot, v in spec.attrs + tuple(x for turn in spec.turns or () for x in turn):
                values.setdefault(slot, []).append(v)
        for st in p.blocks[p.init]:
            if isinstance(st, ir.Set) and _closed(st.expr) is not None:
                values.setdefault(st.slot, []).append(_closed(st.expr))
        out = {}
        for slot, vs in values.items():
            low = min(vs)
            if low < 0 and all(math.isfinite(v) and float(v).is_integer() for v in vs) and self.key_only(slot):
                out[slot] = int(-low)
        return out

    # -- errors -----------------------------------------------------------------

    def refuse(self, path: tuple, what: str) -> ProgramError:
        span = self.where.find(path)
        message = f"{REFUSED}: {what}"
        if span is None:
            message += f" (IR {render_path(path)})"
        return ProgramError(message, span, file=self.where.file)

    # -- numbers ------------------------------------------------------------------

    def natural(self, x: float, path: tuple, what: str) -> int:
        if not (math.isfinite(x) and x >= 0 and float(x).is_integer()):
            raise self.refuse(path, f"{what} {x:g} is not a natural number (the fragment's values are in ℕ)")
        return int(x)

    # -- references ---------------------------------------------------------------

    def single(self, ref: ir.Ref, path: tuple, kind: str) -> int:
        if ref.count != 1 or ref.index is not None:
            raise self.refuse(path, f"a {kind} family ({kind}s indexed by an expression); the fragment names one "
                                    f"{kind} at a time")
        return ref.base

    # -- expressions -------------------------------------------------------------

    def expr(self, e: ir.Expr, path: tuple, context: str) -> L.Expr:
        if isinstance(e, ir.Cost):
            return self.expr(e.expr, path + ("Cost", 1), context)
        if _foldable(e) and _is_natural(_closed(e)):
            return L.Num(int(_closed(e)))
        if isinstance(e, ir.Num):
            return L.Num(self.natural(e.value, path + ("Num",), "the number"))
        if isinstance(e, ir.Attr):
            if context == "engine":
                raise self.refuse(path, "an attribute read in the engine's budget or chunk")
            return L.Attr(e.slot)
        if isinstance(e, ir.Ctx):
            places = _CONTEXTS.get(e.var)
            spelling = ir.CONTEXT_VARIABLES.get(e.var, e.var)
            if places is None:
                raise self.refuse(path, f"the context variable `{spelling}`")
            if context not in places:
                raise self.refuse(path, f"`{spelling}` read in {_WHERE[context]}")
            return L.CtxVar(_CTX[e.var])
        if isinstance(e, ir.Sample):
            raise self.refuse(path, f"a draw `~{ir.DISTRIBUTIONS[e.dist][0]}(…)`: the fragment has no draws")
        if isinstance(e, ir.Call):
            return self.call(e, path + ("Call",), context)
        if isinstance(e, ir.Unary):
            if e.op == "Not":
                return L.Not(self.expr(e.operand, path + ("Unary", 1), context))
            raise self.refuse(path, "a negation `-e` (values are in ℕ; `-` is allowed only heading a serve key)")
        if isinstance(e, ir.Binary):
            if e.op in _BINARY:
                return L.Binary(_BINARY[e.op], self.expr(e.left, path + ("Binary", 1), context),
                                self.expr(e.right, path + ("Binary", 2), context))
            if e.op == "Div":
                raise self.refuse(path, "a division `/` outside `floor(…)` (values are in ℕ: floor(a / b) is the "
                                        "fragment's division)")
            raise self.refuse(path, "the power operator `^`")
        if isinstance(e, ir.Cond):
            return L.Cond(self.expr(e.test, path + ("Cond", 0), context),
                          self.expr(e.then, path + ("Cond", 1), context),
                          self.expr(e.otherwise, path + ("Cond", 2), context))
        raise self.refuse(path, f"the expression {type(e).__name__}")

    def call(self, e: ir.Call, path: tuple, context: str) -> L.Expr:
        fun, args = e.fun, e.args
        spelling = ir.FUNCTIONS.get(fun, (fun,))[0]

        def arg(k: int) -> L.Expr:
            return self.expr(args[k].expr, path + (1, k, "Expr"), context)

        if fun in ("Min", "Max"):
            return L.Binary(fun.lower(), arg(0), arg(1))
        if fun == "Floor":
            inner = args[0].expr
            while isinstance(inner, ir.Cost):
                inner = inner.expr
            if isinstance(inner, ir.Binary) and inner.op == "Div":
                return L.Binary("div", self.expr(inner.left, path + (1, 0, "Expr", "Binary", 1), context),
                                self.expr(inner.right, path + (1, 0, "Expr", "Binary", 2), context))
            return arg(0)  # a value in ℕ is its own floor
        if fun == "Ceil":
            inner = _unwrap(args[0].expr)
            if isinstance(inner, ir.Binary) and inner.op == "Div":
                d = _closed(inner.right)
                if not (_is_natural(d) and d >= 1):
                    raise self.refuse(path, "`ceil(a / b)` with b not a constant natural number of at least 1")
                # ⌈a / d⌉ = ⌊(a + d - 1) / d⌋ on ℕ (d ≥ 1)
                return L.Binary("div", L.Binary("add", self.expr(inner.left, path + (1, 0, "Expr", "Binary", 1),
                                                                 context), L.Num(int(d) - 1)), L.Num(int(d)))
            return arg(0)
        if fun in ("Queued", "CachedIn"):
            if fun == "CachedIn" and context not in ("session", "header"):
                raise self.refuse(path, f"`cachedin` read in {_WHERE[context]}")
            pool = self.single(args[0].ref, path + (1, 0, "Pool"), "pool")
            return L.Queued(pool) if fun == "Queued" else L.CachedIn(pool)
        if fun == "Holders":
            if context != "header":
                raise self.refuse(path, f"`holders` read in {_WHERE[context]}; the fragment reads it only in a "
                                        f"hold's header, at the engine's admission")
            return L.Holders(self.single(args[0].ref, path + (1, 0, "Pool"), "pool"))
        if fun == "BudgetLeft":
            stage = self.single(args[0].ref, path + (1, 0, "Stage"), "stage")
            if stage != self.engine:
                raise self.refuse(path, "`budget_left` of a stage that is not the step engine")
            if context != "header":
                raise self.refuse(path, f"`budget_left` read in {_WHERE[context]}; the fragment reads it only in a "
                                        f"hold's header, at the engine's admission")
            return L.BudgetLeft()
        raise self.refuse(path, f"the function `{spelling}`")

    def test(self, e: ir.Expr, path: tuple) -> L.Expr:
        """A branch guard: a test (0 or 1 by its form)."""
        inner = e
        while isinstance(inner, ir.Cost):
            inner = inner.expr
        is_test = ((isinstance(inner, ir.Binary) and inner.op in _TESTS)
                   or (isinstance(inner, ir.Unary) and inner.op == "Not")
                   or (isinstance(inner, ir.Num) and inner.value in (0.0, 1.0)))
        if not is_test:
            raise self.refuse(path, "a branch guard that is not a test (a comparison, &&, || or !): the fragment "
                                    "takes the first block on 1 and has no run-time error for another value")
        return self.expr(e, path, "session")

    # -- pools and stages ----------------------------------------------------------

    def pool(self, k: int, pool: ir.Pool) -> L.Pool:
        path = ("pools", k)
        if math.isinf(pool.cap):
            raise self.refuse(path + ("cap",), f"pool {pool.name} has cap inf; the fragment's pools have a cap in ℕ")
        block = 1 if pool.block is None else self.natural(pool.block, path + ("block",), f"pool {pool.name}'s block")
        if block < 1:
            raise self.refuse(path + ("block",), f"pool {pool.name} has block 0")
        cap = self.natural(pool.cap, path + ("cap",), f"pool {pool.name}'s cap")
        if pool.evict is not None:
            raise self.refuse(path + ("evict",), f"pool {pool.name} evicts by keys; the fragment's pools are LRU")
        if pool.spill is not None:
            raise self.refuse(path + ("spill",), f"pool {pool.name} spills to a tier")
        if pool.share_prefixes:
            raise self.refuse(path + ("share_prefixes",), f"pool {pool.name} shares prefixes across requests "
                                                          f"(docs/design/shared-prefixes.md); the fragment's cache "
                                                          f"is a session's own")
        requeue_key = pool.requeue == "Key"
        queue = ()
        if pool.queue is not None:
            if not requeue_key:
                raise self.refuse(path + ("queue",), f"pool {pool.name} queues by keys with a preempted hold at its "
                                                     f"head, ahead of the keys; the fragment's keyed queues requeue "
                                                     f"by key")
            queue = self.keys(pool.queue, path + ("queue",), "queue")
        lifo = False
        victim = ()
        if pool.preempt is not None:
            lifo = True
            if pool.preempt != (ir.Unary("Neg", ir.Ctx("Admission")),):
                victim = self.keys(pool.preempt, path + ("preempt",), "victim")
        if pool.admit_via is not None and pool.admit_via != self.engine:
            raise self.refuse(path + ("admit_via",), f"pool {pool.name} is admitted via a stage that is not the "
                                                     f"step engine")
        return L.Pool(cap // block, block, lifo, pool.admit_via is not None, queue, requeue_key, victim)

    def keys(self, keys: tuple, path: tuple, context: str) -> tuple[L.ServeKey, ...]:
        """Keys (a serve, queue or victim order): a key ``-e`` is ``e`` descending."""
        out = []
        for j, key in enumerate(keys):
            inner = _unwrap(key)
            if isinstance(inner, ir.Unary) and inner.op == "Neg":
                out.append(L.ServeKey(L.Order.DESC, self.expr(inner.operand, path + (j, "Unary", 1), context)))
            else:
                out.append(L.ServeKey(L.Order.ASC, self.expr(key, path + (j,), context)))
        return tuple(out)

    def stages(self) -> tuple[L.Engine, tuple[str, ...]]:
        steps = [k for k, s in enumerate(self.p.stages) if isinstance(s.kind, ir.Step)]
        if not steps:
            raise self.refuse(("stages",), "a program without a step engine; the fragment has exactly one")
        if len(steps) > 1:
            raise self.refuse(("stages", steps[1]), f"a second step engine ({self.p.stages[steps[1]].name}); "
                                                    f"the fragment has exactly one")
        self.engine = steps[0]
        for k, s in enumerate(self.p.stages):
            path = ("stages", k, "kind")
            if isinstance(s.kind, ir.Fifo):
                raise self.refuse(path, f"the fifo stage {s.name}; the fragment's stages are one step engine and delays")
            if isinstance(s.kind, ir.Ps) and s.kind.capacity != ir.Ctx("N"):
                raise self.refuse(path, f"the ps stage {s.name} (processor sharing); the fragment's only other "
                                        f"stages are delays")
        step = self.p.stages[self.engine].kind
        path = ("stages", self.engine, "kind", "Step")
        if _constant(step.cost) != 1.0:
            raise self.refuse(path + ("cost",), "an iteration cost other than 1; the fragment runs on the step clock")
        if step.serve is None:
            raise self.refuse(path + ("serve",), "serve exclusive prefill")
        if step.memory is None:
            raise self.refuse(path + ("memory",), "a step engine without a memory pool")
        if step.spec_tokens:
            raise self.refuse(path + ("spec_tokens",), "speculative decoding (`speculate`, "
                                                       "docs/design/speculative-decoding.md)")
        if step.load_remote is not None:
            raise self.refuse(path + ("load_remote",), "a KV connector's remote load (`load remote`, "
                                                       "docs/design/kv-connector.md)")
        if step.offload_chunks:
            raise self.refuse(path + ("offload_chunks",), "CPU offloading (`offload to`, "
                                                          "docs/design/cpu-offloading.md)")
        if step.defer_free:
            raise self.refuse(path + ("defer_free",), "a KV connector's deferred free (`defer free`, "
                                                      "docs/design/kv-connector.md)")
        keys = []
        for j, key in enumerate(step.serve):
            key_path = path + ("serve", "By", j)
            inner = key
            while isinstance(inner, ir.Cost):
                inner = inner.expr
            if isinstance(inner, ir.Unary) and inner.op == "Neg":
                keys.append(L.ServeKey(L.Order.DESC, self.expr(inner.operand, key_path + ("Unary", 1), "serve")))
            else:
                keys.append(L.ServeKey(L.Order.ASC, self.expr(key, key_path, "serve")))
        engine = L.Engine(self.expr(step.budget, path + ("budget",), "engine"),
                          self.expr(step.chunk, path + ("chunk",), "engine"), tuple(keys), step.memory,
                          L.SelfPreemption.CONTINUES if step.self_preemption == "Continue" else L.SelfPreemption.ENDS,
                          bool(step.schedule_ahead))
        return engine, tuple(s.name for s in self.p.stages)

    # -- statements ----------------------------------------------------------------

    def openers(self) -> dict[int, tuple[int, int]]:
        out = {}
        for b, block in enumerate(self.p.blocks):
            for i, s in enumerate(block):
                inner = ()
                if isinstance(s, ir.Hold):
                    inner = (s.body,)
                elif isinstance(s, ir.Branch):
                    inner = (s.then_block, s.else_block)
                elif isinstance(s, (ir.Loop, ir.While)):
                    inner = (s.block,)
                for x in inner:
                    out[x] = (b, i)
        return out

    def inside_hold_on(self, block: int, pool: int) -> bool:
        openers = self.openers()
        seen = set()
        while block in openers and block not in seen:
            seen.add(block)
            b, i = openers[block]
            s = self.p.blocks[b][i]
            if isinstance(s, ir.Hold) and any(u.ref.base == pool for u in s.pools):
                return True
            block = b
        return False

    def stmt(self, b: int, i: int, s: ir.Stmt, memory: int, pools: tuple[L.Pool, ...]) -> L.Stmt:
        path = ("blocks", b, i)
        if isinstance(s, ir.Set):
            if s.slot in self.shift:
                return L.Set(s.slot, L.Num(self.natural(_closed(s.expr) + self.shift[s.slot], path + ("Set", 1),
                                                        "the value")))
            return L.Set(s.slot, self.expr(s.expr, path + ("Set", 1), "session"))
        if isinstance(s, ir.Observe):
            return L.Observe(self.observe_index[s.index], self.expr(s.expr, path + ("Observe", 1), "session"))
        if isinstance(s, ir.Turn):
            return L.Turn()
        if isinstance(s, ir.End):
            return L.Finish()
        if isinstance(s, ir.Branch):
            return L.Branch(self.test(s.guard, path + ("Branch", 0)), s.then_block, s.else_block)
        if isinstance(s, ir.Hold):
            hp = path + ("Hold",)
            if s.lease is not None:
                raise self.refuse(hp + ("lease",), "a lease (an allocation that outlives its hold)")
            uses = []
            for k, u in enumerate(s.pools):
                q = self.single(u.ref, hp + ("pools", k, 0), "pool")
                uses.append(L.Use(q, self.expr(u.units, hp + ("pools", k, 1), "header"),
                                  None if u.reserve is None else self.expr(u.reserve, hp + ("pools", k, 2), "header")))
            if not pools[uses[0].pool].via_engine:
                raise self.refuse(hp + ("pools", 0, 0), f"a hold whose first pool ({self.p.pools[uses[0].pool].name}) "
                                                        f"is not admitted via the step engine: the fragment admits "
                                                        f"only at the engine's iterations")
            reuse = None if s.reuse is None else self.expr(s.reuse, hp + ("reuse",), "header")
            cache = None if s.cache is None else self.expr(s.cache, hp + ("cache",), "session")
            return L.Hold(tuple(uses), reuse, s.body, cache)
        if isinstance(s, ir.Run):
            rp = path + ("Run",)
            if s.also:
                raise self.refuse(rp + ("also",), "a run holding several stages at once (a flow)")
            stage = self.single(s.stage, rp + ("stage",), "stage")
            work = self.expr(s.work, rp + ("work",), "session")
            if stage == self.engine:
                growing = None
                if s.growing is not None:
                    growing = self.single(s.growing, rp + ("growing",), "pool")
                    if growing != memory or not pools[growing].lifo:
                        raise self.refuse(rp + ("growing",), "a growing run on a pool that is not the engine's "
                                                             "memory under preempt lifo")
                    if not self.inside_hold_on(b, growing):
                        raise self.refuse(rp + ("growing",), f"a growing run outside a hold on "
                                                             f"{self.p.pools[growing].name}")
                mode = {"Prefill": L.Mode.PREFILL, "Decode": L.Mode.DECODE}[s.mode]
                return L.Step(mode, work, growing)
            if s.growing is not None:
                raise self.refuse(rp + ("growing",), "a growing run on a delay stage")
            return L.Delay(stage, work)
        name = {ir.Grow: "grow", ir.Drop: "drop", ir.Release: "release", ir.Load: "load", ir.Loop: "loop",
                ir.While: "while", ir.Choose: "choose"}.get(type(s), type(s).__name__)
        raise self.refuse(path, f"the statement `{name}`")

    # -- the program -------------------------------------------------------------

    def program(self) -> Translation:
        p = self.p
        if not isinstance(p.arrival, ir.Sessions):
            raise self.refuse(("arrival",), "an arrival process; the fragment runs explicit sessions, all at time 0")
        if p.trace is not None:
            raise self.refuse(("trace",), "a trace file")
        if p.gauges:
            raise self.refuse(("gauges", 0), "a gauge")
        if p.warmup != 0:
            raise self.refuse(("warmup",), "a warm-up; the fragment keeps every observation")
        self.shift = self.shifts()
        engine, stage_names = self.stages()
        pools = tuple(self.pool(k, pool) for k, pool in enumerate(p.pools))
        for k, pool in enumerate(p.pools):
            if pool.index is not None:
                raise self.refuse(("pools", k, "index"), f"the pool family {pool.name}")
        blocks = []
        for b, block in enumerate(p.blocks):
            stmts = []
            for i, s in enumerate(block):
                if b in (p.init, p.turn) and not isinstance(s, (ir.Set, ir.Observe)):
                    raise self.refuse(("blocks", b, i), "a statement other than set or observe in init or turn")
                stmts.append(self.stmt(b, i, s, engine.memory, pools))
            blocks.append(tuple(stmts))
        sessions = []
        for k, spec in enumerate(p.arrival.sessions):
            sp = ("arrival", "Sessions", k)
            attrs = tuple((slot, self.natural(v + self.shift.get(slot, 0), sp + ("attrs", j, 1),
                                              f"session {k}'s attribute {p.attrs[slot]}"))
                          for j, (slot, v) in enumerate(spec.attrs))
            turns = tuple(tuple((slot, self.natural(v + self.shift.get(slot, 0), sp + ("turns", t, j, 1),
                                                    f"session {k}'s attribute {p.attrs[slot]}"))
                                for j, (slot, v) in enumerate(turn))
                          for t, turn in enumerate(spec.turns or ()))
            sessions.append(L.Spec(attrs, turns))
        slots = L.Slots(p.slot_cached, p.slot_serial, p.slot_turn, p.slot_more, p.slot_computed)
        program = L.Program(len(p.attrs), slots, pools, engine, tuple(blocks), p.init, p.turn, p.session,
                            tuple(sessions))
        return Translation(program, p.attrs, tuple(x.name for x in p.pools), stage_names, self.observes,
                           tuple(sorted(self.shift.items())))


def translate(program: ir.Program, where: Locator, observe_order: tuple[str, ...] = ()) -> Translation:
    """The fragment's program of ``program``, or a ProgramError at the first
    construct outside the fragment; the observations named in
    ``observe_order`` numbered first, in that order."""
    return _Translator(program, where, observe_order).program()
