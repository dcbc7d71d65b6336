"""The IR's JSON encoding (version 13), both ways.

``encode_program`` writes the reference implementation's encoding: structs as
objects with fields in the IR's order, enums externally tagged, numbers as
floats, infinity as the string ``"inf"``, pretty-printed with a two-space
indent and a final newline (``../shared/ir/FORMAT.md``). ``decode_program``
reads it back; ``dumps(loads(text)) == text`` for every file this encoding
writes. Malformed input raises ``IRFormatError`` with a JSON path.
"""

from __future__ import annotations

import json
import math
from typing import Any

from . import ir

# A JSON value as Python builds it.
Json = Any


class IRFormatError(ValueError):
    """An IR file that is not the version-13 encoding; ``path`` says where."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


# --------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------


def encode_number(x: float) -> Json:
    """A float, or "inf"/"-inf" (JSON has no infinity). NaN has no encoding."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if math.isnan(x):
        raise ValueError("NaN has no IR encoding")
    return float(x)


def decode_number(v: Json, path: str) -> float:
    if isinstance(v, bool):
        raise IRFormatError(path, "expected a number, found a boolean")
    if isinstance(v, (int, float)):
        return float(v)
    if v == "inf":
        return math.inf
    if v == "-inf":
        return -math.inf
    raise IRFormatError(path, f"expected a number, found {json.dumps(v)}")


