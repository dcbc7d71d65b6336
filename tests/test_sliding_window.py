"""Sliding-window and hybrid KV cache groups (issue 20 section 1, docs/design/sliding-window.md):
the scenario field ``kv_groups`` checked and located, six small scenarios answered by vLLM 0.33.0
whose answers are the note's rules worked by hand, the corpus
oracle/data/campaign/sliding-window.jsonl the generator's and recorded whole, pyserq reported as
not supporting it, and serq-ref answering such a scenario with its window, with prefix caching the
hit in every group (a shared prompt's, a preempted request's own), where answering as if every token
stayed held would be wrong on the corpus. tests/test_sliding_window_model.py holds
the model to the corpus."""

from __future__ import annotations

import collections
import functools
import hashlib
import json
import pathlib

import pytest

from oracle import campaign_sliding
from oracle.scenario import beyond_the_seed, check_scenario, run_scenario
from semantics.cli import main

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "oracle" / "data" / "campaign" / campaign_sliding.CORPUS
MANIFEST = ROOT / "oracle" / "data" / "manifest.json"
CASES = ROOT / "tests" / "data" / "sliding_window"
#: The recorded corpus's least size (issue 20: at least 2,000 cases).
CORPUS_CASES = 2000


@functools.lru_cache(maxsize=1)
def _records() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


SCENARIO = {"budget": 32, "max_seqs": 4, "block_size": 8, "num_blocks": 14,
            "kv_groups": [{"kind": "full"}, {"kind": "sliding", "window": 8}],
            "requests": [{"prompt": 40, "out": 4}]}


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


BAD_GROUPS = [
    ("sliding", "`kv_groups` is a list of KV cache groups ([full] or [sliding] or [full, sliding]), e.g. "
                '[{"kind": "full"}, {"kind": "sliding", "window": 64}]'),
    ([], "`kv_groups` is a list of KV cache groups ([full] or [sliding] or [full, sliding]), e.g. "
         '[{"kind": "full"}, {"kind": "sliding", "window": 64}]'),
    ([{"kind": "mamba"}], '`kv_groups[0]` is {"kind": "full"} or {"kind": "sliding", "window": W}'),
    ([{"kind": "sliding"}], "`kv_groups[0]` is a sliding-window group without its `window` (tokens)"),
    ([{"kind": "sliding", "window": 0}], "`kv_groups[0].window` is 0: a sliding window holds at least one token"),
    ([{"kind": "sliding", "window": 2.5}], "`kv_groups[0].window` is 2.5, not a natural number"),
    ([{"kind": "full", "window": 8}], "`window` is not a field of a full KV cache group (fields: kind)"),
    ([{"kind": "sliding", "window": 8}, {"kind": "full"}],
     "`kv_groups` lists sliding, full: the driver builds [full] or [sliding] or [full, sliding]"),
    ([{"kind": "full"}, {"kind": "full"}],
     "`kv_groups` lists full, full: the driver builds [full] or [sliding] or [full, sliding]"),
]


@pytest.mark.parametrize("groups,message", BAD_GROUPS)
def test_a_bad_group_list_is_a_located_error(groups, message, capsys, tmp_path) -> None:
    data = {**SCENARIO, "kv_groups": groups}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data, indent=1))
    code, out, err = cli(capsys, "oracle", "run", str(path))
    assert code == 1 and out == ""
    first = err.splitlines()[0]
    assert first.startswith(f"{path}:") and first.endswith(f"error: {message}"), first
    lines = path.read_text().splitlines()
    start = next(i for i, text in enumerate(lines) if '"kv_groups"' in text)
    end = next(i for i, text in enumerate(lines) if '"requests"' in text)
    assert start < int(first.split(":")[1]) <= end, first  # at kv_groups or a node inside it
    assert "Traceback" not in err and err.splitlines()[2].strip() == "^"


#: SCENARIO's request with a system prompt its first 16 tokens, so that prefix caching shares blocks across requests
SHARED = {**SCENARIO, "requests": [{"prompt": 40, "out": 4, "prompt_segments": [["sys", 16]]}]}


