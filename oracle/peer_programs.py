"""Generated deterministic programs for the peer campaign (``serq-ref peer
campaign``; docs/peer.md, docs/campaigns.md "serq-ref against pyserq on
generated programs").

A program is a plain structure (dicts, lists, tuples of numbers and
strings) drawn by ``random_program`` from a seeded ``random.Random``: pools
with their options (block, evict by, preempt lifo, queue by, admit via),
fifo, ps, delay and step stages (a family of two fifo servers for a
choose), explicit sessions (their attributes ``a``, ``b`` and ``arrive``, and
for some programs explicit turns) and one session block of holds (several
pools, reserve, reuse, cache, lease), grows, loads, releases, runs,
observations, branches on attributes, a counted loop, a choose by key, and
step-stage requests (``hold reqs (1), kv (n) { prefill … growing kv;
decode … growing kv; }``). ``render`` writes it as serQ text; ``build``
compiles that text and gives the IR its explicit sessions (the text says
``arrive batch(n)``, the IR carries ``Sessions``: the session's attributes
as the workload gives them, FORMAT.md "Arrival"). Nothing here draws at run
time: every program is deterministic.

``simpler`` lists the one-change simplifications of a program (fewer
sessions, statements, pools, options; smaller numbers), the moves of the
greedy minimiser (oracle/peer_campaign.py).
"""

from __future__ import annotations

import copy
import random

from semantics import ir

#: what a generated statement is, for the per-feature counts
STMT_KINDS = ("run", "hold", "grow", "load", "release", "observe", "branch", "loop", "choose", "request", "set")


# --------------------------------------------------------------------------
# drawing a program
# --------------------------------------------------------------------------

class _Draw:
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.observes = 0

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, options):
        return options[self.rng.randrange(len(options))]

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def observe_name(self) -> str:
        self.observes += 1
        return f"o{self.observes}"


