"""The spec's own snippets parse and compile (seed 002 sections 2-3, seed 000).

Where a snippet elides part of itself with "…", the elided part is filled in
with the smallest thing that makes it whole, and said so in a comment; the
rest is the seed's text.
"""

from __future__ import annotations

from semantics import ir
from semantics.compiler import compile_source

ENGINE = """
let Lambda = 0.5; let Z = 3; let bs = 16; let B = 512;
pool reqs { cap 64; admit via engine; }
pool kv { cap 8000 * bs; block bs; evict lru; preempt lifo; }
stage engine : step { budget B; cost 0.01; memory kv; }
stage tool : delay;
"""


def compile_text(text: str) -> ir.Program:
    program, _ = compile_source(text + "\nrun { horizon 100; }\n", "seed.sq")
    return program


def test_the_two_sides_snippet() -> None:
    """Seed 002, The two sides: the same program written from its two sides."""
    program = compile_text(ENGINE + """
workload {
  arrive poisson(Lambda);
  hidden o;
  init { set K = 0; }
  turn { set n = 100; set o = 20; set more = 1; }   // the snippet's turn { … }
  session {
    turn;
    loop {
      request;
      set K = prompt + o;
      branch (more) { tool (~exp(Z)); turn; } else { end; }
    }
  }
}

server {
  set prompt = K + n;
  set hitmax = floor((prompt - 1) / bs) * bs;
  hold reqs (1), kv (min(prompt, hit + budget_left(engine)))
        at admission (hit = min(cachedin(kv), hitmax)) {
    prefill (prompt - c) growing kv;
    decode (o - 1) growing kv;
  } cache (prompt + o);
}
""".replace("prefill (prompt - c)", "prefill (prompt - cached)"))  # c is the snippet's `set c = cached`
    assert "hitmax" in program.attrs and "hit" not in program.attrs


def test_the_kv_transfer_snippets() -> None:
    """Seed 002, A KV transfer: two holds in a row, then the lease and the transfer form."""
    declarations = """
let x0 = 0.01; let K = 0;
pool memP { cap 1000; } pool memD { cap 1000; }
pool reqsP { cap 8; } pool kvP { cap 1000; } pool reqsD { cap 8; } pool kvD { cap 1000; }
stage prefill : fifo; stage decode : fifo; stage link : ps(100);
stage P : fifo; stage D : fifo; stage setup : delay; stage egress : ps(10); stage ingress : ps(10);
share maxmin;
"""
    program = compile_text(declarations + """
session {
  set T = 100; set n = 10; set o = 5; set prompt = 100; set c = 0;
  hold memP (T) { prefill (n + K); run link (T / 100); } cache (T);
  hold memD (T) { decode (o); }
  hold reqsP (1), kvP (prompt) {                  // the snippet's kvP (…) …
    prefill on P (prompt - c);
  } cache (prompt) lease kvP (inf);
  hold kvD (prompt) reserve (prompt), reqsD (0) reserve (1) {
    run setup (x0);
    transfer on egress, ingress (prompt - c) from kvP to kvD (prompt - 1 - c);
    hold reqsD (1) { prefill on D (1); decode on D (o - 1); }
  } cache (prompt + o);
}
""")
    body = program.blocks[program.session]
    transfer_hold = program.blocks[body[-1].body]
    assert [type(s).__name__ for s in transfer_hold] == ["Run", "Run", "Load", "Release", "Hold"]
    assert transfer_hold[1].also is not None


def test_the_queue_snippet() -> None:
    """Seed 002, Queues: a prefill station declared whole."""
    program = compile_text("""
let NP = 2; let max_seqsP = 8; let blocksP = 100; let bs = 16; let B = 256;
def reusable(p, b) = floor((p - 1) / b) * b;
queue P[NP] : prefill {
  pool reqs { cap max_seqsP; admit via P; }
  pool kv { cap blocksP * bs; block bs; evict lru; preempt lifo; }
  serve step { budget B; cost 1; memory kv; }       // the snippet's cost …
  prefill (prompt) {
    hold reqs (1), kv (min(prompt, hit + budget_left(P))) reserve (prompt)
         at admission (hit = min(cachedin(kv), reusable(prompt, bs))) {
      set c = cached;
      prefill (prompt - c) growing kv;
    } cache (prompt) lease kv (inf);
  }
}
session { set prompt = 40; choose i in NP by (queued(P[i].reqs)); P[i].prefill (prompt); end; }
""")
    assert [(p.name, p.index) for p in program.pools] == [("P.reqs", 0), ("P.reqs", 1), ("P.kv", 0), ("P.kv", 1)]
    assert [p.admit_via for p in program.pools[:2]] == [0, 1]
    assert "P.c" in program.attrs


def test_the_pool_and_gauge_snippets() -> None:
    """Seed 000's Ascend lanes key, and seed 002's two gauges."""
    program = compile_text("""
let N = 2;
stage s : fifo;
pool lanes { queue by (immediate ? 0 : prompt > 128 && waited >= 3 ? 1 : prompt <= 128 ? 2 : 3,
          serial); }
pool reqs[N] { cap 4; }
pool kv[N] { cap 100; }
gauge full = max j in N (free(reqs[j]) == 0);
gauge spread = max j in N (used(kv[j])) - min j in N (used(kv[j]));
session { set immediate = 0; set prompt = 10; hold lanes (1) { run s (1); } }
""")
    assert len(program.pools[0].queue) == 2
    assert [g.name for g in program.gauges] == ["full", "spread"]
