"""The real vLLM 0.33.0 scheduler's recorded answers (oracle/data), checked
without vLLM: the manifest's checksums, that every file parses, that the
answers to the shared scenarios are the recorded ones (../shared/oracle), and
that the campaign's cases are what oracle/campaign_cases.py draws."""

import csv
import gzip
import hashlib
import io
import json
from pathlib import Path

import pytest

from oracle import campaign_cases
from shared_paths import SHARED

DATA = Path(__file__).resolve().parent.parent / "oracle" / "data"
MANIFEST = json.loads((DATA / "manifest.json").read_text())
FILES = MANIFEST["files"]

SCENARIOS = ("alone", "chunked", "hol", "longchunk", "mixed", "preempt", "seqcap")
SERVE = ("admission", "newest_first", "newest_first_preempt", "prefill_first")
SPACINGS = (4, 8, 12, 16, 20, 22, 23, 24, 28, 32, 40)
REPLAY_HEADER = ["session", "turn", "sent", "first", "done", "prompt", "cached", "out"]


def read_json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def read_replay_csv(path: Path) -> list[dict]:
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    reader = csv.DictReader(io.StringIO(text))
    assert reader.fieldnames == REPLAY_HEADER
    return list(reader)


# --- the manifest -----------------------------------------------------------


def test_manifest_lists_every_data_file():
    on_disk = {
        p.relative_to(DATA).as_posix()
        for p in DATA.rglob("*")
        if p.is_file() and p.name not in ("manifest.json", "README.md")
    }
    assert on_disk == set(FILES)


@pytest.mark.parametrize("relative", sorted(FILES))
def test_manifest_checksum(relative):
    entry = FILES[relative]
    data = (DATA / relative).read_bytes()
    assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    assert len(data) == entry["bytes"]
    assert entry["vllm"] == "0.33.0"
    assert entry["produced_by"].startswith("python -m oracle.record ")
    assert entry["date"]


@pytest.mark.parametrize("relative", sorted(FILES))
def test_data_file_parses(relative):
    path = DATA / relative
    if relative.endswith(".jsonl"):
        assert read_json_lines(path)
    elif relative.endswith(".json"):
        json.loads(path.read_text())
    elif relative.endswith((".csv", ".csv.gz")):
        assert read_replay_csv(path)
    else:
        pytest.fail(f"no reader for {relative}")


# --- the shared scenarios ---------------------------------------------------


@pytest.mark.parametrize("name", SCENARIOS)
def test_vllm_scenario_equals_recorded_answer(name):
    ours = json.loads((DATA / "shared" / "vllm" / f"{name}.out.json").read_text())
    recorded = json.loads((SHARED / "oracle" / "vllm" / f"{name}.out.json").read_text())
    assert ours == recorded


def test_cache_trace_equals_recorded_answer():
    ours = (DATA / "shared" / "prefix_cache" / "cache_trace.out.csv").read_text()
    assert ours == (SHARED / "oracle" / "prefix_cache" / "cache_trace.out.csv").read_text()


@pytest.mark.parametrize("name", SERVE)
def test_serve_scenario_older_rule_equals_recorded_answer(name):
    # the recorded serve/ answers were made before vLLM 0.33.0; with the older
    # self-preemption rule (docs/vllm-0.33.md, D1) 0.33.0 gives them all
    ours = json.loads((DATA / "shared" / "serve" / f"{name}.older-rule.out.json").read_text())
    recorded = json.loads((SHARED / "oracle" / "serve" / f"{name}.out.json").read_text())
    assert ours == recorded


@pytest.mark.parametrize("name", SERVE)
def test_serve_scenario_on_vllm_0_33(name):
    # 0.33.0's own priority path: equal but for newest_first_preempt, where a
    # request that preempts itself no longer ends the running loop (D1)
    ours = json.loads((DATA / "shared" / "serve" / f"{name}.out.json").read_text())
    recorded = json.loads((SHARED / "oracle" / "serve" / f"{name}.out.json").read_text())
    if name != "newest_first_preempt":
        assert ours == recorded
        return
    assert ours["preemptions"] == recorded["preemptions"] == 2
    assert ours["first"] == {"2": 3, "0": 5, "3": 17, "1": 25}
    assert ours["done"] == {"2": 15, "3": 22, "0": 25, "1": 48}
    assert ours["steps"] == recorded["steps"] - 1


# --- the full trace -----------------------------------------------------------


