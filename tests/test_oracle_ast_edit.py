"""The oracle's scenario programs built from AST values (oracle/ast_edit.py,
issue 22 §3): "The oracle builds its programs from IR or AST values, not by
replacing text in example files." Each edit names the node it changes and
fails loudly when that node is not there; what the edits write in is what
the scenario says (its serve key, vLLM's priority queue and victim). That the
programs' answers are the recorded ones is the oracle replays'
(tests/test_oracle_harness.py, tests/test_oracle_data.py).
"""

from __future__ import annotations

import dataclasses

import pytest

from oracle import ast_edit
from oracle.ast_edit import EditError
from oracle.scenario import REQUEST_PROGRAM, SCENARIO_PROGRAM, compile_scenario, request_program
from semantics import ir
from semantics.errors import ProgramError

SCENARIO = {"budget": 64, "max_seqs": 2, "block_size": 16, "num_blocks": 10,
            "requests": [{"prompt": 3, "out": 4}, {"prompt": 20, "out": 2, "arrive": 1}]}


def items():
    return ast_edit.load_items(SCENARIO_PROGRAM).items


def engine(program: ir.Program) -> ir.Step:
    return next(s.kind for s in program.stages if isinstance(s.kind, ir.Step))


def pool(program: ir.Program, name: str) -> ir.Pool:
    return next(p for p in program.pools if p.name == name)


def test_a_file_is_parsed_once_and_its_use_resolved():
    first, second = ast_edit.load_items(SCENARIO_PROGRAM), ast_edit.load_items(SCENARIO_PROGRAM)
    assert first is second
    assert any(isinstance(i, ast_edit.ast.StageDecl) and i.name == "engine" for i in first.items)  # lib/vllm.sq's
    assert [path.split("/")[-1] for path in first.uses] == ["vllm.sq"]


@pytest.mark.parametrize("edit,message", [
    (lambda xs: ast_edit.replace_pool_option(xs, "reqs", "queue_by", ()), "0 `queue_by` clauses in pool `reqs`"),
    (lambda xs: ast_edit.replace_pool_option(xs, "requests", "queue_fifo", ()), "0 pools `requests`"),
    (lambda xs: ast_edit.replace_step_option(xs, "gate", "serve_admission", ()), "the stage `gate` is delay"),
    (lambda xs: ast_edit.replace_hold_reserve(xs, "vllm_request", "kv", "prompt", None), "does not reserve (prompt)"),
    (lambda xs: ast_edit.append_to_init(xs, ("prompt", "o"), ()), "does not set prompt, o"),
    (lambda xs: ast_edit.replace_session_call(xs, "vllm_request", ("prompt", "o", "1", "t0"), ()),
     "other arguments than (prompt, o, 1, t0)"),
], ids=["clause", "pool", "stage-kind", "reserve", "init", "call"])
def test_an_edit_whose_node_is_not_there_fails_loudly(edit, message: str):
    with pytest.raises(EditError) as raised:
        edit(items())
    assert message in str(raised.value)


def test_an_edit_changes_a_new_program_and_leaves_the_parsed_one_as_it_was():
    before = items()
    after = ast_edit.replace_pool_option(before, "reqs", "queue_fifo", ())
    reqs = [i for i in after if isinstance(i, ast_edit.ast.PoolDecl) and i.name == "reqs"][0]
    assert "queue_fifo" not in [o.kind for o in reqs.options]
    assert ast_edit.load_items(SCENARIO_PROGRAM).items is before
    with pytest.raises(EditError):  # the clause is gone from the edited program
        ast_edit.replace_pool_option(after, "reqs", "queue_fifo", ())


def test_a_serve_key_is_the_engines_serve_order_in_both_programs():
    data = dict(SCENARIO, serve="-admission")
    neg_admission = (ir.Unary("Neg", ir.Ctx("Admission")),)
    assert engine(compile_scenario(data).program).serve == neg_admission
    assert engine(compile_scenario(SCENARIO).program).serve != neg_admission
    assert engine(request_program(data).program).serve == neg_admission
    assert engine(request_program(SCENARIO).program).serve == ()  # vllm_request.sq: no key (admission order)


def test_a_serve_key_that_does_not_parse_is_the_scenarios_error_at_its_serve():
    with pytest.raises(ProgramError) as raised:
        compile_scenario(dict(SCENARIO, serve="free("), "s.json")
    assert raised.value.message.startswith("the scenario's serve key `free(` does not compile: ")


def test_the_priority_policy_is_vllms_heap_and_victim_and_the_refusals_are_observed():
    program = compile_scenario(dict(SCENARIO, policy="priority", requests=[
        dict(r, priority=k) for k, r in enumerate(SCENARIO["requests"])])).program
    slot = program.attrs.index
    reqs, kv = pool(program, "reqs"), pool(program, "kv")
    assert reqs.queue == (ir.Attr(slot("priority")), ir.Attr(slot("arrival"))) and reqs.requeue == "Key"
    assert kv.preempt == (ir.Unary("Neg", ir.Attr(slot("priority"))), ir.Unary("Neg", ir.Attr(slot("arrival"))))
    assert "refused" in program.observes
    plain = compile_scenario(SCENARIO).program
    assert pool(plain, "reqs").queue is None and pool(plain, "reqs").requeue == "Head"
    assert pool(plain, "kv").preempt == ir.LIFO_KEYS and "refused" not in plain.observes


def test_the_one_request_programs_self_preemption_rule():
    assert engine(request_program(SCENARIO, continues=True).program).self_preemption == "Continue"
    assert engine(request_program(SCENARIO).program).self_preemption == "End"
    assert dataclasses.replace(engine(request_program(SCENARIO, continues=True).program), self_preemption="End") \
        == engine(request_program(SCENARIO).program)
    assert ast_edit.load_items(REQUEST_PROGRAM).uses == {}
