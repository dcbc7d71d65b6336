"""The KV connector's decode side (docs/design/kv-connector.md section 5.5; the step clauses
`load remote (R) after (D);` and `defer free`, rules step/load, step/promote, step/promote-stop,
step/defer): the example a user would copy, examples/pd-disaggregation/decode_side.sq, is the
harness's program of examples/oracle/pd_decode.json and gives vLLM 0.33.0's answer to it; and programs
drawn over the clauses' whole range (R below, at and beyond the prompt, D from 0, tight and loose pools
and budgets, schedule ahead on and off) hold the run invariants after every rule, and the fast engine
gives the definition's result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oracle.scenario import run_scenario
from semantics import fast
from semantics.compiler import compile_file, compile_source
from semantics.smallstep import driver
from test_shared_prefix_rules import walk_with_invariants  # every configuration checked, the rules returned
from test_sliding_window_model import per_serial  # a value per session by serial

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "pd-disaggregation" / "decode_side.sq"
SCENARIO = ROOT / "examples" / "oracle" / "pd_decode.json"

#: vLLM 0.33.0's answer to examples/oracle/pd_decode.json (docs/oracle.md: the driver's answer, the
#: synchronous engine): each request's first-token and last-token step.
VLLM_FIRST = {0: 3, 1: 2, 2: 1}
VLLM_DONE = {0: 4, 1: 3, 2: 3}


def steps_of(result) -> tuple[dict[int, float], dict[int, float]]:
    """Each request's first-token and last-token step (the step clock: a time is a step)."""
    by_name = {o.name: o for o in result.observes}
    first = {serial: time for time, serial, _, _ in by_name["first"].samples}
    done = {serial: time for time, serial, _, _ in by_name["done"].samples}
    return first, done


def test_the_example_gives_vllms_answer_to_its_scenario() -> None:
    program, _ = compile_file(str(EXAMPLE))
    first, done = steps_of(fast.run(program))
    assert (first, done) == (VLLM_FIRST, VLLM_DONE)
    # the same program is the harness's: its answer to the scenario is the same
    answer = run_scenario(json.loads(SCENARIO.read_text()), str(SCENARIO))
    assert answer["first"] == {str(k): v for k, v in VLLM_FIRST.items()}
    assert answer["done"] == {str(k): v for k, v in VLLM_DONE.items()}


def test_the_example_is_beyond_the_reference() -> None:
    """The example uses the serq-ref extension (its engine loads remotely), which seed 002 and pyserq do not
    have, and says so; so no test runs it on the reference engine (tests/test_examples.py runs only pools/)."""
    program, _ = compile_file(str(EXAMPLE))
    engine = next(s for s in program.stages if s.name == "engine")
    assert engine.kind.load_remote is not None and engine.kind.load_delay is not None
    assert "beyond the reference" in EXAMPLE.read_text(encoding="utf-8").split("\n\n")[0].replace("\n// ", " ")
    assert EXAMPLE.parent.name != "pools"


def test_the_example_under_schedule_ahead_is_the_harness_answer_to_the_async_scenario() -> None:
    program, _ = compile_file(str(EXAMPLE), sets={"async_scheduling": 1.0})
    assert any(s.kind.schedule_ahead and s.kind.defer_free for s in program.stages if s.name == "engine")
    first, done = steps_of(fast.run(program))
    data = json.loads(SCENARIO.read_text())
    data["async"] = True
    answer = run_scenario(data, str(SCENARIO))
    assert {str(k): v for k, v in first.items()} == answer["first"]
    assert {str(k): v for k, v in done.items()} == answer["done"]
    assert (first, done) != (VLLM_FIRST, VLLM_DONE)  # a step later: the output is applied a call later


@pytest.mark.parametrize("sets", [{}, {"async_scheduling": 1.0}], ids=["sync", "async"])
def test_the_example_loads_holds_the_invariants_and_both_engines_agree(sets) -> None:
    program, _ = compile_file(str(EXAMPLE), sets=sets)
    rules = walk_with_invariants(program)
    assert {"step/load", "step/promote"} <= set(rules)
    mine, definition = fast.run(program), driver.run(program)
    assert mine == definition and repr(mine) == repr(definition)


@st.composite
def loading_programs(draw) -> str:
    """A step engine whose requests load remotely (R from 0 to past the prompt, D from 0), with or without
    `defer free` under schedule ahead, over a pool and a budget tight or loose, requests of several sizes
    and arrivals."""
    bs = draw(st.integers(1, 6))
    blocks = draw(st.integers(2, 40))
    budget = draw(st.integers(1, 40))
    seqs = draw(st.integers(1, 4))
    ahead = draw(st.booleans())
    defer = ahead and draw(st.booleans())
    load = not defer or draw(st.booleans())
    n = draw(st.integers(1, 6))
    prompts = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    outs = draw(st.lists(st.integers(1, 12), min_size=n, max_size=n))
    remotes = [draw(st.integers(0, p + 2)) for p in prompts]
    delays = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    gaps = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    clauses = ("schedule ahead; " if ahead else "") + ("defer free; " if defer else "") + \
        ("load remote (remote) after (kv_delay);" if load else "")
    return f"""
pool reqs {{ cap {seqs}; queue fifo; admit via engine; }}
pool kv {{ cap {blocks * bs}; block {bs}; evict lru; preempt lifo; }}
stage engine : step {{ budget {budget}; cost 1; chunk 0; serve admission; memory kv; self preemption continue; {clauses} }}
stage gate : delay;
workload {{ arrive batch({n}); }}
session {{
  set prompt = {per_serial(prompts)};
  set o = {per_serial(outs)};
  set remote = {per_serial(remotes)};
  set kv_delay = {per_serial(delays)};
  run gate ({per_serial(gaps)});
  hold reqs (1), kv (min(known, budget_left(engine))) reserve (known)
       at admission (known = computed < prompt ? prompt : computed + 1) {{
    prefill (known) growing kv;
    decode (o - 1 - (known - prompt)) growing kv;
  }}
  observe done = now;
  end;
}}
run {{ horizon 300; seed 1; }}
"""


@settings(max_examples=50, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(loading_programs())
def test_generated_loading_programs_hold_the_invariants_and_both_engines_agree(source) -> None:
    program, _ = compile_source(source, "<generated>")
    walk_with_invariants(program)
    mine, definition = fast.run(program), driver.run(program)
    assert mine == definition and repr(mine) == repr(definition)
