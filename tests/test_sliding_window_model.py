"""The model of sliding-window and hybrid KV cache groups (issue 20 section 1,
docs/design/sliding-window.md; semantics/smallstep/groups.py): the pool option
`groups (full, window (W))` read, printed and refused where it is bad, with a
located error; the rules pool/admit-groups and pool/slide applied and every
configuration of such a run holding the invariants; the fast engine giving the
definition's bytes; the hand-worked scenarios without prefix caching and a
slice of oracle/data/campaign/sliding-window.jsonl (sliding alone and hybrid,
synchronous and asynchronous, with preemptions and blocked admissions)
answered as vLLM 0.33.0 answered them, without running it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oracle.scenario import run_scenario, scenario_program
from semantics import fast
from semantics.cli import main
from semantics.compiler import compile_source
from semantics.smallstep import driver
from test_shared_prefix_rules import walk_with_invariants  # every configuration checked, the rules returned

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "data" / "sliding_window"
CORPUS = ROOT / "oracle" / "data" / "campaign" / "sliding-window.jsonl"

#: A small hybrid program: three requests of 12 tokens in a pool of 16 blocks of 4, a window of 8.
HYBRID = """
let w = 8;
pool reqs { cap 4; queue fifo; admit via engine; }
pool kv { cap 64; block 4; groups (full, window (w) when (w > 0)); evict lru; preempt lifo; }
stage engine : step { budget 16; cost 1; chunk 0; serve admission; memory kv; }
workload { arrive batch(3); }
session {
  hold reqs (1), kv (min(12, budget_left(engine))) reserve (12) {
    prefill (12) growing kv;
    decode (10) growing kv;
  }
  observe done = now;
  end;
}
run { horizon 100; }
"""


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- the option ------------------------------------------------------------------------


def test_the_option_is_in_the_ir_only_with_a_window_group() -> None:
    program, _ = compile_source(HYBRID, "<hybrid>")
    assert [(g.kind, g.window) for g in program.pools[1].groups] == [("Full", None), ("Window", 8.0)]
    off, _ = compile_source(HYBRID.replace("let w = 8;", "let w = 0;"), "<off>")
    plain, _ = compile_source(HYBRID.replace("groups (full, window (w) when (w > 0)); ", ""), "<plain>")
    none, _ = compile_source(HYBRID.replace("full, window", "full when (w > 0), window").replace("let w = 8;",
                                                                                             "let w = 0;"), "<none>")
    assert off.pools[1].groups == () and off == plain and none == plain  # one full group, or none: the seed's pool


def test_fmt_prints_the_option_as_written(tmp_path, capsys) -> None:
    path = tmp_path / "h.sq"
    path.write_text(HYBRID)
    code, out, _ = cli(capsys, "fmt", str(path))
    assert code == 0 and "  groups (full, window (w) when (w > 0));\n" in out
    again = tmp_path / "again.sq"
    again.write_text(out)
    code, out2, _ = cli(capsys, "fmt", str(again))
    assert code == 0 and out2 == out


BAD = [
    ("groups (full, window (0));", "`window (0)`: a window is a whole number of units, at least 1", "0"),
    ("groups (window (2.5));", "`window (2.5)`: a window is a whole number of units, at least 1", "2.5"),
    ("groups (full, full);", "a second `full` group", "full"),
]


@pytest.mark.parametrize("option, message, caret", BAD)
def test_a_bad_option_is_a_located_error(option, message, caret, tmp_path, capsys) -> None:
    path = tmp_path / "bad.sq"
    path.write_text(HYBRID.replace("groups (full, window (w) when (w > 0));", option))
    code, out, err = cli(capsys, "check", str(path))
    first, source, marks = err.splitlines()[:3]
    assert code == 1 and "Traceback" not in err and message in first and first.startswith(f"{path}:4:"), err
    column = int(first.split(":")[2])
    assert source.strip().startswith("pool kv") and source[2:][column - 1:].startswith(caret), err
    assert marks.strip().startswith("^")


def test_the_option_needs_a_block_size(tmp_path, capsys) -> None:
    path = tmp_path / "bad.sq"
    path.write_text(HYBRID.replace("block 4; ", ""))
    code, _, err = cli(capsys, "check", str(path))
    assert code == 1 and "`groups` needs `block`" in err.splitlines()[0]


# -- the rules -----------------------------------------------------------------------------


def corpus_cases(indices) -> list[tuple[int, dict, dict]]:
    lines = CORPUS.read_text().splitlines()
    out = []
    for i in indices:
        record = json.loads(lines[i])
        out.append((i, {k: v for k, v in record["case"].items() if k != "kind"}, record["answer"]))
    return out


def test_every_configuration_of_a_grouped_run_holds_the_invariants() -> None:
    program, _ = compile_source(HYBRID, "<hybrid>")
    assert {"pool/admit-groups", "pool/slide", "pool/grow", "pool/release"} <= set(walk_with_invariants(program))
    for _, case, _ in corpus_cases((887, 168)):  # a window alone, asynchronous; hybrid, synchronous; both preempt
        assert "pool/slide" in walk_with_invariants(scenario_program(case))


def test_the_window_gives_blocks_back_and_the_full_group_does_not() -> None:
    """The slide's units: a hold of 12 tokens past its first chunk has its window group's first block
    (tokens 0-3, wholly before 12 - 8 + 1) back, the full group keeps all three."""
    records = []
    m = driver.build_machine(compile_source(HYBRID, "<hybrid>")[0],
                             observer=lambda rule, c, fields: records.append((rule, fields)))
    for _ in driver.walk(m, None, every=False):
        pass
    slides = [f for rule, f in records if rule == "pool/slide"]
    admits = [f for rule, f in records if rule == "pool/admit-groups"]
    assert admits[0]["coverage"] == 12.0 and admits[0]["units"] == 24.0 and admits[0]["cap"] == 28.0
    assert slides[0] == {"session": 0, "pool": "kv", "processed": 12.0, "blocks": 1, "skipped": 1, "units": 4.0}


@pytest.mark.parametrize("which", ["hybrid", "case887", "case168"])
def test_the_fast_engine_gives_the_definitions_result(which) -> None:
    if which == "hybrid":
        program, _ = compile_source(HYBRID, "<hybrid>")
    else:
        program = scenario_program(corpus_cases((int(which[4:]),))[0][1])
    assert fast.run(program) == driver.run(program)


# -- against vLLM 0.33.0 -----------------------------------------------------------------

#: The nine hand-worked scenarios (tests/test_sliding_window.py holds their recorded answers to the design note's
#: rules), the two with prefix caching and a shared prompt among them (the hit in every group), three with
#: max_model_len below the window less one plus the budget (the cap's clamp, the startup check per group).
HAND = ("window_frees_blocks", "full_attention_same_requests", "admission_cap", "hybrid_counts_both",
        "full_hit_same_requests", "hybrid_hit_in_every_group", "cap_clamped_by_max_model_len",
        "startup_counts_both_groups", "startup_counts_the_window_cap")


@pytest.mark.parametrize("name", HAND)
def test_the_hand_worked_scenarios_are_answered_as_vllm(name) -> None:
    data = json.loads((CASES / f"{name}.json").read_text())
    recorded = json.loads((CASES / f"{name}.out.json").read_text())
    answer = run_scenario(data, str(CASES / f"{name}.json"))
    for field in ("first", "done", "preemptions", "steps", "refused", "cached"):
        assert answer.get(field) == recorded.get(field), (name, field)


#: A slice of the corpus without prefix caching: a window alone and hybrid, both engines, preemptions and
#: blocked admissions among them.
SLICE = (0, 2, 5, 19, 35, 74, 110, 119, 168, 887)


@pytest.mark.parametrize("index, case, recorded", corpus_cases(SLICE), ids=[f"case{i}" for i in SLICE])
def test_a_slice_of_the_corpus_agrees(index, case, recorded) -> None:
    answer = run_scenario(case, f"sliding-window.jsonl#{index}")
    for field in ("first", "done", "preemptions", "steps"):
        assert answer[field] == recorded[field], (index, field)


#: A slice of the corpus with prefix caching (pool/hit-groups, pool/register-window, pool/slide-shared): a shared
#: system prompt with hits, and preempted requests resuming with their own hit, a window alone and hybrid, both
#: engines.
SHARED_SLICE = (47, 328, 43, 743, 8, 315, 7, 758, 1306, 1528, 89, 351, 82, 17)


@pytest.mark.parametrize("index, case, recorded", corpus_cases(SHARED_SLICE), ids=[f"case{i}" for i in SHARED_SLICE])
def test_a_slice_of_the_corpus_with_prefix_caching_agrees(index, case, recorded) -> None:
    answer = run_scenario(case, f"sliding-window.jsonl#{index}")
    for field in ("first", "done", "preemptions", "steps", "cached"):
        assert answer.get(field) == recorded.get(field), (index, field)


def test_the_shared_slice_has_hits_in_both_shapes_both_engines_and_resumptions() -> None:
    cases = corpus_cases(SHARED_SLICE)
    assert all(c["prefix_caching"] for _, c, _ in cases)
    hits = [(len(c["kv_groups"]), bool(c.get("async"))) for _, c, r in cases if any(r.get("cached", {}).values())]
    assert set(hits) == {(1, False), (1, True), (2, False), (2, True)}
    assert sum(r["preemptions"] > 0 and any(r.get("cached", {}).values()) for _, _, r in cases) >= 4
    assert sum(r["preemptions"] > 0 and "cached" not in r for _, _, r in cases) >= 4  # own prefixes only


def test_every_configuration_of_a_shared_grouped_run_holds_the_invariants() -> None:
    """Hybrid cases whose window slides (1306: synchronous, 1528: asynchronous) and a window alone (743,
    asynchronous), each with a shared prompt, hits and preemptions: every configuration holds the table's
    invariants, every group's table of one length."""
    applied = set()
    for _, case, _ in corpus_cases((1306, 1528, 743)):
        applied |= set(walk_with_invariants(scenario_program(case)))
    assert {"pool/hit-groups", "pool/admit-shared-groups", "pool/register-window", "pool/slide-shared",
            "pool/release-shared", "pool/evict-shared", "pool/preempt"} <= applied, applied


