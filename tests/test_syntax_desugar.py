"""Each desugaring of seed 002 against a hand-written kernel twin: the sugared
program and the twin compile to the same IR (the sugar is the parser's, "so
the AST, the IR ... know nothing of them")."""

from __future__ import annotations

import dataclasses
import json

import pytest

from semantics import codec, ir
from semantics.compiler import compile_source
from semantics.errors import ProgramError, UsageError

RUN = "run { horizon 100; }\n"


def compile_text(text: str, **options) -> ir.Program:
    program, _ = compile_source(text + RUN, "test.sq", **options)
    return program


def ir_json(program: ir.Program, ignore: tuple[str, ...] = (), renames: dict[str, str] | None = None) -> dict:
    """The IR as JSON, some fields left out, some pool/stage/attribute names renamed."""
    data = json.loads(codec.dumps(program))
    for key in ignore:
        data.pop(key, None)
    renames = renames or {}
    data["attrs"] = [renames.get(a, a) for a in data["attrs"]]
    for entry in data["pools"] + data["stages"]:
        entry["name"] = renames.get(entry["name"], entry["name"])
    return data


def assert_twins(sugared: str, kernel: str, ignore: tuple[str, ...] = (), renames: dict[str, str] | None = None):
    assert ir_json(compile_text(sugared), ignore, renames) == ir_json(compile_text(kernel), ignore)


STAGES = """
stage prefill : fifo;
stage decode : ps(4);
stage tool : delay;
stage link : ps(100);
pool kvP { cap 100; }
pool kvQ { cap 100; }
"""

# ------------------------------------------------------ the serving vocabulary


@pytest.mark.parametrize("form, kernel", [
    ("prefill 2;", "run prefill (2);"),
    ("decode n + 1;", "run decode (n + 1);"),
    ("tool ~exp(3);", "run tool (~exp(3));"),
    ("prefill on decode (5);", "run decode (5);"),
    ("transfer (n / 10) from kvP to kvQ (n);", "run link (n / 10); load kvQ (n); release kvP;"),
    ("transfer on link, decode (1) from kvP to kvQ (n);", "run link, decode (1); load kvQ (n); release kvP;"),
])
def test_serving_forms_are_runs(form: str, kernel: str) -> None:
    """Seed 002, The serving vocabulary: prefill W; is run prefill (W); transfer
    (X) from P to Q (n); is run link (X); load Q (n); release P;."""
    def program(body: str) -> str:
        return STAGES + "session { set n = 3; hold kvP (1), kvQ (1) { " + body + " } }\n"

    assert_twins(program(form), program(kernel))


def test_serving_forms_on_a_step_engine_take_the_role_mode() -> None:
    """"or on a step engine E: run E prefill (T);" and decode likewise."""
    decl = "pool kv { cap 100; } stage E : step { budget 8; cost 1; memory kv; }\n"
    assert_twins(decl + "session { hold kv (1) { prefill (4) growing kv; decode 3 growing kv; } }",
                 decl + "session { hold kv (1) { run E prefill (4) growing kv; run E decode (3) growing kv; } }")


def test_indexed_and_explicit_forms() -> None:
    """prefill[j] W; serves the role's array; prefill on P[j] (W); names the stage."""
    decl = "pool kv { cap 100; } stage prefill[2] : fifo; stage E[2] : step { budget 8; cost 1; memory kv; }\n"
    assert_twins(decl + "session { choose j in 2 by (serial); prefill[j] 2; hold kv (1) { decode on E[j] (3); } }",
                 decl + "session { choose j in 2 by (serial); run prefill[j] (2); "
                        "hold kv (1) { run E[j] decode (3); } }")


def test_which_stage_finds_none_or_several() -> None:
    """"with none (stage svc : fifo; and prefill W;) or several (two step
    engines) the parser stops at the form and says so"."""
    with pytest.raises(ProgramError, match="`prefill` finds no stage") as none:
        compile_text("stage svc : fifo;\nsession { prefill 1; }")
    assert (none.value.span.line, none.value.span.col) == (2, 11)
    with pytest.raises(ProgramError, match=r"`decode` finds several stages \(`A`, `B`\)"):
        compile_text("stage A : step { budget 1; cost 1; } stage B : step { budget 1; cost 1; }\n"
                     "session { decode 1; }")


def test_which_stage_reads_only_the_stages_declared_above() -> None:
    with pytest.raises(ProgramError, match="`tool` finds no stage"):
        compile_text("session { tool 1; }\nstage tool : delay;")


# ------------------------------------------------------------- the two sides


SIDES_DECL = "pool kv { cap 10; } stage s : fifo;\n"


