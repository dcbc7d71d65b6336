"""The whole-space campaign (issue 18, §4): oracle/campaign_space.py's
generator, its recorded corpus oracle/data/campaign/space.jsonl (vLLM
0.33.0's answers), and its coverage data docs/data/space_coverage.json.

The default suite checks the generator (deterministic, every region of
every knob reached, every case one vLLM accepts and finishes), that the
corpus is the generator's cases, and replays a slice of it against serq-ref
(`serq-ref oracle check`) and the Lean fragment (`serq-ref lean check`);
the whole corpus is behind `campaign`.
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


def test_the_coverage_data_counts_the_corpus() -> None:
    """docs/data/space_coverage.json's regions and features are the corpus's
    (the rules' counts need the runs: the campaign test recomputes them)."""
    data = json.loads(COVERAGE.read_text())
    records = _records()
    assert data["cases"] == len(records)
    drawn = [campaign_space.regions_of(r["seed"], r["index"]) for r in records]
    for knob, regions in data["regions"].items():
        for region, entry in regions.items():
            chosen = [r for r, of in zip(records, drawn) if of[knob] == region]
            assert entry["cases"] == len(chosen), (knob, region)
            assert entry["rules_cases"] == sum(r["index"] % data["rules_every"] == 0 for r in chosen)
            for feature, count in entry["features"].items():
                assert count == sum(bool(r["answer"]["features"][feature]) for r in chosen), (knob, region, feature)


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

    assert space_coverage.measure(_records()) == json.loads(COVERAGE.read_text())
