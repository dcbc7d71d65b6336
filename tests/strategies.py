"""Hypothesis strategies for well-formed serQ programs, as text and as IR.

Unlike the fuzzer's generator (tests/test_run_fuzz.py), whose numbers include
0, negatives, inf and NaN so that it finds crashes, these programs are meant
to compile, link and run: every number is in a sensible range, a hold's units
stay below its pool's cap (but for an attribute drawn just before the hold,
sometimes above it: a rejection), a loop lets time pass and leaves by an
`end;`, a grow is never repeated by a loop around its hold, a
family member is named by a constant or by the index a `choose` among its two
members wrote, and the linker's rules (seed 002 §2 and §3: the mode of a run
on a step stage, `cached` read only under a cache clause, `reuse` only with
`cache`, hidden attributes only in session statements, live state never set
into a hold's header) are kept by construction. What they cover is every
construct of seed 002 §2's kernel syntax:

- pools with every option: cap, block, evict lru / by, queue fifo / by,
  preempt lifo / none, admit via (a step stage), spill (to a tier via a
  stage), and families of two;
- stages fifo, fifo(c), ps(capacity), delay and step { budget; cost; chunk;
  serve admission / decode first / by (keys) / exclusive prefill; memory;
  speculate (K) accept (e) with or without lookahead, slots and within },
  families of two, and two ps stages held by one run under share maxmin or
  bottleneck;
- sessions of set, observe, hold (several pools, reserve, reuse, at
  admission, cache, lease), grow, load, release (of a hold or of a lease),
  drop, run (fifo / ps / delay, a step stage's prefill and decode, growing),
  branch, branch with, loop, choose, turn and end; a step request after
  lib/vllm.sq's vllm_request (a request slot admitted via the engine, KV that
  grows block by block);
- workloads arriving poisson, renewal (constant and drawn gaps), closed,
  batch, none, with init, turn and hidden; and explicit sessions (the IR's
  ``Sessions`` arrival, which has no text form: `explicit_programs` puts it in
  the IR of a program whose text says `arrive none;`); gauges; run blocks
  with warm-up, seed and sometimes `arrivals N`.

``programs()`` gives the text alone (for properties of the front end, a
formatter's round trip say); ``generated()`` gives it with the features it
used (``Generated``), and ``loaded_programs()`` / ``explicit_programs()`` the
IR the pipeline makes of it (``semantics.pipeline.load``, as `serq-ref run`
does: compiled, run settings checked, linked), or ``None`` when the pipeline
refused the text (a ProgramError, which the tests count: the share of
programs that link is a measured figure, docs/campaigns.md).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import NamedTuple

from hypothesis import strategies as st

from semantics import codec, ir
from semantics.errors import ProgramError
from semantics.pipeline import load


class Generated(NamedTuple):
    """A program's text and the features (names from FEATURES) it uses."""

    text: str
    features: frozenset


#: Every feature the generator can use; the campaign records how often each appeared.
FEATURES = (
    "pool", "pool family", "cap inf", "block", "evict lru", "evict by", "queue fifo", "queue by", "preempt lifo",
    "preempt none", "admit via", "spill",
    "fifo", "fifo(c)", "ps", "delay", "step", "step family", "chunk", "serve admission", "serve decode first",
    "serve by", "serve exclusive prefill", "memory", "speculate", "stage family", "share",
    "set", "observe", "hold", "hold several pools", "reserve", "reuse", "at admission", "cache", "lease",
    "release lease", "grow", "load", "release", "drop", "run", "run several stages", "run prefill", "run decode",
    "growing", "step request", "branch", "branch else", "branch with", "loop", "choose", "turn", "end",
    "arrive poisson", "arrive renewal", "arrive closed", "arrive batch", "arrive none", "explicit sessions",
    "explicit turns", "init", "turn block", "hidden", "gauge", "warmup", "arrivals",
)


@dataclasses.dataclass
class PoolDecl:
    name: str
    family: bool
    cap: float  # a member's cap (inf allowed)
    block: int | None
    role: str  # "plain", "seqs" (admitted via the step stage), "kv" (the step stage's memory)