def test_request_splices_the_server() -> None:
    """"request; runs the server once. The parser splices the server's
    statements in its place — at any depth, as often as it is written"."""
    sugared = SIDES_DECL + """workload { arrive poisson(1); init { set k = 0; }
      session { turn; loop { request; set k = k + 1; branch (k < 3) { request; } else { end; } } } }
    server { hold kv (1) { run s (1); } observe w = now; }"""
    kernel = SIDES_DECL + """workload { arrive poisson(1); init { set k = 0; } }
    session { turn; loop { hold kv (1) { run s (1); } observe w = now; set k = k + 1;
      branch (k < 3) { hold kv (1) { run s (1); } observe w = now; } else { end; } } }"""
    assert_twins(sugared, kernel, ignore=("sides",))
    program = compile_text(sugared)
    loop_block = program.blocks[program.session][1].block
    assert program.sides[loop_block] == ("Server", "Server", "Workload", "Workload")


def test_sides_give_the_attribute_types() -> None:
    """What the workload side sets is a Size; what the server sets is a Value."""
    program = compile_text(SIDES_DECL + "workload { arrive poisson(1); session { set a = 1; request; end; } }\n"
                                        "server { set b = 2; run s (b); }")
    types = dict(zip(program.attrs, program.attr_types))
    assert (types["a"], types["b"], types["cached"], types["serial"], types["computed"]) == (
        "Size", "Value", "Value", "Size", "Value")


@pytest.mark.parametrize("text, message", [
    ("workload { arrive poisson(1); session { request; } } server { turn; }", "`turn;` is the session's"),
    ("workload { arrive poisson(1); session { request; } } server { end; }", "`end;` is the session's"),
    ("workload { arrive poisson(1); session { request; } } server { request; }", "a server does not request itself"),
    ("workload { arrive poisson(1); session { end; } } server { run s (1); }", "the server block is never requested"),
    ("server { run s (1); }", "the server block is never requested"),
    ("workload { arrive poisson(1); session { request; } }", "this program has none"),
    ("workload { arrive poisson(1); session { end; } }", "a workload's session without a server"),
    ("session { request; }", "`request` belongs to a workload's session"),
    ("session { end; } workload { arrive poisson(1); session { request; } } server { end; }",
     "a top-level session and a workload's session"),
])
def test_each_side_owns_its_words(text: str, message: str) -> None:
    """Seed 002, The two sides: turn, end and request on the wrong side, a
    session without a server and a server never requested are errors."""
    with pytest.raises(ProgramError, match=message):
        compile_text(SIDES_DECL + text)


# ------------------------------------------------------------- at admission


def test_at_admission_is_substituted_and_the_body_reads_a_set() -> None:
    """"The bindings are substituted into the header's expressions by the
    parser ... One the body reads is set at its top, set known = e;"."""
    decl = "pool kv { cap 100; block 4; } stage E : step { budget 8; cost 1; memory kv; }\n"
    sugared = decl + """workload { arrive batch(1); init { set prompt = 10; } session { request; end; } }
    server { hold kv (min(known, hit + budget_left(E))) reserve (known)
        at admission (hit = min(cachedin(kv), 8), known = computed < prompt ? prompt : computed + 1) {
      prefill (known - cached) growing kv; } cache (known); }"""
    kernel = decl + """workload { arrive batch(1); init { set prompt = 10; } session { request; end; } }
    server { hold kv (min(computed < prompt ? prompt : computed + 1, min(cachedin(kv), 8) + budget_left(E)))
        reserve (computed < prompt ? prompt : computed + 1) {
      set known = computed < prompt ? prompt : computed + 1;
      prefill (known - cached) growing kv; } cache (known); }"""
    assert_twins(sugared, kernel)


@pytest.mark.parametrize("binding, message", [
    ("hit = cachedin(kv)", "reads cachedin"),
    ("hit = ~exp(1)", "draws"),
    ("hit = cached", "`cached`, which the admission itself sets"),
])
def test_bindings_the_body_may_not_read(binding: str, message: str) -> None:
    """"A binding may not draw"; a binding that reads live state "has another
    value there, so the body reading it is a parse error"."""
    with pytest.raises(ProgramError, match=message):
        compile_text(f"pool kv {{ cap 10; }} stage s : fifo;\n"
                     f"session {{ hold kv (hit) at admission ({binding}) {{ run s (hit); }} }}")


