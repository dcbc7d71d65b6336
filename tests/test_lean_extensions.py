"""The Lean fragment on vLLM 0.33.0's default rules (issue 18, sections 1, 2
and 4): asynchronous scheduling (`schedule ahead`: step/park, step/apply,
step/preempt-parked, the in-flight decode's uncached token), user priorities
(`preempt by`, `queue by` with `requeue by key`) and the limits'
refusals, lean-checked on the corpora vLLM 0.33.0 answered
(oracle/data/campaign/async-scenarios.jsonl, async-serve.jsonl,
priority.jsonl, limits.jsonl): a slice of each here, with the cases that
exercise each new rule, and the whole files behind `campaign`
(docs/lean.md, docs/campaigns.md). Each rule is shown to matter: without it
the mirror misses vLLM's answer on a named case.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from lean_bridge.check import mirror_answer
from lean_bridge.interpreter import interpreter_answer
from lean_bridge.mirror import engine
from lean_bridge.scenario import Scenario, load_case
from semantics.cli import main
from semantics.errors import ProgramError

ROOT = Path(__file__).resolve().parent.parent
CAMPAIGN = ROOT / "oracle" / "data" / "campaign"
ASYNC, ASYNC_SERVE = CAMPAIGN / "async-scenarios.jsonl", CAMPAIGN / "async-serve.jsonl"
PRIORITY, LIMITS = CAMPAIGN / "priority.jsonl", CAMPAIGN / "limits.jsonl"


def _lines(capsys, *argv: str) -> tuple[int, list[str]]:
    code = main(["lean", "check", *argv])
    return code, capsys.readouterr().out.strip().splitlines()


def _record(path: Path, index: int) -> dict:
    with open(path, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if record["index"] == index:
                return record
    raise KeyError(index)


def _case(path: Path, index: int, older_rule: bool = False) -> Scenario:
    record = _record(path, index)
    answer = record["answer_older_rule"] if older_rule else record["answer"]
    case = {k: v for k, v in record["case"].items() if k != "kind"}
    return load_case(f"campaign/{path.name}#{index}", case, answer, not older_rule)


def _with_pool(program, q: int, **changes):
    pools = list(program.pools)
    pools[q] = dataclasses.replace(pools[q], **changes)
    return dataclasses.replace(program, pools=tuple(pools))


# -- slices of the corpora, three ways (recorded, mirror, interpreter) ------------------------------

#: (file, --every, the cases that exercise a new rule, the cases checked)
SLICES = [
    # #128: a parked request is the victim twice (step/preempt-parked)
    (ASYNC, "500", "128", 11),
    # #852: a preempted decode's last token in flight is not cached (a block less)
    (ASYNC_SERVE, "100", "852", 11),
    # #2, #3: preemptions under preempt by (-priority, -arrival), negative priorities
    (PRIORITY, "200", "2,3", 12),
    # #3 a prompt not below max_model_len, #9 a request that never fits, #79 preemptions under a watermark
    (LIMITS, "100", "3,9,79", 13),
]


@pytest.mark.parametrize("path,every,cases,checked", SLICES, ids=lambda x: x.name if isinstance(x, Path) else None)
def test_a_slice_of_each_new_corpus_agrees(path: Path, every: str, cases: str, checked: int, capsys) -> None:
    code, lines = _lines(capsys, str(path), "--every", every, "--cases", cases)
    assert code == 0, lines
    assert lines == [f"{checked} passed, 0 failed"]


def test_the_asynchronous_serve_by_slice_agrees_under_the_older_rule(capsys) -> None:
    """async-serve.jsonl's answers under the older revision's self-preemption rule (answer_older_rule)."""
    code, lines = _lines(capsys, str(ASYNC_SERVE), "--every", "100", "--older-rule")
    assert code == 0, lines
    assert lines == ["10 passed, 0 failed"]


# -- each rule matters ----------------------------------------------------------------------------------------


def test_schedule_ahead_is_the_engines_data_and_changes_the_answer() -> None:
    """async-scenarios#128: the program says `schedule ahead` (the engine's
    `ahead`); the same program without it (the synchronous engine) misses vLLM
    0.33.0's answer, and with it the mirror and the interpreter give it."""
    sc = _case(ASYNC, 128)
    p = sc.translation.program
    assert p.engine.ahead
    assert mirror_answer(p) == sc.answer == interpreter_answer(sc.program)
    assert mirror_answer(dataclasses.replace(p, engine=dataclasses.replace(p.engine, ahead=False))) != sc.answer


