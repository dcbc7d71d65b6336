"""The parser on every construct of seed 002's section 2, and its syntax errors."""

from __future__ import annotations

import pytest

from semantics.errors import ProgramError
from semantics.syntax import ast
from semantics.syntax.parser import parse_text


def parse(text: str) -> ast.Program:
    return parse_text(text, "test.sq")


def only_item(text: str):
    items = parse(text).items
    assert len(items) == 1
    return items[0]


def session_stmts(text: str) -> tuple[ast.Stmt, ...]:
    item = only_item(f"session {{ {text} }}")
    assert isinstance(item, ast.SessionItem)
    return item.body


def expr_of(text: str) -> ast.Expr:
    item = only_item(f"let x = {text};")
    return item.expr


# ------------------------------------------------------------------- items


def test_let_use_def_items() -> None:
    items = parse('let B = 1024; use "lib.sq"; def f(a, b) = a + b; def g(p) { run s (p); }').items
    assert [type(i).__name__ for i in items] == ["Let", "Use", "DefExpr", "DefBlock"]
    assert items[1].file == "lib.sq"
    assert items[2].params == ("a", "b") and isinstance(items[2].body, ast.Binary)
    assert isinstance(items[3].body[0], ast.Run)


def test_pool_with_every_option() -> None:
    """Seed 000: cap, block, evict lru | by, preempt none | lifo, queue fifo | by, admit via, spill."""
    pool = only_item("pool kv[N] { cap 10 * bs; block bs; evict by (age, size); preempt lifo; "
                     "queue by (serial); admit via engine; spill tier via link (size) when (size > 16); }")
    assert pool.name == "kv" and isinstance(pool.family, ast.Name)
    assert [o.kind for o in pool.options] == ["cap", "block", "evict_by", "preempt_lifo", "queue_by", "admit",
                                              "spill"]
    assert len(pool.options[2].values) == 2
    other = only_item("pool q { evict lru; preempt none; queue fifo; }")
    assert [o.kind for o in other.options] == ["evict_lru", "preempt_none", "queue_fifo"]


@pytest.mark.parametrize("kind, values", [("fifo", 0), ("fifo(4)", 1), ("ps(min(present, 16))", 1), ("delay", 0)])
def test_simple_stage_kinds(kind: str, values: int) -> None:
    stage = only_item(f"stage s : {kind};")
    assert stage.kind.kind == kind.split("(")[0] and len(stage.kind.values) == values


def test_step_stage_with_every_option() -> None:
    stage = only_item("stage e[2] : step { budget B; cost 1 + tokens; chunk 512; serve by (remaining, -admission); "
                      "memory kv; }")
    assert stage.kind.kind == "step"
    assert [o.kind for o in stage.kind.values] == ["budget", "cost", "chunk", "serve_by", "memory"]
    for serve, kind in (("serve admission;", "serve_admission"), ("serve decode first;", "serve_decode_first"),
                        ("serve exclusive prefill;", "serve_exclusive")):
        step = only_item(f"stage e : step {{ budget 1; cost 1; {serve} }}")
        assert step.kind.values[-1].kind == kind


def test_workload_items() -> None:
    for arrive, kind in (("poisson(0.5)", "poisson"), ("renewal(~h2(2, 4))", "renewal"), ("closed(8)", "closed"),
                         ("batch(3)", "batch"), ("none", "none")):
        workload = only_item(f"workload {{ arrive {arrive}; }}")
        assert workload.items[0].kind == kind
    workload = only_item('workload { trace "t.csv" ordered; init { set K = 0; } turn { set n = 1; } '
                         'session { turn; request; } hidden o, n; }')
    kinds = [o.kind for o in workload.items]
    assert kinds == ["trace", "init", "turn", "session", "hidden"]
    assert workload.items[0].values == ("t.csv", True) and workload.items[-1].values == ("o", "n")


def test_queue_declaration() -> None:
    queue = only_item("queue P[NP] : prefill, decode { pool kv { cap 10; } serve step { budget 1; cost 1; } "
                      "nic ps(100); prefill (prompt) { run (1); } decode (prompt) from src { run (2); } }")
    assert queue.roles == ("prefill", "decode") and queue.pools[0].name == "kv"
    assert queue.serve.kind == "step" and queue.nic.kind == "ps"
    assert [(e.verb, e.params, e.source) for e in queue.entries] == [("prefill", ("prompt",), None),
                                                                    ("decode", ("prompt",), "src")]
    link = only_item("queue L : link { serve ps(10) latency 0.001; }")
    assert link.latency is not None and not link.entries


