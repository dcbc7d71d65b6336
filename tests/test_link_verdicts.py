"""Attribute ranges and the Z3 verdicts on indices, guards, amounts and caps (brief B, check 8).

An error when the property holds for every admissible value, a warning with
a witness when it holds for some, nothing when for none.
"""

from __future__ import annotations

import math

import pytest

from link_programs import (
    attr,
    binary,
    call,
    make_fifo,
    make_hold,
    make_pool,
    make_program,
    make_run,
    make_step,
    num,
    ref,
    sample,
    slot,
)
from semantics import ir
from semantics.errors import ProgramError
from semantics.link import link
from semantics.link.ranges import Interval, compute_attribute_ranges

SVC = [make_fifo("svc")]


def link_error(program: ir.Program) -> str:
    with pytest.raises(ProgramError) as caught:
        link(program)
    return caught.value.message


def only_warning(program: ir.Program) -> str:
    warnings = link(program)
    assert len(warnings) == 1, warnings
    return warnings[0].message


def range_of(program: ir.Program, name: str) -> Interval:
    return compute_attribute_ranges(program)[slot(name)]


# -- ranges


def test_a_range_is_the_union_of_the_assignments():
    program = make_program([ir.Set(slot("x"), num(2)), ir.Branch(attr("more"), 3, 4)], [[ir.Set(slot("x"), num(7))], []])
    assert range_of(program, "x") == Interval(2.0, 7.0, True)


def test_a_draw_ranges_over_its_support():
    def drawn(dist, *args):
        return range_of(make_program([ir.Set(slot("x"), sample(dist, *map(num, args)))]), "x")

    assert drawn("Exp", 3) == Interval(0.0, math.inf, False)
    assert drawn("Det", 4) == Interval(4.0, 4.0, True)
    assert drawn("Uniform", 1, 5) == Interval(1.0, 5.0, False)
    assert drawn("Bernoulli", 0.3) == Interval(0.0, 1.0, True)
    assert drawn("Erlang", 2, 1) == Interval(0.0, math.inf, False)


def test_arithmetic_over_other_ranges():
    program = make_program(
        [ir.Set(slot("prompt"), sample("Uniform", num(10), num(20))), ir.Set(slot("x"), binary("Sub", attr("prompt"), num(1)))]
    )
    assert range_of(program, "x") == Interval(9.0, 19.0, False)


def test_a_counter_widens_to_infinity():
    program = make_program([ir.Set(slot("x"), num(0)), ir.Loop(3)], [[ir.Set(slot("x"), binary("Add", attr("x"), num(1)))]])
    assert range_of(program, "x") == Interval(0.0, math.inf, True)


def test_explicit_sessions_and_choose_give_ranges():
    sessions = ir.Sessions((ir.SessionSpec(((slot("prompt"), 80.0),), None), ir.SessionSpec(((slot("prompt"), 30.0),), None)))
    program = make_program([ir.Choose(slot("j"), 4, ())], arrival=sessions)
    assert range_of(program, "prompt") == Interval(30.0, 80.0, True)
    assert range_of(program, "j") == Interval(0.0, 3.0, True)


def test_builtins_have_their_ranges():
    program = make_program(pools=[make_pool("kv", 64)])
    assert range_of(program, "more") == Interval(0.0, 1.0, True)
    assert range_of(program, "turn_no") == Interval(0.0, math.inf, True)
    assert range_of(program, "computed") == Interval(0.0, 0.0, True)  # no position can move (ranges.can_compute)
    program = make_program([make_hold([(ref(0), num(1), None)], body=3)], [[ir.Load(ref(0), num(1))]],
                           pools=[make_pool("kv", 64)])
    assert range_of(program, "computed") == Interval(0.0, 64.0, False)  # a load moves it, a preemption sets it


# -- (a) family indices

FAMILY = [make_fifo("gpu", index=0), make_fifo("gpu", index=1)]


def test_an_index_always_outside_the_family_is_an_error():
    program = make_program(
        [ir.Choose(slot("j"), 2, ()), make_run(ref(0, 2, binary("Add", attr("j"), num(2))), num(1))], stages=FAMILY
    )
    message = link_error(program)
    assert message.startswith("blocks[2][1] (Run): the index of `gpu[j + 2]` is never a member index 0..1")


def test_an_index_sometimes_outside_the_family_is_a_warning_with_a_witness():
    program = make_program([ir.Choose(slot("j"), 3, ()), make_run(ref(0, 2, attr("j")), num(1))], stages=FAMILY)
    assert only_warning(program) == (
        "blocks[2][1] (Run): the index of `gpu[j]` can be 2 when `j` = 2, which is not a member index 0..1"
    )


def test_an_index_that_can_be_fractional_is_a_warning():
    program = make_program([ir.Set(slot("j"), sample("Uniform", num(0), num(1))), make_run(ref(0, 2, attr("j")), num(1))], stages=FAMILY)
    assert "which is not a member index 0..1" in only_warning(program)


def test_a_chosen_index_within_the_family_links():
    program = make_program([ir.Choose(slot("j"), 2, ()), make_run(ref(0, 2, attr("j")), num(1))], stages=FAMILY)
    assert link(program) == []


def test_an_index_inside_an_observable_is_checked():
    pools = [make_pool("kv", 10, index=0), make_pool("kv", 10, index=1)]
    program = make_program([ir.Set(slot("j"), num(5)), ir.Observe(0, call("Used", ref(0, 2, attr("j"))))], pools=pools)
    assert "the index of `kv[j]` is never a member index 0..1" in link_error(program)


# -- (b) guards