def test_a_parked_session_is_a_victim(monkeypatch) -> None:
    """async-scenarios#128: vLLM preempts running[-1] while its last token is
    in flight (step/preempt-parked, twice in this case); if a parked session
    were no candidate, the preemptions would differ."""
    sc = _case(ASYNC, 128)
    calls = []
    original = engine.preempt_parked
    monkeypatch.setattr(engine, "preempt_parked", lambda *a: calls.append(a[3]) or original(*a))
    assert mirror_answer(sc.translation.program) == sc.answer and len(calls) == 2
    monkeypatch.setattr(engine, "candidate", lambda m, serial: engine.resident_mode(m, serial) is not None)
    assert mirror_answer(sc.translation.program) != sc.answer


def test_a_preempted_decodes_token_in_flight_is_not_cached(monkeypatch) -> None:
    """async-serve#852: the victim's last decode token is in flight (its id
    not applied), so its block is not cached (kv_cache_manager.py:615-625):
    without that, one block too many stays cached and the answer differs."""
    sc = _case(ASYNC_SERVE, 852)
    assert mirror_answer(sc.translation.program) == sc.answer
    monkeypatch.setattr(engine, "in_flight", lambda p, m, it, victim: 0)
    assert mirror_answer(sc.translation.program) != sc.answer


@pytest.mark.parametrize("index", [2, 3])
def test_the_priority_victim_and_queue_decide(index: int) -> None:
    """priority#2, #3: the victim is the running request with the greatest
    (priority, arrival) (`preempt by (-priority, -arrival)`) and the waiting
    queue is vLLM's heap (`queue by (priority, arrival)`); the fragment with
    lifo's victim, or a fifo queue, misses vLLM's answer."""
    sc = _case(PRIORITY, index)
    p = sc.translation.program
    reqs, kv = sc.translation.pools.index("reqs"), sc.translation.pools.index("kv")
    assert p.pools[reqs].queue and p.pools[reqs].requeue_key and p.pools[kv].victim
    assert mirror_answer(p) == sc.answer == interpreter_answer(sc.program)
    assert mirror_answer(_with_pool(p, kv, victim=())) != sc.answer
    assert mirror_answer(_with_pool(p, reqs, queue=())) != sc.answer


def test_negative_priorities_are_shifted_into_the_naturals() -> None:
    """priority#2: vLLM's priorities are any integers; `priority` is read only
    as a whole key, so every value (init's 0 among them) is given plus the
    same number, the least then 0: no comparison changes."""
    sc = _case(PRIORITY, 2)
    t = sc.translation
    slot = t.attrs.index("priority")
    shift = dict(t.shifts)[slot]
    record = _record(PRIORITY, 2)
    given = [r.get("priority", 0) for r in record["case"]["requests"]]
    assert shift == -min(given) > 0
    assert [dict(spec.attrs)[slot] for spec in t.program.sessions] == [x + shift for x in given]


@pytest.mark.parametrize("index,codes", [(0, ((0, 1), (1, 1), (2, 1))), (3, ((0, 2), (5, 2))), (9, ((0, 3),))])
def test_refusals_are_the_recorded_ones(index: int, codes: tuple) -> None:
    """limits.jsonl: a refused request's reason, read back as its code (1 the
    cache cannot hold one request of max_model_len, 2 the prompt, 3 it never
    fits), is what `refusals` gives; the reason's text is the recorded one."""
    sc = _case(LIMITS, index)
    assert sc.answer.refused == codes
    assert mirror_answer(sc.translation.program).refused == codes
    assert interpreter_answer(sc.program).refused == codes


def test_a_wrong_refusal_is_a_disagreement(tmp_path, capsys) -> None:
    record = _record(LIMITS, 3)
    record["answer"]["refused"]["5"] = record["answer"]["refused"]["0"].replace("prompt:", "prompt?")
    path = tmp_path / "limits.jsonl"
    path.write_text(json.dumps(record) + "\n")
    code, lines = _lines(capsys, str(path))
    assert code == 1
    assert lines[0].startswith(f"{tmp_path.name}/limits.jsonl#3: disagree: recorded ") and "refused [(0, 2), (5, 0)]" \
        in lines[0] and "refused [(0, 2), (5, 2)]" in lines[0]


# -- the translation -------------------------------------------------------------------------------------------