def decode_int(v: Json, path: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < 0:
        raise IRFormatError(path, f"expected a non-negative integer, found {json.dumps(v)}")
    return int(v)


# --------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------


def encode_ref(r: ir.Ref) -> Json:
    return {"base": r.base, "count": r.count, "index": None if r.index is None else encode_expr(r.index)}


def encode_target(t: ir.Target) -> Json:
    if isinstance(t, ir.JointTarget):
        return {"Joint": [encode_target(x) for x in t.parts]}
    return {t.kind: {"base": t.base, "count": t.count}}


def encode_arg(a: ir.Arg) -> Json:
    if isinstance(a, ir.ExprArg):
        return {"Expr": encode_expr(a.expr)}
    if isinstance(a, ir.PoolArg):
        return {"Pool": encode_ref(a.ref)}
    return {"Stage": encode_ref(a.ref)}


def encode_expr(e: ir.Expr) -> Json:
    match e:
        case ir.Num(value):
            return {"Num": encode_number(value)}
        case ir.Attr(slot):
            return {"Attr": slot}
        case ir.Ctx(var):
            return {"Ctx": var}
        case ir.Sample(dist, args):
            return {"Sample": [dist, [encode_expr(a) for a in args]]}
        case ir.Call(fun, args):
            return {"Call": [fun, [encode_arg(a) for a in args]]}
        case ir.Unary(op, operand):
            return {"Unary": [op, encode_expr(operand)]}
        case ir.Binary(op, left, right):
            return {"Binary": [op, encode_expr(left), encode_expr(right)]}
        case ir.Cond(test, then, otherwise):
            return {"Cond": [encode_expr(test), encode_expr(then), encode_expr(otherwise)]}
        case ir.Cost(target, expr):
            return {"Cost": [encode_target(target), encode_expr(expr)]}
    raise TypeError(f"not an IR expression: {e!r}")


def _opt_expr(e: ir.Expr | None) -> Json:
    return None if e is None else encode_expr(e)


def encode_stmt(s: ir.Stmt) -> Json:
    match s:
        case ir.Turn():
            return "Turn"
        case ir.End():
            return "End"
        case ir.Set(slot, expr):
            return {"Set": [slot, encode_expr(expr)]}
        case ir.Observe(index, expr):
            return {"Observe": [index, encode_expr(expr)]}
        case ir.Hold(pools, reuse, body, cache, lease):
            return {
                "Hold": {
                    "pools": [[encode_ref(p.ref), encode_expr(p.units), _opt_expr(p.reserve)] for p in pools],
                    "reuse": _opt_expr(reuse),
                    "body": body,
                    "cache": _opt_expr(cache),
                    "lease": None if lease is None else [encode_ref(lease.ref), encode_expr(lease.duration)],
                }
            }
        case ir.Grow(ref, amount):
            return {"Grow": [encode_ref(ref), encode_expr(amount)]}
        case ir.Drop(ref):
            return {"Drop": encode_ref(ref)}
        case ir.Release(ref):
            return {"Release": encode_ref(ref)}
        case ir.Load(ref, amount):
            return {"Load": [encode_ref(ref), encode_expr(amount)]}
        case ir.Run(stage, mode, work, growing, also):
            body: dict[str, Json] = {
                "stage": encode_ref(stage),
                "mode": mode,
                "work": encode_expr(work),
                "growing": None if growing is None else encode_ref(growing),
            }
            if also is not None:
                body["also"] = [encode_ref(r) for r in also]
            return {"Run": body}
        case ir.Branch(guard, then_block, else_block):
            return {"Branch": [encode_expr(guard), then_block, else_block]}
        case ir.Loop(block):
            return {"Loop": block}
        case ir.While(guard, block):
            return {"While": [encode_expr(guard), block]}
        case ir.Choose(var, count, key):
            return {"Choose": {"var": var, "count": count, "key": [encode_expr(k) for k in key]}}
    raise TypeError(f"not an IR statement: {s!r}")


def _keys(keys: tuple[ir.Expr, ...]) -> Json:
    return [encode_expr(k) for k in keys]


def encode_pool(p: ir.Pool) -> Json:
    out: dict[str, Json] = {"name": p.name}
    if p.index is not None:
        out["index"] = p.index
    out["cap"] = encode_number(p.cap)
    out["block"] = None if p.block is None else encode_number(p.block)
    out["evict"] = "Lru" if p.evict is None else {"By": _keys(p.evict)}
    out["preempt"] = "None" if p.preempt is None else {"By": {"keys": _keys(p.preempt)}}
    out["queue"] = None if p.queue is None else _keys(p.queue)
    out["spill"] = (
        None
        if p.spill is None
        else {"to": p.spill.to, "via": p.spill.via, "work": encode_expr(p.spill.work), "when": encode_expr(p.spill.when)}
    )
    out["admit_via"] = p.admit_via
    if p.requeue != "Head":  # serq-ref's extension of v13: written only when not the default
        out["requeue"] = p.requeue
    return out


def encode_stage(s: ir.Stage) -> Json:
    out: dict[str, Json] = {"name": s.name}
    if s.index is not None:
        out["index"] = s.index
    match s.kind:
        case ir.Fifo(servers):
            kind: Json = {"Fifo": servers}
        case ir.Ps(capacity):
            kind = {"Ps": encode_expr(capacity)}
        case ir.Step(budget, cost, chunk, serve, memory, self_preemption, schedule_ahead):
            kind = {
                "Step": {
                    "budget": encode_expr(budget),
                    "cost": encode_expr(cost),
                    "chunk": encode_expr(chunk),
                    "serve": "ExclusivePrefill" if serve is None else {"By": _keys(serve)},
                    "memory": memory,
                }
            }
            if self_preemption != "End":  # serq-ref's extension of v13: written only when not the default
                kind["Step"]["self_preemption"] = self_preemption
            if schedule_ahead:  # serq-ref's extension of v13: written only when not the default
                kind["Step"]["schedule_ahead"] = True
        case _:
            raise TypeError(f"not a stage kind: {s.kind!r}")
    out["kind"] = kind
    return out


def _pairs(pairs: tuple[tuple[int, float], ...]) -> Json:
    return [[slot, encode_number(v)] for slot, v in pairs]


def encode_arrival(a: ir.Arrival) -> Json:
    match a:
        case ir.Poisson(rate):
            return {"Poisson": encode_number(rate)}
        case ir.Renewal(gap):
            return {"Renewal": encode_expr(gap)}
        case ir.Closed(n):
            return {"Closed": n}
        case ir.Batch(n):
            return {"Batch": n}
        case ir.NoArrival():
            return "None"
        case ir.Sessions(sessions):
            out = []
            for s in sessions:
                item: dict[str, Json] = {"attrs": _pairs(s.attrs)}
                if s.turns is not None:
                    item["turns"] = [_pairs(t) for t in s.turns]
                out.append(item)
            return {"Sessions": out}
    raise TypeError(f"not an arrival: {a!r}")


def encode_attr_type(t: ir.AttrType) -> Json:
    return t if isinstance(t, str) else {"Cost": encode_target(t)}


def encode_program(p: ir.Program) -> Json:
    out: dict[str, Json] = {
        "version": p.version,
        "attrs": list(p.attrs),
        "attr_types": [encode_attr_type(t) for t in p.attr_types],
        "sides": [list(s) for s in p.sides],
        "observes": list(p.observes),
        "pools": [encode_pool(x) for x in p.pools],
        "stages": [encode_stage(x) for x in p.stages],
        "arrival": encode_arrival(p.arrival),
        "trace": p.trace,
        "trace_ordered": p.trace_ordered,
        "init": p.init,
        "turn": p.turn,
        "session": p.session,
        "blocks": [[encode_stmt(s) for s in b] for b in p.blocks],
        "horizon": encode_number(p.horizon),
        "warmup": encode_number(p.warmup),
        "seed": p.seed,
    }
    if p.arrivals is not None:
        out["arrivals"] = p.arrivals
    for name in ("cached", "serial", "turn", "new", "out", "think", "more", "forced", "computed"):
        out[f"slot_{name}"] = getattr(p, f"slot_{name}")
    out["hidden"] = list(p.hidden)
    if p.share is not None:
        out["share"] = p.share
    if p.gauges:
        out["gauges"] = [{"name": g.name, "expr": encode_expr(g.expr)} for g in p.gauges]
    return out


def dumps(p: ir.Program) -> str:
    """The IR file's text: 2-space indent, final newline."""
    return json.dumps(encode_program(p), indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------

#: IR nodes of later versions that this project does not run (FORMAT.md, last paragraph).
LATER_NODES = ("Fork", "Join", "Claim", "Register", "Iteration", "Await", "Signal")


def _tag(v: Json, path: str) -> tuple[str, Json]:
    if isinstance(v, str):
        return v, None
    if isinstance(v, dict) and len(v) == 1:
        ((k, payload),) = v.items()
        return k, payload
    raise IRFormatError(path, f"expected an externally tagged variant, found {json.dumps(v)[:80]}")


def _list(v: Json, path: str, n: int | None = None) -> list:
    if not isinstance(v, list):
        raise IRFormatError(path, f"expected a list, found {json.dumps(v)[:80]}")
    if n is not None and len(v) != n:
        raise IRFormatError(path, f"expected {n} items, found {len(v)}")
    return v


def _obj(v: Json, path: str, fields: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    if not isinstance(v, dict):
        raise IRFormatError(path, f"expected an object, found {json.dumps(v)[:80]}")
    for f in fields:
        if f not in v:
            raise IRFormatError(path, f"missing field `{f}`")
    extra = sorted(set(v) - set(fields) - set(optional))
    if extra:
        raise IRFormatError(path, f"unknown field `{extra[0]}`")
    return v


def _later(tag: str, path: str) -> IRFormatError:
    return IRFormatError(
        path, f"`{tag}` is an IR node of a later serQ version; serq-ref runs version {ir.IR_VERSION}"
    )


def decode_ref(v: Json, path: str) -> ir.Ref:
    o = _obj(v, path, ("base", "count", "index"))
    index = None if o["index"] is None else decode_expr(o["index"], path + ".index")
    return ir.Ref(decode_int(o["base"], path + ".base"), decode_int(o["count"], path + ".count"), index)


def decode_target(v: Json, path: str) -> ir.Target:
    kind, payload = _tag(v, path)
    if kind == "Joint":
        parts = _list(payload, path + ".Joint")
        return ir.JointTarget(tuple(decode_target(x, f"{path}.Joint[{i}]") for i, x in enumerate(parts)))
    if kind not in ("Pool", "Stage"):
        raise IRFormatError(path, f"unknown cost target `{kind}`")
    o = _obj(payload, f"{path}.{kind}", ("base", "count"))
    return ir.CostTarget(kind, decode_int(o["base"], path), decode_int(o["count"], path))


def decode_arg(v: Json, path: str) -> ir.Arg:
    kind, payload = _tag(v, path)
    if kind == "Expr":
        return ir.ExprArg(decode_expr(payload, path + ".Expr"))
    if kind == "Pool":
        return ir.PoolArg(decode_ref(payload, path + ".Pool"))
    if kind == "Stage":
        return ir.StageArg(decode_ref(payload, path + ".Stage"))
    raise IRFormatError(path, f"unknown argument kind `{kind}`")


def decode_expr(v: Json, path: str) -> ir.Expr:
    tag, x = _tag(v, path)
    p = f"{path}.{tag}"
    if tag == "Num":
        return ir.Num(decode_number(x, p))
    if tag == "Attr":
        return ir.Attr(decode_int(x, p))
    if tag == "Ctx":
        if x not in ir.CONTEXT_VARIABLES:
            raise IRFormatError(p, f"unknown context variable `{x}`")
        return ir.Ctx(x)
    if tag == "Sample":
        dist, args = _list(x, p, 2)
        if dist not in ir.DISTRIBUTIONS:
            raise IRFormatError(p, f"unknown distribution `{dist}`")
        return ir.Sample(dist, tuple(decode_expr(a, f"{p}[1][{i}]") for i, a in enumerate(_list(args, p))))
    if tag == "Call":
        fun, args = _list(x, p, 2)
        if fun not in ir.FUNCTIONS:
            raise IRFormatError(p, f"unknown function `{fun}`")
        return ir.Call(fun, tuple(decode_arg(a, f"{p}[1][{i}]") for i, a in enumerate(_list(args, p))))
    if tag == "Unary":
        op, e = _list(x, p, 2)
        if op not in ir.UNARY_OPS:
            raise IRFormatError(p, f"unknown unary operator `{op}`")
        return ir.Unary(op, decode_expr(e, p + "[1]"))
    if tag == "Binary":
        op, a, b = _list(x, p, 3)
        if op not in ir.BINARY_OPS:
            raise IRFormatError(p, f"unknown binary operator `{op}`")
        return ir.Binary(op, decode_expr(a, p + "[1]"), decode_expr(b, p + "[2]"))
    if tag == "Cond":
        c, a, b = _list(x, p, 3)
        return ir.Cond(decode_expr(c, p + "[0]"), decode_expr(a, p + "[1]"), decode_expr(b, p + "[2]"))
    if tag == "Cost":
        t, e = _list(x, p, 2)
        return ir.Cost(decode_target(t, p + "[0]"), decode_expr(e, p + "[1]"))
    if tag in LATER_NODES:
        raise _later(tag, path)
    raise IRFormatError(path, f"unknown expression `{tag}`")


def _opt(v: Json, path: str) -> ir.Expr | None:
    return None if v is None else decode_expr(v, path)


def decode_stmt(v: Json, path: str) -> ir.Stmt:
    tag, x = _tag(v, path)
    p = f"{path}.{tag}"
    if tag == "Turn" and x is None:
        return ir.Turn()
    if tag == "End" and x is None:
        return ir.End()
    if tag == "Set":
        slot, e = _list(x, p, 2)
        return ir.Set(decode_int(slot, p + "[0]"), decode_expr(e, p + "[1]"))
    if tag == "Observe":
        k, e = _list(x, p, 2)
        return ir.Observe(decode_int(k, p + "[0]"), decode_expr(e, p + "[1]"))
    if tag == "Hold":
        o = _obj(x, p, ("pools", "reuse", "body", "cache", "lease"))
        pools = []
        for i, item in enumerate(_list(o["pools"], p + ".pools")):
            ref, units, reserve = _list(item, f"{p}.pools[{i}]", 3)
            q = f"{p}.pools[{i}]"
            pools.append(ir.HoldPool(decode_ref(ref, q + "[0]"), decode_expr(units, q + "[1]"), _opt(reserve, q + "[2]")))
        lease = None
        if o["lease"] is not None:
            ref, dur = _list(o["lease"], p + ".lease", 2)
            lease = ir.Lease(decode_ref(ref, p + ".lease[0]"), decode_expr(dur, p + ".lease[1]"))
        return ir.Hold(
            tuple(pools), _opt(o["reuse"], p + ".reuse"), decode_int(o["body"], p + ".body"), _opt(o["cache"], p + ".cache"), lease
        )
    if tag == "Grow":
        ref, e = _list(x, p, 2)
        return ir.Grow(decode_ref(ref, p + "[0]"), decode_expr(e, p + "[1]"))
    if tag == "Drop":
        return ir.Drop(decode_ref(x, p))
    if tag == "Release":
        return ir.Release(decode_ref(x, p))
    if tag == "Load":
        ref, e = _list(x, p, 2)
        return ir.Load(decode_ref(ref, p + "[0]"), decode_expr(e, p + "[1]"))
    if tag == "Run":
        o = _obj(x, p, ("stage", "mode", "work", "growing"), ("also",))
        if o["mode"] not in ir.RUN_MODES:
            raise IRFormatError(p + ".mode", f"unknown run mode `{o['mode']}`")
        also = None
        if "also" in o:
            also = tuple(decode_ref(r, f"{p}.also[{i}]") for i, r in enumerate(_list(o["also"], p + ".also")))
        growing = None if o["growing"] is None else decode_ref(o["growing"], p + ".growing")
        return ir.Run(decode_ref(o["stage"], p + ".stage"), o["mode"], decode_expr(o["work"], p + ".work"), growing, also)
    if tag == "Branch":
        g, a, b = _list(x, p, 3)
        return ir.Branch(decode_expr(g, p + "[0]"), decode_int(a, p + "[1]"), decode_int(b, p + "[2]"))
    if tag == "Loop":
        return ir.Loop(decode_int(x, p))
    if tag == "While":
        g, b = _list(x, p, 2)
        return ir.While(decode_expr(g, p + "[0]"), decode_int(b, p + "[1]"))
    if tag == "Choose":
        o = _obj(x, p, ("var", "count", "key"))
        keys = tuple(decode_expr(k, f"{p}.key[{i}]") for i, k in enumerate(_list(o["key"], p + ".key")))
        return ir.Choose(decode_int(o["var"], p + ".var"), decode_int(o["count"], p + ".count"), keys)
    if tag in LATER_NODES:
        raise _later(tag, path)
    raise IRFormatError(path, f"unknown statement `{tag}`")


def _decode_keys(v: Json, path: str) -> tuple[ir.Expr, ...]:
    return tuple(decode_expr(k, f"{path}[{i}]") for i, k in enumerate(_list(v, path)))


def decode_pool(v: Json, path: str) -> ir.Pool:
    fields = ("name", "cap", "block", "evict", "preempt", "queue", "spill", "admit_via")
    o = _obj(v, path, fields, ("index", "requeue"))
    evict_tag, evict = _tag(o["evict"], path + ".evict")
    if evict_tag == "Lru" and evict is None:
        evict_keys = None
    elif evict_tag == "By":
        evict_keys = _decode_keys(evict, path + ".evict.By")
    else:
        raise IRFormatError(path + ".evict", f"unknown eviction `{evict_tag}`")
    pre_tag, pre = _tag(o["preempt"], path + ".preempt")
    if pre_tag == "None" and pre is None:
        preempt_keys = None
    elif pre_tag == "By":
        preempt_keys = _decode_keys(_obj(pre, path + ".preempt.By", ("keys",))["keys"], path + ".preempt.By.keys")
    else:
        raise IRFormatError(path + ".preempt", f"unknown preemption `{pre_tag}`")
    spill = None
    if o["spill"] is not None:
        s = _obj(o["spill"], path + ".spill", ("to", "via", "work", "when"))
        spill = ir.Spill(
            decode_int(s["to"], path + ".spill.to"),
            decode_int(s["via"], path + ".spill.via"),
            decode_expr(s["work"], path + ".spill.work"),
            decode_expr(s["when"], path + ".spill.when"),
        )
    if not isinstance(o["name"], str):
        raise IRFormatError(path + ".name", "expected a string")
    return ir.Pool(
        name=o["name"],
        index=None if o.get("index") is None else decode_int(o["index"], path + ".index"),
        cap=decode_number(o["cap"], path + ".cap"),
        block=None if o["block"] is None else decode_number(o["block"], path + ".block"),
        evict=evict_keys,
        preempt=preempt_keys,
        queue=None if o["queue"] is None else _decode_keys(o["queue"], path + ".queue"),
        spill=spill,
        admit_via=None if o["admit_via"] is None else decode_int(o["admit_via"], path + ".admit_via"),
        requeue=_decode_requeue(o.get("requeue", "Head"), path + ".requeue"),
    )


def _decode_requeue(v: Json, path: str) -> str:
    if v not in ir.REQUEUE:
        raise IRFormatError(path, f"expected one of {', '.join(map(json.dumps, ir.REQUEUE))}, found {json.dumps(v)[:80]}")
    return v


def _decode_self_preemption(v: Json, path: str) -> str:
    if v not in ir.SELF_PREEMPTION:
        raise IRFormatError(path, f"expected one of {', '.join(map(json.dumps, ir.SELF_PREEMPTION))}, "
                                  f"found {json.dumps(v)[:80]}")
    return v


def _decode_schedule_ahead(v: Json, path: str) -> bool:
    if v is not True and v is not False:
        raise IRFormatError(path, f"expected true or false, found {json.dumps(v)[:80]}")
    return v


def decode_stage(v: Json, path: str) -> ir.Stage:
    o = _obj(v, path, ("name", "kind"), ("index",))
    tag, x = _tag(o["kind"], path + ".kind")
    p = f"{path}.kind.{tag}"
    if tag == "Fifo":
        kind: ir.StageKind = ir.Fifo(decode_int(x, p))
    elif tag == "Ps":
        kind = ir.Ps(decode_expr(x, p))
    elif tag == "Step":
        s = _obj(x, p, ("budget", "cost", "chunk", "serve", "memory"), ("self_preemption", "schedule_ahead"))
        serve_tag, serve = _tag(s["serve"], p + ".serve")
        if serve_tag == "ExclusivePrefill" and serve is None:
            serve_keys = None
        elif serve_tag == "By":
            serve_keys = _decode_keys(serve, p + ".serve.By")
        else:
            raise IRFormatError(p + ".serve", f"unknown serve `{serve_tag}`")
        kind = ir.Step(
            decode_expr(s["budget"], p + ".budget"),
            decode_expr(s["cost"], p + ".cost"),
            decode_expr(s["chunk"], p + ".chunk"),
            serve_keys,
            None if s["memory"] is None else decode_int(s["memory"], p + ".memory"),
            _decode_self_preemption(s.get("self_preemption", "End"), p + ".self_preemption"),
            _decode_schedule_ahead(s.get("schedule_ahead", False), p + ".schedule_ahead"),
        )
    elif tag == "Delay":
        raise IRFormatError(p, "`Delay` is not a stage kind of IR version 13 (a delay stage is `Ps` of `N`)")
    else:
        raise IRFormatError(path + ".kind", f"unknown stage kind `{tag}`")
    if not isinstance(o["name"], str):
        raise IRFormatError(path + ".name", "expected a string")
    return ir.Stage(o["name"], None if o.get("index") is None else decode_int(o["index"], path + ".index"), kind)


def _decode_pairs(v: Json, path: str) -> tuple[tuple[int, float], ...]:
    out = []
    for i, item in enumerate(_list(v, path)):
        slot, value = _list(item, f"{path}[{i}]", 2)
        out.append((decode_int(slot, f"{path}[{i}][0]"), decode_number(value, f"{path}[{i}][1]")))
    return tuple(out)


def decode_arrival(v: Json, path: str) -> ir.Arrival:
    tag, x = _tag(v, path)
    p = f"{path}.{tag}"
    if tag == "Poisson":
        return ir.Poisson(decode_number(x, p))
    if tag == "Renewal":
        return ir.Renewal(decode_expr(x, p))
    if tag == "Closed":
        return ir.Closed(decode_int(x, p))
    if tag == "Batch":
        return ir.Batch(decode_int(x, p))
    if tag == "None" and x is None:
        return ir.NoArrival()
    if tag == "Sessions":
        sessions = []
        for i, s in enumerate(_list(x, p)):
            q = f"{p}[{i}]"
            o = _obj(s, q, ("attrs",), ("turns",))
            turns = None
            if "turns" in o:
                turns = tuple(_decode_pairs(t, f"{q}.turns[{j}]") for j, t in enumerate(_list(o["turns"], q + ".turns")))
            sessions.append(ir.SessionSpec(_decode_pairs(o["attrs"], q + ".attrs"), turns))
        return ir.Sessions(tuple(sessions))
    raise IRFormatError(path, f"unknown arrival `{tag}`")


def decode_attr_type(v: Json, path: str) -> ir.AttrType:
    if v in ("Size", "Value"):
        return v
    tag, x = _tag(v, path)
    if tag == "Cost":
        return decode_target(x, path + ".Cost")
    raise IRFormatError(path, f"unknown attribute type {json.dumps(v)}")


PROGRAM_FIELDS = (
    "version", "attrs", "attr_types", "sides", "observes", "pools", "stages", "arrival", "trace",
    "trace_ordered", "init", "turn", "session", "blocks", "horizon", "warmup", "seed",
    "slot_cached", "slot_serial", "slot_turn", "slot_new", "slot_out", "slot_think", "slot_more",
    "slot_forced", "slot_computed", "hidden",
)  # fmt: skip


def decode_program(v: Json) -> ir.Program:
    if not isinstance(v, dict):
        raise IRFormatError("", "an IR file is a JSON object")
    version = v.get("version")
    if version != ir.IR_VERSION:
        raise IRFormatError("version", f"IR version {version} is not IR version {ir.IR_VERSION}, which serq-ref reads")
    o = _obj(v, "", PROGRAM_FIELDS, ("arrivals", "share", "gauges"))
    names = lambda key: tuple(_str(x, f"{key}[{i}]") for i, x in enumerate(_list(o[key], key)))  # noqa: E731
    sides = tuple(
        tuple(_side(s, f"sides[{i}][{j}]") for j, s in enumerate(_list(b, f"sides[{i}]")))
        for i, b in enumerate(_list(o["sides"], "sides"))
    )
    blocks = tuple(
        tuple(decode_stmt(s, f"blocks[{i}][{j}]") for j, s in enumerate(_list(b, f"blocks[{i}]")))
        for i, b in enumerate(_list(o["blocks"], "blocks"))
    )
    share = o.get("share")
    if share is not None and share not in ("MaxMin", "Bottleneck"):
        raise IRFormatError("share", f"unknown share `{share}`")
    gauges = tuple(
        ir.Gauge(_str(_obj(g, f"gauges[{i}]", ("name", "expr"))["name"], f"gauges[{i}].name"), decode_expr(g["expr"], f"gauges[{i}].expr"))
        for i, g in enumerate(_list(o.get("gauges", []), "gauges"))
    )
    if o["trace"] is not None and not isinstance(o["trace"], str):
        raise IRFormatError("trace", "expected a path or null")
    if not isinstance(o["trace_ordered"], bool):
        raise IRFormatError("trace_ordered", "expected a boolean")
    return ir.Program(
        version=version,
        attrs=names("attrs"),
        attr_types=tuple(decode_attr_type(t, f"attr_types[{i}]") for i, t in enumerate(_list(o["attr_types"], "attr_types"))),
        sides=sides,
        observes=names("observes"),
        pools=tuple(decode_pool(p, f"pools[{i}]") for i, p in enumerate(_list(o["pools"], "pools"))),
        stages=tuple(decode_stage(s, f"stages[{i}]") for i, s in enumerate(_list(o["stages"], "stages"))),
        arrival=decode_arrival(o["arrival"], "arrival"),
        trace=o["trace"],
        trace_ordered=o["trace_ordered"],
        init=decode_int(o["init"], "init"),
        turn=decode_int(o["turn"], "turn"),
        session=decode_int(o["session"], "session"),
        blocks=blocks,
        horizon=decode_number(o["horizon"], "horizon"),
        warmup=decode_number(o["warmup"], "warmup"),
        seed=decode_int(o["seed"], "seed"),
        arrivals=None if o.get("arrivals") is None else decode_int(o["arrivals"], "arrivals"),
        slot_cached=decode_int(o["slot_cached"], "slot_cached"),
        slot_serial=decode_int(o["slot_serial"], "slot_serial"),
        slot_turn=decode_int(o["slot_turn"], "slot_turn"),
        slot_new=decode_int(o["slot_new"], "slot_new"),
        slot_out=decode_int(o["slot_out"], "slot_out"),
        slot_think=decode_int(o["slot_think"], "slot_think"),
        slot_more=decode_int(o["slot_more"], "slot_more"),
        slot_forced=decode_int(o["slot_forced"], "slot_forced"),
        slot_computed=decode_int(o["slot_computed"], "slot_computed"),
        hidden=tuple(decode_int(h, f"hidden[{i}]") for i, h in enumerate(_list(o["hidden"], "hidden"))),
        share=share,
        gauges=gauges,
    )


def _str(v: Json, path: str) -> str:
    if not isinstance(v, str):
        raise IRFormatError(path, f"expected a string, found {json.dumps(v)[:80]}")
    return v


def _side(v: Json, path: str) -> str:
    if v not in ir.SIDES:
        raise IRFormatError(path, f"expected \"Workload\" or \"Server\", found {json.dumps(v)[:80]}")
    return v


def loads(text: str) -> ir.Program:
    """Parse IR text. Raises ``IRFormatError`` (invalid JSON included)."""
    try:
        v = json.loads(text)
    except json.JSONDecodeError as e:
        raise IRFormatError(f"line {e.lineno} column {e.colno}", f"not JSON: {e.msg}") from None
    return decode_program(v)