@pytest.mark.parametrize("groups", ([{"kind": "sliding", "window": 8}],
                                    [{"kind": "full"}, {"kind": "sliding", "window": 8}]))
def test_a_sliding_window_scenario_with_prefix_caching_across_requests_is_answered(groups, capsys, tmp_path) -> None:
    """The hit in every group and the window group's sparse registration are modelled
    (docs/design/sliding-window.md, section 1 (c); semantics/smallstep/window_sharing.py): a scenario with
    prefix caching and shared content is answered, with its requests' hits (``cached``)."""
    path = tmp_path / "sliding.json"
    data = {**SHARED, "kv_groups": groups, "prefix_caching": True}
    path.write_text(json.dumps(data, indent=1))
    code, out, err = cli(capsys, "oracle", "run", str(path))
    assert code == 0 and err == "" and out.startswith("request 0: first ") and "cached 0" in out, out + err
    # the one-request program (the differential harness's) has the seed's pool: it refuses any window
    from oracle.scenario import request_program
    from semantics.errors import ProgramError
    with pytest.raises(ProgramError, match="sliding-window"):
        request_program({**SCENARIO, "kv_groups": groups}, str(path), json.dumps({**SCENARIO, "kv_groups": groups}))


@pytest.mark.parametrize("caching", (False, True))
@pytest.mark.parametrize("groups", ([{"kind": "sliding", "window": 8}],
                                    [{"kind": "full"}, {"kind": "sliding", "window": 8}]))
def test_a_sliding_window_scenario_without_shared_content_is_answered_with_its_window(groups, caching, capsys,
                                                                                       tmp_path) -> None:
    path = tmp_path / "sliding.json"
    path.write_text(json.dumps({**SCENARIO, "kv_groups": groups, "prefix_caching": caching}, indent=1))
    code, out, err = cli(capsys, "oracle", "run", str(path))
    assert code == 0 and err == "" and out.startswith("request 0: first "), out + err


def test_a_preempted_request_hits_its_own_prefix_in_every_group(capsys, tmp_path) -> None:
    """With prefix caching and no shared content the only hit is a preempted request's own prefix on its
    resumption, which must hold in every group: the harness's pool shares prefixes, the hit is pool/hit-groups'
    and the answer is vLLM's (corpus case 82, hybrid, synchronous, one preemption). Without `share prefixes`
    a grouped pool's session cache knows no window group's sparse registration: the run stops at such a hold,
    saying so, rather than answer without the hit."""
    import dataclasses

    from oracle.scenario import scenario_program
    from semantics.errors import RunError
    from semantics.smallstep import driver

    record = _records()[82]
    case = {k: v for k, v in record["case"].items() if k != "kind"}
    assert case["prefix_caching"] and record["answer"]["preemptions"] == 1
    answer = run_scenario(case, "case82")
    assert {k: answer[k] for k in ("first", "done", "preemptions", "steps")} == \
        {k: record["answer"][k] for k in ("first", "done", "preemptions", "steps")}
    program = scenario_program(case)
    assert any(p.share_prefixes and p.groups for p in program.pools)
    unshared = dataclasses.replace(program, pools=tuple(dataclasses.replace(p, share_prefixes=False)
                                                        for p in program.pools))
    with pytest.raises(RunError, match="is modelled only in a pool that shares prefixes"):
        driver.run(unshared)


def test_one_full_group_is_what_a_scenario_without_groups_means(tmp_path) -> None:
    plain = {k: v for k, v in SCENARIO.items() if k != "kv_groups"}
    assert run_scenario({**plain, "kv_groups": [{"kind": "full"}]}) == run_scenario(plain)


def test_pyserq_reports_sliding_windows_unsupported() -> None:
    assert "sliding-window" in beyond_the_seed(SCENARIO)
    assert beyond_the_seed({**SCENARIO, "kv_groups": [{"kind": "full"}]}) is None


# ---------------------------------------------------------------------------
# Nine scenarios answered by vLLM 0.33.0, each a rule of the design note worked by hand