def test_run_share_pull_gauge_session_server() -> None:
    items = parse("run { horizon 100; warmup 10; seed 2; arrivals 50; } share bottleneck; "
                  "D pull P latency x0 share maxmin; gauge full = max j in N (free(reqs[j]) == 0); "
                  "session { end; } server { end; }").items
    assert [o.kind for o in items[0].options] == ["horizon", "warmup", "seed", "arrivals"]
    assert items[1].policy == "Bottleneck"
    assert (items[2].reader, items[2].source, items[2].policy) == ("D", "P", "MaxMin")
    assert isinstance(items[3].expr, ast.Over)
    assert isinstance(items[4], ast.SessionItem) and isinstance(items[5], ast.ServerItem)


# -------------------------------------------------------------- statements


def test_kernel_statements() -> None:
    stmts = session_stmts(
        "turn; set x = 1; observe y = x; grow kv (1); drop kv; release kv; load kv (2); "
        "run s (1); run e prefill (2) growing kv; run a, b (3); branch (x == 1) { end; } else { turn; } "
        "branch with (0.5) { end; } loop { end; } choose j in 2 by (queued(kv[j]), serial); end; mark m; "
        "request; request gw;")
    names = [type(s).__name__ for s in stmts]
    assert names == ["Turn", "Set", "Observe", "Grow", "Drop", "Release", "Load", "Run", "Run", "Run", "Branch",
                     "Branch", "Loop", "Choose", "End", "Mark", "Request", "Request"]
    assert stmts[8].mode == "Prefill" and stmts[8].growing.dotted == "kv"
    assert [p.dotted for p in stmts[9].stages] == ["a", "b"]
    assert stmts[11].draw and not stmts[10].draw
    assert stmts[16].queue is None and stmts[17].queue == "gw"


def test_hold_with_every_clause() -> None:
    (hold,) = session_stmts("hold reqs (1), kv (hit + 1) reserve (prompt) reuse (hit) "
                            "at admission (hit = min(cachedin(kv), 3), h2 = hit + 1) { end; } "
                            "cache (prompt) lease kv (inf);")
    assert [p.pool.dotted for p in hold.pools] == ["reqs", "kv"]
    assert hold.pools[0].reserve is None and hold.pools[1].reserve is not None
    assert [b.name for b in hold.bindings] == ["hit", "h2"]
    assert hold.reuse is not None and hold.cache is not None and hold.lease.pool.dotted == "kv"
    # the closing ';' is optional
    (bare,) = session_stmts("hold kv (1) { end; }")
    assert bare.cache is None and bare.lease is None and bare.bindings == ()


def test_serving_forms() -> None:
    stmts = session_stmts("prefill (n) growing kv; decode[j] o; tool ~exp(2); prefill on P[j] (w); "
                          "transfer on egress[i], ingress[j] (x) from kvP to kvD (n); transfer (x) from a to b (1);")
    assert [(s.role if isinstance(s, ast.Serving) else "transfer") for s in stmts] == [
        "prefill", "decode", "tool", "prefill", "transfer", "transfer"]
    assert stmts[0].growing.dotted == "kv" and stmts[1].index is not None
    assert [p.dotted for p in stmts[3].on] == ["P"] and stmts[3].on[0].parts[0].index is not None
    assert [p.dotted for p in stmts[4].on] == ["egress", "ingress"]
    assert stmts[4].source.dotted == "kvP" and stmts[4].dest.dotted == "kvD"


def test_entry_calls_and_def_calls() -> None:
    stmts = session_stmts("P[i].prefill (prompt); D[j].decode (prompt) from P[i]; "
                          "nic[self].transfer (n) from src to kv (m); vllm_request(prompt, o);")
    assert stmts[0].target.dotted == "P.prefill" and stmts[0].source is None
    assert stmts[1].source.dotted == "P"
    assert stmts[2].to[0].dotted == "kv"
    assert stmts[3].target.simple == "vllm_request" and len(stmts[3].args) == 2


# ------------------------------------------------------------- expressions


