"""CPU offloading against vLLM 0.33.0 (issue 20 section 3, docs/design/cpu-offloading.md):
the scenario field ``offload`` checked and located, small scenarios answered by
vLLM's own OffloadingConnector through the driver (oracle/real/offload.py plays
its worker) checked against the design note's rules worked by hand, pyserq
reported as not supporting it, and serq-ref answering them with its model of the
tier (``offload to``; tests/test_cpu_offload_model.py holds the model's rules)."""

from __future__ import annotations

import json
import pathlib
import runpy

import pytest

from oracle.scenario import check_scenario
from semantics.cli import main

ROOT = pathlib.Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "data" / "cpu_offload"

SCENARIO = {"budget": 64, "max_seqs": 4, "block_size": 16, "num_blocks": 9, "prefix_caching": True,
            "offload": {"cpu_blocks": 8, "load_delay": 2, "store_delay": 1},
            "requests": [{"prompt": 64, "out": 2}, {"prompt": 6, "out": 3}]}


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


BAD = [
    ({"offload": 8}, ("offload",), "`offload` is an object {cpu_blocks, load_delay, store_delay}"),
    ({"offload": {"load_delay": 1}}, ("offload",), "`offload` has no `cpu_blocks`: the CPU tier's size in blocks"),
    ({"offload": {"cpu_blocks": 0}}, ("offload", "cpu_blocks"),
     "`offload.cpu_blocks` is 0, not a natural number at least 1: vLLM refuses a CPU tier of no bytes"),
    ({"offload": {"cpu_blocks": 4, "load_delay": -1}}, ("offload", "load_delay"),
     "`offload.load_delay` is -1, not a natural number at least 0"),
    ({"offload": {"cpu_blocks": 4, "load_delay": 1.5}}, ("offload", "load_delay"),
     "`offload.load_delay` is 1.5, not a natural number at least 0"),
    ({"offload": {"cpu_blocks": 4, "store_delay": 0}}, ("offload", "store_delay"),
     "`offload.store_delay` is 0, not a natural number at least 1: the worker submits a step's stores"),
    ({"offload": {"cpu_blocks": 4, "policy": "arc"}}, ("offload", "policy"),
     "`policy` is not a field of `offload` (fields: cpu_blocks, load_delay, store_delay)"),
    ({"prefix_caching": False}, ("offload",), "a scenario with `offload` has `\"prefix_caching\": true`"),
    ({"spec_tokens": 2}, ("spec_tokens",), "`offload` with `spec_tokens`"),
    ({"kv_groups": [{"kind": "full"}]}, ("kv_groups",), "`offload` with `kv_groups`"),
]


@pytest.mark.parametrize("change,key,message", BAD)
def test_a_bad_offload_field_is_a_located_error(change, key, message, capsys, tmp_path) -> None:
    data = {**json.loads(json.dumps(SCENARIO)), **change}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data, indent=1))
    code, out, err = cli(capsys, "oracle", "run", str(path))
    assert code == 1 and out == "" and "Traceback" not in err
    first = err.splitlines()[0]
    assert first.startswith(f"{path}:") and f"error: {message}" in first, first
    assert f'"{key[-1]}"' in err.splitlines()[1] and err.splitlines()[2].strip() == "^"


def test_offload_with_a_remote_prefill_is_a_located_error(capsys, tmp_path) -> None:
    data = json.loads(json.dumps(SCENARIO))
    data["requests"][1]["remote"] = 6
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data, indent=1))
    code, out, err = cli(capsys, "oracle", "run", str(path))
    assert code == 1 and "`offload` with `remote`" in err.splitlines()[0] and '"remote": 6' in err.splitlines()[1]


