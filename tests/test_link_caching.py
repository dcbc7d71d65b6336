"""`cached` and `reuse` need a cache clause.

Seed 002 §3, Pools: "Without it the hold is memory alone ... and cached is 0
in its body (the linker rejects a body that reads it there, and a reuse
there; cache (0) is the hold that consumes the prefix and keeps nothing)."
"""

from __future__ import annotations

import pytest

from link_programs import attr, binary, make_hold, make_pool, make_program, num, ref, slot
from semantics import ir
from semantics.errors import ProgramError
from semantics.link import link

POOLS = [make_pool("kv", 100), make_pool("reqs", 4)]
READ_CACHED = ir.Set(slot("x"), attr("cached"))


def link_error(program: ir.Program) -> str:
    with pytest.raises(ProgramError) as caught:
        link(program)
    return caught.value.message


def test_cached_read_in_the_body_of_a_hold_without_cache_is_an_error():
    program = make_program([make_hold([(ref(0), num(8), None)], body=3)], [[READ_CACHED]], pools=POOLS)
    message = link_error(program)
    assert message.startswith("blocks[3][0] (Set): `cached` is read in the body of a hold on `kv`, which has no `cache` clause")


def test_cached_read_in_the_body_of_a_hold_with_cache_links():
    program = make_program([make_hold([(ref(0), num(8), None)], body=3, cache=num(8))], [[READ_CACHED]], pools=POOLS)
    assert link(program) == []


def test_cached_read_in_a_branch_inside_a_hold_without_cache_is_an_error():
    program = make_program(
        [make_hold([(ref(0), num(8), None)], body=3)],
        [[ir.Branch(attr("more"), 4, 5)], [READ_CACHED], []],
        pools=POOLS,
    )
    assert link_error(program).startswith("blocks[4][0] (Set): `cached`")


def test_a_nested_hold_with_its_own_cache_decides_for_its_body():
    # the body of the outer hold stops at a nested hold that has its own cache clause
    inner = make_hold([(ref(0), num(8), None)], body=4, cache=num(8))
    program = make_program([make_hold([(ref(1), num(1), None)], body=3)], [[inner], [READ_CACHED]], pools=POOLS)
    assert link(program) == []


def test_a_nested_hold_without_cache_inside_one_with_cache_is_an_error():
    inner = make_hold([(ref(1), num(1), None)], body=4)
    program = make_program([make_hold([(ref(0), num(8), None)], body=3, cache=num(8))], [[inner], [READ_CACHED]], pools=POOLS)
    assert "a hold on `reqs`, which has no `cache` clause" in link_error(program)


def test_cached_read_in_a_nested_hold_header_counts_in_the_outer_body():
    inner = make_hold([(ref(0), binary("Add", attr("cached"), num(1)), None)], body=4, cache=num(8))
    program = make_program([make_hold([(ref(1), num(1), None)], body=3)], [[inner], []], pools=POOLS)
    assert link_error(program).startswith("blocks[3][0] (Hold): `cached` is read in the body of a hold on `reqs`")


def test_cached_read_outside_every_hold_links():
    assert link(make_program([READ_CACHED], pools=POOLS)) == []


def test_reuse_on_a_hold_without_cache_is_an_error():
    program = make_program([make_hold([(ref(0), num(8), None)], body=3, reuse=num(4))], [[]], pools=POOLS)
    assert "`reuse` on a hold on `kv` without a `cache` clause" in link_error(program)


def test_reuse_with_cache_zero_links():
    program = make_program([make_hold([(ref(0), num(8), None)], body=3, reuse=num(4), cache=num(0))], [[]], pools=POOLS)
    assert link(program) == []
