"""Prefixes shared across requests (issue 19 section 1, docs/design/shared-prefixes.md):
the scenario field ``prompt_segments`` checked and located, the corpus
oracle/data/campaign/shared-prefix.jsonl the generator's and consistent with
vLLM 0.33.0's rules as the design note states them, the conformance check
comparing ``cached``, pyserq reported as not supporting it, and serq-ref
answering such a scenario with its sharing (tests/test_shared_prefix_rules.py
checks the model against the corpus)."""

from __future__ import annotations

import collections
import functools
import io
import json
import pathlib
import runpy

import pytest

from oracle import campaign_prefix
from oracle.check import differences, shape_problem
from oracle.scenario import check_scenario
from semantics.cli import main
from semantics.errors import ProgramError

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "oracle" / "data" / "campaign" / campaign_prefix.CORPUS
#: The recorded corpus's least size (issue 19: at least 3,000 cases).
CORPUS_CASES = 3000


@functools.lru_cache(maxsize=1)
def _records() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


@functools.lru_cache(maxsize=1)
def _drawn() -> list[tuple[dict, dict]]:
    """The generator's case and regions for each record of the corpus."""
    return [campaign_prefix.draw(r["seed"], r["index"]) for r in _records()]


SCENARIO = {"budget": 64, "max_seqs": 4, "block_size": 16, "num_blocks": 40, "prefix_caching": True,
            "requests": [{"prompt": 70, "out": 3, "prompt_segments": [["sys", 48]]},
                         {"prompt": 48, "out": 2, "prompt_segments": [["sys", 48]], "arrive": 6}]}


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


BAD_SEGMENTS = [
    ({"prompt_segments": "sys"}, "`requests[0].prompt_segments` is a list of [KEY, LENGTH]"),
    ({"prompt_segments": [["sys"]]}, "segment 0 of request 0 is not [KEY, LENGTH]"),
    ({"prompt_segments": [[1.5, 3]]}, "segment 0 of request 0 has the key 1.5: a string or a natural number"),
    ({"prompt_segments": [["sys", 0]]}, "segment 0 of request 0 has 0 tokens: 1 to 99999"),
    ({"prompt_segments": [["sys", 2.5]]}, "`requests[0].prompt_segments[0] length` is 2.5, not a natural number"),
    ({"prompt_segments": [["sys", 60], ["doc", 20]]}, "request 0's segments have 80 tokens, more than its prompt 70"),
]


@pytest.mark.parametrize("change,message", BAD_SEGMENTS)
def test_a_bad_segment_list_is_a_located_error(change, message, capsys, tmp_path) -> None:
    data = json.loads(json.dumps(SCENARIO))
    data["requests"][0].update(change)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data, indent=1))
    code, out, err = cli(capsys, "oracle", "run", str(path))
    assert code == 1 and out == ""
    first = err.splitlines()[0]
    assert first.startswith(f"{path}:") and first.endswith(f"error: {message}"), first
    assert "Traceback" not in err and err.splitlines()[2].strip() == "^"


def test_a_shared_prefix_scenario_is_answered_with_its_sharing(capsys, tmp_path) -> None:
    path = tmp_path / "shared.json"
    path.write_text(json.dumps(SCENARIO, indent=1))
    code, out, err = cli(capsys, "oracle", "run", str(path))
    # request 1's prompt is all of sys: it hits the two full blocks request 0 cached, never its last token
    assert (code, err) == (0, "") and out.splitlines()[1] == "request 1: first 7 done 8 cached 32"
    # a scenario without segments means what it meant
    plain = json.loads(json.dumps(SCENARIO))
    for r in plain["requests"]:
        del r["prompt_segments"]
    path.write_text(json.dumps(plain))
    code, out, err = cli(capsys, "oracle", "run", str(path))
    assert (code, err) == (0, "") and out.startswith("request 0: first ")


def test_conformance_compares_cached_when_the_record_has_it() -> None:
    recorded = {"first": {"0": 2}, "done": {"0": 4}, "preemptions": 0, "steps": 5, "cached": {"0": 32}}
    same = {"first": {"0": 2}, "done": {"0": 4}, "preemptions": 0, "steps": 5, "cached": {"0": 32}}
    assert differences("c", recorded, same) == []
    assert differences("c", recorded, {**same, "cached": {"0": 16}}) == [
        "c: request 0: recorded cached 32, serq-ref cached 16"]
    assert differences("c", recorded, {k: v for k, v in same.items() if k != "cached"}) == [
        "c: request 0: recorded cached 32, serq-ref cached -"]
    # a record without it (every older corpus) never asks for it
    assert differences("c", {k: v for k, v in recorded.items() if k != "cached"}, same) == []
    assert shape_problem({**same, "cached": {"0": "x"}}) == \
        "`cached` is not an object of request id to a number of tokens"