def test_a_binding_the_body_reads_has_a_name_of_its_own() -> None:
    with pytest.raises(ProgramError, match="also sets it here"):
        compile_text("pool kv { cap 10; } stage s : fifo;\n"
                     "session { set k = 1; hold kv (k) at admission (k = serial) { run s (k); } }")
    with pytest.raises(ProgramError, match="bound after it"):
        compile_text("pool kv { cap 10; } session { hold kv (a) at admission (a = b, b = serial) { end; } }")


# ------------------------------------------------------ branch with, aggregates


def test_branch_with_is_a_bernoulli_test() -> None:
    """"branch with (p) takes the first block with probability p, and is sugar
    the parser rewrites to branch (~bernoulli(p))"."""
    assert_twins("session { branch with (0.25) { end; } }", "session { branch (~bernoulli(0.25)) { end; } }")


def test_aggregates_are_written_out() -> None:
    """"max k in 2 (used(kv[k])) is max(used(kv[0]), used(kv[1]))"."""
    decl = "let N = 3; pool kv[N] { cap 1; }\n"
    assert_twins(decl + "gauge g = max k in 2 (used(kv[k])) + sum k in N (free(kv[k]));\nsession { end; }",
                 decl + "gauge g = max(used(kv[0]), used(kv[1])) + (free(kv[0]) + free(kv[1]) + free(kv[2]));\n"
                        "session { end; }")


# --------------------------------------------------------------------- defs


def test_defs_expand_in_place() -> None:
    decl = "pool kv { cap 10; block 2; } stage s : fifo;\n"
    sugared = decl + """def half(x) = x / 2;
    def serve_one(p, w) { hold p (half(w)) { run s (w); } }
    session { set n = 4; serve_one(kv, n + 1); }"""
    kernel = decl + "session { set n = 4; hold kv ((n + 1) / 2) { run s (n + 1); } }"
    assert_twins(sugared, kernel)


# ------------------------------------------------------------ stage kinds


def test_delay_is_ps_of_present_and_decode_first_is_a_key() -> None:
    """FORMAT.md: "stage g : delay; compiles to {"Ps": {"Ctx": "N"}}"; serve
    decode first is By([Cond(Ctx Decoding, 0, 1)])."""
    assert_twins("stage g : delay; stage e : step { budget 1; cost 1; serve decode first; }\nsession { end; }",
                 "stage g : ps(present); stage e : step { budget 1; cost 1; serve by (decoding ? 0 : 1); }\n"
                 "session { end; }")


def test_preempt_lifo_is_the_newest_admission_first() -> None:
    program = compile_text("pool kv { preempt lifo; } pool q { preempt none; }\nsession { end; }")
    assert program.pools[0].preempt == (ir.Unary("Neg", ir.Ctx("Admission")),)
    assert program.pools[1].preempt is None


# ------------------------------------------------------------------ queues


QUEUE_PROGRAM = """
queue gw : gateway { route { set prompt = n; set i = serial - 2 * floor(serial / 2); P[i].prefill (prompt);
                             D.decode (prompt) from P[i]; observe first = D.first; } }
queue P[2] : prefill {
  pool kv { cap 100; block 4; }
  serve step { budget 16; cost 1; memory kv; }
  nic ps(1000);
  prefill (prompt) { hold kv (prompt) { set c = cached; prefill (prompt - c) growing kv; } cache (prompt)
                     lease kv (inf); }
}
queue D : decode {
  pool kv { cap 100; block 4; }
  serve step { budget 16; cost 1; memory kv; }
  nic ps(1000);
  decode (prompt) from src { hold kv (prompt) { transfer (prompt) from src to kv (prompt); mark first;
                             decode (3) growing kv; } }
}
D pull P latency 0.5 share maxmin;
workload { arrive poisson(1); init { set n = 8; } session { request gw; end; } }
"""

QUEUE_KERNEL = """
pool P_kv[2] { cap 100; block 4; }
stage P[2] : step { budget 16; cost 1; memory P_kv; }
stage P_nic[2] : ps(1000);
pool D_kv { cap 100; block 4; }
stage D : step { budget 16; cost 1; memory D_kv; }
stage D_nic : ps(1000);
stage D_nic_latency : delay;
share maxmin;
workload { arrive poisson(1); init { set n = 8; } }
session {
  set prompt = n;
  set i = serial - 2 * floor(serial / 2);
  hold P_kv[i] (prompt) {
    set P_c = cached;
    run P[i] prefill (prompt - P_c) growing P_kv[i];
  } cache (prompt) lease P_kv[i] (inf);
  hold D_kv (prompt) {
    run D_nic_latency (0.5);
    run P_nic[i], D_nic (prompt);
    load D_kv (prompt);
    release P_kv[i];
    set D_first = now;
    run D decode (3) growing D_kv;
  }
  observe first = D_first;
  end;
}
"""


