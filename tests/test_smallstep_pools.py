"""Pool rules of the small-step semantics, on deterministic IR programs with
exact expected times (seed 000, seed 002 §3 Pools, Waiting selection, Ties)."""

from __future__ import annotations

import math

import pytest

from irbuild import Builder, binary, build_lifo_grower_program, explicit, now
from semantics import ir
from semantics.errors import RunError
from semantics.smallstep.driver import configurations, run, trace
from semantics.smallstep.invariants import check_invariants


def samples(result, name):
    rec = next(o for o in result.observes if o.name == name)
    return [(serial, value) for _, serial, _, value in rec.samples]


def walk_checked(program):
    """Every configuration of the run, each checked against the invariants."""
    out = []
    for rule, c in configurations(program):
        check_invariants(c)
        out.append((rule, c))
    return out


def test_block_rounding_of_allocation_and_cache():
    # 000 block: "Allocations round up, and cache entries are kept and evicted, in blocks of this many units"
    b = Builder()
    kv = b.pool("kv", cap=64, block=16)
    d = b.delay("d")
    b.session(b.hold([(kv, 20)], b.run(d, 1), b.observe("used", ir.Call("Used", (ir.PoolArg(ir.Ref(kv, 1, None)),))),
                     cache=40))
    steps = walk_checked(b.build(horizon=5))
    result = run(b.build(horizon=5))
    assert samples(result, "used") == [(0, 32.0)]
    final = steps[-1][1]
    assert final.pools[kv].cached == 32.0  # min(40, 32) rounded down to blocks
    assert final.pools[kv].allocated == 0.0


def test_cache_rounds_down_to_blocks():
    # 002 §3 Pools: "min(ℓ, computed) units stay cached, rounded down to blocks"
    b = Builder()
    kv = b.pool("kv", cap=64, block=16)
    d = b.delay("d")
    b.session(b.hold([(kv, 40)], b.run(d, 1), cache=40))
    final = walk_checked(b.build(horizon=5))[-1][1]
    assert final.pools[kv].cached == 32.0


def _two_phase(b, kv, d, first_units, second_units):
    """Session 0 caches first_units then ends; session 1 then needs second_units."""
    who = b.attr("who")
    return b.branch(binary("Eq", who, 0),
                    [b.hold([(kv, first_units)], b.run(d, 1), cache=first_units)],
                    [b.run(d, 2), b.hold([(kv, second_units)], b.run(d, 1))])


def test_eviction_is_per_block_from_the_tail():
    # 000 block: "An entry is evicted from its tail, block by block."
    b = Builder(attrs=("who",))
    kv = b.pool("kv", cap=64, block=16)
    d = b.delay("d")
    b.session(_two_phase(b, kv, d, 48, 32))
    program = b.build(arrival=explicit({9: 0.0}, {9: 1.0}), horizon=10)
    records = [r for r in trace(program) if r["rule"].startswith("pool/evict")]
    assert [(r["rule"], r["units"], r["left"], r["time"]) for r in records] == [("pool/evict-block", 16.0, 32.0, 2.0)]
    final = walk_checked(program)[-1][1]
    assert final.pools[kv].cached == 32.0  # session 0's entry lost one block; session 1 cached nothing


def test_cached_prefixes_never_block_an_admission():
    # 000 cap: "Cached prefixes never block an admission: they are evicted to make room."
    b = Builder(attrs=("who",))
    kv = b.pool("kv", cap=64)
    d = b.delay("d")
    b.session(_two_phase(b, kv, d, 64, 64), b.observe("at", now()))
    result = run(b.build(arrival=explicit({9: 0.0}, {9: 1.0}), horizon=10))
    assert samples(result, "at") == [(0, 1.0), (1, 3.0)]
    assert result.pools[0].evicted_entries == 1 and result.pools[0].evicted_units == 64.0


