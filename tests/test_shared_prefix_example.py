"""examples/pools/shared_prefix.sq (a chat service whose requests share a
system prompt) against the real vLLM 0.33.0 scheduler, without running it:
on the step clock, with a request every 2 steps, every request's first-token
and last-token step and its cached tokens are vLLM's recorded answer to the
same requests (tests/data/shared_prefix/chat_service.json, .out.json), and
the figures in the example's header are that answer's."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from semantics.compiler import compile_file
from semantics.fast import run
from semantics.link import link

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "pools" / "shared_prefix.sq"
SCENARIO = ROOT / "tests" / "data" / "shared_prefix" / "chat_service.json"
RECORDED = ROOT / "tests" / "data" / "shared_prefix" / "chat_service.out.json"
#: The step clock (one step per iteration) and the scenario's spacing of requests.
STEP_CLOCK = {"c_it": 1.0, "d_decoder": 0.0, "e_context": 0.0, "a_prefill": 0.0, "b_attention": 0.0, "gap": 2.0}
#: The example's horizon is in seconds; on the step clock the run needs 720 steps.
STEP_HORIZON = 100_000.0


def step_clock_run():
    program, smap = compile_file(str(EXAMPLE), sets=STEP_CLOCK)
    link(program, smap)
    return run(dataclasses.replace(program, horizon=STEP_HORIZON))


def test_the_scenario_is_the_examples_requests():
    data = json.loads(SCENARIO.read_text())
    assert (data["budget"], data["max_seqs"], data["block_size"], data["num_blocks"] - 1) == (512, 16, 16, 250)
    assert data["async"] and data["prefix_caching"]
    for i, r in enumerate(data["requests"]):
        assert r == {"prompt": 1030 + (37 * i) % 200, "out": 40 + (53 * i) % 160, "arrive": 2 * i,
                     "prompt_segments": [["sys", 1000]]}
    assert len(data["requests"]) == 60


def test_on_the_step_clock_every_request_is_vllms():
    recorded = json.loads(RECORDED.read_text())
    result = step_clock_run()
    samples = {o.name: {serial: (time, value) for time, serial, _, value in o.samples} for o in result.observes}
    assert {str(s): int(t) for s, (t, _) in samples["ttft"].items()} == recorded["first"]
    assert {str(s): int(t) for s, (t, _) in samples["done"].items()} == recorded["done"]
    assert {str(s): int(v) for s, (_, v) in samples["cached_tokens"].items()} == recorded["cached"]
    kv = next(p for p in result.pools if p.name == "kv")
    assert kv.preemptions == recorded["preemptions"] == 44


def test_the_headers_figures_are_the_recorded_answers():
    recorded = json.loads(RECORDED.read_text())
    data = json.loads(SCENARIO.read_text())
    header = " ".join(line[2:].strip() for line in EXAMPLE.read_text().splitlines() if line.startswith("//"))
    hit, prompt = sum(recorded["cached"].values()), sum(r["prompt"] for r in data["requests"])
    assert (hit, prompt) == (58528, 67890) and sorted(set(recorded["cached"].values())) == [0, 992]
    assert f"{hit // 1000} {hit % 1000:03d} of the {prompt // 1000} {prompt % 1000:03d}" in header
    assert f"{100 * hit / prompt:.1f} %" in header
    assert re.search(rf"{recorded['preemptions']}\s+preemptions in {recorded['steps']} steps", header)