def test_queues_are_pools_stages_and_entries_in_place() -> None:
    """Seed 002, Queues: "A queue's pools and stage are the program's under
    their long names, an entry call is its body in place, mark is a set", and
    a pull relation's transfer is run D.nic.latency[j] (x0); run P.nic[i],
    D.nic[j] (…); load D.kv[j] (…); release P.kv[i];."""
    renames = {"P_kv": "P.kv", "P_nic": "P.nic", "D_kv": "D.kv", "D_nic": "D.nic", "D_nic_latency": "D.nic.latency",
               "P_c": "P.c", "D_first": "D.first"}
    assert ir_json(compile_text(QUEUE_PROGRAM), ("sides", "attr_types")) == ir_json(
        compile_text(QUEUE_KERNEL), ("sides", "attr_types"), renames)


@pytest.mark.parametrize("change, message", [
    ("D.decode (prompt) from P[i];", None),
    ("D.decode (prompt);", "call it with `from QUEUE"),
    ("D.decode (prompt) from gw;", "pulls from `P`"),
    ("D.nope (prompt) from P[i];", "has no entry `nope`"),
    ("P.prefill (prompt); D.decode (prompt) from P[i];", "is a family of 2"),
    ("P[2].prefill (prompt); D.decode (prompt) from P[i];", "out of range"),
    ("D.decode (~exp(1)) from P[i];", "none may draw"),
    ("D.decode (prompt) from P[0];", r"`release P.kv\[…\]` outside a hold of `P.kv\[…\]`"),
])
def test_entry_call_errors(change: str, message: str | None) -> None:
    text = QUEUE_PROGRAM.replace("D.decode (prompt) from P[i];", change)
    if message is None:
        compile_text(text)
        return
    with pytest.raises(ProgramError, match=message):
        compile_text(text)


def test_from_a_queue_that_leases_nothing_and_a_transfer_without_a_relation() -> None:
    no_lease = QUEUE_PROGRAM.replace("lease kv (inf);", ";")
    with pytest.raises(ProgramError, match="no entry of `P` leases a pool"):
        compile_text(no_lease)
    no_pull = QUEUE_PROGRAM.replace("D pull P latency 0.5 share maxmin;", "")
    with pytest.raises(ProgramError, match="pulls from no queue"):
        compile_text(no_pull)


def test_request_names_a_gateway() -> None:
    """"The parser checks that the target exists and plays that role"."""
    with pytest.raises(ProgramError, match="no queue `nope`"):
        compile_text(QUEUE_PROGRAM.replace("request gw;", "request nope;"))
    with pytest.raises(ProgramError, match="does not play the gateway role"):
        compile_text(QUEUE_PROGRAM.replace("request gw;", "request D;"))


def test_sets_override_lets_and_arrivals_override_the_run_block() -> None:
    program, _ = compile_source("let B = 4; let C = B * 2; pool kv { cap C; }\nsession { end; }\n"
                                "run { horizon 10; arrivals 3; }", "t.sq", sets={"B": 10}, arrivals=7)
    assert program.pools[0].cap == 20.0 and program.arrivals == 7
    with pytest.raises(UsageError, match="declares no let constant Q"):
        compile_source("let B = 4;\nsession { end; }\nrun { horizon 1; }", "t.sq", sets={"Q": 1})


def test_same_input_same_output() -> None:
    first = codec.dumps(compile_text(QUEUE_PROGRAM))
    assert first == codec.dumps(compile_text(QUEUE_PROGRAM))
    assert dataclasses.is_dataclass(compile_text(QUEUE_PROGRAM))


@pytest.mark.parametrize("old, new, message", [
    # "Its header ... reads the parameters, the queue's pools and stage and the constants"
    ("hold kv (prompt) { set c = cached;", "hold kv (n) { set c = cached;", "reads `n` in its header"),
    # "its body also reads now, cached and the request's hidden attributes, and nothing else the session has set"
    ("decode (3) growing kv;", "decode (n) growing kv;", "reads `n` in its body"),
    # "Its statements hold, grow, load and release only the queue's own pools and the pool its from names"
    ("decode (3) growing kv; } }", "decode (3) growing kv; grow P.kv (1); } }", "acts on `P.kv`"),
    # "every entry of P must lease it on every way through it"
    ("} cache (prompt)\n                     lease kv (inf); }",
     "} cache (prompt)\n                     lease kv (inf); } decode (p) { run (p); }", "on every way through it"),
])
def test_an_entry_sees_its_own(old: str, new: str, message: str) -> None:
    text = QUEUE_PROGRAM.replace("queue P[2] : prefill {", "queue P[2] : prefill, decode {").replace(old, new)
    assert text != QUEUE_PROGRAM.replace("queue P[2] : prefill {", "queue P[2] : prefill, decode {")
    with pytest.raises(ProgramError, match=message):
        compile_text(text)