class Writer:
    """Draws one program; ``features`` collects what it wrote."""

    def __init__(self, draw):
        self.draw = draw
        self.features: set[str] = set()
        self.pools: list[PoolDecl] = []
        self.families = False  # some pool or stage is a family of two (a `choose k in 2` routes to it)
        self.gpu_family = False
        self.engine: str | None = None  # "engine" when a step stage is declared
        self.engine_family = False
        self.share = False
        self.spill = False
        self.turn_block = False
        self.hidden = False
        self.loops = 0

    # -- drawing ----------------------------------------------------------------
    def pick(self, choices):
        return self.draw(st.sampled_from(choices))

    def chance(self, percent: int) -> bool:
        return self.draw(st.integers(0, 99)) < percent

    def use(self, *names: str) -> None:
        for name in names:
            assert name in FEATURES, name
            self.features.add(name)

    # -- references -------------------------------------------------------------
    def member(self, name: str, family: bool) -> str:
        """A pool or stage as a statement names it: a family's member by a constant or by `k`."""
        return f"{name}[{self.pick(('k', 'k', '0', '1'))}]" if family else name

    def plain_pools(self) -> list[PoolDecl]:
        return [p for p in self.pools if p.role == "plain"]

    # -- declarations -----------------------------------------------------------
    def declare_pools(self) -> list[str]:
        lines = []
        names = self.pick(((), ("mem",), ("host",), ("mem", "host"), ("mem", "disk"), ("host", "disk"),
                           ("mem", "host", "disk")))
        for name in names:
            family = self.chance(30)
            block = self.pick((None, None, 2, 4, 8))
            cap = float(self.pick((16, 32, 64, 128))) if not self.chance(10) else float("inf")
            options = []
            if cap == float("inf"):
                self.use("cap inf")
            else:
                options.append(f"cap {cap:g};")
            if block is not None:
                options.append(f"block {block};")
                self.use("block")
            evict = self.pick(("", "lru", "by size", "by age"))
            if evict == "lru":
                options.append("evict lru;")
                self.use("evict lru")
            elif evict:
                options.append(self.pick(("evict by (size, age);", "evict by (-last, waiting);",
                                          "evict by (age, ~uniform(0, 1));")))
                self.use("evict by")
            queue = self.pick(("", "fifo", "by"))
            if queue == "fifo":
                options.append("queue fifo;")
                self.use("queue fifo")
            elif queue:
                options.append(self.pick(("queue by (waited);", "queue by (-waited, a);", "queue by (a, now);")))
                self.use("queue by")
            preempt = self.pick(("", "lifo", "none"))
            if preempt:
                options.append(f"preempt {preempt};")
                self.use(f"preempt {preempt}")
            if name == "mem" and "host" in names and not family and self.chance(80):
                options.append(f"spill host via link ({self.pick(('size / 64', '0.5', 'size / 16'))}) "
                               f"when (size >= {self.pick(('1', '4', '8'))});")
                self.spill = True
                self.use("spill")
            self.pools.append(PoolDecl(name, family, cap, block, "plain"))
            if family:
                self.families = True
                self.use("pool family")
            self.use("pool")
            lines.append(f"pool {name}{'[2]' if family else ''} {{ {' '.join(options)} }}")
        return lines

    def declare_engine(self) -> list[str]:
        """A step stage with its request pool (admit via) and KV pool (memory), sometimes a family of two."""
        self.engine = "engine"
        self.engine_family = self.chance(25)
        if self.engine_family:
            self.families = True
            self.use("step family", "stage family", "pool family")
        family = "[2]" if self.engine_family else ""
        bs = self.pick((2, 4, 8))
        blocks = self.pick((12, 16, 32))
        kv = PoolDecl("kv", self.engine_family, float(bs * blocks), bs, "kv")
        seqs = PoolDecl("seqs", self.engine_family, float(self.pick((2, 4, 8))), None, "seqs")
        self.pools += [seqs, kv]
        self.use("pool", "block", "admit via", "step")
        preempt = self.pick(("lifo", "lifo", "none"))
        self.use(f"preempt {preempt}")
        evict = self.pick(("evict lru;", "evict by (size, age);", ""))
        if evict:
            self.use("evict lru" if "lru" in evict else "evict by")
        options = [f"budget {self.pick(('16', '32', '64', 'max(8, 32 - residents)'))};",
                   f"cost {self.pick(('1', '0.5 + 0.01 * tokens', '0.2 + 0.005 * prefilled + 0.01 * decoders + 0.0001 * attention + 0.0001 * kv_decode'))};"]
        if self.chance(50):
            chunks = ('8', '0') if self.engine_family else ('8', '0', 'residents + queued(seqs) > 1 ? 8 : 0')
            options.append(f"chunk {self.pick(chunks)};")
            self.use("chunk")
        serve = self.pick(("", "admission", "decode first", "by", "exclusive prefill"))
        if serve == "by":
            options.append(self.pick(("serve by (remaining);", "serve by (-remaining, admission);",
                                      "serve by (decoding ? 0 : 1, remaining);")))
            self.use("serve by")
        elif serve:
            options.append(f"serve {serve};")
            self.use(f"serve {serve}")
        else:
            self.use("serve admission")
        if self.chance(70):
            options.append("memory kv;")
            self.use("memory")
        return [f"pool seqs{family} {{ cap {seqs.cap:g}; admit via engine;{' queue fifo;' if self.chance(30) else ''} }}",
                f"pool kv{family} {{ cap {kv.cap:g}; block {bs}; {evict} preempt {preempt}; }}",
                f"stage engine{family} : step {{ {' '.join(options)} }}"]

    def declare_stages(self) -> list[str]:
        lines = []
        self.gpu_family = self.chance(30)
        if self.gpu_family:
            self.families = True
            self.use("stage family")
        kind = self.pick(("fifo", "fifo(c)", "ps", "ps", "delay"))
        text = {"fifo": "fifo", "fifo(c)": f"fifo({self.pick((2, 3))})", "delay": "delay",
                "ps": f"ps({self.pick(('1', '2', 'min(present, 2)', '1 + present / 4'))})"}[kind]
        self.use(kind)
        lines.append(f"stage gpu{'[2]' if self.gpu_family else ''} : {text};")
        lines.append("stage think : delay;")
        self.use("delay")
        if self.spill:
            lines.append("stage link : fifo;")
        if self.chance(25):
            self.share = True
            self.use("share", "ps")
            lines += ["stage up : ps(2);", "stage down : ps(1);", f"share {self.pick(('maxmin', 'bottleneck'))};"]
        return lines

    # -- expressions ------------------------------------------------------------
    def work(self) -> str:
        return self.pick(("1", "0.5", "2", "~exp(1)", "~exp(0.5)", "~uniform(0.5, 1.5)", "~erlang(2, 1)",
                          "~h2(1, 4)", "a / 2", "~det(0.25)"))

    def observable(self) -> str:
        """An expression a session statement may observe or a guard test: observables of what is declared."""
        choices = ["now", "serial", "turn_no", "a", "now - t0"]
        for p in self.pools:
            ref = f"{p.name}[0]" if p.family else p.name
            choices += [f"used({ref})", f"free({ref})", f"holders({ref})", f"queued({ref})", f"cachedin({ref})"]
        gpu = "gpu[0]" if self.gpu_family else "gpu"
        choices += [f"queue({gpu})", f"busy({gpu})", f"work({gpu})", f"est_lambda({gpu})", f"est_wait({gpu})"]
        if self.engine:
            engine = "engine[1]" if self.engine_family else "engine"
            choices += [f"budget_left({engine})", f"work({engine})", f"queue({engine})"]
        return self.pick(choices)

    def guard(self) -> str:
        return self.pick(("a > 2", "serial == 0", "now > 3", "now - t0 > 1", "turn_no < 2", "a <= b",
                          f"{self.observable()} > 1", "a == 1 || serial > 3", "!(a > 1)"))

    # -- statements -------------------------------------------------------------
    def block(self, depth: int, held: list, cached: bool, in_loop: bool, size: int = 4) -> list[str]:
        """Statements of one block; ``held`` the (reference, PoolDecl, direct, grows) of the holds around
        it (direct: this block is the hold's own body, where a release may give it back, and the block
        narrows the list when it does; grows: no loop lies between the hold and here, so that a grow is
        not repeated until the hold preempts itself for ever), ``cached`` whether `cached` may be read."""
        held = list(held)
        out: list[str] = []
        for _ in range(self.draw(st.integers(1, size))):
            out += self.statement(depth, held, cached, in_loop)
        if self.chance(12):
            out.append("end;")
            self.use("end")
        return out

    def statement(self, depth: int, held: list, cached: bool, in_loop: bool) -> list[str]:
        kinds = ["set", "observe", "run", "run"]
        if not any("[k]" in h[0] for h in held):  # a hold on kv[k] keeps the member it holds
            kinds.append("choose")
        if depth > 0:
            kinds += ["branch", "branch with", "hold", "hold"]
            if not in_loop and self.loops < 2:
                kinds.append("loop")
            if self.engine:
                kinds += ["request", "request"]
        if held:
            kinds.append("drop")
        if any(h[3] for h in held):
            kinds += ["grow", "load"]
        if any(h[2] for h in held):
            kinds.append("release")
        if self.turn_block:
            kinds.append("turn")
        if self.share:
            kinds.append("run several")
        if self.engine:
            kinds.append("run step")
        kind = self.pick(kinds)
        if kind == "set":
            self.use("set")
            name, value = self.pick((("a", self.pick(("1 + floor(~uniform(0, 3))", "2", "a == 1 ? 3 : 1"))),
                                     ("b", self.pick(("b + 1", "floor(now)", "~bernoulli(0.5)"))),
                                     ("t0", "now")))
            return [f"set {name} = {value};"]
        if kind == "observe":
            self.use("observe")
            value = self.pick(("cached", "computed")) if cached and self.chance(30) else self.observable()
            return [f"observe {self.pick(('x', 'y', 'z'))} = {value};"]
        if kind == "run":
            self.use("run")
            return [f"run {self.pick((self.member('gpu', self.gpu_family), 'think'))} ({self.work()});"]
        if kind == "run several":
            self.use("run several stages", "run")
            return [f"run up, down ({self.work()});"]
        if kind == "run step":
            mode = self.pick(("prefill", "decode"))
            self.use(f"run {mode}", "run")
            return [f"run {self.member('engine', self.engine_family)} {mode} ({self.pick(('1', '4', '2 + a'))});"]
        if kind == "choose":
            self.use("choose")
            keys = ["serial", "-a"]
            if self.gpu_family:
                keys.append("queue(gpu[k])")
            for p in self.pools:
                if p.family:
                    keys.append(f"holders({p.name}[k])")
            return [f"choose k in 2 by ({self.pick(keys)}, {self.pick(('serial', 'now', 'k'))});"]
        if kind == "turn":
            self.use("turn")
            return ["turn;"]
        if kind == "grow":
            self.use("grow")
            ref = self.pick([h for h in held if h[3]])[0]
            return [f"grow {ref} ({self.pick(('1', '2', '4'))});"]
        if kind == "load":  # grown first, so that it fits the allocation (a load past it is a RunError)
            self.use("load", "grow")
            ref = self.pick([h for h in held if h[3]])[0]
            n = self.pick(('1', '2', '3'))
            return [f"grow {ref} ({n});", f"load {ref} ({n});"]
        if kind == "drop":
            self.use("drop")
            ref = self.pick(held)[0]
            return [f"drop {ref};"]
        if kind == "release":
            self.use("release")
            item = self.pick([h for h in held if h[2]])
            held.remove(item)  # what follows in this block no longer holds it
            return [f"release {item[0]};"]
        if kind in ("branch", "branch with"):
            self.use(kind)
            inner = [(ref, p, False, grows) for ref, p, _, grows in held]  # a release in one arm: the other holds
            then = self.block(depth - 1, inner, cached, in_loop, 3)
            if kind == "branch":
                head = f"branch ({self.guard()})"
            else:
                head = f"branch with ({self.pick(('0.3', '0.5', '0.8', 'a / 4'))})"
            text = f"{head} {{ {' '.join(then)} }}"
            if self.chance(50):
                self.use("branch else")
                text += f" else {{ {' '.join(self.block(depth - 1, inner, cached, in_loop, 3))} }}"
            return [text]
        if kind == "loop":
            self.use("loop")
            self.loops += 1
            inner = [(ref, p, False, False) for ref, p, _, _ in held]  # a release or grow inside: repeated
            body = self.block(depth - 1, inner, cached, True, 3)
            leave = self.pick((f"branch (now > {self.pick((3, 5, 8))}) {{ end; }}",
                               "branch with (0.4) { end; }",
                               f"branch (turn_no >= {self.pick((2, 3))}) {{ end; }} else {{ turn; }}"))
            self.use("end")
            if "turn;" in leave:
                self.use("turn")
            return [f"loop {{ {' '.join(body)} run think ({self.pick(('1', '~exp(1)', '0.5'))}); {leave} }}"]
        if kind == "request":
            return [self.request(held)]
        return [self.hold(depth, held, cached, in_loop)]

    def hold(self, depth: int, held: list, cached: bool, in_loop: bool) -> str:
        """A hold on one or two plain pools not already held; a run if there is none."""
        free = [p for p in self.plain_pools() if all(p is not h[1] for h in held)]
        if not free:
            self.use("run")
            return f"run think ({self.work()});"
        self.use("hold")
        chosen = self.draw(st.lists(st.sampled_from(free), min_size=1, max_size=2, unique_by=lambda p: p.name))
        if len(chosen) > 1:
            self.use("hold several pools")
        headers, refs = [], []
        binding = None
        for p in chosen:
            ref = self.member(p.name, p.family)
            refs.append((ref, p, True, True))
            units = self.pick(("1", "2", "4", "a", "a + 2") + (("r",) if p.cap >= 64 else ()))
            # r, drawn just before the hold, is sometimes above the cap: that session is rejected (seed 002 §3
            # Pools); drawn in the header instead, every admission attempt would draw again, and settle would
            # not be idempotent (semantics/smallstep/settle.py: the one exception)
            if binding is None and self.chance(20):
                binding = f"h = min(cachedin({ref}), 2)"
                units = "h + 1"
            header = f"{ref} ({units})"
            if self.chance(25):
                header += f" reserve ({self.pick(('6', 'a + 4'))})"
                self.use("reserve")
            headers.append(header)
        cache = self.chance(55)
        text = "hold " + ", ".join(headers)
        if any(h.split(" (")[1].startswith("r)") for h in headers):
            text = "set r = floor(~uniform(1, 100)); " + text
        if cache and self.chance(50):
            text += f" reuse ({self.pick(('2', '4', 'a'))})"
            self.use("reuse")
        if binding is not None:
            text += f" at admission ({binding})"
            self.use("at admission")
        outer = [(ref, p, False, grows) for ref, p, _, grows in held]
        body = self.block(depth - 1, outer + refs, cache, in_loop, 3)
        text += f" {{ {' '.join(body)} }}"
        after = ""
        if cache:
            text += f" cache ({self.pick(('1', '2', '4', 'a'))})"
            self.use("cache")
            if self.chance(35):
                ref = refs[0][0]
                text += f" lease {ref} ({self.pick(('0.5', '2', 'inf'))})"
                self.use("lease")
                if self.chance(50):
                    after = f" run think ({self.work()}); release {ref};"
                    self.use("release lease", "release")
        return text + after

    def request(self, held: list) -> str:
        """A step request after lib/vllm.sq's vllm_request: a request slot admitted via the engine, KV
        allocated up to the budget left, reserved for the prompt, grown block by block."""
        if any(h[1].role != "plain" for h in held):  # a request inside a request would wait for itself
            return f"run think ({self.work()});"
        self.use("step request", "hold", "hold several pools", "reserve", "run prefill", "run decode", "growing",
                 "run")
        index = f"[{self.pick(('k', '0', '1'))}]" if self.engine_family else ""
        engine, seqs, kv = f"engine{index}", f"seqs{index}", f"kv{index}"
        prompt = self.pick(("8", "12", "20", "p"))
        cache = self.chance(60)
        binding = self.chance(40)
        known = "known" if binding else prompt
        header = f"hold {seqs} (1), {kv} (min({known}, budget_left({engine}))) reserve ({known})"
        if cache and self.chance(60):
            header += f" reuse ({self.pick(('4', '8', prompt))})"
            self.use("reuse")
        if binding:
            header += f" at admission (known = computed < {prompt} ? {prompt} : computed + 1)"
            self.use("at admission")
        body = [f"run {engine} prefill ({known} - cached) growing {kv};" if cache else
                f"run {engine} prefill ({known}) growing {kv};"]
        if self.chance(50):
            body.append("observe first = now - t0;")
            self.use("observe")
        body.append(f"run {engine} decode ({self.pick(('o', '1', '3'))}) growing {kv};")
        text = f"{header} {{ {' '.join(body)} }}"
        if cache:
            text += f" cache ({prompt} + 1)"
            self.use("cache")
        return text

    # -- the program ------------------------------------------------------------
    def program(self, arrival: str | None = None) -> str:
        lines = self.declare_pools()
        if self.chance(45):
            lines += self.declare_engine()
        lines += self.declare_stages()
        arrival = arrival or self.pick(("poisson", "renewal", "closed", "batch", "batch", "none"))
        self.use(f"arrive {arrival}")
        workload = [{"poisson": f"arrive poisson({self.pick(('0.5', '1', '2'))});",
                     "renewal": f"arrive renewal({self.pick(('1.5', '~exp(1)', '~erlang(2, 0.5)', '~h2(1, 4)', '~uniform(0.5, 1.5)'))});",
                     "closed": f"arrive closed({self.pick((1, 2, 4))});",
                     "batch": f"arrive batch({self.pick((1, 2, 5))});",
                     "none": "arrive none;"}[arrival]]
        init = self.chance(60)
        if init:
            workload.append("init { set a = 1 + floor(~uniform(0, 3)); set b = 0; set p = 8 + floor(~uniform(0, 16)); "
                            "set o = 1 + floor(~uniform(0, 6)); }")
            self.use("init")
        if self.chance(35):
            self.turn_block = True
            workload.append(f"turn {{ set b = {self.pick(('b + 1', 'turn_no', '~bernoulli(0.5)'))}; observe y = turn_no; }}")
            self.use("turn block")
        if init and self.chance(40):
            workload.append("hidden o;")
            self.hidden = True
            self.use("hidden")
        lines.append(f"workload {{ {' '.join(workload)} }}")
        for number in range(self.pick((0, 0, 1, 2))):
            self.use("gauge")
            gpu = "gpu[1]" if self.gpu_family else "gpu"
            terms = [f"queue({gpu})", f"busy({gpu})", "busy(think)"]
            for p in self.pools:
                ref = f"{p.name}[0]" if p.family else p.name
                terms += [f"used({ref})", f"holders({ref})", f"queued({ref})"]
            lines.append(f"gauge g{number} = {self.pick(terms)} + {self.pick(terms)};")
        session = ["set t0 = now;"]
        if not init:
            session += ["set a = 1 + floor(~uniform(0, 3));", "set b = 0;", "set p = 8 + floor(~uniform(0, 16));",
                        "set o = 1 + floor(~uniform(0, 6));"]
            self.use("set")
        if arrival == "closed":  # a closed session that lets no time pass is replaced at once, for ever
            session.append(f"run think ({self.pick(('1', '~exp(1)', '0.5 + ~uniform(0, 1)'))});")
        if self.families:
            session.append("choose k in 2 by (serial, -k);")
            self.use("choose")
        session += self.block(3, [], True, False, 5)
        lines.append(f"session {{ {' '.join(session)} }}")
        horizon = self.pick((8, 12, 16))
        settings = [f"horizon {horizon};", f"seed {self.draw(st.integers(0, 9))};"]
        limit = arrival in ("poisson", "renewal") and self.chance(15)
        if not limit and self.chance(30):
            settings.append(f"warmup {self.pick((1, 2))};")
            self.use("warmup")
        if limit:
            settings[0] = "horizon 200;"
            settings.append(f"arrivals {self.pick((3, 6))};")
            self.use("arrivals")
        lines.append(f"run {{ {' '.join(settings)} }}")
        if self.engine is not None:  # drawn last, so that the draws before it are those of the programs without it
            lines = [self.speculate(line) if line.startswith("stage engine") else line for line in lines]
        return "\n".join(lines) + "\n"

    def speculate(self, engine: str) -> str:
        """The step stage's line, sometimes with speculative decoding (docs/design/speculative-decoding.md) and
        its edges (section 8: lookahead slots, draft slots, a model length)."""
        if not self.chance(30):
            return engine
        k = self.pick((1, 2, 3))
        clause = f"speculate ({k}) accept ({self.pick(('0', '1', str(k), 'remaining > 2 ? 2 : 0'))})"
        if self.chance(50):
            clause += f" lookahead ({self.pick((k, 1))})"
        if self.chance(50):
            clause += f" slots ({self.pick((1, k))})"
        if self.chance(40):
            clause += f" within ({self.pick((24, 40, 200))})"
        self.use("speculate")
        return engine[:engine.rindex("}")] + clause + "; }"


