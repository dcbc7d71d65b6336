"""The whole-space campaign (issue 18, §4): oracle/campaign_space.py's
generator, its recorded corpora oracle/data/campaign/space.jsonl
(synchronous FCFS) and space-all.jsonl (both modes, both policies, the
limits), vLLM 0.33.0's answers, and their coverage data
docs/data/space_coverage.json.

The default suite checks the generator (deterministic, every region of
every knob reached, for space-all in both modes and both policies, every
case one vLLM accepts and finishes), that each corpus is the generator's
cases, and replays a slice of each against serq-ref (`serq-ref oracle
check`) and of space.jsonl against the Lean fragment (`serq-ref lean
check`); the whole corpora are behind `campaign`.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from oracle import campaign, campaign_space
from oracle.campaign_cases import SCENARIO_MAX_MODEL_LEN, blocks_needed
from semantics.cli import main

ROOT = Path(__file__).resolve().parent.parent
SPACE = ROOT / "oracle" / "data" / "campaign" / "space.jsonl"
COVERAGE = ROOT / "docs" / "data" / "space_coverage.json"
#: Enough draws to reach every region of every knob (the rarest is about one case in six).
DRAWS = 600


def _records() -> list[dict]:
    return [json.loads(line) for line in SPACE.read_text().splitlines() if line.strip()]


def test_a_case_is_drawn_again_alone_and_the_same() -> None:
    first = [campaign_space.draw(3, i) for i in range(50)]
    random.seed(12345)  # the global stream is not the generator's
    again = [campaign_space.draw(3, i) for i in reversed(range(50))][::-1]
    assert first == again
    assert campaign_space.draw(3, 7) != campaign_space.draw(4, 7)
    assert campaign.draw("space", 3, 7) == first[7][0]


def test_every_region_of_every_knob_is_reached() -> None:
    seen = {knob: set() for knob in campaign_space.KNOBS}
    for i in range(DRAWS):
        for knob, region in campaign_space.regions_of(1, i).items():
            seen[knob].add(region)
    # mode and priority are parameters, off by default: a default case is sync and FCFS
    assert seen.pop("mode") == {"sync"} and seen.pop("priority") == {"fcfs"}
    for knob, regions in seen.items():
        assert regions == set(campaign_space.KNOBS[knob]), knob
    assert campaign_space.draw(1, 0, mode="async")[1]["mode"] == "async"
    assert campaign_space.draw(1, 0, mode="async")[0]["async"] is True
    served, regions = campaign_space.draw(1, 0, serve=True)
    assert regions["priority"] == "serve" and served["serve"] in campaign.campaign_cases.SERVE_KEYS
    with pytest.raises(ValueError):
        campaign_space.draw(1, 0, mode="eager")


def test_each_region_draws_what_it_names() -> None:
    for i in range(DRAWS):
        case, regions = campaign_space.draw(1, i)
        budget, seqs, block, chunk = case["budget"], case["max_seqs"], case["block_size"], case["chunk"]
        usable = case["num_blocks"] - 1
        needs = [blocks_needed(r["prompt"], r["out"], block) for r in case["requests"]]
        assert {"one": block == 1, "small": 2 <= block <= 7, "common": block in (8, 16, 32),
                "odd": 9 <= block <= 63 and block not in (16, 32), "large": 64 <= block <= 128}[regions["block"]]
        assert {"at_max_seqs": budget == seqs, "small": budget <= 64, "medium": 65 <= budget <= 512,
                "large": 513 <= budget <= 4096}[regions["budget"]]
        assert {"off": chunk == 0, "one": chunk == 1, "below_block": 2 <= chunk < block,
                "below_budget": 2 <= chunk < budget, "at_budget": chunk == budget,
                "above_budget": chunk > budget}[regions["threshold"]]
        assert {"barely_one": usable == max(needs), "one_plus": max(needs) < usable <= max(needs) + 3,
                "some": max(needs) <= usable, "most": max(needs) <= usable <= max(max(needs), sum(needs)),
                "never_tight": usable > sum(needs)}[regions["pool"]]
        assert {"together": all("arrive" not in r for r in case["requests"]),
                "staggered": all(r.get("arrive", 0) <= 8 for r in case["requests"])}.get(regions["arrivals"], True)
        if regions["prompts"] == "beyond_chunk":
            first_chunk = min(chunk, budget) if chunk else budget
            assert all(r["prompt"] > first_chunk for r in case["requests"])


def test_every_case_is_one_vllm_accepts_and_finishes() -> None:
    for i in range(DRAWS):
        case = campaign_space.scenario(1, i)
        assert campaign.scenario_valid(case), i
        assert case["chunk"] <= SCENARIO_MAX_MODEL_LEN
        assert all(r["prompt"] + r["out"] <= SCENARIO_MAX_MODEL_LEN for r in case["requests"])


def test_the_corpus_is_the_generators_and_every_case_finished() -> None:
    records = _records()
    assert len(records) >= 5000
    for record in records:
        assert record["case"] == campaign_space.scenario(record["seed"], record["index"])
        assert record["answer"]["status"] == "finished" and not record["answer"]["unfinished"]


def test_the_coverage_data_counts_the_corpora() -> None:
    """docs/data/space_coverage.json's regions and features are the three
    corpora's (the rules' counts need the runs: the campaign test recomputes
    them)."""
    from oracle import space_coverage

    data = json.loads(COVERAGE.read_text())
    assert data["version"] == 3
    assert set(data["corpora"]) == {"space.jsonl", "space-all.jsonl", "async-priority-pressure.jsonl"}
    pressure = [json.loads(line) for line in (SPACE.parent / "async-priority-pressure.jsonl").read_text().splitlines()]
    for name, records, regions_of in (("space.jsonl", _records(), campaign_space.regions_of),
                                      ("space-all.jsonl", _all_records(), campaign_space.regions_all),
                                      ("async-priority-pressure.jsonl", pressure, campaign_space.regions_pressure)):
        corpus = data["corpora"][name]
        assert corpus["cases"] == len(records)
        assert corpus["rules"] == space_coverage.relevant_rules()
        counted = {r["index"] for r in records if r["index"] % corpus["rules_every"] == 0}
        for rule, indices in corpus["listed"].items():  # the cases listed are counted ones, as many as counted
            assert set(indices) <= counted and len(indices) == corpus["total"]["rules"][rule], (name, rule)
        drawn = [regions_of(r["seed"], r["index"]) for r in records]
        features = [space_coverage.features_of(r) for r in records]
        for knob, regions in corpus["regions"].items():
            for region, entry in regions.items():
                chosen = [k for k, of in enumerate(drawn) if of[knob] == region]
                assert entry["cases"] == len(chosen), (name, knob, region)
                assert entry["rules_cases"] == sum(records[k]["index"] % corpus["rules_every"] == 0 for k in chosen)
                for feature, count in entry["features"].items():
                    assert count == sum(feature in features[k] for k in chosen), (name, knob, region, feature)


def test_serq_ref_agrees_with_vllm_on_a_slice_of_the_corpus(capsys, tmp_path) -> None:
    code = main(["oracle", "campaign", "10", "--seed", "1", "--kind", "space", "--start", "0",
                 "--recorded", str(SPACE), "--vllm-python", str(tmp_path / "no-python")])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0, out
    assert out[-1].startswith("space: 10 cases, 10 agree, 0 differ")


def test_lean_check_on_a_slice_of_the_corpus(capsys) -> None:
    code = main(["lean", "check", str(SPACE), "--every", "500"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 0, lines
    assert lines == [f"{len(_records()) // 500} passed, 0 failed"]


@pytest.mark.campaign
def test_the_whole_corpus_agrees_with_serq_ref_and_the_lean_fragment(capsys) -> None:
    records = _records()
    assert main(["oracle", "check", str(SPACE)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"{len(records)} passed, 0 failed"
    assert main(["lean", "check", str(SPACE)]) == 0
    assert capsys.readouterr().out.strip().splitlines() == [f"{len(records)} passed, 0 failed"]


@pytest.mark.campaign
def test_the_coverage_data_is_the_measurement() -> None:
    from oracle import space_coverage

    assert space_coverage.measure_all() == json.loads(COVERAGE.read_text())


# ---------------------------------------------------------------------------
# The kind space-all: both modes, both policies, the limits (space-all.jsonl)

SPACE_ALL = ROOT / "oracle" / "data" / "campaign" / "space-all.jsonl"
#: Draws enough to reach every region of every knob of space-all in each mode and policy (the rarest,
#: a never-fits request of one kind in a mode and policy, is about one case in forty of them).
DRAWS_ALL = 2400


def _all_records() -> list[dict]:
    return [json.loads(line) for line in SPACE_ALL.read_text().splitlines() if line.strip()]


def test_a_space_all_case_is_drawn_again_alone_and_space_draws_what_it_drew() -> None:
    first = [campaign_space.draw_all(3, i) for i in range(40)]
    random.seed(999)
    again = [campaign_space.draw_all(3, i) for i in reversed(range(40))][::-1]
    assert first == again
    assert campaign.draw("space-all", 3, 7) == first[7][0] == campaign_space.scenario_all(3, 7)
    # a stream of its own: space-all's case is not space's
    assert campaign_space.draw_all(1, 0)[0] != campaign_space.draw(1, 0)[0]


def test_every_region_of_space_all_is_reached_in_both_modes_and_both_policies() -> None:
    seen: dict[tuple[str, str], dict[str, set]] = {}
    for i in range(DRAWS_ALL):
        regions = campaign_space.regions_all(1, i)
        by_knob = seen.setdefault((regions["mode"], regions["policy"]), {k: set() for k in campaign_space.ALL_KNOBS})
        for knob, region in regions.items():
            by_knob[knob].add(region)
    assert set(seen) == {(m, p) for m in ("sync", "async") for p in ("fcfs", "priority")}
    for (mode, policy), by_knob in seen.items():
        for knob, regions in by_knob.items():
            want = set(campaign_space.ALL_KNOBS[knob])
            if knob == "mode":
                want = {mode}
            elif knob == "policy":
                want = {policy}
            elif knob == "priorities":
                want = {"none"} if policy == "fcfs" else set(campaign.campaign_cases.PRIORITY_MODES)
            assert regions == want, (mode, policy, knob, want - regions)


def test_each_space_all_region_draws_what_it_names() -> None:
    for i in range(DRAWS_ALL // 2):
        case, regions = campaign_space.draw_all(1, i)
        requests, block, usable = case["requests"], case["block_size"], case["num_blocks"] - 1
        assert case.get("async", False) is (regions["mode"] == "async")
        assert (case.get("policy") == "priority") is (regions["policy"] == "priority")
        priorities = [r.get("priority") for r in requests]
        assert {"none": lambda: set(priorities) == {None}, "equal": lambda: len(set(priorities)) == 1,
                "two": lambda: len(set(priorities)) <= 2, "few": lambda: all(-3 <= p <= 3 for p in priorities),
                "distinct": lambda: len(set(priorities)) == len(priorities),
                "wide": lambda: all(-10**6 <= p <= 10**6 for p in priorities)}[regions["priorities"]](), i
        length = case.get("max_model_len")
        prompts = [r["prompt"] for r in requests]
        region = regions["max_model_len"]
        assert (length is None) is (region == "default"), i
        if region == "refuses_some":
            assert length <= max(prompts), i
        elif region == "ends_some":
            assert any(r["prompt"] < length < r["prompt"] + r["out"] for r in requests), i  # ends at the limit
        elif region == "above_all":
            assert length > max(r["prompt"] + r["out"] for r in requests), i
        if region == "cache_too_small":
            assert -(-length // block) > usable, i
        elif length is not None:
            assert -(-length // block) <= usable, i  # a cache vLLM starts
        too_long = [r for r in requests if -(-min(r["prompt"] + r["out"] - 1, 8191) // block) > usable]
        assert (len(too_long) == 1) is (regions["never_fits"] != "none") or length is not None, i
        if regions["never_fits"] == "prompt":
            assert too_long[0]["prompt"] > usable * block, i
        watermark = case.get("watermark", 0)
        assert {"zero": watermark == 0, "low": 0.01 <= watermark <= 0.1, "medium": 0.1 <= watermark <= 0.5,
                "high": 0.5 <= watermark <= 0.99}[regions["watermark"]], i


def test_every_space_all_case_is_one_vllm_accepts() -> None:
    """vLLM's SchedulerConfig takes it (budget >= max_seqs, the threshold
    within max_model_len, the watermark in [0, 1)), and every request it
    does not refuse fits the cache alone, so each finishes."""
    from oracle.scenario import check_scenario

    for i in range(DRAWS_ALL // 2):
        case = campaign_space.scenario_all(1, i)
        check_scenario({k: v for k, v in case.items() if k != "kind"})
        length = case.get("max_model_len", SCENARIO_MAX_MODEL_LEN)
        assert case["budget"] >= case["max_seqs"] >= 1 and case["chunk"] <= length
        assert 0 <= case.get("watermark", 0) < 1
        usable = case["num_blocks"] - 1
        if "max_model_len" in case and -(-length // case["block_size"]) > usable:
            continue  # a cache too small for one request of max_model_len: every request refused
        for r in case["requests"]:
            assert r["prompt"] + r["out"] <= SCENARIO_MAX_MODEL_LEN
            tokens = min(r["prompt"] + r["out"] - 1, length - 1)
            if r["prompt"] < length and "max_model_len" in case:
                assert -(-tokens // case["block_size"]) <= usable, i


def test_the_space_all_corpus_is_the_generators_and_says_its_mode() -> None:
    records = _all_records()
    assert len(records) >= 5000
    modes = {"sync": 0, "async": 0}
    for record in records:
        assert record["case"] == campaign_space.scenario_all(record["seed"], record["index"])
        answer = record["answer"]
        assert answer["status"] == "finished" and not answer["unfinished"]
        assert answer["mode"] == ("async" if record["case"].get("async") else "sync")
        modes[answer["mode"]] += 1
        served = set(answer["done"]) | set(answer.get("refused", {}))
        assert served == {str(k) for k in range(len(record["case"]["requests"]))}  # nothing dropped
    assert min(modes.values()) > len(records) // 3


#: Cases of space-all.jsonl replayed by the default suite (small ones): asynchronous and priority with
#: the priority victim (2437: a self-preemption; 4763: a parked victim, step/preempt-parked), synchronous
#: priority (526), asynchronous FCFS with preemptions (320), each refusal (1134 configuration, 4205
#: prompt, 3141 never fits), an end at max_model_len (1005), a high watermark that blocks the head (2900).
SPACE_ALL_SLICE = (320, 526, 1005, 1134, 2437, 2900, 3141, 4205, 4763)


def test_serq_ref_agrees_with_vllm_on_a_slice_of_space_all(capsys) -> None:
    records = _all_records()
    chosen = [records[i] for i in SPACE_ALL_SLICE]
    assert any(r["case"].get("async") and r["case"].get("policy") == "priority"
               and r["answer"]["features"]["preemptions"] for r in chosen)
    for reason in ("configuration", "prompt", "never fits"):
        assert any(any(w.startswith(reason + ":") for w in r["answer"].get("refused", {}).values()) for r in chosen)
    code = main(["oracle", "check", str(SPACE_ALL), "--cases", ",".join(map(str, SPACE_ALL_SLICE))])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 0, lines
    assert lines[-1] == f"{len(SPACE_ALL_SLICE)} passed, 0 failed"


def test_the_campaign_command_takes_space_all_and_refuses_what_it_cannot_mean(capsys, tmp_path) -> None:
    code = main(["oracle", "campaign", "3", "--seed", "1", "--kind", "space-all", "--recorded", str(SPACE_ALL),
                 "--vllm-python", str(tmp_path / "no-python")])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0, out
    assert out[-1].startswith("space-all: 3 cases, 3 agree, 0 differ")
    for extra in (["--async"], ["--older-rule"]):
        assert main(["oracle", "campaign", "3", "--seed", "1", "--kind", "space-all", *extra]) == 2
        assert "space-all" in capsys.readouterr().err


@pytest.mark.campaign
def test_the_whole_space_all_corpus_agrees_with_serq_ref(capsys) -> None:
    records = _all_records()
    assert main(["oracle", "check", str(SPACE_ALL), "--workers", "2"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"{len(records)} passed, 0 failed"