def test_an_offload_scenario_is_answered_with_its_tier_as_vllm_answers_it(capsys, tmp_path) -> None:
    # SCENARIO without shared prompts: the tier holds request 0's four prompt blocks, nobody reads them; vLLM
    # 0.33.0 answers first 1, 2, done 2, 4 and 5 steps (oracle/real/driver.py, run on 2026-12-04)
    path = tmp_path / "offload.json"
    path.write_text(json.dumps(SCENARIO, indent=1))
    code, out, err = cli(capsys, "oracle", "run", str(path))
    assert (code, err) == (0, "")
    assert out.splitlines() == ["request 0: first 1 done 2", "request 1: first 2 done 4", "preemptions 0 steps 5"]
    # a campaign file's case: check passes it, and fails it when the recorded answer differs
    corpus = tmp_path / "offload.jsonl"
    answer = {"first": {"0": 1, "1": 2}, "done": {"0": 2, "1": 4}, "preemptions": 0, "steps": 5}
    corpus.write_text(json.dumps({"seed": 1, "index": 0, "case": SCENARIO, "answer": answer}) + "\n")
    code, out, err = cli(capsys, "oracle", "check", str(corpus))
    assert code == 0 and "1 passed, 0 failed" in out + err
    corpus.write_text(json.dumps({"seed": 1, "index": 0, "case": SCENARIO,
                                  "answer": {**answer, "steps": 6}}) + "\n")
    code, out, err = cli(capsys, "oracle", "check", str(corpus))
    assert code == 1 and "steps: recorded 6, serq-ref 5" in out + err


def test_the_hand_made_cases_are_answered_as_vllm_answers_them(capsys) -> None:
    # six finished, and the one-token one stalled where the driver stalls it (section 1.7)
    code, out, err = cli(capsys, "oracle", "check", str(CASES))
    assert code == 0 and "7 passed, 0 failed" in out + err


def test_pyserq_reports_offloading_unsupported() -> None:
    adapter = runpy.run_path(str(ROOT / "examples" / "adapters" / "pyserq_adapter.py"), run_name="adapter")
    assert adapter["answer"](SCENARIO) == {
        "unsupported": "CPU offloading (offload): seed 002's vLLM program has no CPU tier"}
    # the reason given first, before the shared prompts every offloading case has to hit the tier
    example = json.loads((ROOT / "examples" / "oracle" / "cpu_offload.json").read_text())
    assert adapter["answer"](example) == adapter["answer"](SCENARIO)


def _case(name: str) -> tuple[dict, dict]:
    scenario = json.loads((CASES / f"{name}.json").read_text())
    check_scenario(scenario)
    return scenario, json.loads((CASES / f"{name}.out.json").read_text())


def _scheduled(answer: dict, step: int) -> dict:
    """The tokens the step scheduled per request, and its victims (the recorded step trace)."""
    for time, tokens, preempted in answer["step_trace"]:
        if time == step:
            return {**tokens, "preempted": preempted}
    return {}


def test_a_prefix_evicted_from_the_gpu_pool_is_loaded_back_from_the_tier() -> None:
    # request 0's four prompt blocks are written to the tier as they are computed (step 1, done at
    # step 2); request 1 (another prompt) takes request 0's freed blocks, tail first, so request 2 (request
    # 0's prompt again, arriving after step 12) finds 3 blocks on the GPU and the 4th in the tier: it loads
    # 16 tokens from step 13, reported done at 13 + 2, is promoted at step 16 and computes only its last
    # prompt token (the whole prompt is loaded: 64 cached)
    _, answer = _case("load_back")
    assert answer["offload"] == {"cpu_blocks": 8, "loads": {"2": [[13, 15, 16]]}, "stored": 8, "evicted": 0}
    assert _scheduled(answer, 16) == {"2": 1, "preempted": []}
    assert all("2" not in tokens for time, tokens, _ in answer["step_trace"] if time < 16)
    assert answer["cached"]["2"] == 64 and answer["first"]["2"] == 16


def test_the_asynchronous_engine_promotes_a_step_later() -> None:
    _, answer = _case("load_back_async")
    assert answer["offload"]["loads"] == {"2": [[13, 15, 16]]}
    assert _scheduled(answer, 17) == {"2": 1, "preempted": []} and answer["first"]["2"] == 17