def random_program(rng: random.Random) -> dict:
    """One program of the campaign's space."""
    d = _Draw(rng)
    pools = []
    for k in range(d.int(1, 2)):
        pool = {"name": f"p{k}", "cap": d.int(2, 12), "block": d.pick((None, None, 1, 2)),
                "evict": d.pick((None, None, "-last", "size", "age")), "preempt": d.pick(("none", "lifo")),
                "queue": d.pick((None, None, "-a", "b", "waited >= 2 ? 0 : 1"))}
        pools.append(pool)
    stages = [{"name": "s0", "kind": d.pick(("fifo", "ps", "delay")), "n": d.int(1, 2)},
              {"name": "d", "kind": "delay"}]
    step = None
    if d.chance(0.4):
        step = {"budget": d.int(2, 16), "cost": d.pick(("1", "1", "2", "1 + decoders", "residents + 1",
                                                           "tokens / 4 + 1")),
                "chunk": d.pick((0, 0, d.int(1, 6))),
                "serve": d.pick((None, "decode first", "by (-admission)", "exclusive prefill")),
                "reqs": d.int(1, 4), "kv": d.int(8, 24), "block": d.pick((1, 1, 2, 4)),
                "preempt": d.pick(("lifo", "lifo", "none"))}
    family = d.chance(0.3)
    if family:
        stages.append({"name": "f", "kind": "fifo", "n": 1, "family": 2})
    n_sessions = d.int(1, 5)
    turns = d.chance(0.2)
    sessions = []
    for _ in range(n_sessions):
        session = {"a": d.int(0, 6), "b": d.int(0, 3), "arrive": d.pick((0, 0, d.int(0, 8)))}
        if turns:
            session["turns"] = [d.int(1, 4) for _ in range(d.int(1, 3))]
        sessions.append(session)
    ctx = {"pools": [p["name"] for p in pools], "family": family, "step": step is not None,
           "lifo": {p["name"] for p in pools if p["preempt"] == "lifo"},
           "room": {p["name"]: p["cap"] // (p["block"] or 1) * (p["block"] or 1) for p in pools}}
    body = [("run", "d", "arrive")]
    if turns:
        inner = _statements(d, ctx, held=(), depth=1, budget=d.int(1, 4))
        body.append(("turns", inner))
    else:
        body += _statements(d, ctx, held=(), depth=0, budget=d.int(1, 6))
    return {"pools": pools, "stages": stages, "step": step, "sessions": sessions, "body": body,
            "horizon": d.pick((60, 200))}


def _work(d: _Draw) -> str:
    return d.pick(("1", "2", "a", "b + 1", "a / 2", "3"))


def _value(d: _Draw, ctx, held) -> str:
    options = ["now", "a", "cached", "computed", "now - a"]
    options += [f"used({p})" for p in ctx["pools"]] + [f"queued({p})" for p in ctx["pools"]]
    options += [f"cachedin({p})" for p in ctx["pools"]]
    return d.pick(tuple(options))


def _statements(d: _Draw, ctx, held: tuple, depth: int, budget: int) -> list:
    out = []
    for _ in range(budget):
        out.append(_statement(d, ctx, held, depth))
    return out


def _statement(d: _Draw, ctx, held: tuple, depth: int):
    kinds = ["run", "run", "observe", "hold", "hold"]
    if held:
        kinds += ["grow"]
        if held[-1][2]["loadable"]:
            kinds += ["load"]
    if depth < 2:
        kinds += ["branch", "choose"] if ctx["family"] else ["branch"]
        if depth == 0:
            kinds += ["loop"]
    if ctx["step"] and not held:
        kinds += ["request", "request"]
    kind = d.pick(tuple(kinds))
    if kind == "run":
        return ("run", "s0", _work(d))
    if kind == "observe":
        return ("observe", d.observe_name(), _value(d, ctx, held))
    if kind == "grow":
        pool = held[-1][0]
        return ("grow", pool, d.pick(("1", "2", "a")))
    if kind == "load":
        # one load per hold, within what it allocated, in a hold without reuse (a reused
        # prefix counts as computed, and a load past the allocation is a run-time error)
        pool, units, state = held[-1]
        state["loadable"] = False
        return ("load", pool, min(units, d.int(1, 3)))
    if kind == "branch":
        cond = d.pick(("a < 3", "b == 0", "serial == 0", "a > b", "used(p0) > 2"))
        then = _statements(d, ctx, held, depth + 1, d.int(1, 2))
        other = _statements(d, ctx, held, depth + 1, d.int(0, 2))
        return ("branch", cond, then, other)
    if kind == "loop":
        # a run on the delay stage first: every pass lets time pass (pyserq refuses a loop that may not)
        return ("loop", d.int(2, 3), [("run", "d", "1")] + _statements(d, ctx, held, depth + 1, d.int(0, 2)))
    if kind == "choose":
        key = d.pick(("queue(f[k])", "k == 1 && a > 2 ? 0 : 1", "busy(f[k]) * 10 + k", "-k"))
        return ("choose", key, d.pick(("1", "a + 1")))
    if kind == "request":
        return ("request", d.pick(("a + 1", "3", "b * 2 + 1")), d.pick(("2", "b + 1", "floor(a / 2) + 1")))
    # a hold
    free = [p for p in ctx["pools"] if p not in {h[0] for h in held}]
    if not free:
        return ("run", "s0", _work(d))
    chosen = [d.pick(tuple(free))]
    if len(free) > 1 and d.chance(0.25):
        chosen.append(next(p for p in free if p != chosen[0]))
    pools = []
    for p in chosen:  # within the cap in blocks (pyserq refuses a hold that can never fit)
        room = ctx["room"][p]
        units = d.int(1, min(6, room))
        pools.append((p, units, d.pick((None, None, None, min(room, units + d.int(1, 3))))))
    cache = d.pick((None, None, "computed", str(d.int(1, 4)), "a"))
    reuse = d.pick((None, None, str(d.int(1, 4)))) if cache is not None else None
    # a preempted hold runs its body again from its cached prefix: a load there can pass the allocation
    state = {"loadable": reuse is None and not any(p in ctx["lifo"] for p, _, _ in pools)}
    inner_held = held + tuple((p, u, state) for p, u, _ in pools)
    body = _statements(d, ctx, inner_held, depth + 1, d.int(1, 3))
    lease = None
    if d.chance(0.15):
        lease = (pools[0][0], d.pick(("2", "inf")))
    hold = ("hold", pools, reuse, body, cache, lease)
    if lease is not None and lease[1] == "inf":
        return ("seq", [hold, ("run", "d", "1"), ("release", lease[0])])
    return hold


# --------------------------------------------------------------------------
# rendering and building
# --------------------------------------------------------------------------

def render(program: dict) -> str:
    """The program as serQ text (its sessions are given by ``build``: the
    text's ``arrive batch(n)`` and ``init`` set their count and slots)."""
    lines = []
    text = repr(program["body"])
    uses_step = "'request'" in text
    uses_family = "'choose'" in text
    uses_s0 = "'s0'" in text  # pyserq refuses a stage that no statement runs
    for p in program["pools"]:
        opts = [f"cap {p['cap']};"]
        if p.get("block"):
            opts.append(f"block {p['block']};")
        if p.get("evict"):
            opts.append(f"evict by ({p['evict']});")
        if p.get("preempt") == "lifo":
            opts.append("preempt lifo;")
        if p.get("queue"):
            opts.append(f"queue by ({p['queue']});")
        lines.append(f"pool {p['name']} {{ {' '.join(opts)} }}")
    step = program.get("step") if uses_step else None
    if step:
        lines.append(f"pool reqs {{ cap {step['reqs']}; admit via eng; }}")
        lines.append(f"pool kv {{ cap {step['kv']}; block {step['block']};"
                     f"{' preempt lifo;' if step['preempt'] == 'lifo' else ''} }}")
    for s in program["stages"]:
        if (s["name"] == "f" and not uses_family) or (s["name"] == "s0" and not uses_s0):
            continue
        name = s["name"] + (f"[{s['family']}]" if s.get("family") else "")
        if s["kind"] == "fifo":
            lines.append(f"stage {name} : fifo({s.get('n', 1)});")
        elif s["kind"] == "ps":
            lines.append(f"stage {name} : ps({s.get('n', 1)});")
        else:
            lines.append(f"stage {name} : delay;")
    if step:
        opts = [f"budget {step['budget']};", f"cost {step['cost']};", "memory kv;"]
        if step["chunk"]:
            opts.append(f"chunk {step['chunk']};")
        if step["serve"]:
            opts.append(f"serve {step['serve']};")
        lines.append(f"stage eng : step {{ {' '.join(opts)} }}")
    lines.append("workload {")
    lines.append(f"  arrive batch({len(program['sessions'])});")
    lines.append("  init { set a = 0; set b = 0; set arrive = 0; }")
    lines.append("}")
    lines.append("session {")
    _render_block(program["body"], lines, "  ")
    lines.append("}")
    lines.append(f"run {{ horizon {program['horizon']}; }}")
    return "\n".join(lines) + "\n"


def _render_block(statements, lines: list, pad: str) -> None:
    for s in statements:
        _render_statement(s, lines, pad)


def _render_statement(s, lines: list, pad: str) -> None:
    kind = s[0]
    if kind == "seq":
        _render_block(s[1], lines, pad)
    elif kind == "run":
        lines.append(f"{pad}run {s[1]} ({s[2]});")
    elif kind == "observe":
        lines.append(f"{pad}observe {s[1]} = {s[2]};")
    elif kind == "grow":
        lines.append(f"{pad}grow {s[1]} ({s[2]});")
    elif kind == "load":
        lines.append(f"{pad}load {s[1]} ({s[2]});")
    elif kind == "release":
        lines.append(f"{pad}release {s[1]};")
    elif kind == "branch":
        lines.append(f"{pad}branch ({s[1]}) {{")
        _render_block(s[2], lines, pad + "  ")
        if s[3]:
            lines.append(f"{pad}}} else {{")
            _render_block(s[3], lines, pad + "  ")
        lines.append(f"{pad}}}")
    elif kind == "loop":
        var = f"i{len(lines)}"
        lines.append(f"{pad}set {var} = 0;")
        lines.append(f"{pad}loop {{")
        _render_block(s[2], lines, pad + "  ")
        lines.append(f"{pad}  set {var} = {var} + 1;")
        lines.append(f"{pad}  branch ({var} >= {s[1]}) {{ end; }}")
        lines.append(f"{pad}}}")
    elif kind == "choose":
        lines.append(f"{pad}choose k in 2 by ({s[1]});")
        lines.append(f"{pad}observe picked = k;")
        lines.append(f"{pad}run f[k] ({s[2]});")
    elif kind == "request":
        lines.append(f"{pad}hold reqs (1), kv ({s[1]}) {{")
        lines.append(f"{pad}  run eng prefill ({s[1]}) growing kv;")
        lines.append(f"{pad}  observe first = now;")
        lines.append(f"{pad}  run eng decode ({s[2]}) growing kv;")
        lines.append(f"{pad}}}")
        lines.append(f"{pad}observe done = now;")
    elif kind == "turns":
        lines.append(f"{pad}loop {{")
        lines.append(f"{pad}  turn;")
        lines.append(f"{pad}  run d (1);  // every pass lets time pass (pyserq refuses a loop that may not)")
        _render_block(s[1], lines, pad + "  ")
        lines.append(f"{pad}  observe turn_end = now;")
        lines.append(f"{pad}  branch (more == 0) {{ end; }}")
        lines.append(f"{pad}}}")
    elif kind == "hold":
        _, pools, reuse, body, cache, lease = s
        heads = ", ".join(f"{p} ({u})" + (f" reserve ({r})" if r is not None else "") for p, u, r in pools)
        lines.append(f"{pad}hold {heads}{f' reuse ({reuse})' if reuse else ''} {{")
        _render_block(body, lines, pad + "  ")
        tail = f"{pad}}}"
        if cache is not None:
            tail += f" cache ({cache})"
        if lease is not None:
            tail += f" lease {lease[0]} ({lease[1]})"
        lines.append(tail)
    else:
        raise ValueError(kind)


def build(program: dict) -> ir.Program:
    """The program's IR: its text compiled, its arrival the explicit
    sessions (attributes a, b, arrive; turns as explicit turns)."""
    return build_text(render(program), program["sessions"])


def build_text(text: str, sessions: list[dict]) -> ir.Program:
    """``text`` (``render``'s) compiled, with ``sessions`` as its explicit
    sessions: each one's ``a``, ``b``, ``arrive``, and its ``turns`` (the
    value of ``a`` at each turn) when it has them."""
    import dataclasses

    from semantics.compiler import compile_source

    compiled, _ = compile_source(text, "<peer campaign>")
    slots = {name: k for k, name in enumerate(compiled.attrs)}
    specs = []
    for s in sessions:
        attrs = tuple((slots[name], float(s[name])) for name in ("a", "b", "arrive"))
        turns = None
        if "turns" in s:
            turns = tuple(((slots["a"], float(t)),) for t in s["turns"])
        specs.append(ir.SessionSpec(attrs, turns))
    return dataclasses.replace(compiled, arrival=ir.Sessions(tuple(specs)))


# --------------------------------------------------------------------------
# what a program exercises, and its simplifications
# --------------------------------------------------------------------------

def features(program: dict) -> list[str]:
    """The features a program has, by name, sorted."""
    found = set()
    for p in program["pools"]:
        for option in ("block", "evict", "queue"):
            if p.get(option):
                found.add(f"pool {option}")
        if p.get("preempt") == "lifo":
            found.add("preempt lifo")
    for s in program["stages"]:
        if s["name"] == "s0" and "'s0'" in repr(program["body"]):
            found.add(f"stage {s['kind']}")
    if program.get("step") and "'request'" in repr(program["body"]):  # a step stage no request runs is not written
        step = program["step"]
        found.add("step stage")
        found.add(f"step serve {step['serve'] or 'admission'}")
        if step["chunk"]:
            found.add("step chunk")
        if step["cost"] not in ("1", "2"):
            found.add("step cost reads the iteration")
        if step["preempt"] == "lifo":
            found.add("step preempt lifo")
    if any("turns" in s for s in program["sessions"]):
        found.add("explicit turns")

    def walk(statements):
        for s in statements:
            kind = s[0]
            if kind == "seq":
                walk(s[1])
                continue
            found.add(f"stmt {kind}")
            if kind == "hold":
                _, pools, reuse, body, cache, lease = s
                if len(pools) > 1:
                    found.add("hold several pools")
                if any(r is not None for _, _, r in pools):
                    found.add("hold reserve")
                if reuse:
                    found.add("hold reuse")
                if cache is not None:
                    found.add("hold cache")
                if lease is not None:
                    found.add("hold lease")
                walk(body)
            elif kind == "branch":
                walk(s[2])
                walk(s[3])
            elif kind == "loop":
                walk(s[2])
            elif kind == "turns":
                walk(s[1])
    walk(program["body"])
    return sorted(found)


def _replace_at(statements: list, path: tuple, new: list) -> list:
    """``statements`` with the statement at ``path`` replaced by ``new`` (a
    list: empty removes it, several splice in)."""
    k = path[0]
    if len(path) == 1:
        return statements[:k] + new + statements[k + 1:]
    s = statements[k]
    field, rest = path[1], path[2:]
    s = list(s)
    s[field] = _replace_at(s[field], rest, new)
    return statements[:k] + [tuple(s)] + statements[k + 1:]


def _statement_paths(statements: list, prefix: tuple = ()):
    """(path, statement) for every statement, outermost first."""
    for k, s in enumerate(statements):
        yield prefix + (k,), s
        kind = s[0]
        children = {"seq": (1,), "hold": (3,), "branch": (2, 3), "loop": (2,), "turns": (1,)}.get(kind, ())
        for field in children:
            yield from _statement_paths(s[field], prefix + (k, field))


def simpler(program: dict):
    """Every one-change simplification of ``program``, the boldest first."""
    p = program
    if len(p["sessions"]) > 1:
        for k in range(len(p["sessions"])):
            yield {**p, "sessions": p["sessions"][:k] + p["sessions"][k + 1:]}
    for path, s in list(_statement_paths(p["body"])):
        if path == (0,):
            continue  # the arrival delay
        yield {**p, "body": _replace_at(p["body"], path, [])}
        kind = s[0]
        if kind in ("hold", "loop"):
            yield {**p, "body": _replace_at(p["body"], path, list(s[3] if kind == "hold" else s[2]))}
        if kind == "branch":
            yield {**p, "body": _replace_at(p["body"], path, list(s[2]))}
            yield {**p, "body": _replace_at(p["body"], path, list(s[3]))}
        if kind == "seq":
            yield {**p, "body": _replace_at(p["body"], path, list(s[1]))}
        if kind == "hold":
            _, pools, reuse, body, cache, lease = s
            variants = []
            if len(pools) > 1:
                variants += [(pools[:1], reuse, body, cache, lease), (pools[1:], reuse, body, cache, lease)]
            if any(r is not None for _, _, r in pools):
                variants.append(([(q, u, None) for q, u, _ in pools], reuse, body, cache, lease))
            if reuse is not None:
                variants.append((pools, None, body, cache, lease))
            if cache is not None and reuse is None:
                variants.append((pools, reuse, body, None, lease))
            if lease is not None:
                variants.append((pools, reuse, body, cache, None))
            for q, (pname, u, r) in enumerate(pools):
                if u > 1:
                    variants.append((pools[:q] + [(pname, u - 1, r)] + pools[q + 1:], reuse, body, cache, lease))
            for v in variants:
                yield {**p, "body": _replace_at(p["body"], path, [("hold",) + v])}
    for k, s in enumerate(p["sessions"]):
        for key in ("a", "b", "arrive"):
            if s[key] > 0:
                for smaller in sorted({0, s[key] // 2, s[key] - 1}):
                    if smaller < s[key]:
                        sessions = copy.deepcopy(p["sessions"])
                        sessions[k][key] = smaller
                        yield {**p, "sessions": sessions}
        if "turns" in s and len(s["turns"]) > 1:
            sessions = copy.deepcopy(p["sessions"])
            sessions[k]["turns"] = s["turns"][:-1]
            yield {**p, "sessions": sessions}
    for k, pool in enumerate(p["pools"]):
        for option, plain in (("evict", None), ("queue", None), ("preempt", "none"), ("block", None)):
            if pool.get(option) != plain:
                pools = copy.deepcopy(p["pools"])
                pools[k][option] = plain
                yield {**p, "pools": pools}
        if pool["cap"] > 1:
            pools = copy.deepcopy(p["pools"])
            pools[k]["cap"] -= 1
            yield {**p, "pools": pools}
    step = p.get("step")
    if step:
        plain = {"serve": None, "chunk": 0, "cost": "1", "preempt": "none", "block": 1}
        for option, value in plain.items():
            if step[option] != value:
                yield {**p, "step": {**step, option: value}}
        for option, floor in (("budget", 1), ("reqs", 1), ("kv", 1)):
            if step[option] > floor:
                yield {**p, "step": {**step, option: step[option] - 1}}
    for k, s in enumerate(p["stages"]):
        if s["name"] == "s0" and s["kind"] != "delay":
            stages = copy.deepcopy(p["stages"])
            stages[k] = {"name": "s0", "kind": "delay"}
            yield {**p, "stages": stages}
        if s.get("n", 1) > 1:
            stages = copy.deepcopy(p["stages"])
            stages[k]["n"] = 1
            yield {**p, "stages": stages}