def test_a_keyed_queue_that_requeues_at_its_head_is_refused_at_the_pool() -> None:
    """`queue by` without `requeue by key` puts a preempted hold at the head,
    ahead of the keys (seed 002 §3 Ties): the fragment's queue has no mark
    for that, so the translation refuses it, at the pool's line."""
    from lean_bridge.translate import Locator, translate
    from semantics import ir
    from semantics.compiler import compile_source

    text = (ROOT / "examples" / "oracle" / "vllm_request.sq").read_text()
    text = text.replace("pool reqs { cap max_seqs; admit via vllm; }",
                        "pool reqs { cap max_seqs; queue by (prompt); admit via vllm; }")
    program, smap = compile_source(text, "vllm_request_keyed.sq")
    program = dataclasses.replace(program, arrival=ir.Sessions((ir.SessionSpec(((9, 80.0),), None),)))
    with pytest.raises(ProgramError) as e:
        translate(program, Locator.for_source(smap))
    assert "queues by keys with a preempted hold at its head" in e.value.message
    assert e.value.span is not None and text.splitlines()[e.value.span.line - 1].startswith("pool reqs {")
    # with requeue by key it is inside
    keyed = text.replace("queue by (prompt);", "queue by (prompt); requeue by key;")
    program, smap = compile_source(keyed, "vllm_request_keyed.sq")
    program = dataclasses.replace(program, arrival=ir.Sessions((ir.SessionSpec(((9, 80.0),), None),)))
    t = translate(program, Locator.for_source(smap))
    assert t.program.pools[0].requeue_key and len(t.program.pools[0].queue) == 1


#: The committed theorems of the new corpora: (directory, file, --every, --cases, files written)
THEOREMS = [("Async", ASYNC, "1000", "128", 7), ("AsyncServe", ASYNC_SERVE, "500", "852", 4),
            ("Priority", PRIORITY, "1000", "2", 4), ("Limits", LIMITS, "500", "3,9", 5)]


@pytest.mark.parametrize("directory,path,every,cases,count", THEOREMS, ids=[t[0] for t in THEOREMS])
def test_the_committed_theorems_are_what_the_emitter_writes(directory, path, every, cases, count, tmp_path,
                                                            capsys) -> None:
    """lean_bridge/lean/SerqRefOracle/{Async,AsyncServe,Priority,Limits}: the
    emitter's output (lean_bridge/lean/SerqRefOracle.lean says how); the
    extensions are in their programs (`ahead := true`, the pools' keys and
    `requeueKey`, the refusals' theorem)."""
    out = tmp_path / directory
    assert main(["lean", str(path), "--out", str(out), "--module", f"SerqRefOracle.{directory}", "--every", every,
                 "--cases", cases]) == 0
    capsys.readouterr()
    committed = ROOT / "lean_bridge" / "lean" / "SerqRefOracle" / directory
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(p.name for p in committed.iterdir()) and len(names) == count
    for name in names:
        assert (out / name).read_text() == (committed / name).read_text(), name
    texts = [(out / name).read_text() for name in names if name != "All.lean"]
    if directory.startswith("Async"):
        assert all("ahead := true" in t for t in texts)
    if directory == "Priority":
        assert all("requeueKey := true" in t and "victim := [{ order := .desc" in t for t in texts)
    if directory == "Limits":
        assert all("theorem refused : refusals program" in t for t in texts)
        assert "theorem refused : refusals program" in (out / "Case9.lean").read_text() and \
            "= [(0, 3)] := by" in (out / "Case9.lean").read_text()


@pytest.mark.campaign
@pytest.mark.parametrize("path,passed,older", [(ASYNC, 5000, False), (ASYNC_SERVE, 1000, False),
                                               (ASYNC_SERVE, 1000, True), (PRIORITY, 2000, False),
                                               (LIMITS, 1000, False)],
                         ids=["async-scenarios", "async-serve", "async-serve-older-rule", "priority", "limits"])
def test_lean_check_on_the_whole_new_corpora(path: Path, passed: int, older: bool, capsys) -> None:
    """docs/campaigns.md, "The Lean fragment on vLLM 0.33.0's default rules":
    every case agrees three ways (recorded, mirror, interpreter)."""
    code, lines = _lines(capsys, str(path), *(("--older-rule",) if older else ()))
    assert code == 0, lines[:5]
    assert lines == [f"{passed} passed, 0 failed"]
