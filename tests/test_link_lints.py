"""The two lints of seed 002 §3 "Lints", and constant guards (§3 Branching).

"A set that reads live pool or stage state (cachedin, budget_left, used, …)
and is then used in a hold's header: the header is read at admission and the
set is not ... at admission is the clause for it. And a branch whose guard is
a constant strictly between 0 and 1: that is a draw, and branch with is how
to say so. Both are errors rather than warnings."
"""

from __future__ import annotations

import pytest

from link_programs import attr, binary, call, make_hold, make_pool, make_program, make_step, num, ref, slot
from semantics import ir
from semantics.errors import ProgramError, Span
from semantics.link import link
from semantics.sourcemap import SourceMap

POOLS = [make_pool("kv", 100), make_pool("reqs", 4, admit_via=0)]
STAGES = [make_step("engine", memory=0)]
LOOKUP = ir.Set(slot("hit"), call("CachedIn", ref(0)))


def hold_reading(e: ir.Expr, body: int = 3) -> ir.Hold:
    return make_hold([(ref(1), num(1), None), (ref(0), e, None)], body=body, cache=num(8))


def link_error(program: ir.Program, smap: SourceMap | None = None) -> ProgramError:
    with pytest.raises(ProgramError) as caught:
        link(program, smap)
    return caught.value


def test_a_live_set_read_in_a_later_header_is_an_error_at_the_set():
    program = make_program([LOOKUP, hold_reading(binary("Add", attr("hit"), num(8)))], [[]], pools=POOLS, stages=STAGES)
    message = link_error(program).message
    assert message.startswith("blocks[2][0] (Set): `hit` reads cachedin(kv) when the session reaches this `set`")
    assert "in the header of a hold on `reqs`, `kv` (blocks[2][1] (Hold))" in message
    assert "Write `at admission (hit = …)`" in message


def test_the_hold_is_named_by_its_line_when_there_are_spans():
    program = make_program([LOOKUP, hold_reading(attr("hit"))], [[]], pools=POOLS, stages=STAGES)
    smap = SourceMap(file="t.sq", stmts={(2, 0): Span("t.sq", 4, 3), (2, 1): Span("t.sq", 5, 3)})
    error = link_error(program, smap)
    assert error.span == Span("t.sq", 4, 3)
    assert "a hold on `reqs`, `kv` (line 5)" in error.message


def test_the_admission_value_written_in_the_header_links():
    # at admission (hit = cachedin(kv)) is substituted into the header by the front end
    units = binary("Add", call("Min", call("CachedIn", ref(0)), num(50)), num(8))
    program = make_program([hold_reading(units)], [[]], pools=POOLS, stages=STAGES)
    assert link(program) == []


def test_a_live_set_reassigned_before_the_hold_links():
    program = make_program(
        [LOOKUP, ir.Set(slot("hit"), num(0)), hold_reading(attr("hit"))], [[]], pools=POOLS, stages=STAGES
    )
    assert link(program) == []


def test_a_live_set_read_only_in_the_body_links():
    program = make_program([LOOKUP, hold_reading(num(8))], [[ir.Observe(0, attr("hit"))]], pools=POOLS, stages=STAGES)
    assert link(program) == []


def test_a_live_value_reaching_the_header_through_another_attribute_is_an_error():
    program = make_program(
        [ir.Set(slot("x"), call("BudgetLeft", ref(0), kinds="s")), ir.Set(slot("hit"), attr("x")), hold_reading(attr("hit"))],
        [[]],
        pools=POOLS,
        stages=STAGES,
    )
    message = link_error(program).message
    assert message.startswith("blocks[2][0] (Set): `x` reads budget_left(engine)")
    assert "used (through `hit`)" in message


def test_a_live_set_in_one_arm_of_a_branch_reaches_the_hold_after_it():
    program = make_program(
        [ir.Branch(attr("more"), 3, 4), hold_reading(attr("hit"), body=5)],
        [[LOOKUP], [ir.Set(slot("hit"), num(0))], []],
        pools=POOLS,
        stages=STAGES,
    )
    assert link_error(program).message.startswith("blocks[3][0] (Set): `hit` reads cachedin(kv)")


def test_a_live_set_at_the_end_of_a_loop_reaches_the_header_at_its_top():
    program = make_program(
        [ir.Set(slot("hit"), num(0)), ir.Loop(3)],
        [[hold_reading(attr("hit"), body=4), ir.Set(slot("hit"), call("Used", ref(0)))], []],
        pools=POOLS,
        stages=STAGES,
    )
    assert link_error(program).message.startswith("blocks[3][1] (Set): `hit` reads used(kv)")


def test_end_stops_a_live_set_from_reaching_further():
    program = make_program(
        [ir.Branch(attr("more"), 3, 4), hold_reading(attr("hit"), body=5)],
        [[LOOKUP, ir.End()], [ir.Set(slot("hit"), num(0))], []],
        pools=POOLS,
        stages=STAGES,
    )
    assert link(program) == []


def test_a_live_set_in_the_turn_block_reaches_the_header_after_turn():
    program = make_program([ir.Turn(), hold_reading(attr("hit"))], [[]], turn=[LOOKUP], pools=POOLS, stages=STAGES)
    assert link_error(program).message.startswith("blocks[1][0] (Set): `hit` reads cachedin(kv)")


# -- constant guards (seed 002 §3 Branching)


def test_a_branch_on_a_constant_probability_is_an_error_suggesting_branch_with():
    message = link_error(make_program([ir.Branch(num(0.3), 3, 4)], [[], []])).message
    assert message == (
        "blocks[2][0] (Branch): `branch (0.3)` is not a test: a guard is 0 or 1, and a constant strictly between "
        "them is a probability. Write `branch with (0.3)` for a draw"
    )


def test_a_folded_constant_guard_is_judged_by_its_value():
    message = link_error(make_program([ir.Branch(binary("Div", num(1), num(4)), 3, 4)], [[], []])).message
    assert "Write `branch with (1 / 4)`" in message


@pytest.mark.parametrize("value, shown", [(2.0, "2"), (-1.0, "-1")])
def test_a_constant_guard_outside_zero_one_is_an_error(value, shown):
    message = link_error(make_program([ir.Branch(num(value), 3, 4)], [[], []])).message
    assert f"its guard is always {shown}, and a guard is 0 or 1" in message


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_a_constant_guard_of_zero_or_one_links(value):
    assert link(make_program([ir.Branch(num(value), 3, 4)], [[], []])) == []


def test_a_while_on_a_constant_fraction_is_an_error():
    # IR files of the reference's later versions carry `While` (the oracle's multi-turn replay)
    message = link_error(make_program([ir.While(num(0.5), 3)], [[]])).message
    assert message.startswith("blocks[2][0] (While): `while (0.5)` is not a test")