def test_a_guard_that_can_be_a_fraction_is_a_warning():
    program = make_program([ir.Set(slot("x"), sample("Uniform", num(0), num(1))), ir.Branch(attr("x"), 3, 4)], [[], []])
    message = only_warning(program)
    assert message.startswith("blocks[2][1] (Branch): the guard of this branch can be ")
    assert "which is neither 0 nor 1" in message


def test_a_guard_that_is_never_zero_or_one_is_an_error():
    program = make_program([ir.Set(slot("x"), sample("Uniform", num(2), num(3))), ir.Branch(attr("x"), 3, 4)], [[], []])
    assert "the guard of this branch is never 0 or 1" in link_error(program)


def test_a_comparison_or_a_bernoulli_draw_is_a_guard():
    program = make_program(
        [ir.Set(slot("x"), sample("Bernoulli", num(0.5))), ir.Branch(attr("x"), 3, 4), ir.Branch(binary("Gt", attr("prompt"), num(3)), 5, 6)],
        [[], [], [], []],
    )
    assert link(program) == []


# -- (c) negative amounts


def test_work_negative_for_every_value_is_an_error():
    program = make_program([ir.Set(slot("x"), sample("Exp", num(1))), make_run(0, binary("Sub", num(-1), attr("x")))], stages=SVC)
    assert "the work of `run svc` is negative for every admissible value" in link_error(program)


def test_work_negative_for_some_value_is_no_warning():
    """A run of zero work or less completes at once (seed 002 §3 Stages): what some values do is defined,
    so only "every value" is a finding (issue 13: warnings that are true and worth acting on)."""
    program = make_program(
        [ir.Set(slot("o"), sample("Uniform", num(0), num(10))), make_run(0, binary("Sub", attr("o"), num(1)))], stages=SVC
    )
    assert link(program) == []


def test_work_of_a_positive_draw_links():
    program = make_program([make_run(0, sample("Exp", num(2)))], stages=SVC)
    assert link(program) == []


def test_a_negative_grow_amount_is_an_error():
    program = make_program(
        [make_hold([(ref(0), num(1), None)], body=3)], [[ir.Grow(ref(0), num(-2))]], pools=[make_pool("kv", 100)]
    )
    assert "the amount of `grow kv` is negative for every admissible value (e.g. -2)" in link_error(program)


# -- (d) units and reserve against the cap


def test_units_above_the_cap_for_every_value_are_an_error():
    program = make_program(
        [ir.Set(slot("prompt"), sample("Uniform", num(200), num(300))), make_hold([(ref(0), attr("prompt"), None)], body=3)],
        [[]],
        pools=[make_pool("kv", 100)],
    )
    message = link_error(program)
    assert message.startswith("blocks[2][1] (Hold): the units of the hold on `kv` can never fit in the pool, whose cap is 100 (e.g. 200 when `prompt` = 200)")


def test_a_reserve_above_the_cap_for_some_value_is_no_warning():
    """Such a session is rejected (seed 002 §3 Pools), and the run counts and names it (`rej`); only a hold
    no value fits is a finding (issue 13)."""
    program = make_program(
        [ir.Set(slot("prompt"), sample("Uniform", num(50), num(300))), make_hold([(ref(0), num(1), attr("prompt"))], body=3)],
        [[]],
        pools=[make_pool("kv", 100)],
    )
    assert link(program) == []


def test_units_within_the_cap_link():
    program = make_program(
        [ir.Set(slot("prompt"), sample("Uniform", num(1), num(100))), make_hold([(ref(0), attr("prompt"), None)], body=3)],
        [[]],
        pools=[make_pool("kv", 100)],
    )
    assert link(program) == []


def test_min_with_an_observable_bounded_by_the_cap_links():
    # units min(prompt, hit + budget_left(engine)) with prompt <= cap: an observable is a fresh value >= 0
    units = call("Min", attr("prompt"), binary("Add", attr("hit"), call("BudgetLeft", ref(0), kinds="s")))
    program = make_program(
        [ir.Set(slot("prompt"), num(80)), ir.Set(slot("hit"), num(0)), make_hold([(ref(0), units, None)], body=3)],
        [[]],
        pools=[make_pool("kv", 160)],
        stages=[make_step("engine", memory=0)],
    )
    assert link(program) == []


def test_warnings_come_out_the_same_every_time():
    program = make_program(
        [ir.Set(slot("o"), sample("Uniform", num(0), num(10))), make_run(0, binary("Sub", attr("o"), num(1))), make_run(0, num(-0.0))],
        stages=SVC,
    )
    assert link(program) == link(program)


def test_a_while_guard_is_checked_like_a_branch_guard():
    program = make_program([ir.Set(slot("x"), sample("Uniform", num(0), num(1))), ir.While(attr("x"), 3)], [[]])
    assert only_warning(program).startswith("blocks[2][1] (While): the guard of this while can be ")
    assert link(make_program([ir.While(attr("more"), 3)], [[ir.Turn()]])) == []


def test_a_witness_is_written_as_a_number_the_source_could_write():
    """A model's whole numbers print exactly up to 10^15; beyond, to 12
    digits (a hold of ~h2(1e308, 2) gave a 309-digit witness)."""
    import z3

    from semantics.link.solver import format_model_value

    assert format_model_value(z3.IntVal(42)) == "42"
    assert format_model_value(z3.RealVal(-7)) == "-7"
    assert format_model_value(z3.RealVal("1/4")) == "0.25"
    assert format_model_value(z3.IntVal(10**308 + 1)) == "1e+308"
    assert format_model_value(z3.RealVal(3 * 10**20)) == "3e+20"
