"""The pressure region of the whole-space campaign (issue 18): oracle/campaign_space.py's
``draw_pressure``, asynchronous cases under the priority policy with memory tight enough that
requests are preempted while others wait, its recorded corpus
oracle/data/campaign/async-priority-pressure.jsonl (vLLM 0.33.0's AsyncScheduler's answers) and
its coverage data in docs/data/space_coverage.json.

The default suite checks the generator (deterministic, every region of every knob reached, each
region drawing what it names, every case asynchronous, priority and one vLLM accepts), that the
corpus is the generator's, and replays a slice against serq-ref (`serq-ref oracle check`) and the
Lean fragment (`serq-ref lean check`), the slice holding a parked victim (step/preempt-parked) and
cases whose answer the requeue key decides; the whole corpus is behind `campaign`.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from oracle import campaign, campaign_space
from oracle.campaign_cases import blocks_needed
from semantics.cli import main

ROOT = Path(__file__).resolve().parent.parent
PRESSURE = ROOT / "oracle" / "data" / "campaign" / "async-priority-pressure.jsonl"
COVERAGE = ROOT / "docs" / "data" / "space_coverage.json"
#: Draws enough to reach every region of every knob (the rarest, a priority pattern, is one case in five).
DRAWS = 300


def _records() -> list[dict]:
    return [json.loads(line) for line in PRESSURE.read_text().splitlines() if line.strip()]


def test_a_pressure_case_is_drawn_again_alone_and_in_a_stream_of_its_own() -> None:
    first = [campaign_space.draw_pressure(3, i) for i in range(40)]
    random.seed(4242)  # the global stream is not the generator's
    again = [campaign_space.draw_pressure(3, i) for i in reversed(range(40))][::-1]
    assert first == again
    assert campaign.draw("pressure", 3, 7) == first[7][0] == campaign_space.scenario_pressure(3, 7)
    assert campaign_space.draw_pressure(1, 0)[0] not in (campaign_space.draw_all(1, 0)[0], campaign_space.draw(1, 0)[0])


def test_every_region_of_every_pressure_knob_is_reached() -> None:
    seen = {knob: set() for knob in campaign_space.PRESSURE_KNOBS}
    for i in range(DRAWS):
        for knob, region in campaign_space.regions_pressure(1, i).items():
            seen[knob].add(region)
    for knob, regions in seen.items():
        assert regions == set(campaign_space.PRESSURE_KNOBS[knob]), knob


def test_each_pressure_region_draws_what_it_names() -> None:
    for i in range(DRAWS):
        case, regions = campaign_space.draw_pressure(1, i)
        assert case["async"] is True and case["policy"] == "priority", i
        requests, block = case["requests"], case["block_size"]
        budget, seqs, chunk, usable = case["budget"], case["max_seqs"], case["chunk"], case["num_blocks"] - 1
        assert {"one": block == 1, "small": 2 <= block <= 7, "common": block in (8, 16)}[regions["block"]], i
        assert {"few": 2 <= seqs <= 4, "some": 5 <= seqs <= 12}[regions["max_seqs"]], i
        assert {"tight": seqs <= budget <= 64, "roomy": 65 <= budget <= 512}[regions["budget"]], i
        assert {"off": chunk == 0, "below_budget": 2 <= chunk < budget}[regions["threshold"]], i
        assert {"several": 6 <= len(requests) <= 12, "many": 13 <= len(requests) <= 24}[regions["requests"]], i
        most = {"short": 2, "blocks": 8}[regions["prompts"]]
        assert all(1 <= r["prompt"] <= most * block for r in requests), i
        needs = [blocks_needed(r["prompt"], r["out"], block) for r in requests]
        need, total = max(needs), sum(needs)
        assert {"barely_one": usable == need, "one_plus": need < usable <= need + 3,
                "tight": need <= usable <= need + max(0, (total - need) // 4)}[regions["pool"]], i
        arrivals = [r.get("arrive", 0) for r in requests]
        assert arrivals == sorted(arrivals) and arrivals.count(0) >= 2, i  # a first group, then the others
        if regions["arrivals"] == "during":
            assert max(arrivals) <= 40, i
        priorities = [r["priority"] for r in requests]
        assert {"two": len(set(priorities)) <= 2, "few": all(-3 <= p <= 3 for p in priorities),
                "distinct": len(set(priorities)) == len(priorities),
                "wide": all(-10**6 <= p <= 10**6 for p in priorities),
                "urgent_late": all(p >= 0 for p, a in zip(priorities, arrivals) if a == 0)
                and all(p <= 2 for p, a in zip(priorities, arrivals) if a > 0)}[regions["priorities"]], i
        assert (case.get("watermark", 0) == 0) is (regions["watermark"] == "zero"), i
        assert 0 <= case.get("watermark", 0) <= 0.1, i


def test_every_pressure_case_is_one_vllm_accepts_and_finishes() -> None:
    from oracle.scenario import check_scenario

    for i in range(DRAWS):
        case = campaign_space.scenario_pressure(1, i)
        assert campaign.scenario_valid(case), i
        check_scenario({k: v for k, v in case.items() if k != "kind"})


def test_the_pressure_corpus_is_the_generators_and_says_its_mode() -> None:
    records = _records()
    assert len(records) >= 2000
    for record in records:
        assert record["case"] == campaign_space.scenario_pressure(record["seed"], record["index"])
        answer = record["answer"]
        assert answer["status"] == "finished" and not answer["unfinished"]
        assert answer["mode"] == "async"
        assert set(answer["done"]) == {str(k) for k in range(len(record["case"]["requests"]))}  # nothing dropped
    # the region is there for its preemptions: most of its cases have some
    assert sum(r["answer"]["preemptions"] > 0 for r in records) > len(records) // 2


def _coverage() -> dict:
    return json.loads(COVERAGE.read_text())["corpora"]["async-priority-pressure.jsonl"]


#: The slice of the corpus the default suite replays: every EVERY-th case, and the first LISTED cases
#: docs/data/space_coverage.json lists as applying step/preempt-parked and as decided by the requeue key.
EVERY = 250
LISTED = 2


def _slice() -> list[int]:
    listed = _coverage()["listed"]
    chosen = set(range(0, len(_records()), EVERY))
    for rule in ("step/preempt-parked", "session/hold-enter [requeue by key decides]"):
        chosen |= set(listed[rule][:LISTED])
    return sorted(chosen)


def test_the_coverage_lists_parked_victims_and_answers_the_requeue_key_decides() -> None:
    """The corpus is there for these: a victim whose last token is in flight (step/preempt-parked, by
    the keys) and answers the requeue key decides, each in many cases; the first listed of each is so."""
    from oracle import space_coverage

    corpus = _coverage()
    listed = corpus["listed"]
    assert corpus["cases"] == len(_records()) and corpus["total"]["rules_cases"] == len(_records()) // corpus["rules_every"]
    for rule in ("step/preempt-parked", "step/preempt-parked [by keys]", space_coverage.REQUEUE_DECIDES):
        assert corpus["total"]["rules"][rule] >= 20, rule
    assert len(listed["step/preempt-parked"]) == corpus["total"]["rules"]["step/preempt-parked"]
    assert len(listed[space_coverage.REQUEUE_DECIDES]) == corpus["total"]["rules"][space_coverage.REQUEUE_DECIDES]
    records = _records()
    counts = space_coverage.rules_applied(records[listed["step/preempt-parked"][0]]["case"])
    assert counts.get("step/preempt-parked [by keys]")
    counts = space_coverage.rules_applied(records[listed[space_coverage.REQUEUE_DECIDES][0]]["case"])
    assert counts.get(space_coverage.REQUEUE_DECIDES)


def test_serq_ref_agrees_with_vllm_on_a_slice_of_the_pressure_corpus(capsys) -> None:
    chosen = _slice()
    code = main(["oracle", "check", str(PRESSURE), "--cases", ",".join(map(str, chosen))])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 0, lines
    assert lines[-1] == f"{len(chosen)} passed, 0 failed"


def test_lean_check_on_a_slice_of_the_pressure_corpus(capsys) -> None:
    chosen = _slice()
    # lean check's --every K takes 0, K, 2K, ... besides --cases: a K beyond the corpus leaves case 0 alone
    code = main(["lean", "check", str(PRESSURE), "--cases", ",".join(map(str, chosen)), "--every", str(10**9)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 0, lines
    assert lines == [f"{len(chosen)} passed, 0 failed"]


#: The smallest case the requeue key decides (docs/campaigns.md, "Asynchronous priority under pressure").
EXAMPLE = 1755


def test_the_requeue_key_decides_an_answer_and_vllm_agrees() -> None:
    """A case of the corpus whose answer changes when a preempted request re-enters at the head of the
    waiting queue (the seed's rule) instead of by its (priority, arrival), as vLLM 0.33.0's heap puts it
    back (request_queue.py:160-166): serq-ref's answer with `requeue by key` is vLLM's recorded one, the
    other is not."""
    from semantics.smallstep.driver import run

    from oracle.scenario import answer_of, scenario_program

    from oracle.space_coverage import REQUEUE_DECIDES

    assert EXAMPLE in _coverage()["listed"][REQUEUE_DECIDES]
    record = _records()[EXAMPLE]
    data = {k: v for k, v in record["case"].items() if k != "kind"}
    program = scenario_program(data)
    head = dataclasses.replace(program, pools=tuple(dataclasses.replace(p, requeue="Head") for p in program.pools))
    assert any(p.requeue == "Key" for p in program.pools)
    recorded = {k: record["answer"][k] for k in ("first", "done", "preemptions", "steps")}
    assert answer_of(run(program), program, data) == recorded
    assert answer_of(run(head), head, data) != recorded


@pytest.mark.campaign
def test_the_whole_pressure_corpus_agrees_with_serq_ref_and_the_lean_fragment(capsys) -> None:
    records = _records()
    assert main(["oracle", "check", str(PRESSURE), "--workers", "2"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"{len(records)} passed, 0 failed"
    assert main(["lean", "check", str(PRESSURE)]) == 0
    assert capsys.readouterr().out.strip().splitlines() == [f"{len(records)} passed, 0 failed"]