def trace_turns() -> dict:
    rows = csv.DictReader((SHARED / "traces" / "short_base.csv").open())
    return {(int(r["session"]), int(r["turn"])): r for r in rows}


def test_full_replay_summary():
    summary = json.loads((DATA / "replay" / "summary.json").read_text())
    assert sorted(int(k) for k in summary) == list(SPACINGS)
    for entry in summary.values():
        assert (entry["budget"], entry["max_seqs"], entry["blocks"], entry["block_size"]) == (512, 64, 8010, 16)
        assert entry["status"] == "finished"
        assert entry["requests_sent"] == entry["requests_finished"] == 3321
        assert entry["unfinished"] == [] and entry["never_sent"] == []
    # the cliff: collapsed up to spacing 22, not from 23 on
    assert summary["22"]["mean_ttft_steps"] > 1000 > 100 > summary["23"]["mean_ttft_steps"]


@pytest.mark.parametrize("spacing", SPACINGS)
def test_full_replay_rows(spacing):
    rows = read_replay_csv(DATA / "replay" / f"short_base-s{spacing:02d}.csv.gz")
    turns = trace_turns()
    assert len(rows) == len(turns) == 3321
    for row in rows:
        turn = turns[(int(row["session"]), int(row["turn"]))]
        assert int(row["prompt"]) == int(turn["new"]) and int(row["out"]) == int(turn["out"])
        sent, first, done = float(row["sent"]), float(row["first"]), float(row["done"])
        assert sent < first <= done
        cached = int(row["cached"])
        assert 0 <= cached <= int(row["prompt"]) - 1 and cached % 16 == 0
        if int(row["turn"]) == 1:
            assert sent == int(row["session"]) * spacing and cached == 0


# --- the campaign -----------------------------------------------------------


def campaign(name: str) -> list[dict]:
    return read_json_lines(DATA / "campaign" / name)


def test_campaign_scenarios_are_the_generators():
    records = campaign("scenarios.jsonl")
    assert len(records) >= 2000
    for record in records:
        assert record["case"] == campaign_cases.scenario(record["seed"], record["index"])


def test_campaign_replays_are_the_generators():
    records = campaign("replays.jsonl")
    assert len(records) >= 500
    for record in records:
        assert record["case"] == campaign_cases.replay(record["seed"], record["index"])


def test_campaign_serve_cases_are_the_generators():
    for record in campaign("serve.jsonl"):
        assert record["case"] == campaign_cases.serve_scenario(record["seed"], record["index"])


def test_campaign_scenario_cases_fit_and_finish():
    records = campaign("scenarios.jsonl") + campaign("serve.jsonl")
    for record in records:
        case, answer = record["case"], record["answer"]
        usable = case["num_blocks"] - 1
        assert case["budget"] >= case["max_seqs"]
        for request in case["requests"]:
            assert campaign_cases.blocks_needed(request["prompt"], request["out"], case["block_size"]) <= usable
        assert answer["status"] == "finished" and answer["unfinished"] == []
        ids = {str(i) for i in range(len(case["requests"]))}
        assert set(answer["first"]) == set(answer["done"]) == ids
        for i, request in enumerate(case["requests"]):
            first, done = answer["first"][str(i)], answer["done"][str(i)]
            assert request.get("arrive", 0) < first <= done
            assert done - first >= request["out"] - 1


def test_campaign_covers_tight_cases():
    answers = [r["answer"]["features"] for r in campaign("scenarios.jsonl")]
    assert sum(f["preemptions"] > 0 for f in answers) >= 400
    assert sum(f["self_preemptions"] > 0 for f in answers) >= 200
    assert sum(f["blocked_steps"] > 0 for f in answers) >= 1000
    replays = [r["answer"]["features"] for r in campaign("replays.jsonl")]
    assert sum(f["preemptions"] > 0 for f in replays) >= 50


def test_campaign_replays_finish():
    for record in campaign("replays.jsonl"):
        answer = record["answer"]
        assert answer["status"] == "finished"
        assert answer["unfinished"] == [] and answer["never_sent"] == []
        turns = [line.split(",") for line in record["case"]["trace"].splitlines()[1:]]
        assert len(answer["rows"]) == len(turns)
        for row in answer["rows"]:
            session, turn, sent, first, done, prompt, cached, out = row
            assert sent < first <= done
            assert 0 <= cached <= prompt - 1 and cached % 16 == 0