def test_pyserq_reports_shared_prefixes_unsupported() -> None:
    adapter = runpy.run_path(str(ROOT / "examples" / "adapters" / "pyserq_adapter.py"), run_name="adapter")
    answer = adapter["answer"](SCENARIO)
    assert answer == {"unsupported": "prefixes shared across requests (prompt_segments): seed 002's cache is a "
                                     "session's own"}


def test_a_case_is_drawn_again_alone_and_the_same_and_is_valid() -> None:
    seen = collections.Counter()
    for index in range(400):
        case, region = campaign_prefix.draw(1, index)
        assert campaign_prefix.scenario(1, index) == case
        check_scenario(case)
        assert case["budget"] >= case["max_seqs"]
        for r in case["requests"]:
            need = -(-(r["prompt"] + r["out"] - 1) // case["block_size"])
            assert need <= case["num_blocks"] - 1
        seen.update(f"{k}={v}" for k, v in region.items())
    for knob, regions in campaign_prefix.KNOBS.items():
        for name in regions:
            assert seen[f"{knob}={name}"] > 0, (knob, name)


def test_the_corpus_is_the_generators_and_every_case_finished() -> None:
    records = _records()
    assert len(records) >= CORPUS_CASES
    assert [(r["seed"], r["index"]) for r in records] == [(1, i) for i in range(len(records))]
    for record, (case, _) in zip(records, _drawn()):
        assert record["case"] == case
        answer = record["answer"]
        assert answer["status"] == "finished" and not answer["unfinished"]
        ids = {str(i) for i in range(len(record["case"]["requests"]))}
        if any("prompt_segments" in r for r in record["case"]["requests"]):
            assert set(answer["done"]) == set(answer["cached"]) == ids
        else:  # a mixed case whose every request drew a prompt of its own (2 of the 3,000): a plain scenario
            assert "cached" not in answer and set(answer["done"]) == ids


def _shared_head(case: dict, i: int) -> int:
    """Request i's tokens that some other request of the case has at the same positions (the longest
    common run of segments, key and length, then a partial last segment of the same key)."""
    mine = case["requests"][i].get("prompt_segments", [])
    best = 0
    for j, other in enumerate(case["requests"]):
        if j == i:
            continue
        theirs, run = other.get("prompt_segments", []), 0
        for (k1, l1), (k2, l2) in zip(mine, theirs):
            if k1 != k2:
                break
            run += min(l1, l2)
            if l1 != l2:
                break
        best = max(best, run)
    return best


def test_the_recorded_hits_follow_the_rules_the_design_note_states() -> None:
    """Every recorded hit (num_cached_tokens) is whole blocks, never the last prompt token, none without
    prefix caching, and, but for a request's own blocks after a preemption (which vLLM does not report:
    the first admission's hit), within what another request shares with it; the corpus has hits, hits on
    every structure, and preemptions."""
    hits_by_structure = collections.Counter()
    preempting = 0
    for record, (_, region) in zip(_records(), _drawn()):
        case, answer = record["case"], record["answer"]
        structure = region["structure"]
        preempting += answer["preemptions"] > 0
        for rid, n in answer.get("cached", {}).items():
            r = case["requests"][int(rid)]
            assert n % case["block_size"] == 0 and n <= r["prompt"] - 1, (record["index"], rid)
            if not case["prefix_caching"]:
                assert n == 0, (record["index"], rid)
            assert n <= _shared_head(case, int(rid)), (record["index"], rid)
            hits_by_structure[structure] += n > 0
    assert all(hits_by_structure[s] > 0 for s in campaign_prefix.KNOBS["structure"]), hits_by_structure
    assert preempting > 0


#: The first cases of the corpus answered by serq-ref with the segments taken out (each prompt its own, the
#: model before issue 19): (agree or differ, some request hit or none) -> cases. docs/campaigns.md.
IGNORED_SHARING = {("differ", "hit"): 173, ("agree", "no hit"): 60, ("agree", "hit"): 67}


@pytest.mark.campaign
def test_answering_without_the_sharing_is_wrong_on_most_cases_with_a_hit() -> None:
    """Why serq-ref refuses a shared-prefix scenario rather than answer it without its sharing: on the
    corpus's first 300 cases the model without it differs from vLLM on 173 (every one a case with a hit)."""
    from oracle.scenario import run_scenario

    outcome = collections.Counter()
    for record in _records()[:300]:
        case = {k: v for k, v in record["case"].items() if k != "kind"}
        case["requests"] = [{k: v for k, v in r.items() if k != "prompt_segments"} for r in case["requests"]]
        ours, theirs = run_scenario(case, older_rule=False), record["answer"]
        same = all(ours[k] == theirs[k] for k in ("first", "done", "preemptions", "steps"))
        hit = any(n > 0 for n in theirs.get("cached", {}).values())
        outcome[("agree" if same else "differ", "hit" if hit else "no hit")] += 1
    assert dict(outcome) == IGNORED_SHARING


REPLAYS = ROOT / "oracle" / "data" / "replay"
SPACINGS = (4, 8, 12, 16, 20, 22, 23, 24, 28, 32, 40)


def test_the_shared_head_replays_are_recorded_whole_and_share_the_head() -> None:
    """The full trace with a 1,000-token system prompt shared by every session, at the eleven spacings:
    every request finished, and the first turn of every session but the first admitted hits the shared
    head's 62 full blocks (992 tokens) or more, at every spacing; without the head (replay/summary.json)
    a first turn never hits."""
    import csv
    import gzip

    summary = json.loads((REPLAYS / "shared-head-summary.json").read_text())
    plain = json.loads((REPLAYS / "summary.json").read_text())
    assert sorted(summary) == [f"{s:02d}" for s in SPACINGS]
    for key, entry in summary.items():
        assert entry["shared_head"] == 1000 and entry["status"] == "finished"
        assert entry["requests_finished"] == entry["requests_sent"] == 3321
        assert entry["cached_tokens"] > plain[key]["cached_tokens"]
        rows = list(csv.DictReader(io.StringIO(gzip.decompress((REPLAYS / f"shared-head-short_base-s{key}.csv.gz")
                                                               .read_bytes()).decode())))
        first_turns = [r for r in rows if r["turn"] == "1"]
        assert len(first_turns) == 333
        hits = sorted(int(r["cached"]) for r in first_turns)
        assert hits[0] == 0 and hits[1] >= 992, (key, hits[:3])


#: Small scenarios, one per rule of docs/design/shared-prefixes.md section 1, answered by vLLM 0.33.0
#: (tests/data/shared_prefix/NAME.out.json, written from oracle/real/driver.py's answers on 2026-12-04),
#: and the hits the note's rules give, worked by hand (blocks of 4 tokens).
RULE_CASES = {
    # request 1 is admitted in the pass that allocated request 0's blocks for its whole prompt: vLLM caches
    # blocks at allocation, so it hits the 4 blocks of `sys` no forward pass has computed yet
    "same_pass_hit": {"0": 0, "1": 16},
    # the same 16-token prompt again: a hit never takes the last token, so 3 blocks, not 4
    "last_token_cap": {"0": 0, "1": 12},
    # request 0's 4 blocks of A are freed tail first into the free queue after the 4 never-used ones;
    # request 1 needs 5 blocks and evicts the first cached one in the queue, A's last block: request 2
    # hits A's first 3 (head first it would hit none)
    "evict_tail_first": {"0": 0, "1": 0, "2": 12},
    # a tree: request 1 shares the root (8 tokens), request 2 the root and branch b1 (16)
    "tree": {"0": 0, "1": 8, "2": 16},
    # heads of one key at two lengths, 10 and 7: the first block (D0-D3) is shared, the second is not
    "heads_of_two_lengths": {"0": 0, "1": 4},
    # without prefix caching nothing is looked up
    "caching_off": {"0": 0, "1": 0},
    # 8 usable blocks; request 0 holds 5 (17 tokens), request 1 (the same 16-token head) needs 5 more of its
    # own without sharing, 1 with it: the 4 blocks it hits are request 0's, counted once, so it is admitted
    # at once (first at step 2), where the same requests without segments wait for request 0 to finish
    # (the driver's answer: first 4, two blocked steps)
    "shared_blocks_count_once": {"0": 0, "1": 16},
}
#: The first-token steps the rule cases show besides their hits.
RULE_FIRST = {"shared_blocks_count_once": {"0": 1, "1": 2}, "same_pass_hit": {"0": 1, "1": 1}}


@pytest.mark.parametrize("name", sorted(RULE_CASES))
def test_each_rule_of_the_design_note_is_the_real_schedulers(name) -> None:
    directory = ROOT / "tests" / "data" / "shared_prefix"
    scenario = json.loads((directory / f"{name}.json").read_text())
    check_scenario(scenario)
    recorded = json.loads((directory / f"{name}.out.json").read_text())
    assert recorded["cached"] == RULE_CASES[name]
    if name in RULE_FIRST:
        assert recorded["first"] == RULE_FIRST[name]
    assert set(recorded["done"]) == {str(i) for i in range(len(scenario["requests"]))}