def test_precedence() -> None:
    """c ? a : b binds loosest, then ||, &&, comparisons, + -, * /, unary, ^."""
    e = expr_of("a || b && c < d + e * -f ^ 2 ? 1 : 0")
    assert isinstance(e, ast.Cond)
    assert e.test.op == "Or" and e.test.right.op == "And"
    comparison = e.test.right.right
    assert comparison.op == "Lt" and comparison.right.op == "Add"
    product = comparison.right.right
    assert product.op == "Mul" and product.right.op == "Neg" and product.right.operand.op == "Pow"


def test_left_associativity_and_not() -> None:
    e = expr_of("o - 1 - (k - p)")
    assert e.op == "Sub" and e.left.op == "Sub"
    assert expr_of("!x").op == "Not"


@pytest.mark.parametrize("dist", ["exp(1)", "det(2)", "uniform(0, 1)", "erlang(2, 3)", "h2(1, 4)", "bernoulli(0.5)"])
def test_distributions(dist: str) -> None:
    e = expr_of(f"~{dist}")
    assert isinstance(e, ast.Sample) and e.distribution == dist.split("(")[0]


def test_calls_paths_aggregates_numbers() -> None:
    assert isinstance(expr_of("used(D[j].kv)"), ast.FunctionCall)
    path = expr_of("D.nic.latency[j]").path
    assert path.dotted == "D.nic.latency" and len(path.indices) == 1
    over = expr_of("sum k in (N + 1) (used(kv[k]))")
    assert over.aggregate == "sum" and over.variable == "k" and isinstance(over.count, ast.Binary)
    assert expr_of("1.5e3").value == 1500.0 and expr_of(".5").value == 0.5
    assert isinstance(expr_of("inf"), ast.Name)


def test_keywords_are_contextual() -> None:
    """`chunk`, `queue`, `prefill` are keywords only where the grammar reads one."""
    items = parse("let chunk = 0; stage prefill : fifo; stage e : step { budget 1; cost 1; chunk chunk; } "
                  "session { run prefill (queue(prefill)); }").items
    assert items[0].name == "chunk"
    assert items[1].name == "prefill"
    assert items[3].body[0].stages[0].dotted == "prefill"


def test_comments_and_spans() -> None:
    program = parse("// a comment\nlet B = 1; // another\n  pool kv { cap B; }\n")
    assert program.items[0].span.line == 2
    assert (program.items[1].span.line, program.items[1].span.col) == (3, 8)


# ---------------------------------------------------------- syntax errors


@pytest.mark.parametrize("text, line, col, message", [
    ("let x = 1 +;", 1, 12, "expected '!', '(', '-', '~', a name or a number, found ';'"),
    # issue 13: what is wrong, where it is (semantics/syntax/syntax_errors.py)
    ("pool kv { cap 3 }", 1, 16, "missing `;` at the end of this statement (the block ends)"),
    ("stage s : foo;", 1, 11, "expected 'delay', 'fifo', 'ps' or 'step', found 'foo'"),
    ("session {\n  set x = 1\n}", 2, 12, "missing `;` at the end of this statement (the block ends)"),
    ("session { run s (1) }", 1, 20, "missing `;` at the end of this statement (the block ends)"),
    ("let x = 3 $;", 1, 11, "found '$'"),
    ("workload { arrive sometimes; }", 1, 19, "expected 'batch', 'closed', 'none', 'poisson' or 'renewal'"),
    ("session { hold kv (1) }", 1, 23, "found '}'"),
    ("let x = a < b < c;", 1, 15, "found '<'"),
    ("session { end;", 1, 9, "this `{` (line 1) is never closed: a `}` is missing before the end of the file"),
])
def test_syntax_errors_say_what_was_expected(text: str, line: int, col: int, message: str) -> None:
    """Seed brief: "FILE:LINE:COL: error: expected ..., found ..." in the source's spelling."""
    with pytest.raises(ProgramError) as caught:
        parse(text)
    error = caught.value
    assert (error.span.file, error.span.line, error.span.col) == ("test.sq", line, col)
    assert message in error.message
    # the parser's own message, or what syntax_errors.py recognises as wrong (issue 13)
    assert error.message.startswith(("expected ", "missing `;`", "this `{`"))


def test_transfer_without_ends_is_a_parse_error() -> None:
    """Seed 002: "without from P to Q (n) it is a parse error"."""
    with pytest.raises(ProgramError, match="`transfer` needs `from POOL to POOL"):
        session_stmts("transfer (x);")


def test_a_run_over_several_stages_takes_no_mode() -> None:
    with pytest.raises(ProgramError, match="a run over several stages takes no mode"):
        session_stmts("run a, b prefill (1);")