def _three_releases(evict):
    """Sessions 0, 1, 2 release 16-unit entries at times 1, 2, 3; session 3 then needs 16 of a full pool."""
    b = Builder(attrs=("who",))
    kv = b.pool("kv", cap=48, block=16, evict=evict)
    d = b.delay("d")
    who = b.attr("who")
    b.session(b.branch(binary("Lt", who, 3),
                       [b.run(d, who), b.hold([(kv, 16)], b.run(d, 1), cache=16)],
                       [b.run(d, 5), b.hold([(kv, 16)], b.run(d, 1))]))
    return b.build(arrival=explicit({9: 0.0}, {9: 1.0}, {9: 2.0}, {9: 3.0}), horizon=20)


def test_lru_evicts_the_oldest_release():
    # 000 evict: "lru: release time, then release order"
    evicted = [r["source"] for r in trace(_three_releases(None)) if r["rule"].startswith("pool/evict")]
    assert evicted == [0]


def test_evict_by_keys_then_release_order():
    # 000 evict: "by (k1, …): ascending keys, then release order"; -last evicts the newest first
    newest_first = _three_releases((ir.Unary("Neg", ir.Ctx("Last")),))
    assert [r["source"] for r in trace(newest_first) if r["rule"].startswith("pool/evict")] == [2]
    # equal keys: the release order decides (the earliest release goes first)
    constant = _three_releases((ir.Num(1.0),))
    assert [r["source"] for r in trace(constant) if r["rule"].startswith("pool/evict")] == [0]


def test_consumed_prefix_leaves_a_dead_entry_of_the_same_age():
    # 002 §3 Pools: "on admission the session consumes at most ρ units of its own cached prefix
    # (cached := what it consumed); the rest of that entry stays in the cache as a dead entry with the same age"
    b = Builder()
    kv = b.pool("kv", cap=64, block=16)
    d = b.delay("d")
    b.session(b.hold([(kv, 48)], b.run(d, 1), cache=48),
              b.hold([(kv, 16)], b.observe("cached", b.attr("cached")), b.run(d, 1), cache=0, reuse=16),
              b.hold([(kv, 16)], b.observe("cached", b.attr("cached")), b.run(d, 1)))
    steps = walk_checked(b.build(horizon=10))
    admitted = [c for rule, c in steps if rule == "pool/admit"][1]
    dead = [e for e in admitted.pools[kv].entries if e.owner is None]
    assert [(e.units, e.released) for e in dead] == [(32.0, 1.0)]
    result = run(b.build(horizon=10))
    assert samples(result, "cached") == [(0, 16.0), (0, 0.0)]  # no cache clause: cached is 0


def test_hold_without_cache_leaves_the_prefix_alone():
    # 002 §3 Pools: "Without it the hold is memory alone: it leaves the session's cached blocks where they are"
    b = Builder()
    kv = b.pool("kv", cap=64)
    d = b.delay("d")
    b.session(b.hold([(kv, 20)], b.run(d, 1), cache=20),
              b.hold([(kv, 10)], b.run(d, 1)),
              b.observe("mine", ir.Call("CachedIn", (ir.PoolArg(ir.Ref(kv, 1, None)),))))
    assert samples(run(b.build(horizon=10)), "mine") == [(0, 20.0)]


def test_grow_waits_under_preempt_none():
    # 000 preempt: "none: The session waits and resumes where it was."
    b = Builder(attrs=("who",))
    p = b.pool("p", cap=10)
    d = b.delay("d")
    who = b.attr("who")
    b.session(b.branch(binary("Eq", who, 0),
                       [b.hold([(p, 6)], b.run(d, 1), b.grow(p, 2), b.observe("grown", now()))],
                       [b.hold([(p, 4)], b.run(d, 5))]))
    program = b.build(arrival=explicit({9: 0.0}, {9: 1.0}), horizon=20)
    walk_checked(program)
    assert samples(run(program), "grown") == [(0, 5.0)]
    assert [r["rule"] for r in trace(program) if r["rule"].startswith("pool/grow")] == ["pool/grow-wait", "pool/grow-resume"]


