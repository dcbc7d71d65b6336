"""The linker on the IR's shape (indices, blocks, admit via) and on runs (modes, growing, several stages)."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from link_programs import (
    attr,
    ctx,
    make_fifo,
    make_hold,
    make_pool,
    make_program,
    make_ps,
    make_run,
    make_step,
    num,
    ref,
)
from semantics import ir
from semantics.errors import ProgramError, Span
from semantics.link import link
from semantics.sourcemap import SourceMap


def link_error(program: ir.Program, smap: SourceMap | None = None) -> str:
    with pytest.raises(ProgramError) as caught:
        link(program, smap)
    return caught.value.message


# -- indices in range: a malformed IR file is a ProgramError, never an IndexError


def test_a_hold_on_a_pool_past_the_last_is_an_error_naming_the_ir_path():
    program = make_program([make_hold([(ref(3), num(1), None)], body=3)], [[]], pools=[make_pool("kv")])
    message = link_error(program)
    assert message.startswith("blocks[2][0] (Hold): malformed IR:")
    assert "pool #3" in message and "1 pool" in message


def test_a_run_on_a_stage_family_past_the_end_is_an_error():
    program = make_program([make_run(ref(0, 2, num(0)), num(1))], stages=[make_fifo("svc")])
    assert "stages #0..#1" in link_error(program)


def test_an_observation_past_the_last_is_an_error():
    program = make_program([ir.Observe(4, num(1))])
    assert "observation #4" in link_error(program)


def test_an_attribute_past_the_last_is_an_error():
    program = make_program([ir.Set(40, num(1))])
    assert "attribute #40" in link_error(program)


def test_an_expression_reading_an_attribute_past_the_last_is_an_error():
    program = make_program([ir.Observe(0, ir.Attr(99))])
    assert "reads attribute #99" in link_error(program)


def test_a_nested_block_past_the_last_is_an_error():
    program = make_program([ir.Loop(17)])
    assert "nests block 17" in link_error(program)


def test_a_block_inside_itself_is_an_error():
    # block 3 loops over block 3: the blocks reachable from the session must form a tree (FORMAT.md, Program)
    program = make_program([ir.Loop(3)], [[ir.Loop(3)]])
    assert "block 3 contains itself" in link_error(program)


def test_a_session_root_past_the_last_block_is_an_error():
    program = dataclasses.replace(make_program(), session=9)
    assert "block 9" in link_error(program)


def test_a_call_with_an_expression_where_a_pool_belongs_is_an_error():
    program = make_program([ir.Observe(0, ir.Call("Used", (ir.ExprArg(num(1)),)))])
    assert "used(…) takes (a pool)" in link_error(program)


def test_admit_via_a_fifo_stage_is_an_error():
    # seed 002 §3: "A pool marked admit via S ... its queue is served by step stage S"
    program = make_program(pools=[make_pool("reqs", admit_via=0)], stages=[make_fifo("svc")])
    message = link_error(program)
    assert message.startswith("pools[0] (reqs): `admit via svc` names a fifo stage")


def test_admit_via_a_step_stage_links():
    program = make_program(pools=[make_pool("kv", 100), make_pool("reqs", admit_via=0)], stages=[make_step("engine", memory=0)])
    assert link(program) == []


def test_admit_via_a_stage_past_the_last_is_an_error():
    program = make_program(pools=[make_pool("reqs", admit_via=2)])
    assert "admit via names stage #2" in link_error(program)


def test_a_step_memory_past_the_last_pool_is_an_error():
    program = make_program(stages=[make_step("engine", memory=5)])
    assert link_error(program).startswith("stages[0] (engine): malformed IR: its memory names pool #5")


def test_a_span_from_the_source_map_replaces_the_ir_path():
    program = make_program(pools=[make_pool("reqs", admit_via=0)], stages=[make_fifo("svc")])
    span = Span("t.sq", 3, 5, 9)
    with pytest.raises(ProgramError) as caught:
        link(program, SourceMap(file="t.sq", pools={0: span}))
    assert caught.value.span == span
    assert caught.value.message.startswith("`admit via svc`")


# -- run modes (seed 002 §2: "the mode is required on a step stage and forbidden elsewhere")


def test_a_plain_run_on_a_step_stage_is_an_error():
    program = make_program([make_run(0, num(5))], stages=[make_step("engine")])
    assert "`run engine` on a step stage needs a mode" in link_error(program)


def test_a_prefill_run_on_a_step_stage_links():
    program = make_program([make_run(0, num(5), "Prefill")], stages=[make_step("engine")])
    assert link(program) == []


def test_a_decode_run_on_a_fifo_stage_is_an_error():
    program = make_program([make_run(0, num(5), "Decode")], stages=[make_fifo("svc")])
    assert "`run svc decode` names a mode, but `svc` is a fifo stage" in link_error(program)


def test_growing_on_a_ps_stage_is_an_error():
    program = make_program(
        [make_hold([(ref(0), num(1), None)], body=3)],
        [[make_run(0, num(5), growing=ref(0))]],
        pools=[make_pool("kv", 10)],
        stages=[make_ps("link")],
    )
    assert "`growing` needs a step stage, and `link` is a ps stage" in link_error(program)


def test_growing_on_a_step_stage_links():
    program = make_program(
        [make_hold([(ref(0), num(1), None)], body=3)],
        [[make_run(0, num(5), "Decode", growing=ref(0))]],
        pools=[make_pool("kv", 10)],
        stages=[make_step("engine", memory=0)],
    )
    assert link(program) == []


# -- runs over several stages (seed 002 §3, Stages)

TWO_LINKS = [make_ps("egress", 10.0), make_ps("ingress", 5.0)]


def test_a_run_over_two_stages_without_share_is_an_error():
    program = make_program([make_run(0, num(1), also=[ref(1)])], stages=TWO_LINKS)
    assert "a run over several stages needs `share maxmin;` or `share bottleneck;`" in link_error(program)


def test_a_run_over_two_constant_ps_stages_with_share_links():
    program = make_program([make_run(0, num(1), also=[ref(1)])], stages=TWO_LINKS, share="MaxMin")
    assert link(program) == []


def test_a_run_over_a_delay_stage_is_an_error():
    # a delay stage is ps(present): "a flow is not described by the present a capacity could read"
    stages = [make_ps("egress", 10.0), make_ps("wait", ctx("present"))]
    program = make_program([make_run(0, num(1), also=[ref(1)])], stages=stages, share="MaxMin")
    assert "`wait` does not have a constant capacity" in link_error(program)


def test_a_run_over_a_ps_stage_of_capacity_zero_is_an_error():
    stages = [make_ps("egress", 10.0), make_ps("dead", 0.0)]
    program = make_program([make_run(0, num(1), also=[ref(1)])], stages=stages, share="Bottleneck")
    assert "`dead` has a capacity that is not above 0" in link_error(program)


def test_a_run_over_a_fifo_and_a_ps_stage_is_an_error():
    stages = [make_fifo("svc"), make_ps("egress", 10.0)]
    program = make_program([make_run(0, num(1), also=[ref(1)])], stages=stages, share="MaxMin")
    assert "holds ps stages only, and `svc` is a fifo stage" in link_error(program)


def test_a_run_naming_one_stage_array_twice_is_an_error():
    # "a run names each stage array once (an index is known only when the run starts)"
    stages = [make_ps("nic", 10.0, index=0), make_ps("nic", 10.0, index=1)]
    program = make_program(
        [ir.Choose(attr("j").slot, 2, ()), make_run(ref(0, 2, attr("j")), num(1), also=[ref(0, 2, num(0))])],
        stages=stages,
        share="MaxMin",
    )
    assert "names each stage array once, and `nic` is named twice" in link_error(program)


def test_a_run_naming_two_members_of_one_array_is_an_error():
    stages = [make_ps("nic", 10.0, index=0), make_ps("nic", 10.0, index=1)]
    program = make_program([make_run(ref(0), num(1), also=[ref(1)])], stages=stages, share="MaxMin")
    assert "names each stage array once, and `nic` is named twice" in link_error(program)


@pytest.mark.parametrize("cap, shown", [(float("nan"), "nan"), (-3.0, "-3")])
def test_a_cap_that_is_nan_or_negative_is_an_error(cap, shown):
    # seed 002 §2: "Every constant ... is a number or inf; one that evaluates to NaN ... does not link"
    program = make_program(pools=[make_pool("kv", cap)])
    assert link_error(program) == f"pools[0] (kv): its cap is {shown}; a cap is a number of units, at least 0, or inf"


def test_a_block_of_zero_units_is_an_error():
    assert "its block is 0" in link_error(make_program(pools=[make_pool("kv", 10, block=0.0)]))


def test_an_aggregate_written_out_thousands_deep_links():
    # `sum j in 4096 (used(kv))` is 4096 nested additions once the front end writes it out
    total = num(0)
    for _ in range(4096):
        total = ir.Binary("Add", total, ir.Call("Used", (ir.PoolArg(ref(0)),)))
    program = make_program([ir.Observe(0, total), make_run(0, total)], pools=[make_pool("kv", 10)], stages=[make_fifo("svc")])
    assert link(program) == []


def test_a_turn_block_holding_more_than_set_and_observe_is_an_error():
    # seed 002 §2: "init block | turn block -- only set / observe"
    program = make_program(turn=[ir.Set(attr("x").slot, num(1)), ir.Turn()])
    assert link_error(program) == "blocks[1][1] (Turn): the workload's turn block holds only `set` and `observe`, not Turn"


def test_link_leaves_the_recursion_limit_as_it_found_it():
    before = sys.getrecursionlimit()
    link(make_program([ir.Set(attr("x").slot, num(1))]))
    with pytest.raises(ProgramError):
        link(make_program([ir.Loop(17)]))
    assert sys.getrecursionlimit() == before
