"""The CPU tier modelled (docs/design/cpu-offloading.md section 6; the step option
`offload to (N) load after (L) store after (S);`, rules offload/land, offload/lookup,
offload/wait, offload/park, offload/store with step/load and step/promote): a slice of
the corpus oracle/data/campaign/cpu-offload.jsonl (vLLM 0.33.0's answers) replayed
without vLLM; the two cases vLLM never finishes stalled where the driver stalls them
(offload/reload); programs drawn over
the option's range (tiers from one chunk, delays from 0, pools and budgets tight and
loose, shared and own prompts, schedule ahead and defer free on and off) hold the
run invariants after every rule, the tier's among them (semantics/smallstep/
invariants.check_tier), and the fast engine gives the definition's result; the
option's located errors; and the example a user would copy,
examples/pools/cpu_offload.sq, which gives vLLM 0.33.0's answer to its scenario."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oracle.check import differences
from oracle.scenario import run_scenario, scenario_program
from semantics import fast
from semantics.cli import main
from semantics.compiler import compile_file, compile_source
from semantics.errors import ProgramError
from semantics.smallstep import driver
from semantics.smallstep.invariants import check_tier
from test_shared_prefix_rules import walk_with_invariants  # every configuration checked, the rules returned
from test_sliding_window_model import request_session, walk_and_run  # the generated programs' session, their check

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "oracle" / "data" / "campaign" / "cpu-offload.jsonl"
EXAMPLE = ROOT / "examples" / "pools" / "cpu_offload.sq"
#: The example's scenario and vLLM 0.33.0's answer to it (oracle/real/driver.py, run on 2026-12-04)
RETRIEVAL = ROOT / "tests" / "data" / "cpu_offload_example" / "retrieval.json"
#: The example on the step clock: one step per iteration, a request every 2 steps, the run to its end
STEP_CLOCK = {"c_it": 1.0, "d_decoder": 0.0, "e_context": 0.0, "a_prefill": 0.0, "b_attention": 0.0, "gap": 2.0,
              "until": 1000.0}

#: The cases vLLM 0.33.0 never finishes (a one-token prompt loaded for ever, section 1.7): the driver ends them
#: as stalled, and so does the harness (offload/reload).
STALLED = (190, 1786)
#: Every 50th case of the corpus, and cases that load, wait and flush (found by tracing the corpus).
SLICE = tuple(i for i in range(0, 2000, 50) if i not in STALLED) + (144, 1239, 1646)


def corpus_records(indices) -> dict[int, dict]:
    wanted = set(indices)
    out = {}
    with CORPUS.open() as f:
        for i, line in enumerate(f):
            if i in wanted:
                out[i] = json.loads(line)
    return out


RECORDS = corpus_records(SLICE + STALLED)


@pytest.mark.parametrize("index", SLICE, ids=[f"case{i}" for i in SLICE])
def test_a_slice_of_the_corpus_agrees_with_vllm(index) -> None:
    record = RECORDS[index]
    answer = run_scenario(record["case"], f"cpu-offload.jsonl#{index}")
    assert differences(f"#{index}", record["answer"], answer) == []


def test_the_slice_loads_from_the_tier_on_both_engines() -> None:
    loading = [i for i in SLICE if RECORDS[i]["answer"]["offload"]["loads"]]
    assert len(loading) >= 8
    assert {bool(RECORDS[i]["case"].get("async")) for i in loading} == {True, False}
    assert any(RECORDS[i]["answer"]["offload"]["evicted"] for i in SLICE)


@pytest.mark.parametrize("index", STALLED)
def test_the_cases_vllm_never_finishes_stall_where_the_driver_ends_them(index) -> None:
    record = RECORDS[index]
    answer = run_scenario(record["case"], f"cpu-offload.jsonl#{index}")
    assert differences(f"#{index}", record["answer"], answer) == []
    for key in ("status", "unfinished", "steps"):
        assert answer[key] == record["answer"][key]
    assert answer["status"].startswith("stalled")


def test_a_one_token_prompt_is_looked_up_again_by_the_rules() -> None:
    # section 1.7: promoted to no computed token, the session is looked up again and loads no chunk, again and
    # again (offload/reload), its hold never run; the run bounded (vLLM's never ends: the driver stops it)
    case = json.loads((ROOT / "tests" / "data" / "cpu_offload" / "one_token_loads_forever.json").read_text())
    program = dataclasses.replace(scenario_program(case), horizon=14.0)
    rules = walk_with_invariants(program)
    assert rules.count("offload/reload") >= 5 and rules.count("step/promote") == 0


def test_a_load_the_rules_name_and_the_tier_holds_its_invariants() -> None:
    case = json.loads((ROOT / "tests" / "data" / "cpu_offload" / "load_back.json").read_text())
    rules = walk_with_invariants(scenario_program(case))
    assert {"offload/lookup", "offload/park", "step/load", "step/promote", "offload/land", "offload/store"} <= \
        set(rules)
    case = json.loads((ROOT / "tests" / "data" / "cpu_offload" / "store_pending_waits.json").read_text())
    assert "offload/wait" in walk_with_invariants(scenario_program(case))


def test_the_tier_invariants_catch_a_chunk_over_the_size() -> None:
    case = json.loads((ROOT / "tests" / "data" / "cpu_offload" / "load_back.json").read_text())
    last = None
    for _, c in driver.configurations(scenario_program(case)):
        last = c
    tier = next(s.tier for s in last.stages if getattr(s, "tier", None) is not None)
    check_tier(tier)
    with pytest.raises(AssertionError, match="more than"):
        check_tier(tier._replace(size=len(tier.chunks) - 1))
    key = next(iter(tier.chunks))
    with pytest.raises(AssertionError, match="pinned"):
        check_tier(tier._replace(chunks=tier.chunks.set(key, tier.chunks[key]._replace(pins=1))))


@st.composite
def offloading_programs(draw) -> str:
    """A step engine with a CPU tier: N from 1 chunk, L from 0, S from 1, with or without schedule ahead and
    defer free, over a pool and a budget tight or loose; requests whose prompts share heads (a few content
    keys) or not, of several sizes and arrivals, some preempted."""
    bs = draw(st.integers(1, 6))
    blocks = draw(st.integers(4, 40))
    budget = draw(st.integers(1, 48))
    seqs = draw(st.integers(1, 4))
    ahead = draw(st.booleans())
    defer = ahead and draw(st.booleans())
    chunks = draw(st.integers(1, 30))
    load = draw(st.integers(0, 4))
    store = draw(st.integers(1, 6))
    n = draw(st.integers(1, 6))
    whole = draw(st.booleans())  # prompts of whole blocks, all of them content: a GPU hit stops a block short
    prompts = draw(st.lists(st.integers(1, 8).map(lambda k: k * bs) if whole else st.integers(2, 40),
                            min_size=n, max_size=n))
    prompts = [max(2, p) for p in prompts]
    outs = draw(st.lists(st.integers(1, 8), min_size=n, max_size=n))
    keys = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    heads = [p if whole else draw(st.integers(1, p)) for p in prompts]
    gaps = draw(st.lists(st.integers(0, 8), min_size=n, max_size=n))
    clauses = ("schedule ahead; " if ahead else "") + ("defer free; " if defer else "") + \
        f"offload to ({chunks}) load after ({load}) store after ({store});"
    return f"""