def test_preempt_lifo_takes_the_most_recently_admitted_holder():
    # 000 preempt: "lifo: The most recently admitted holder ... is preempted ... it re-enters the head of the
    # queue to execute its hold again"; for a pool that is no engine's memory, its most recently admitted holder
    program = build_lifo_grower_program(lambda b, p, d: [
        b.hold([(p, 4)], b.observe("start", now()), b.run(d, 10)), b.observe("done", now())])
    walk_checked(program)
    result = run(program)
    assert result.pools[0].preemptions == 1
    assert samples(result, "start") == [(1, 0.0), (1, 3.0)]  # re-admitted when session 0 released at 3
    assert samples(result, "done") == [(1, 13.0)]
    victims = [r["session"] for r in trace(program) if r["rule"] == "pool/preempt"]
    assert victims == [1]


def test_self_preemption_is_counted_stuck():
    # 002 §3 Statistics: "stuck: sessions preempted a second time without having advanced past the
    # position of their previous preemption"; 000: "The grower can be its own victim."
    b = Builder()
    p = b.pool("p", cap=10, lifo=True)
    d = b.delay("d")
    b.session(b.hold([(p, 6)], b.run(d, 1), b.grow(p, 6)))
    result = run(b.build(horizon=10.5))
    assert result.pools[0].preemptions == 10
    assert result.pools[0].stuck == 1
    assert result.pools[0].stuck_unfinished == 1  # it never gets past: the livelock the count is for
    assert result.pools[0].explanations and "stuck" in result.pools[0].explanations[0]


STUCK_THEN_PAST = """pool p { cap 10; preempt lifo; }
stage d : delay;
workload { arrive batch(2); }
session {
  run d (serial);
  hold p (4) { run d (1); grow p (serial == 0 ? 2 : 4); run d (serial == 0 ? 5 : 1); }
  observe done = now;
}
run { horizon 100; }
"""


def test_a_stuck_session_that_gets_past_is_told_apart():
    # 002 §3 Statistics counts every session "preempted a second time without having advanced past the
    # position of their previous preemption"; the report says how many of them had not ended when the run
    # did (issue 13: "a run where every session finished reported stuck 85")
    from semantics.compiler import compile_source
    from semantics.report import build_report, format_text

    result = run(compile_source(STUCK_THEN_PAST, "<stuck>")[0])
    pool = result.pools[0]
    assert pool.stuck >= 1 and pool.stuck_unfinished == 0
    assert [serial for serial, _ in samples(result, "done")] == [0, 1]  # both ended
    text = format_text(build_report(result))
    assert f"note: pool p: {pool.stuck} of its {pool.stuck} stuck session(s) got past their position and ended, 0 had " \
           "not ended when the run did" in text


def test_preempted_hold_finds_computed_set():
    # 002 §3 Pools: "The re-executed hold finds computed set to the position the hold had computed"
    result = run(build_lifo_grower_program(lambda b, p, d: [
        b.hold([(p, 4)], b.load(p, 3), b.observe("computed", b.attr("computed")), b.run(d, 10))]))
    assert samples(result, "computed") == [(1, 0.0), (1, 3.0)]


