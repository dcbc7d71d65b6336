"""The per-step schedule log (docs/conformance.md, "The schedule log"):
`serq-ref oracle run SCENARIO --log FILE` writes serq-ref's, any engine may
write one, and `serq-ref oracle diverge A.log B.log` finds the first step at
which two differ, with serq-ref's named rules there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oracle.campaign import serq_steps
from oracle.scenario import run_scenario
from oracle.schedule_log import read_log, serq_log
from semantics.cli import main
from semantics.smallstep.driver import all_rules

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "oracle" / "data" / "shared"
NAMES = [("vllm", n) for n in ("alone", "chunked", "hol", "longchunk", "mixed", "preempt", "seqcap")] + \
        [("serve", n) for n in ("admission", "newest_first", "newest_first_preempt", "prefill_first")]


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def scenario(group: str, name: str) -> dict:
    return json.loads((SCENARIOS / group / f"{name}.json").read_text())


def write(path: Path, log: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in log))
    return path


def log_of(tmp_path: Path, data: dict, name: str, capsys, *options: str) -> Path:
    source = tmp_path / f"{name}.json"
    source.write_text(json.dumps(data))
    out = tmp_path / f"{name}.log"
    code, _, err = cli(capsys, "oracle", "run", str(source), "--log", str(out), *options)
    assert (code, err) == (0, "")
    return out


# --- serq-ref's log -------------------------------------------------------------------


@pytest.mark.parametrize("group, name", NAMES)
def test_the_log_is_the_step_trace_read_independently(group, name):
    # oracle.campaign.serq_steps reads the same trace into the campaign's
    # [step, {request: tokens}, [preempted]]: the log says the same, and its
    # finished requests are the answer's done steps
    data = scenario(group, name)
    answer, log = serq_log(data)
    assert log[0] == {"format": "serq-schedule-log", "version": 1, "engine": log[0]["engine"],
                      "scenario": "<scenario>"}
    steps = log[1:]
    expected = [s for s in serq_steps("scenario", data) if s[1] or s[2]]
    got = [[s["step"], {e["request"]: e["tokens"] for e in s["scheduled"]}, sorted(s["preempted"])]
           for s in steps if s["scheduled"] or s["preempted"]]
    assert got == [[t, dict(sorted(tokens.items())), p] for t, tokens, p in expected]
    finished = {request: s["step"] for s in steps for request in s["finished"]}
    assert finished == answer["done"]
    assert answer == run_scenario(data)
    # every rule named is a rule of the semantics
    names = {r.name for r in all_rules()}
    assert {rule for s in steps for rules in s["rules"].values() for rule in rules} <= names


def test_the_log_of_a_preemption(tmp_path, capsys):
    path = log_of(tmp_path, scenario("vllm", "preempt"), "preempt", capsys)
    log = read_log(str(path))
    assert log["header"]["engine"].startswith("serq-ref ")
    step1, step2 = log["steps"][1], log["steps"][2]
    assert step1["scheduled"] == [{"request": "0", "tokens": 80, "mode": "prefill"},
                                  {"request": "1", "tokens": 20, "mode": "prefill"}]
    assert step1["admitted"] == ["0", "1"]
    # request 1's grow fails, it is the victim, nothing of it is scheduled
    assert step2["scheduled"] == [{"request": "0", "tokens": 1, "mode": "decode"}]
    assert step2["preempted"] == ["1"]
    assert "pool/preempt" in step2["rules"]["1"] and "step/grow" in step2["rules"]["1"]
    # every request computes its prompt and all but its last output token, request 1's first 20 twice
    tokens = {}
    for step in log["steps"].values():
        for entry in step["scheduled"]:
            tokens[entry["request"]] = tokens.get(entry["request"], 0) + entry["tokens"]
    assert tokens == {"0": 80 + 29, "1": 20 + 80 + 29}
    assert log["steps"][30]["finished"] == ["0"] and log["steps"][60]["finished"] == ["1"]


def test_run_log_to_standard_output(capsys):
    code, out, _ = cli(capsys, "oracle", "run", str(SCENARIOS / "vllm" / "alone.json"), "--log", "-")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[0]["format"] == "serq-schedule-log" and lines[0]["scenario"] == "alone.json"
    assert [line["step"] for line in lines[1:]] == sorted(line["step"] for line in lines[1:])


# --- diverge ------------------------------------------------------------------------


def test_diverge_finds_the_first_step_of_a_seeded_disagreement(tmp_path, capsys):
    # the same scenario on one more block: request 1 is no longer preempted at step 2
    data = scenario("vllm", "preempt")
    a = log_of(tmp_path, data, "eleven", capsys)
    b = log_of(tmp_path, dict(data, num_blocks=12), "twelve", capsys)
    code, out, _ = cli(capsys, "oracle", "diverge", str(a), str(b))
    assert code == 1
    lines = out.splitlines()
    assert lines[:3] == ["first difference at step 2",
                         "  request 1: scheduled nothing against 60 (prefill)",
                         "  preempted [1] against []"]
    assert lines[3].endswith("eleven.log): scheduled 0: 1 decode; preempted [1]")
    assert lines[4].endswith("twelve.log): scheduled 0: 1 decode, 1: 60 prefill")
    assert lines[5] == "  the rules of A at step 2:"
    assert lines[6] == ("    request 1: step/schedule, pool/preempt, stage/leave, pool/release, session/hold-enter, "
                        "step/grow")


@pytest.mark.parametrize("at", [1, 17, 45, 60])
def test_diverge_finds_a_hand_edited_step(tmp_path, capsys, at):
    # another engine's log: no rules, no modes, every step written (the
    # empty ones too); equal to serq-ref's but at step `at`
    _, log = serq_log(scenario("vllm", "mixed"))
    steps = {s["step"]: s for s in log[1:]}
    other = [{"format": "serq-schedule-log", "version": 1, "engine": "seeded"}]
    for number in range(1, max(steps) + 1):
        step = steps.get(number, {"step": number, "scheduled": [], "admitted": [], "preempted": [], "finished": []})
        record = {"step": number, "scheduled": [{"request": e["request"], "tokens": e["tokens"]}
                                                for e in reversed(step["scheduled"])],
                  "admitted": list(reversed(step["admitted"])), "preempted": step["preempted"],
                  "finished": step["finished"]}
        if number == at:
            assert record["scheduled"], "the seeded step schedules something"
            record["scheduled"][0] = dict(record["scheduled"][0], tokens=record["scheduled"][0]["tokens"] + 1)
        other.append(record)
    a = write(tmp_path / "serq.log", log)
    b = write(tmp_path / "other.log", other)
    code, out, _ = cli(capsys, "oracle", "diverge", str(a), str(b))
    assert code == 1
    assert out.splitlines()[0] == f"first difference at step {at}"
    assert "the rules of A at step" in out and "the rules of B" not in out
    # the same log unseeded: no difference (order and empty steps do not count)
    other[at]["scheduled"][0]["tokens"] -= 1
    write(tmp_path / "other.log", other)
    code, out, _ = cli(capsys, "oracle", "diverge", str(a), str(b))
    assert code == 0
    assert out.startswith("no difference: the two logs agree at every step")


def test_diverge_compares_modes_only_where_both_give_them_and_victims_in_order(tmp_path, capsys):
    header = {"format": "serq-schedule-log", "version": 1, "engine": "x"}
    a = [header, {"step": 3, "scheduled": [{"request": "0", "tokens": 1, "mode": "decode"}],
                  "preempted": ["2", "1"]}]
    b = [header, {"step": 3, "scheduled": [{"request": "0", "tokens": 1}], "preempted": ["1", "2"]}]
    a_log, b_log = write(tmp_path / "a.log", a), write(tmp_path / "b.log", b)
    code, out, _ = cli(capsys, "oracle", "diverge", str(a_log), str(b_log))
    assert code == 1
    assert out.splitlines()[:2] == ["first difference at step 3", "  preempted [2, 1] against [1, 2]"]


@pytest.mark.parametrize("text, message", [
    ("", "1:1: error: an empty file: a log starts with its header line"),
    ('{"step": 1}\n', "1:1: error: the first line is the header"),
    ('{"format": "serq-schedule-log", "version": 2}\n',
     "1:1: error: schedule log version 2: this serq-ref reads version 1"),
    ('{"format": "serq-schedule-log", "version": 1}\n{"step": 0}\n', "2:1: error: `step` is 0: a whole number from 1"),
    ('{"format": "serq-schedule-log", "version": 1}\n{"step": 2}\n{"step": 2}\n', "3:1: error: step 2 after step 2"),
    ('{"format": "serq-schedule-log", "version": 1}\n{"step": 1, "scheduled": [{"request": 0, "tokens": 1, '
     '"mode": "both"}]}\n', "2:1: error: request 0: `mode` is \"both\""),
    ('{"format": "serq-schedule-log", "version": 1}\n{"step": 1,\n', "2:12: error: not JSON"),
])
def test_a_malformed_log_is_an_error_at_its_line(tmp_path, capsys, text, message):
    bad = tmp_path / "bad.log"
    bad.write_text(text)
    good = write(tmp_path / "good.log", [{"format": "serq-schedule-log", "version": 1, "engine": "x"}])
    code, out, err = cli(capsys, "oracle", "diverge", str(good), str(bad))
    assert code == 1 and out == ""
    assert err.startswith(f"{bad}:{message}")
    assert "Traceback" not in err


def test_diverge_usage(tmp_path, capsys):
    code, _, err = cli(capsys, "oracle", "diverge", str(tmp_path / "missing.log"), str(tmp_path / "missing.log"))
    assert code == 2 and "no such file" in err
    code, _, err = cli(capsys, "oracle", "run", str(SCENARIOS / "vllm" / "alone.json"), "--log")
    assert code == 2


# --- the real vLLM scheduler's log ---------------------------------------------------

#: `serq-ref oracle run oracle/data/shared/serve/newest_first_preempt.json --real --log FILE`
#: (vLLM 0.33.0 through oracle/real/driver.py): its schedule log, kept so the
#: default suite can diverge against it without vLLM
VLLM_LOG = ROOT / "tests" / "data" / "schedule_logs" / "newest_first_preempt.vllm-0.33.0.log"


def test_diverge_finds_d1_against_the_real_scheduler(tmp_path, capsys):
    # docs/vllm-0.33.md, D1: at step 10 the newest request preempts itself;
    # under the older rule (seed 001, lib/vllm.sq's older_rule) the pass ends
    # there, 0.33.0's priority path goes on and decodes request 2 in the same step
    ours = log_of(tmp_path, scenario("serve", "newest_first_preempt"), "newest_first_preempt", capsys,
                  "--older-rule")
    code, out, _ = cli(capsys, "oracle", "diverge", str(VLLM_LOG), str(ours))
    assert code == 1
    lines = out.splitlines()
    assert lines[:2] == ["first difference at step 10", "  request 2: scheduled 1 against nothing"]
    assert lines[2].endswith("newest_first_preempt.vllm-0.33.0.log): scheduled 2: 1; preempted [0]")
    assert lines[3].endswith("newest_first_preempt.log): scheduled nothing; preempted [0]")
    assert lines[4:] == ["  the rules of B at step 10:",
                         "    request 2: no rule applied to it",
                         "    request 0: step/schedule, pool/preempt, stage/leave, pool/release, session/hold-enter, "
                         "step/grow"]


def test_under_0_33_0s_rule_the_logs_agree(tmp_path, capsys):
    # lib/vllm.sq's default rule is 0.33.0's (D1 fixed): the same scenario's log agrees with the real scheduler's
    ours = log_of(tmp_path, scenario("serve", "newest_first_preempt"), "newest_first_preempt", capsys)
    code, out, _ = cli(capsys, "oracle", "diverge", str(VLLM_LOG), str(ours))
    assert (code, out.split(":")[0]) == (0, "no difference")


def test_a_log_compares_only_the_fields_both_record(tmp_path, capsys):
    # the driver's log records scheduled and preempted only (its header says
    # so): up to step 9 it and serq-ref's agree, admissions and finishes aside
    vllm = [json.loads(line) for line in VLLM_LOG.read_text().splitlines()]
    assert vllm[0]["fields"] == ["scheduled", "preempted"] and vllm[0]["unordered"] == ["preempted"]
    _, ours = serq_log(scenario("serve", "newest_first_preempt"))
    assert any(s["admitted"] or s["finished"] for s in ours[1:] if s["step"] < 10)
    a = write(tmp_path / "vllm.log", [r for r in vllm if r.get("step", 0) < 10])
    b = write(tmp_path / "serq.log", [r for r in ours if r.get("step", 0) < 10])
    code, out, _ = cli(capsys, "oracle", "diverge", str(a), str(b))
    assert (code, out.split(":")[0]) == (0, "no difference")


@pytest.mark.vllm  # deselected without SERQ_VLLM_PYTHON (tests/conftest.py)
def test_the_real_scheduler_writes_the_kept_log(tmp_path, capsys):
    out = tmp_path / "vllm.log"
    code, printed, err = cli(capsys, "oracle", "run", str(SCENARIOS / "serve" / "newest_first_preempt.json"),
                             "--real", "--log", str(out))
    assert (code, err) == (0, "")
    assert out.read_text() == VLLM_LOG.read_text()
    assert printed.splitlines()[-1] == "preemptions 2 steps 49"
