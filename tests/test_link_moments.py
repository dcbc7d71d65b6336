"""The moment table: context variables, hidden attributes and draws where they are read.

Seed 002 §2: "Each context variable exists at the one place named in its
parenthesis (now everywhere), and reading it anywhere else is a link error
rather than a 0: set x = tokens; in a session, or evict by (tokens), does not
link." FORMAT.md "Moments" is the table.
"""

from __future__ import annotations

import pytest

from link_programs import (
    attr,
    binary,
    call,
    ctx,
    make_hold,
    make_pool,
    make_program,
    make_ps,
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
from semantics.link.moments import describe_where_supplied


def link_error(program: ir.Program) -> str:
    with pytest.raises(ProgramError) as caught:
        link(program)
    return caught.value.message


def program_with_pool(**fields) -> ir.Program:
    return make_program(pools=[make_pool("kv", 100, **fields)], stages=[make_step("engine", memory=0)])


def program_with_step(**fields) -> ir.Program:
    return make_program(pools=[make_pool("kv", 100)], stages=[make_step("engine", memory=0, **fields)])


# -- context variables


def test_tokens_in_a_session_set_is_an_error_naming_where_it_exists():
    program = make_program([ir.Set(slot("x"), ctx("tokens"))])
    assert link_error(program) == (
        "blocks[2][0] (Set): `tokens` is read in a session statement; it exists only in a step stage's cost"
    )


def test_now_in_a_session_set_links():
    assert link(make_program([ir.Set(slot("x"), ctx("now"))])) == []


def test_tokens_in_an_eviction_key_is_an_error():
    message = link_error(program_with_pool(evict=(ctx("tokens"),)))
    assert message == "pools[0] (kv): `tokens` is read in pool `kv`'s eviction keys; it exists only in a step stage's cost"


@pytest.mark.parametrize("name", ["size", "age", "last", "waiting", "now"])
def test_eviction_keys_read_size_age_last_waiting_now(name):
    assert link(program_with_pool(evict=(ctx(name),))) == []


def test_waited_in_an_eviction_key_is_an_error():
    assert "it exists only in a pool's queue keys" in link_error(program_with_pool(evict=(ctx("waited"),)))


def test_queue_keys_read_waited():
    assert link(program_with_pool(queue=(ctx("waited"),))) == []


def test_size_in_a_queue_key_is_an_error():
    message = link_error(program_with_pool(queue=(ctx("size"),)))
    assert "`size` is read in pool `kv`'s queue keys; it exists only in a pool's eviction keys or spill clause" in message


def test_spill_reads_size():
    spill = ir.Spill(to=0, via=1, work=ctx("size"), when=binary("Gt", ctx("age"), num(5)))
    program = make_program(pools=[make_pool("kv", 100, spill=spill)], stages=[make_step("engine"), make_ps("disk")])
    assert link(program) == []


def test_preemption_keys_read_admission_but_not_remaining():
    assert link(program_with_pool(preempt=(ir.Unary("Neg", ctx("admission")),))) == []
    message = link_error(program_with_pool(preempt=(ctx("remaining"),)))
    assert "`remaining` is read in pool `kv`'s preemption keys; it exists only in a step stage's serve keys" in message


def test_present_in_a_ps_capacity_links_and_in_a_budget_does_not():
    assert link(make_program(stages=[make_ps("g", ctx("present"))])) == []
    message = link_error(program_with_step(budget=ctx("present")))
    assert "`present` is read in stage `engine`'s budget; it exists only in a ps stage's capacity" in message


def test_the_step_totals_exist_in_budget_chunk_cost_and_serve_keys():
    for name in ("residents", "decoders", "kv_decode", "kv_prefill"):
        assert link(program_with_step(budget=ctx(name), chunk=ctx(name), cost=ctx(name), serve=(ctx(name),))) == []
    assert describe_where_supplied("Ndec") == "a step stage's budget, chunk, cost, serve keys or acceptance"


def test_attention_in_a_chunk_is_an_error_and_in_the_cost_links():
    assert link(program_with_step(cost=binary("Add", num(1), ctx("attention")))) == []
    assert "`attention` is read in stage `engine`'s chunk" in link_error(program_with_step(chunk=ctx("attention")))


def test_decoding_in_a_hold_header_is_an_error():
    program = make_program([make_hold([(ref(0), ctx("decoding"), None)], body=3)], [[]], pools=[make_pool("kv", 100)])
    message = link_error(program)
    assert message.startswith("blocks[2][0] (Hold): `decoding` is read in the units of a hold on `kv` at admission;")
    assert message.endswith("it exists only in a pool's preemption keys or a step stage's serve keys or acceptance")


# -- hidden (seed 002 §3, hidden)

HIDDEN_O = (slot("o"),)


def test_a_hidden_attribute_in_a_hold_units_is_an_error():
    program = make_program(
        [make_hold([(ref(0), binary("Add", attr("prompt"), attr("o")), None)], body=3)],
        [[]],
        pools=[make_pool("kv", 100)],
        hidden=HIDDEN_O,
    )
    message = link_error(program)
    assert "`o` is hidden, and the scheduler reads it here, in the units of a hold on `kv` at admission" in message


def test_a_hidden_attribute_in_a_reserve_is_an_error():
    program = make_program(
        [make_hold([(ref(0), attr("prompt"), binary("Add", attr("prompt"), attr("o")))], body=3)],
        [[]],
        pools=[make_pool("kv", 100)],
        hidden=HIDDEN_O,
    )
    assert "`o` is hidden, and the scheduler reads it here, in the reserve of a hold on `kv`" in link_error(program)


def test_a_hidden_attribute_in_a_decode_run_and_in_the_cache_links():
    # "a hidden attribute may be read in a session statement (decode (o - 1)), a run or a hold's cache"
    body = [make_run(0, binary("Sub", attr("o"), num(1)), "Decode", growing=ref(0))]
    program = make_program(
        [ir.Set(slot("o"), num(3)), make_hold([(ref(0), num(4), None)], body=3, cache=binary("Add", num(4), attr("o")))],
        [body],
        pools=[make_pool("kv", 100)],
        stages=[make_step("engine", memory=0)],
        hidden=HIDDEN_O,
    )
    assert link(program) == []


@pytest.mark.parametrize(
    "fields",
    [
        dict(queue=(attr("o"),)),
        dict(evict=(attr("o"),)),
        dict(preempt=(attr("o"),)),
    ],
)
def test_a_hidden_attribute_in_a_pool_key_is_an_error(fields):
    program = make_program(pools=[make_pool("kv", 100, **fields)], hidden=HIDDEN_O)
    assert "`o` is hidden" in link_error(program)


def test_a_hidden_attribute_in_a_spill_clause_is_an_error():
    spill = ir.Spill(to=0, via=0, work=num(1), when=attr("o"))
    program = make_program(pools=[make_pool("kv", 100, spill=spill)], stages=[make_ps("disk")], hidden=HIDDEN_O)
    assert "`o` is hidden, and the scheduler reads it here, in pool `kv`'s spill clause" in link_error(program)


@pytest.mark.parametrize("part", ["budget", "cost", "chunk"])
def test_a_hidden_attribute_in_a_step_stage_is_an_error(part):
    program = make_program(stages=[make_step("engine", **{part: attr("o")})], hidden=HIDDEN_O)
    assert f"`o` is hidden, and the scheduler reads it here, in stage `engine`'s {part}" in link_error(program)


def test_a_hidden_attribute_in_a_serve_key_and_a_ps_capacity_are_errors():
    assert "serve keys" in link_error(make_program(stages=[make_step("e", serve=(attr("o"),))], hidden=HIDDEN_O))
    assert "capacity" in link_error(make_program(stages=[make_ps("g", attr("o"))], hidden=HIDDEN_O))


@pytest.mark.parametrize("name", ["cached", "computed"])
def test_hiding_an_attribute_the_scheduler_sets_is_an_error(name):
    # "An attribute the scheduler itself sets (cached, computed) cannot be hidden"
    assert link_error(make_program(hidden=(slot(name),))) == f"hidden: `{name}` cannot be hidden: the scheduler itself sets it"


# -- draws in keys (seed 002 §3: "A key may not draw")


@pytest.mark.parametrize("field", ["queue", "preempt"])
def test_a_pool_key_that_draws_is_an_error(field):
    message = link_error(program_with_pool(**{field: (sample("Exp", num(1)),)}))
    assert "draw (~exp(1)): a key may not draw" in message


def test_a_serve_key_that_draws_is_an_error():
    assert "stage `engine`'s serve keys draw (~uniform(0, 1))" in link_error(
        program_with_step(serve=(sample("Uniform", num(0), num(1)),))
    )


def test_a_hold_header_that_draws_links():
    program = make_program(
        [make_hold([(ref(0), sample("Uniform", num(1), num(2)), None)], body=3)], [[]], pools=[make_pool("kv", 100)]
    )
    assert link(program) == []


# -- gauges (seed 002 §3, Gauges)

KV = [make_pool("kv", 100)]


def gauge_error(expr: ir.Expr) -> str:
    return link_error(make_program(pools=KV, stages=[make_step("engine")], gauges=[ir.Gauge("g", expr)]))


def test_a_gauge_of_used_links():
    assert link(make_program(pools=KV, gauges=[ir.Gauge("u", call("Used", ref(0)))])) == []


def test_a_gauge_reading_now_an_attribute_or_a_draw_is_an_error():
    assert "`now` is read in gauge `g`; a gauge reads no context variable" in gauge_error(ctx("now"))
    assert "gauge `g` reads the attribute `prompt`; a gauge has no session" in gauge_error(attr("prompt"))
    assert "gauge `g` draws (~exp(1))" in gauge_error(sample("Exp", num(1)))


def test_a_gauge_reading_cachedin_work_or_budget_left_is_an_error():
    assert "reads cachedin(kv)" in gauge_error(call("CachedIn", ref(0)))
    assert "reads work(engine)" in gauge_error(call("Work", ref(0), kinds="s"))
    assert "reads budget_left(engine)" in gauge_error(call("BudgetLeft", ref(0), kinds="s"))


def test_a_gauge_naming_a_pool_by_an_expression_is_an_error():
    pools = [make_pool("kv", 100, index=0), make_pool("kv", 100, index=1)]
    expr = call("Used", ref(0, 2, binary("Add", num(0), num(1))))
    message = link_error(make_program(pools=pools, gauges=[ir.Gauge("g", expr)]))
    assert "a gauge names a pool or stage by a number" in message
    assert link(make_program(pools=pools, gauges=[ir.Gauge("g", call("Used", ref(0, 2, num(1))))])) == []