def test_the_slice_has_both_shapes_both_engines_preemptions_and_blocked_admissions() -> None:
    cases = corpus_cases(SLICE)
    assert not any(c.get("prefix_caching") for _, c, _ in cases)
    assert {len(c["kv_groups"]) for _, c, _ in cases} == {1, 2}
    assert {bool(c.get("async")) for _, c, _ in cases} == {True, False}
    assert sum(r["preemptions"] > 0 for _, _, r in cases) >= 2
    assert sum(r["features"]["blocked_steps"] > 0 for _, _, r in cases) >= 2


# -- generated programs ---------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def per_serial(values) -> str:
    """An expression that is ``values[i]`` for the session of serial i (the last value for every later one)."""
    return " : ".join(f"serial == {i} ? {x}" for i, x in enumerate(values[:-1])) + \
        (" : " if len(values) > 1 else "") + str(values[-1])


def engine_draws(draw, fewest_blocks: int) -> tuple:
    """The draws of a step engine over a pool with KV cache groups, in this order: the block size, the window,
    hybrid or not, the pool's blocks (from ``fewest_blocks``), the budget, schedule ahead or not, and the
    number of requests; with the groups option's text."""
    bs = draw(st.integers(1, 6))
    window = draw(st.integers(1, 6 * bs))
    full = draw(st.booleans())
    blocks = draw(st.integers(fewest_blocks, 40))
    budget = draw(st.integers(1, 24))
    ahead = "schedule ahead;" if draw(st.booleans()) else ""
    n = draw(st.integers(1, 6))
    groups = f"full, window ({window})" if full else f"window ({window})"
    return bs, blocks, budget, ahead, n, groups