def test_queue_by_reevaluates_waited_before_each_admission():
    # 000 queue: "by reevaluates keys for every waiting hold before each admission attempt ... waited supplies
    # seconds since the current hold entered the queue"
    def program(keys):
        b = Builder(attrs=("who", "prio"))
        p = b.pool("p", cap=1, queue=keys(b))
        d = b.delay("d")
        who = b.attr("who")
        b.session(b.branch(binary("Eq", who, 0),
                           [b.hold([(p, 1)], b.run(d, 5))],
                           [b.run(d, b.attr("prio")), b.hold([(p, 1)], b.observe("in", now()), b.run(d, 1))]))
        # session 1 (prio 2) queues at 2, session 2 (prio 1) at 1... arrival order set by the delay
        return b.build(arrival=explicit({9: 0.0, 10: 0.0}, {9: 1.0, 10: 2.0}, {9: 2.0, 10: 4.0}), horizon=30)

    by_priority = program(lambda b: (b.attr("prio"),))
    assert samples(run(by_priority), "in") == [(1, 5.0), (2, 6.0)]
    aged = program(lambda b: (ir.Cond(binary("Ge", ir.Ctx("Waited"), 2), ir.Num(0.0), ir.Num(1.0)), b.attr("prio")))
    # at 5: session 1 waited 3 (aged, key 0), session 2 waited 1 (key 1): the aged one goes first
    assert samples(run(aged), "in") == [(1, 5.0), (2, 6.0)]
    reverse = program(lambda b: (ir.Unary("Neg", b.attr("prio")),))
    assert samples(run(reverse), "in") == [(2, 5.0), (1, 6.0)]


def test_fifo_queue_blocks_behind_its_head():
    # 002 §3 Pools: "the first that does not fit blocks the rest (head-of-line blocking)"
    b = Builder(attrs=("who",))
    p = b.pool("p", cap=10)
    d = b.delay("d")
    who = b.attr("who")
    b.session(b.run(d, binary("Mul", who, 0.1)),
              b.hold([(p, ir.Cond(binary("Eq", who, 1), ir.Num(8.0), ir.Cond(binary("Eq", who, 0), ir.Num(4.0), ir.Num(2.0))))], b.observe("in", now()), b.run(d, 5)))
    result = run(b.build(arrival=explicit({9: 0.0}, {9: 1.0}, {9: 2.0}), horizon=30))
    # session 1 (8 units) does not fit next to session 0's 4; session 2's 2 would, but waits behind it
    assert samples(result, "in") == [(0, 0.0), (1, 5.0), (2, 5.0)]


def test_a_hold_that_can_never_fit_is_rejected():
    # 000: "A request that can never fit — its units, or its reserve when that is larger, above the cap — is
    # rejected and its session ends."
    b = Builder()
    p = b.pool("p", cap=10)
    b.session(b.hold([(p, 4, 11)]), b.observe("after", now()))
    result = run(b.build(arrival=ir.Batch(2), horizon=5))
    assert result.pools[0].rejected == 2
    assert result.ended == 2 and samples(result, "after") == []
    assert result.pools[0].explanations[0] == "session 0 rejected: reserve 11 above cap 10"


def test_hold_on_several_pools_needs_room_in_each():
    # 002 §3 Pools: "The head of a queue is admitted when every pool of its hold has room"
    b = Builder(attrs=("who",))
    a = b.pool("a", cap=10)
    c = b.pool("c", cap=5)
    d = b.delay("d")
    who = b.attr("who")
    b.session(b.branch(binary("Eq", who, 0),
                       [b.hold([(c, 4)], b.run(d, 3))],
                       [b.run(d, 1), b.hold([(a, 1), (c, 2)], b.observe("in", now()))]))
    result = run(b.build(arrival=explicit({9: 0.0}, {9: 1.0}), horizon=10))
    assert samples(result, "in") == [(1, 3.0)]
    assert result.pools[0].mean_queue == pytest.approx(2 / 10)  # it waited in the first pool's queue, from 1 to 3


def test_lease_then_release():
    # 002 §3 Pools: "A hold's lease m (t) keeps its allocation on m past the scope's end ... until the session's
    # release m, t seconds, or the session's end, and cache applies then"
    b = Builder()
    kv = b.pool("kv", cap=64)
    d = b.delay("d")
    used = ir.Call("Used", (ir.PoolArg(ir.Ref(kv, 1, None)),))
    b.session(b.hold([(kv, 8)], b.run(d, 1), cache=8, lease=(kv, math.inf)),
              b.observe("leased", used), b.run(d, 2), b.release(kv), b.observe("released", used),
              b.observe("mine", ir.Call("CachedIn", (ir.PoolArg(ir.Ref(kv, 1, None)),))))
    program = b.build(horizon=10)
    walk_checked(program)
    result = run(program)
    assert samples(result, "leased") == [(0, 8.0)]
    assert samples(result, "released") == [(0, 0.0)]
    assert samples(result, "mine") == [(0, 8.0)]