def test_the_tier_evicts_its_least_recently_used_chunks() -> None:
    # a tier of 4 chunks: request 1's four chunks evict request 0's four (LRU), so request 2 finds no
    # chunk of its prompt in the tier, loads nothing and recomputes its 4th block (48 cached, the GPU's);
    # its own store then evicts request 1's four: 12 stored, 8 evicted
    _, answer = _case("tier_evicts")
    assert answer["offload"] == {"cpu_blocks": 4, "loads": {}, "stored": 12, "evicted": 8}
    assert _scheduled(answer, 13) == {"2": 16, "preempted": []} and answer["cached"]["2"] == 48


def test_a_loading_request_waits_holding_no_budget_while_others_run() -> None:
    # the load takes 5 steps (13 to 18): request 3 runs alone meanwhile, request 2 is promoted at step 19
    _, answer = _case("load_in_flight")
    assert answer["offload"]["loads"] == {"2": [[13, 18, 16]]}
    for step in range(13, 19):
        assert "2" not in _scheduled(answer, step) and "3" in _scheduled(answer, step), step
    assert _scheduled(answer, 19) == {"2": 1, "preempted": []}


def test_a_store_whose_blocks_are_reused_is_flushed() -> None:
    # request 0's store would take 12 steps, but request 1 reuses its freed GPU blocks at step 6: the store
    # is flushed (the worker waits for it before that step), so request 2 finds the chunk ready at step 9
    _, answer = _case("store_late")
    assert answer["offload"]["loads"] == {"2": [[9, 9, 16]]}
    assert _scheduled(answer, 10) == {"2": 1, "preempted": []}


def test_a_pending_store_of_the_prefix_holds_a_request_back() -> None:
    # request 1 repeats request 0's prompt, all of it still on the GPU; the GPU gives 3 blocks (never the
    # last token's block), and the tier's lookup of the 4th finds it still being written (stored at step 1,
    # reported at 1 + 6): the request waits (get_num_new_matched_tokens answers None) from its arrival to
    # step 7, then loads that block from the tier at step 8 (delay 0) and is promoted at step 9
    _, answer = _case("store_pending_waits")
    assert answer["offload"]["loads"] == {"1": [[8, 8, 16]]}
    assert [time for time, tokens, _ in answer["step_trace"] if "1" in tokens] == [9, 10]
    assert answer["cached"]["1"] == 64 and answer["first"]["1"] == 9


def test_a_one_token_prompt_in_the_tier_is_loaded_again_and_again() -> None:
    # request 1's prompt is one token, which the tier holds (request 0's): the GPU hit is capped at
    # num_tokens - 1 = 0, so it loads its whole prompt (step 6) and is promoted to num_tokens - 1 = 0
    # computed tokens, which the waiting loop takes for a new request: it is looked up again and loads
    # nothing, at every step, and never runs (vLLM 0.33.0 as driven; the driver ends the run as stalled once
    # a load of nothing after a load is all that happens). Request 2, sharing that token, runs.
    _, answer = _case("one_token_loads_forever")
    assert answer["offload"]["loads"] == {"1": [[6, 6, 1], [7, 7, 0], [8, 8, 0], [9, 9, 0]]}
    assert answer["status"] == "stalled at step 9: nothing schedulable and nothing to come"
    assert answer["unfinished"] == ["1"] and answer["done"] == {"0": 2, "2": 7}


@pytest.mark.vllm
def test_the_driver_reproduces_the_rule_cases_and_the_first_records() -> None:
    from oracle import campaign_offload
    from test_kv_connector import assert_the_driver_answers_as_recorded  # the connector's: the same check

    assert_the_driver_answers_as_recorded(CASES, ROOT / "oracle" / "data" / "campaign" / campaign_offload.CORPUS)


