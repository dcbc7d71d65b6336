"""The real vLLM 0.33.0 scheduler against the recorded answers.

Needs the vLLM environment (oracle/real/setup-vllm.sh) named by
SERQ_VLLM_PYTHON; without it every test here is deselected (tests/conftest.py
says so in the run's summary).
The quick part (the shared scenarios, the prefix-cache replay and a sample of
the campaign: one driver process, about 40 s) runs in the default suite when
the variable is set; re-answering the whole campaign and the full trace sits
behind the campaign marker (python -m pytest -m campaign -o timeout=0
tests/test_oracle_real.py).
"""

import gzip
import json
from pathlib import Path

import pytest

from oracle import real
from shared_paths import SHARED

DATA = Path(__file__).resolve().parent.parent / "oracle" / "data"

pytestmark = pytest.mark.vllm  # deselected without SERQ_VLLM_PYTHON (tests/conftest.py)

SCENARIOS = ("alone", "chunked", "hol", "longchunk", "mixed", "preempt", "seqcap")
SERVE = ("admission", "newest_first", "newest_first_preempt", "prefill_first")
SAMPLE = 40


def records(name):
    path = DATA / "campaign" / name
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def quick_answers():
    """One driver process answers the shared scenarios, the prefix-cache
    replay and the first SAMPLE cases of each campaign file."""
    jobs = {}
    for name in SCENARIOS:
        jobs[f"vllm/{name}"] = real.scenario_job(json.loads((SHARED / "oracle" / "vllm" / f"{name}.json").read_text()))
    for name in SERVE:
        scenario = json.loads((SHARED / "oracle" / "serve" / f"{name}.json").read_text())
        jobs[f"serve/{name}"] = real.scenario_job(scenario)
        jobs[f"serve/{name}.older-rule"] = real.scenario_job(scenario, self_preempt_ends_pass=True)
    jobs["cache_trace"] = real.replay_job(
        (SHARED / "oracle" / "prefix_cache" / "cache_trace.csv").read_text(),
        spacing=3, budget=64, max_seqs=4, blocks=20,
    )
    for name in ("scenarios.jsonl", "replays.jsonl", "serve.jsonl"):
        for record in records(name)[:SAMPLE]:
            jobs[f"{name}:{record['index']}"] = dict(record["case"])
    answers = real.answer_all(list(jobs.values()))
    return dict(zip(jobs, answers))


def test_driver_runs_vllm_0_33(quick_answers):
    assert {a["vllm"] for a in quick_answers.values()} == {real.VLLM_VERSION}
    assert not [key for key, a in quick_answers.items() if "error" in a]


@pytest.mark.parametrize("name", SCENARIOS)
def test_vllm_scenario(quick_answers, name):
    recorded = json.loads((SHARED / "oracle" / "vllm" / f"{name}.out.json").read_text())
    assert real.recorded_fields(quick_answers[f"vllm/{name}"]) == recorded


@pytest.mark.parametrize("name", SERVE)
def test_serve_scenario(quick_answers, name):
    for suffix in ("", ".older-rule"):
        ours = json.loads((DATA / "shared" / "serve" / f"{name}{suffix}.out.json").read_text())
        assert real.recorded_fields(quick_answers[f"serve/{name}{suffix}"]) == ours


def test_cache_trace(quick_answers):
    recorded = (SHARED / "oracle" / "prefix_cache" / "cache_trace.out.csv").read_text()
    assert quick_answers["cache_trace"]["csv"] == recorded


@pytest.mark.parametrize("name", ("scenarios.jsonl", "replays.jsonl", "serve.jsonl"))
def test_campaign_sample(quick_answers, name):
    for record in records(name)[:SAMPLE]:
        answer = quick_answers[f"{name}:{record['index']}"]
        assert {k: answer[k] for k in record["answer"]} == record["answer"], record["index"]


@pytest.mark.campaign
@pytest.mark.parametrize("name", ("scenarios.jsonl", "replays.jsonl", "serve.jsonl"))
def test_campaign_whole(name):
    cases = records(name)
    jobs = [dict(r["case"]) for r in cases]
    if name == "serve.jsonl":
        jobs += [{**r["case"], "self_preempt_ends_pass": True} for r in cases]
    answers = real.answer_all(jobs)
    for record, answer in zip(cases, answers):
        assert {k: answer[k] for k in record["answer"]} == record["answer"], record["index"]
    if name == "serve.jsonl":
        for record, answer in zip(cases, answers[len(cases):]):
            expected = record["answer_older_rule"]
            assert {k: answer[k] for k in expected} == expected, record["index"]


@pytest.mark.campaign
@pytest.mark.parametrize("spacing", (22, 23))
def test_full_replay_at_the_cliff(spacing):
    (answer,) = real.answer_all([
        real.replay_job((SHARED / "traces" / "short_base.csv").read_text(), spacing=spacing,
                        budget=512, max_seqs=64, blocks=8010)
    ])
    recorded = gzip.decompress((DATA / "replay" / f"short_base-s{spacing:02d}.csv.gz").read_bytes()).decode()
    assert answer["csv"] == recorded