def request_session(prompts, outs, gaps, keys=None, heads=None, reuse: str | None = None) -> str:
    """The generated programs' session and run: request i of prompts[i] tokens and outs[i] output tokens,
    after a delay of gaps[i], through the hold of lib/vllm.sq's vllm_request (its prompt, then its computed
    tokens and one more at a readmission); with ``reuse``, its prompt's head (keys[i] : heads[i]) is its
    content, its hit within ``reuse``, and its tokens are cached at its release."""
    sets = hit = less_hit = content = admission = less_cached = cache = ""
    if reuse is not None:
        sets = f"  set key = {per_serial(keys)};\n  set head = {per_serial(heads)};\n"
        hit, less_hit, less_cached = "hit + ", " - hit", " - cached"
        content = f"\n       reuse ({reuse}) content (key : head)"
        admission = f",\n                     hit = min(cachedin(kv), {reuse})"
        cache = " cache (prompt + o - 1);"
    return f"""session {{
  set prompt = {per_serial(prompts)};
  set o = {per_serial(outs)};
{sets}  run gate ({per_serial(gaps)});
  hold reqs (1), kv ({hit}min(known{less_hit}, budget_left(engine))) reserve (known){content}
       at admission (known = computed < prompt ? prompt : computed + 1{admission}) {{
    prefill (known{less_cached}) growing kv;
    decode (o - 1 - (known - prompt)) growing kv;
  }}{cache}
  observe done = now;
  end;
}}
run {{ horizon 400; seed 1; }}
"""