# --- the recorded corpus (oracle/data/campaign/cpu-offload.jsonl) ----------------------------------------

from oracle import campaign_offload  # noqa: E402

CORPUS = ROOT / "oracle" / "data" / "campaign" / campaign_offload.CORPUS
#: The recorded corpus's least size (issue 20: at least 2,000 cases).
CORPUS_CASES = 2000


def _records() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_a_case_is_drawn_again_alone_and_the_same_and_is_valid() -> None:
    seen = set()
    for index in range(300):
        case, region = campaign_offload.draw(1, index)
        assert campaign_offload.scenario(1, index) == case
        check_scenario(case)
        assert case["prefix_caching"] and case["offload"]["cpu_blocks"] >= 1
        seen.update(f"{k}={v}" for k, v in region.items())
    for knob, regions in campaign_offload.KNOBS.items():
        for name in regions:
            assert f"{knob}={name}" in seen, (knob, name)


def test_the_corpus_is_the_generators_and_follows_the_offloading_rules() -> None:
    """The corpus (vLLM 0.33.0's answers, oracle/record.py) is the generator's, every case finished with
    the tier vLLM was asked for, each load is reported at its start step + load_delay and brings whole
    blocks of the prompt, a request whose first admission loads samples no earlier than the step after
    that report (two after, asynchronous), and the corpus has what it was drawn for: loads, loads again
    after a preemption, tiers that evict, asynchronous cases."""
    records = _records()
    assert len(records) >= CORPUS_CASES and [r["index"] for r in records] == list(range(len(records)))
    counts = {"loads": 0, "loading cases": 0, "again": 0, "evicting": 0, "async": 0, "tiny tier hit": 0,
              "livelocked": 0}
    for record in records:
        case, answer = record["case"], record["answer"]
        assert record["seed"] == 1 and case == campaign_offload.scenario(1, record["index"]), record["index"]
        offload = answer["offload"]
        if answer["status"] != "finished":  # only the one-token prompt loaded again and again (a rule case)
            assert answer["status"].startswith("stalled at step "), record["index"]
            assert case["block_size"] == 1 and answer["unfinished"], record["index"]
            assert all(case["requests"][int(rid)]["prompt"] == 1 for rid in answer["unfinished"]), record["index"]
            assert any(loads[-1][2] == 0 for loads in offload["loads"].values()), record["index"]
            counts["livelocked"] += 1
        else:
            assert answer["unfinished"] == [], record["index"]
        assert offload["cpu_blocks"] == case["offload"]["cpu_blocks"], record["index"]
        late = 2 if case.get("async") else 1
        for rid, loads in offload["loads"].items():
            prompt = case["requests"][int(rid)]["prompt"]
            for start, done, tokens in loads:
                assert done == start + case["offload"]["load_delay"], (record["index"], rid)
                assert tokens % case["block_size"] == 0 and tokens <= prompt, (record["index"], rid)
                assert tokens > 0 or answer["status"] != "finished", (record["index"], rid)  # the livelock's
            if rid in answer["first"] and loads[0][0] <= answer["first"][rid]:
                assert answer["first"][rid] >= loads[0][1] + late, (record["index"], rid)
            counts["again"] += len(loads) > 1
        counts["loads"] += sum(len(v) for v in offload["loads"].values())
        counts["loading cases"] += bool(offload["loads"])
        counts["evicting"] += offload["evicted"] > 0
        counts["async"] += bool(case.get("async"))
        counts["tiny tier hit"] += bool(offload["loads"]) and case["offload"]["cpu_blocks"] <= 3
    assert counts["loading cases"] >= len(records) // 5 and counts["again"] > 0, counts
    assert counts["evicting"] > 0 and counts["async"] > len(records) // 3 and counts["tiny tier hit"] > 0, counts
    assert counts["livelocked"] == 2, counts  # cases 190 and 1,786 (docs/design/cpu-offloading.md section 1.7)