@st.composite
def generated(draw, arrival: str | None = None) -> Generated:
    """A well-formed program and the features it uses; ``arrival`` forces the workload's arrival kind."""
    writer = Writer(draw)
    text = writer.program(arrival)
    return Generated(text, frozenset(writer.features))


def programs(arrival: str | None = None) -> st.SearchStrategy[str]:
    """A well-formed serQ program in the text syntax (seed 002 §2)."""
    return generated(arrival).map(lambda g: g.text)


# ---------------------------------------------------------------- the IR


class Loaded(NamedTuple):
    """A generated program, its IR as the pipeline makes it (None: refused, with the message)."""

    generated: Generated
    program: ir.Program | None
    error: str | None


def load_text(text: str, name: str = "generated.sq") -> ir.Program:
    """The IR of ``text`` as `serq-ref run` makes it: ``semantics.pipeline.load`` (compile, check the
    run settings, link) on a file holding it. Raises ProgramError."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return load(path, command="run").program


def load_ir(program: ir.Program) -> ir.Program:
    """``program`` through the pipeline as an IR file: encoded, validated against the schema, decoded, linked."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "generated.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(codec.dumps(program))
        return load(path, command="run").program


def _loaded(g: Generated) -> Loaded:
    try:
        return Loaded(g, load_text(g.text), None)
    except ProgramError as e:
        return Loaded(g, None, str(e))