pool reqs {{ cap {seqs}; queue fifo; admit via engine; }}
pool kv {{ cap {blocks * bs}; block {bs}; evict lru; preempt lifo; share prefixes; }}
stage engine : step {{ budget {budget}; cost 1; chunk 0; serve admission; memory kv; self preemption continue; {clauses} }}
stage gate : delay;
workload {{ arrive batch({n}); hidden o; }}
""" + request_session(prompts, outs, gaps, keys, heads, f"max(prompt - 1, floor(computed / {bs}) * {bs})")


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(offloading_programs())
def test_generated_offloading_programs_hold_the_invariants_and_both_engines_agree(source) -> None:
    _, mine, definition = walk_and_run(source)
    assert mine == definition and repr(mine) == repr(definition)


def test_the_generated_programs_reach_every_rule_of_the_tier() -> None:
    """The draws above are not idle: over the first programs every rule of the tier applies."""
    seen = set()
    for source in _first_programs(25):
        program, _ = compile_source(source, "<generated>")
        seen |= {r for r in walk_with_invariants(program) if r.startswith(("offload/", "step/load", "step/promote"))}
    assert {"offload/land", "offload/lookup", "offload/wait", "offload/park", "offload/store", "step/load",
            "step/promote"} <= seen


def _first_programs(count: int) -> list[str]:
    out: list[str] = []

    @settings(max_examples=count, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(offloading_programs())
    def collect(source):
        out.append(source)

    collect()
    return out


@pytest.mark.parametrize("option, message", [
    ("offload to (-1) load after (0) store after (1);", "the tier's chunks of `offload` is -1"),
    ("offload to (4) load after (0.5) store after (1);", "the load delay of `offload` is 0.5"),
    ("offload to (4) load after (0) store after (0);", "the store delay of `offload` is 0, not a natural number at least 1"),
])
def test_a_bad_value_of_the_option_is_a_located_error(option, message, capsys, tmp_path) -> None:
    source = f"""pool kv {{ cap 40; block 4; evict lru; preempt lifo; share prefixes; }}