#: name -> what the note's rules give, checked against the recorded answer
HAND = {
    # the window of 8 tokens (one block of 8) frees each request's blocks behind it, so the three run
    # at once in 13 usable blocks (no preemption; first tokens at steps 2, 3, 4); the same requests on
    # full attention (full_attention_same_requests) preempt twice and the third waits to step 44
    "window_frees_blocks": {"first": {"0": 2, "1": 3, "2": 4}, "preemptions": 0},
    "full_attention_same_requests": {"first": {"0": 2, "1": 3, "2": 44}, "preemptions": 2},
    # the admission cap: ceil((W - 1 + budget) / bs) + 1 = ceil(11 / 4) + 1 = 4 blocks, so a prompt of
    # 100 tokens (25 blocks) is admitted in 6 usable blocks; its prefill is 13 chunks of 8 (first at
    # step 13), then two decodes
    "admission_cap": {"first": {"0": 13}, "done": {"0": 15}, "preemptions": 0},
    # hybrid: the full group counts every block, 26 + min(26, 4) = 30 > 6: refused up front
    # (the recorded convention: vLLM would never admit it)
    "hybrid_counts_both": {"first": {}, "refused": {"0": "never fits: 102 tokens need 30 blocks of 4 in its 2 "
                                                        "KV cache groups, the KV cache has 6 usable"}},
    # a hit must hold in every group: request 0 (41 tokens) caches every full-attention block but,
    # under retention 0, only the ceil((8 - 1) / 4) = 2 sliding-window blocks ending at its last
    # boundary at or before 40 (blocks 8, 9); request 1 (the same prompt) hits 40 in both groups;
    # request 2 (the first 24 tokens shared) hits 24 in the full group and nothing in the sliding
    # one (no run of 2 cached blocks within 6, block 0 uncached), so 0; its lookup found the junction
    # at 24 and cached the sliding blocks 4, 5, so request 3 (the same 24 shared) hits 24.
    # On full attention alone (full_hit_same_requests) requests 2 and 3 both hit 24.
    "hybrid_hit_in_every_group": {"cached": {"0": 0, "1": 40, "2": 0, "3": 24}},
    "full_hit_same_requests": {"cached": {"0": 0, "1": 40, "2": 24, "3": 24}},
    # max_model_len 64 below the window less one plus the budget (7 + 64): vLLM's cap is clamped to
    # ceil(64 / 4) + 1 = 17 blocks. At startup (a scenario giving max_model_len) vLLM asks one request of
    # max_model_len in every layer, 16 pages for the full group and the cap, 17, for the sliding one, of the
    # pool less one block of two pages: 33 <= 35 - 2 runs (and the clamp never binds at admission: a
    # sequence counted is at most 64 tokens, 16 blocks); 33 > 34 - 2 is refused
    "cap_clamped_by_max_model_len": {"first": {"0": 1, "1": 2, "2": 28, "3": 29}, "preemptions": 1},
    "startup_counts_both_groups": {"first": {}, "refused": {
        str(k): "configuration: the KV cache of 33 usable blocks of 4 tokens cannot hold one request of "
                "max_model_len 64 (16 blocks)" for k in range(4)}},
    # a sliding group alone asks its cap, 17 pages, more than full attention's 16: 16 usable blocks refuse
    "startup_counts_the_window_cap": {"first": {}, "refused": {
        str(k): "configuration: the KV cache of 16 usable blocks of 4 tokens cannot hold one request of "
                "max_model_len 64 (16 blocks)" for k in range(2)}},
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_each_rule_of_the_design_note_is_the_real_schedulers(name) -> None:
    scenario = json.loads((CASES / f"{name}.json").read_text())
    check_scenario(scenario)
    recorded = json.loads((CASES / f"{name}.out.json").read_text())
    for key, value in HAND[name].items():
        assert recorded.get(key, {}) == value, (name, key)
    assert recorded["status"] == "finished"
    if "kv_groups" in scenario:
        caps = [g for g in recorded["kv_groups"] if g["kind"] == "sliding"]
        window = scenario["kv_groups"][-1]["window"]
        assert caps == [{"kind": "sliding", "window": window,
                         "cap": campaign_sliding.admission_cap(window, scenario["block_size"],
                                                               scenario["budget"], False,
                                                               scenario.get("max_model_len",
                                                                            campaign_sliding.MAX_MODEL_LEN))}]


@pytest.mark.vllm
def test_the_hand_worked_scenarios_are_answered_so_by_vllm_0_33() -> None:
    from oracle import real

    names = sorted(HAND)
    jobs = [json.loads((CASES / f"{name}.json").read_text()) for name in names]
    for name, answer in zip(names, real.iter_answers(jobs)):
        recorded = json.loads((CASES / f"{name}.out.json").read_text())
        assert {k: v for k, v in answer.items() if not k.endswith("seconds")} == recorded, name


# ---------------------------------------------------------------------------
# The corpus


def test_a_case_is_drawn_again_alone_and_the_same_and_is_valid() -> None:
    for index in (0, 1, 17, 999):
        case, region = campaign_sliding.draw(7, index)
        assert campaign_sliding.draw(7, index) == (case, region)
        check_scenario(case)
        assert set(region) == set(campaign_sliding.KNOBS)
        usable = case["num_blocks"] - 1
        assert all(campaign_sliding.need_of(case, q) <= usable for q in case["requests"])
        assert [g["kind"] for g in case["kv_groups"]] == (["sliding"] if region["groups"] == "sliding"
                                                          else ["full", "sliding"])


def test_the_corpus_is_the_generators_recorded_whole_and_every_case_finished() -> None:
    records = _records()
    assert len(records) >= CORPUS_CASES
    assert [r["index"] for r in records] == list(range(len(records)))
    regions = collections.defaultdict(collections.Counter)
    for record in records:
        case, region = campaign_sliding.draw(record["seed"], record["index"])
        assert record["case"] == case, record["index"]
        answer = record["answer"]
        assert answer["status"] == "finished" and answer["unfinished"] == [] and "refused" not in answer
        assert answer["mode"] == ("async" if case.get("async") else "sync")
        assert set(answer["done"]) == {str(i) for i in range(len(case["requests"]))}
        # the cap the driver's vLLM gave is the generator's formula (its pools are drawn with it)
        window = case["kv_groups"][-1]["window"]
        assert answer["kv_groups"][-1] == {"kind": "sliding", "window": window, "cap": campaign_sliding.admission_cap(
            window, case["block_size"], case["budget"], bool(case.get("async")))}
        for knob, value in region.items():
            regions[knob][value] += 1
    for knob, values in campaign_sliding.KNOBS.items():
        assert set(regions[knob]) == set(values), knob
    manifest = json.loads(MANIFEST.read_text())["files"]["campaign/" + campaign_sliding.CORPUS]
    assert manifest["sha256"] == hashlib.sha256(CORPUS.read_bytes()).hexdigest()
    assert manifest["cases"] == len(records) and manifest["generator"] == "oracle/campaign_sliding.py"


def test_the_corpus_exercises_what_the_window_changes() -> None:
    """Preemptions, hits and blocked admissions occur in both shapes and both engines."""
    seen = collections.Counter()
    for record in _records():
        case, answer = record["case"], record["answer"]
        shape = "hybrid" if len(case["kv_groups"]) == 2 else "sliding"
        seen[shape, answer["mode"], "preempted"] += answer["preemptions"] > 0
        seen[shape, answer["mode"], "blocked"] += answer["features"]["blocked_steps"] > 0
        seen[shape, "hit"] += any(v > 0 for v in answer.get("cached", {}).values())
    for shape in ("sliding", "hybrid"):
        assert seen[shape, "hit"] >= 50, seen
        for mode in ("sync", "async"):
            assert seen[shape, mode, "preempted"] >= 20 and seen[shape, mode, "blocked"] >= 20, seen


def test_answering_without_the_window_is_wrong_on_a_part_of_the_corpus() -> None:
    """serq-ref's model of a full-attention pool (which agrees with vLLM on every recorded corpus)
    given the first cases without sharing and without their groups: some answers differ from vLLM's
    with the window, which is why the model has the window."""
    tried = differ = 0
    for record in _records()[:60]:
        case = {k: v for k, v in record["case"].items() if k not in ("kv_groups", "kind")}
        if any("prompt_segments" in q for q in case["requests"]):
            continue
        ours, theirs = run_scenario(case), record["answer"]
        tried += 1
        differ += (ours["first"], ours["done"], ours["preemptions"]) != \
            (theirs["first"], theirs["done"], theirs["preemptions"])
    assert tried >= 20 and differ >= 5, (tried, differ)


#: vLLM 0.33.0's answer to examples/oracle/sliding_window.json (the driver, 2026-12-04; test_the_example_is_vllms
#: below asks the real scheduler again when it is installed)
EXAMPLE_ANSWER = {"first": {"0": 4, "1": 207, "2": 360, "3": 362, "4": 464, "5": 482},
                  "done": {"0": 203, "1": 356, "2": 479, "3": 461, "4": 543, "5": 541}, "preemptions": 0, "steps": 545}


def test_the_example_is_a_hybrid_scenario_serq_ref_answers_as_vllm(capsys) -> None:
    """examples/oracle/sliding_window.json (docs/oracle.md): a valid scenario; its sliding group's cap is
    the one docs/oracle.md states (41 blocks); prefix caching on, no content shared across requests and no
    preemption: serq-ref answers it, and its answer is vLLM's."""
    path = ROOT / "examples" / "oracle" / "sliding_window.json"
    data = json.loads(path.read_text())
    check_scenario(data)
    assert campaign_sliding.admission_cap(128, data["block_size"], data["budget"], data["async"]) == 41
    answer = run_scenario(data, str(path))
    assert {k: answer[k] for k in EXAMPLE_ANSWER} == EXAMPLE_ANSWER


@pytest.mark.vllm
def test_the_example_is_vllms() -> None:
    from oracle import real

    data = json.loads((ROOT / "examples" / "oracle" / "sliding_window.json").read_text())
    (answer,) = list(real.iter_answers([data]))
    assert {k: answer[k] for k in EXAMPLE_ANSWER} == EXAMPLE_ANSWER


def test_every_recorded_hit_lands_where_the_design_note_says() -> None:
    """docs/design/sliding-window.md section 1 (c): under retention 0 a sliding group caches only the
    ceil((W - 1) / bs) blocks ending at a request's last boundary below its prompt's last token (and,
    in a hybrid model, at the junction the full group found), so every hit of the corpus (its requests
    share one system prompt of S tokens) is such a boundary of some request of the case, the junction
    floor(S / bs) * bs (hybrid), or a run from block 0 shorter than ceil((W - 1) / bs) blocks; and a
    window of one token caches nothing: no hit at all."""
    seen = collections.Counter()
    for record in _records():
        case, answer = record["case"], record["answer"]
        if "cached" not in answer:
            continue
        bs, window = case["block_size"], case["kv_groups"][-1]["window"]
        need = -(-(window - 1) // bs)
        requests = case["requests"]
        ends = {(q["prompt"] - 1) // bs * bs for q in requests}
        junction = requests[0]["prompt_segments"][0][1] // bs * bs if len(case["kv_groups"]) == 2 else None
        for request, hit in answer["cached"].items():
            if not case["prefix_caching"]:
                assert hit == 0, (record["index"], request)
                continue
            if need == 0:
                assert hit == 0, (record["index"], request)
                seen["one-token window"] += 1
            elif hit in ends:
                seen["a last boundary"] += hit > 0
            elif hit == junction:
                seen["the junction"] += 1
            else:
                assert hit < need * bs, (record["index"], request, hit)
                seen["a short run from block 0"] += hit > 0
    assert all(seen[k] >= 10 for k in ("one-token window", "a last boundary", "the junction",
                                       "a short run from block 0")), seen