def loaded_programs(arrival: str | None = None) -> st.SearchStrategy[Loaded]:
    """A generated program with its IR (or the pipeline's refusal)."""
    return generated(arrival).map(_loaded)


class Explicit(NamedTuple):
    """A program of explicit sessions before it is loaded: its text (which says `arrive none;`) and the
    sessions, each ``(attributes, turns)``: attribute names to values, and None or the values `b` takes
    at each turn."""

    generated: Generated
    sessions: tuple


@st.composite
def explicit_sessions(draw) -> Explicit:
    """One to four explicit sessions (the IR's ``Sessions`` arrival: FORMAT.md, Arrival), each with its own
    `a`, `b`, `p`, `o` (attributes every generated program sets), and, when the program takes turns,
    sometimes the turns' values of `b`."""
    g = draw(generated("none"))
    takes_turns = "turn" in g.features or "turn block" in g.features
    sessions = []
    for _ in range(draw(st.integers(1, 4))):
        attrs = {"a": draw(st.sampled_from((1.0, 2.0, 3.0))), "b": draw(st.sampled_from((0.0, 1.0))),
                 "p": draw(st.sampled_from((8.0, 12.0, 20.0))), "o": draw(st.sampled_from((1.0, 3.0)))}
        turns = None
        if takes_turns and draw(st.booleans()):
            turns = tuple(float(t) for t in range(draw(st.integers(1, 3))))
        sessions.append((attrs, turns))
    features = set(g.features) | {"explicit sessions"}
    if any(turns for _, turns in sessions):
        features.add("explicit turns")
    return Explicit(Generated(g.text, frozenset(features)), tuple(sessions))


def _load_explicit(e: Explicit) -> Loaded:
    """The text through the pipeline, its arrival replaced by the explicit sessions, then through the
    pipeline again as an IR file (schema, decode, link)."""
    first = _loaded(e.generated)
    if first.program is None:
        return first
    program = first.program
    slot = {name: program.attrs.index(name) for name in ("a", "b", "p", "o")}
    specs = []
    for attrs, turns in e.sessions:
        pairs = tuple(sorted((slot[name], value) for name, value in attrs.items()))
        specs.append(ir.SessionSpec(pairs, None if turns is None else tuple(((slot["b"], b),) for b in turns)))
    explicit = dataclasses.replace(program, arrival=ir.Sessions(tuple(specs)))
    try:
        return Loaded(e.generated, load_ir(explicit), None)
    except ProgramError as error:
        return Loaded(e.generated, None, str(error))


def explicit_programs() -> st.SearchStrategy[Loaded]:
    """A program of explicit sessions with its IR (or the pipeline's refusal)."""
    return explicit_sessions().map(_load_explicit)