def test_an_entry_body_reads_hidden_attributes() -> None:
    """"its body also reads ... the request's hidden attributes"."""
    text = QUEUE_PROGRAM.replace("decode (3) growing kv;", "decode (o) growing kv;").replace(
        "init { set n = 8; }", "hidden o; init { set n = 8; set o = 3; }")
    compile_text(text)


def test_a_binding_is_read_only_inside_its_hold() -> None:
    """"... and not read outside the holds that bind it"."""
    with pytest.raises(ProgramError, match="read here outside the hold that binds it") as caught:
        compile_text("pool kv { cap 10; } stage s : fifo;\n"
                     "session { hold kv (k) at admission (k = serial + 1) { run s (k); }\nobserve x = k; }")
    assert caught.value.span.line == 3


LINKS = """
queue L[2] : link { serve ps(100) latency 0.25; }
queue M : link { serve ps(50); }
queue N : link { serve ps(10); transfer (n) { run (n / 10); } }
pool a { cap 100; } pool b { cap 100; }
share maxmin;
"""


def test_a_transfer_on_link_queues_waits_their_latency_first() -> None:
    """"latency x on a link's serve is the wait before such a transfer: a delay
    stage L.latency of the link's own, which every transfer on naming the link
    runs first"."""
    sugared = LINKS + "session { hold a (1), b (1) { transfer on L[1], M (4) from a to b (3); } }"
    kernel = ("stage L_[2] : ps(100); stage L_latency[2] : delay; stage M_ : ps(50); stage N_ : ps(10);\n"
              "pool a { cap 100; } pool b { cap 100; }\nshare maxmin;\n"
              "session { hold a (1), b (1) { run L_latency[1] (0.25); run L_[1], M_ (4); load b (3); release a; } }")
    renames = {"L_": "L", "L_latency": "L.latency", "M_": "M", "N_": "N"}
    assert ir_json(compile_text(sugared)) == ir_json(compile_text(kernel), renames=renames)


def test_a_link_entry_is_called_with_from_and_to() -> None:
    """"A link with a transfer (n) entry is called instead, nic[self].transfer
    (n) from src to kv (m); and runs its body on its own stage"."""
    sugared = LINKS + "session { hold a (1), b (1) { N.transfer (20) from a to b (5); } }"
    kernel = ("stage L_[2] : ps(100); stage L_latency[2] : delay; stage M_ : ps(50); stage N_ : ps(10);\n"
              "pool a { cap 100; } pool b { cap 100; }\nshare maxmin;\n"
              "session { hold a (1), b (1) { run N_ (20 / 10); load b (5); release a; } }")
    renames = {"L_": "L", "L_latency": "L.latency", "M_": "M", "N_": "N"}
    assert ir_json(compile_text(sugared)) == ir_json(compile_text(kernel), renames=renames)


def test_self_is_the_members_index() -> None:
    """"self is the member's index in a family"; a family of one is still called with an index."""
    sugared = ("queue Q[2] : prefill { serve fifo; prefill (w) { run (w + self); } }\n"
               "queue R[1] : prefill { serve fifo; prefill (w) { run (w * self); } }\n"
               "session { choose j in 2 by (serial); Q[j].prefill (3); R[0].prefill (2); R.prefill (1); }")
    kernel = ("stage Q[2] : fifo; stage R[1] : fifo;\n"
              "session { choose j in 2 by (serial); run Q[j] (3 + j); run R[0] (2 * 0); run R[0] (1 * 0); }")
    assert ir_json(compile_text(sugared)) == ir_json(compile_text(kernel))


def test_a_def_used_in_an_entry_reads_the_entrys_names() -> None:
    """A use of a def is its body in place, so inside an entry `kv` is the queue's pool."""
    sugared = ("def take(n) { hold kv (n) { run (n); } }\n"
               "queue Q : prefill { pool kv { cap 9; } serve fifo; prefill (w) { take(w); } }\n"
               "session { Q.prefill (2); }")
    kernel = "pool Q_kv { cap 9; } stage Q : fifo;\nsession { hold Q_kv (2) { run Q (2); } }"
    assert ir_json(compile_text(sugared)) == ir_json(compile_text(kernel), renames={"Q_kv": "Q.kv"})