pool reqs {{ cap 2; queue fifo; admit via engine; }}
stage engine : step {{ budget 16; cost 1; chunk 0; serve admission; memory kv;
  {option}
}}
workload {{ arrive batch(1); }}
session {{ hold reqs (1), kv (8) reserve (8) {{ prefill (8) growing kv; }} end; }}
run {{ horizon 10; }}
"""
    path = tmp_path / "bad.sq"
    path.write_text(source)
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{path}:4:") and message in err[0], err
    assert err[1].strip().startswith("offload to") and err[2].strip().startswith("^")


def test_a_tier_needs_a_memory_that_shares_prefixes(capsys, tmp_path) -> None:
    source = """pool kv { cap 40; block 4; evict lru; preempt lifo; }
pool reqs { cap 2; queue fifo; admit via engine; }
stage engine : step { budget 16; cost 1; chunk 0; serve admission; memory kv;
  offload to (4) load after (0) store after (1);
}
workload { arrive batch(1); }
session { hold reqs (1), kv (8) reserve (8) { prefill (8) growing kv; } end; }
run { horizon 10; }
"""
    path = tmp_path / "plain.sq"
    path.write_text(source)
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:3:7: error: step stage `engine` offloads to a CPU tier and its memory `kv` does not share" in err
    # a tier of 0 chunks is no tier: the program means what it meant without the option
    path.write_text(source.replace("offload to (4)", "offload to (0)"))
    assert main(["check", str(path)]) == 0


def test_the_option_prints_and_formats_as_written(capsys, tmp_path) -> None:
    source = EXAMPLE.read_text()
    assert "offload to (offload_chunks) load after (offload_load_delay) store after (offload_store_delay);" in \
        (ROOT / "examples" / "lib" / "vllm.sq").read_text()
    path = tmp_path / "example.sq"
    path.write_text(source)
    assert main(["fmt", str(path)]) == 0
    assert main(["fmt", str(path)]) == 0  # fmt of its own output is the same
    out = capsys.readouterr().out
    half = len(out) // 2
    assert out[:half] == out[half:]


def test_every_program_without_the_option_means_what_it_meant() -> None:
    """lib/vllm.sq's default is no tier: its engine's IR has none of the fields (the digest holds every result)."""
    program, _ = compile_file(str(ROOT / "examples" / "oracle" / "vllm_scenario.sq"))
    engine = next(s for s in program.stages if s.name == "engine")
    assert (engine.kind.offload_chunks, engine.kind.offload_load_delay, engine.kind.offload_store_delay) == (0, 0, 1)


def test_the_example_gives_vllms_answer_to_its_scenario() -> None:
    program, _ = compile_file(str(EXAMPLE), sets=STEP_CLOCK)
    result = fast.run(program)
    by_name = {o.name: o for o in result.observes}
    recorded = json.loads(RETRIEVAL.with_name("retrieval.out.json").read_text())
    assert recorded["status"] == "finished" and len(recorded["offload"]["loads"]) == 36
    first = {str(serial): time for time, serial, _, _ in by_name["ttft"].samples}
    done = {str(serial): time for time, serial, _, _ in by_name["done"].samples}
    cached = {str(serial): value for _, serial, _, value in by_name["cached_tokens"].samples}
    assert (first, done, cached) == (recorded["first"], recorded["done"], recorded["cached"])
    # the harness's program of the scenario answers it the same, steps and preemptions included
    answer = run_scenario(json.loads(RETRIEVAL.read_text()), str(RETRIEVAL))
    assert differences("retrieval", recorded, answer) == []


def test_the_example_loads_and_both_engines_agree() -> None:
    program, _ = compile_file(str(EXAMPLE), sets={**STEP_CLOCK, "until": 120.0})
    rules = walk_with_invariants(program)
    assert {"offload/park", "step/load", "step/promote", "offload/land", "offload/store"} <= set(rules)
    mine, definition = fast.run(program), driver.run(program)
    assert mine == definition and repr(mine) == repr(definition)


def test_the_example_is_beyond_the_reference() -> None:
    """The example uses the serq-ref extension, which seed 002 and pyserq do not have, and says so
    (tests/test_examples.py keeps it from the reference engine's runs: BEYOND_THE_REFERENCE)."""
    program, _ = compile_file(str(EXAMPLE))
    engine = next(s for s in program.stages if s.name == "engine")
    assert engine.kind.offload_chunks == 400 and engine.kind.offload_load_delay == 2
    assert "beyond the reference" in EXAMPLE.read_text(encoding="utf-8").split("\n\n")[0].replace("\n// ", " ")