def walk_and_run(source: str) -> tuple:
    """A generated program compiled, every configuration of the definition's walk checked
    (walk_with_invariants), then run by the fast engine and by the definition: the program and the two
    results."""
    program, _ = compile_source(source, "<generated>")
    walk_with_invariants(program)
    return program, fast.run(program), driver.run(program)


@st.composite
def grouped_programs(draw) -> str:
    """A step engine over a pool with KV cache groups: a window alone or hybrid, any window against the
    block size, tight or loose, synchronous or scheduling ahead, requests of several sizes and arrivals."""
    bs, blocks, budget, ahead, n, groups = engine_draws(draw, 4)
    prompts = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    outs = draw(st.lists(st.integers(1, 30), min_size=n, max_size=n))
    gaps = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    return f"""
pool reqs {{ cap 4; queue fifo; admit via engine; }}
pool kv {{ cap {blocks * bs}; block {bs}; groups ({groups}); evict lru; preempt lifo; }}
stage engine : step {{ budget {budget}; cost 1; chunk 0; serve admission; memory kv; self preemption continue; {ahead} }}
stage gate : delay;
workload {{ arrive batch({n}); }}
""" + request_session(prompts, outs, gaps)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grouped_programs())
def test_generated_grouped_programs_hold_the_invariants_and_both_engines_agree(source) -> None:
    _, mine, definition = walk_and_run(source)
    assert mine == definition


@st.composite
def shared_grouped_programs(draw) -> str:
    """grouped_programs' engines over a pool that also shares prefixes: each request's prompt begins with one of
    two heads (a key and a length), its hit in every group within max(prompt - 1, its computed blocks), cached
    whole at its release, as lib/vllm.sq's vllm_request with a content clause."""
    bs, blocks, budget, ahead, n, groups = engine_draws(draw, 6)
    prompts = draw(st.lists(st.integers(2, 40), min_size=n, max_size=n))
    heads = [draw(st.integers(0, p)) for p in prompts]
    keys = draw(st.lists(st.integers(1, 2), min_size=n, max_size=n))
    outs = draw(st.lists(st.integers(1, 30), min_size=n, max_size=n))
    gaps = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    return f"""
let bs = {bs};
pool reqs {{ cap 4; queue fifo; admit via engine; }}
pool kv {{ cap {blocks} * bs; block bs; groups ({groups}); evict lru; share prefixes; preempt lifo; }}
stage engine : step {{ budget {budget}; cost 1; chunk 0; serve admission; memory kv; self preemption continue; {ahead} }}
stage gate : delay;
workload {{ arrive batch({n}); }}
""" + request_session(prompts, outs, gaps, keys, heads, "max(prompt - 1, floor(computed / bs) * bs)")


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shared_grouped_programs())
def test_generated_shared_grouped_programs_hold_the_invariants_and_both_engines_agree(source) -> None:
    program, mine, definition = walk_and_run(source)
    assert program.pools[1].share_prefixes and program.pools[1].groups
    assert mine == definition