def test_lease_expires_after_its_time():
    b = Builder()
    kv = b.pool("kv", cap=64)
    d = b.delay("d")
    b.session(b.hold([(kv, 8)], b.run(d, 1), cache=8, lease=(kv, 2)), b.run(d, 10))
    rules = [(r["rule"], r["time"]) for r in trace(b.build(horizon=20)) if r["rule"].startswith("pool/lease")]
    assert rules == [("pool/lease", 1.0), ("pool/lease-end", 3.0)]


def test_lease_ends_with_the_session_and_is_no_victim():
    # 002 §3 Pools: a leased allocation is "neither evictable nor a preemption victim", until "the session's end"
    b = Builder(attrs=("who",))
    kv = b.pool("kv", cap=10, lifo=True)
    d = b.delay("d")
    who = b.attr("who")
    b.session(b.branch(binary("Eq", who, 0),
                       [b.hold([(kv, 4)], b.run(d, 1), cache=4, lease=(kv, math.inf)), b.run(d, 9.5)],
                       [b.run(d, 2), b.hold([(kv, 4)], b.run(d, 1), b.grow(kv, 4), b.observe("grown", now()))]))
    program = b.build(arrival=explicit({9: 0.0}, {9: 1.0}), horizon=30)
    walk_checked(program)
    result = run(program)
    # session 1 is the only holder in a scope: it preempts itself every second until the lease ends at 10.5
    assert {r["session"] for r in trace(program) if r["rule"] == "pool/preempt"} == {1}
    assert result.pools[0].preemptions == 8
    assert samples(result, "grown") == [(1, 11.0)]


def test_self_preemption_at_one_instant_hits_the_backstop():
    # SERQ-FACTS.md run-time backstops: "a thousand readies at one instant" is a RunError
    b = Builder()
    kv = b.pool("kv", cap=10, lifo=True)
    b.session(b.hold([(kv, 6)], b.grow(kv, 6)))
    with pytest.raises(RunError, match="ready 1000 times at one instant"):
        run(b.build(horizon=5))


def test_end_keeps_cached_prefixes_and_drop_discards_them():
    # 002 §3 Pools: "end releases every hold but keeps the session's cached prefixes ... A program that models
    # dropping them writes drop POOL; before end;"
    def final_cached(with_drop):
        b = Builder()
        kv = b.pool("kv", cap=64)
        d = b.delay("d")
        tail = [b.drop(kv)] if with_drop else []
        b.session(b.hold([(kv, 8)], b.run(d, 1), cache=8), *tail, b.end())
        return walk_checked(b.build(horizon=5))[-1][1].pools[kv].cached

    assert final_cached(False) == 8.0
    assert final_cached(True) == 0.0


def test_spill_writes_an_evicted_prefix_to_the_tier_through_the_link():
    # 000 spill: "evicted prefixes are written to a tier"; the piece becomes a write job of `work` on the link
    # stage, and a cache entry in the tier when the write completes (docs/semantics.md, pool/spill)
    b = Builder(attrs=("who",))
    tier = b.pool("tier", cap=100)
    kv = b.pool("kv", cap=32, block=16, spill=ir.Spill(0, 1, ir.Num(0.5), ir.Num(1.0)))
    d = b.delay("d")
    b.fifo("link")
    who = b.attr("who")
    b.session(b.branch(binary("Eq", who, 0),
                       [b.hold([(kv, 32)], b.run(d, 1), cache=32), b.run(d, 10)],
                       [b.run(d, 2), b.hold([(kv, 16)], b.run(d, 1))]))
    program = b.build(arrival=explicit({9: 0.0}, {9: 1.0}), horizon=20)
    steps = walk_checked(program)
    rules = [(rule, c.time) for rule, c in steps if rule.startswith("pool/spill")]
    assert rules == [("pool/spill", 2.0), ("pool/spill-land", 2.5)]
    final = steps[-1][1]
    assert final.pools[tier].cached == 16.0 and final.pools[kv].cached == 16.0
    assert run(program).pools[1].spills == 1


def test_load_past_the_allocation_is_a_run_error():
    # 002 §3 Pools: "load m (n) advances the innermost enclosing hold's position on m by n tokens, which its
    # allocation must cover"
    b = Builder()
    kv = b.pool("kv", cap=64)
    b.session(b.hold([(kv, 8)], b.load(kv, 9)))
    with pytest.raises(RunError) as err:
        run(b.build(horizon=5))
    assert err.value.stmt == (2, 0) and "must fit the allocation" in err.value.message


def _preempted_while_queued():
    """Session 1 holds q and waits in p's queue at the head; session 2 waits behind it; session 0's grow on q
    preempts session 1 (q's most recently admitted holder), which leaves p's queue."""
    b = Builder(attrs=("who",))
    q = b.pool("q", cap=10, lifo=True)
    p = b.pool("p", cap=10)
    d = b.delay("d")
    who = b.attr("who")
    b.session(b.branch(binary("Eq", who, 0),
                       [b.hold([(q, 4)], b.run(d, 3), b.grow(q, 4), b.run(d, 1))],
                       [b.branch(binary("Eq", who, 1),
                                 [b.run(d, 1), b.hold([(q, 4)], b.hold([(p, 8)], b.observe("in", now())))],
                                 [b.branch(binary("Eq", who, 2),
                                           [b.run(d, 2), b.hold([(p, 2)], b.observe("in", now()), b.run(d, 1))],
                                           [b.hold([(p, 4)], b.run(d, 100))])])]))
    return b.build(arrival=explicit({9: 3.0}, {9: 0.0}, {9: 1.0}, {9: 2.0}), horizon=200)


def test_a_hold_leaving_the_queue_unblocks_the_next():
    # 002 §3 Pools: the victim's "job leaves its stage, its hold is released ... and it re-enters the head of the
    # pool's queue"; the hold behind it in the other queue is then the head and is tried at the next settle
    program = _preempted_while_queued()
    walk_checked(program)
    result = run(program)
    assert result.pools[0].preemptions == 1
    # serials follow the rows: 3 (who 2) enters p at 3, when 2 (who 1) leaves p's queue; 2 enters p at 100
    assert samples(result, "in") == [(3, 3.0), (2, 100.0)]


def test_growers_wait_in_stall_order_and_the_head_blocks():
    # 002 §3 Ties: "A pool's growers: the order they stalled, the head blocking the rest."
    b = Builder(attrs=("who",))
    p = b.pool("p", cap=12)
    d = b.delay("d")
    who = b.attr("who")
    b.session(b.branch(binary("Eq", who, 0), [b.hold([(p, 5)], b.run(d, 5))],
                       [b.branch(binary("Eq", who, 3), [b.hold([(p, 3)], b.run(d, 4))],
                                 [b.hold([(p, 2)], b.run(d, who),
                                         b.grow(p, ir.Cond(binary("Eq", who, 1), ir.Num(5.0), ir.Num(3.0))),
                                         b.observe("grown", now()), b.run(d, 1))])]))
    program = b.build(arrival=explicit({9: 0.0}, {9: 1.0}, {9: 2.0}, {9: 3.0}), horizon=20)
    walk_checked(program)
    # the pool is full (5 + 2 + 2 + 3); session 1 stalls at 1 for 5, session 2 at 2 for 3; at 4 session 3
    # frees 3, enough for session 2 but not for the head, session 1; at 5 session 0 frees 5: both, in order
    assert samples(run(program), "grown") == [(1, 5.0), (2, 5.0)]
