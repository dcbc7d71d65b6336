"""``serve exclusive prefill`` (seed 002 §3, Stages), one test per sentence of
the seed, then the invariants after every rule of these programs, then the
reference implementation (pyserq) on them.

The seed: "serve exclusive prefill selects either one prefill alone or a
decode-only batch. A resident prefill takes precedence. Otherwise resident
decodes are tentative: while budget is left, a waiting prefill that fits can
replace them and use the full budget, including in budget_left at admission.
Once a prefill is selected, no further waiting request is admitted in that
iteration. Displaced decodes keep any newly acquired allocation but neither
execute nor advance computed KV. Ordinary fit and no-admission-after-preemption
gates remain; this mechanism does not implement PP decode caps or remote-KV
waiting policy."

Every program costs 1 an iteration, so its times are iterations: an
iteration that starts at k ends at k + 1, and an observe at its end reads
k + 1. The schedules in the comments are derived by hand from the seed;
``batches`` reads what each iteration gave from the configuration the rule
step/iteration leaves (the iteration in flight).
"""

from __future__ import annotations

import math

import pytest

from oracle.peer import report_of
from semantics.compiler import compile_source
from semantics.smallstep.driver import configurations, run, trace
from semantics.smallstep.invariants import check_invariants

# -- the programs --------------------------------------------------------------------

#: Session 0 (A) prefills 2 tokens at 0 and then decodes 2; session 1 (B)
#: arrives at 1 with a prompt of 4. The hold's header takes the first chunk
#: the budget allows, min(prompt, budget_left(engine)), and reserves the prompt.
TAKEOVER = """
pool reqs {{ cap {slots}; admit via engine; }}
pool kv {{ cap {kv}; }}
stage gate : delay;
stage engine : step {{ budget 4; chunk 4; cost 1; memory kv; {serve} }}
workload {{ arrive batch(2); init {{ set prompt = serial == 0 ? 2 : 4; }} }}
session {{
  run gate (serial);
  hold reqs (1), kv (min(prompt, left)) reserve (prompt) at admission (left = budget_left(engine)) {{
    observe allocation = used(kv);
    run engine prefill (prompt) growing kv;
    observe first = now;
    branch (serial == 0) {{ run engine decode (2) growing kv; }}
  }} cache (100);
  observe extent = cachedin(kv);
  observe done = now;
}}
run {{ horizon 20; }}
"""

#: Four requests: prompts 3, 5, 7, 9 arriving at 0, 0.5, 1, 1.5, three decode tokens each.
FOUR = """
pool reqs {{ cap 4; admit via engine; }}
stage gate : delay;
stage engine : step {{ budget 5; cost 1; {serve} }}
workload {{ arrive batch(4); init {{ set p = 3 + 2 * serial; }} }}
session {{
  run gate (serial / 2);
  hold reqs (1) {{
    run engine prefill (p);
    observe first = now;
    run engine decode (3);
  }}
  observe done = now;
}}
run {{ horizon 60; }}
"""

#: Three sessions, all admitted at 0 into the gate inside their holds (so no
#: prefill is selected then): A (0) and B (1) prefill 1 at 1 and then decode
#: 3; C (2) prefills 2 at 2 and decodes 1. Budget 2: A's and B's decodes
#: alone would spend it.
RESIDENT = """
pool reqs {{ cap 3; admit via engine; }}
stage gate : delay;
stage engine : step {{ budget 2; cost 1; {serve} }}
workload {{ arrive batch(3); }}
session {{
  hold reqs (1) {{
    run gate (serial == 2 ? 2 : 1);
    run engine prefill (serial == 2 ? 2 : 1);
    observe first = now;
    run engine decode (serial == 2 ? 1 : 3);
  }}
  observe done = now;
}}
run {{ horizon 20; }}
"""

#: Sessions 0 and 1 decode 2 tokens each; session 2, waiting beside them, prefills 4.
EXHAUSTED = """
pool reqs { cap 3; admit via engine; }
stage engine : step { budget 2; cost 1; serve exclusive prefill; }
workload { arrive batch(3); }
session {
  hold reqs (1) {
    observe admitted = now;
    branch (serial < 2) { run engine decode (2); } else { run engine prefill (4); }
  }
  observe done = now;
}
run { horizon 10; }
"""

#: Three requests at 0, each a prefill of 6 in chunks of 4 and a decode of 1.
CHUNKS = """
pool reqs { cap 3; admit via engine; }
pool kv { cap 40; }
stage engine : step { budget 4; chunk 4; cost 1; memory kv; serve exclusive prefill; }
workload { arrive batch(3); }
session {
  hold reqs (1), kv (4) reserve (6) {
    observe admitted = now;
    run engine prefill (6) growing kv;
    run engine decode (1) growing kv;
  }
  observe done = now;
}
run { horizon 20; }
"""

#: A (0) and B (1) prefill 2 and decode 6 on 8 units of KV under preempt lifo;
#: C (2) waits from 3.5 in another queue the engine serves first, for a prefill
#: of 2 that needs no KV.
PREEMPTION = """
pool fresh { cap 1; admit via engine; }
pool reqs { cap 2; admit via engine; }
pool kv { cap 8; preempt lifo; }
stage gate : delay;
stage engine : step { budget 4; cost 1; memory kv; serve exclusive prefill; }
workload { arrive batch(3); }
session {
  run gate (serial == 2 ? 3.5 : serial);
  branch (serial == 2) {
    hold fresh (1) { observe admitted = now; run engine prefill (2); }
  } else {
    hold reqs (1), kv (2) { observe admitted = now; run engine prefill (2) growing kv; run engine decode (6) growing kv; }
  }
  observe done = now;
}
run { horizon 40; }
"""

#: Session 0 is a resumed request: its hold's run is a decode of 3. Session 1,
#: admitted in the same iteration, prefills 4.
RESUMED = """
pool reqs { cap 2; admit via engine; }
stage engine : step { budget 4; cost 1; serve exclusive prefill; }
workload { arrive batch(2); }
session {
  hold reqs (1) {
    observe admitted = now;
    branch (serial == 0) { run engine decode (3); } else { run engine prefill (4); }
  }
  observe done = now;
}
run { horizon 20; }
"""

#: Under preempt none: A (0) holds its 4 units from admission and decodes 2;
#: B (1), admitted at 1 with 1 unit, must grow to 3 for its prefill, which
#: does not fit beside A until A ends.
WAITING_GROWTH = """
pool reqs { cap 3; admit via engine; }
pool kv { cap 6; preempt none; }
stage gate : delay;
stage engine : step { budget 4; cost 1; memory kv; serve exclusive prefill; }
workload { arrive batch(2); }
session {
  run gate (serial);
  hold reqs (1), kv (serial == 0 ? 4 : 1) {
    run engine prefill (serial == 0 ? 2 : 3) growing kv;
    observe first = now;
    run engine decode (2) growing kv;
  }
  observe done = now;
}
run { horizon 40; }
"""

#: A's second prefill (a resident's, admitted first) grows and preempts B's decode.
RESIDENT_GROWTH = """
pool reqs { cap 2; admit via engine; }
pool kv { cap 8; preempt lifo; }
stage gate : delay;
stage engine : step { budget 4; chunk 3; cost 1; memory kv; serve exclusive prefill; }
workload { arrive batch(2); }
session {
  run gate (serial);
  hold reqs (1), kv (2) reuse (0) at admission (known = max(2, computed)) {
    observe admitted = now;
    branch (serial == 0) {
      run engine prefill (2) growing kv;
      run engine decode (2) growing kv;
      run engine prefill (3) growing kv;
      run engine decode (1) growing kv;
    } else {
      run engine prefill (known) growing kv;
      run engine decode (4 - (known - 2)) growing kv;
    }
  } cache (100);
  observe done = now;
}
run { horizon 40; }
"""

#: A waiting prefill whose growth preempts itself: the tentative decode stays.
SELF_PREEMPTION = """
pool reqs { cap 3; admit via engine; }
pool kv { cap 6; preempt lifo; }
stage gate : delay;
stage engine : step { budget 4; cost 1; memory kv; serve exclusive prefill; }
workload { arrive batch(2); }
session {
  run gate (serial);
  hold reqs (1), kv (1) {
    branch (serial == 0) { run engine prefill (2) growing kv; run engine decode (2) growing kv; }
    else { run engine prefill (4) growing kv; }
  } cache (100);
  observe done = now;
}
run { horizon 40; }
"""

EXCLUSIVE = "serve exclusive prefill;"


def compile_program(source: str):
    program, _ = compile_source(source, "<exclusive>")
    return program


def samples(result, name: str) -> list[tuple[int, float]]:
    """(session, value) of every sample of the observation ``name``, in the order taken."""
    record = next(o for o in result.observes if o.name == name)
    return [(serial, value) for _, serial, _, value in record.samples]


def by_session(result, name: str) -> dict[int, list[float]]:
    values: dict[int, list[float]] = {}
    for serial, value in samples(result, name):
        values.setdefault(serial, []).append(value)
    return values


def engine_record(result):
    return next(s for s in result.stages if s.name == "engine")


def batches(program) -> list[tuple[float, tuple[tuple[int, str, float], ...]]]:
    """What each iteration of the stage ``engine`` gave, as it went in flight:
    (its start, ((session, "prefill" or "decode", tokens), ...) in the order served)."""
    s = [stage.name for stage in program.stages].index("engine")
    out = []
    for rule, c in configurations(program):
        if rule == "step/iteration":
            it = c.stages[s].iteration
            out.append((it.started, tuple((a.serial, a.mode.lower(), a.tokens) for a in it.assigned)))
    return out


def records(program, name: str) -> list[dict]:
    return [r for r in trace(program) if r["rule"] == name]


# -- "serve exclusive prefill selects either one prefill alone or a decode-only batch." ------------


def test_an_iteration_is_one_prefill_alone_or_decodes_only():
    program = compile_program(FOUR.format(serve=EXCLUSIVE))
    # Each arrival's prefill runs alone (B and D need two iterations of 5); the decodes wait and then run together.
    assert batches(program) == [
        (0.0, ((0, "prefill", 3.0),)),
        (1.0, ((1, "prefill", 5.0),)),
        (2.0, ((2, "prefill", 5.0),)),
        (3.0, ((2, "prefill", 2.0),)),
        (4.0, ((3, "prefill", 5.0),)),
        (5.0, ((3, "prefill", 4.0),)),
        (6.0, ((0, "decode", 1.0), (1, "decode", 1.0), (2, "decode", 1.0), (3, "decode", 1.0))),
        (7.0, ((0, "decode", 1.0), (1, "decode", 1.0), (2, "decode", 1.0), (3, "decode", 1.0))),
        (8.0, ((0, "decode", 1.0), (1, "decode", 1.0), (2, "decode", 1.0), (3, "decode", 1.0))),
    ]
    engine = engine_record(run(program))
    assert (engine.iterations, engine.prefill_only, engine.decode_only, engine.mixed) == (9, 6, 3, 0)


def test_the_same_program_served_in_admission_order_mixes_prefills_and_decodes():
    # The counterpart: the default serve admission gives one token to each decode, the rest of the budget to a prefill.
    result = run(compile_program(FOUR.format(serve="")))
    assert engine_record(result).mixed > 0
    exclusive = run(compile_program(FOUR.format(serve=EXCLUSIVE)))
    assert by_session(result, "first") != by_session(exclusive, "first")


# -- "A resident prefill takes precedence." ------------------------------------------------------


def test_a_resident_prefill_runs_alone_before_the_decodes_and_the_first_of_two_goes_first():
    program = compile_program(RESIDENT.format(serve=EXCLUSIVE))
    # 0: the three admitted into the gate, no token (step/idle); 1: A and B are resident prefills,
    # A (admitted first) runs alone; 2: B's prefill alone, before A's decode; 3: C's prefill alone,
    # though A's and B's decodes, served first, would have spent the budget; then the decodes
    assert batches(program) == [
        (1.0, ((0, "prefill", 1.0),)),
        (2.0, ((1, "prefill", 1.0),)),
        (3.0, ((2, "prefill", 2.0),)),
        (4.0, ((0, "decode", 1.0), (1, "decode", 1.0))),
        (5.0, ((0, "decode", 1.0), (1, "decode", 1.0))),
        (6.0, ((0, "decode", 1.0), (1, "decode", 1.0))),
        (7.0, ((2, "decode", 1.0),)),
    ]
    result = run(program)
    assert by_session(result, "first") == {0: [2.0], 1: [3.0], 2: [4.0]}
    assert by_session(result, "done") == {0: [7.0], 1: [7.0], 2: [8.0]}
    # served in admission order instead, A's and B's prefills share an iteration, and C waits for their decodes
    assert batches(compile_program(RESIDENT.format(serve="")))[:2] == [
        (1.0, ((0, "prefill", 1.0), (1, "prefill", 1.0))), (2.0, ((0, "decode", 1.0), (1, "decode", 1.0)))]


def test_a_resident_prefill_that_must_grow_preempts_a_decode_and_still_runs_alone():
    program = compile_program(RESIDENT_GROWTH)
    # at 4 A's second prefill (3 tokens) takes precedence over both decodes; its growth to 7 units
    # preempts B (admitted last), and it runs alone
    assert (4.0, ((0, "prefill", 3.0),)) in batches(program)
    preemptions = [r for r in trace(program) if r["rule"] == "pool/preempt"]
    assert [(r["time"], r["session"]) for r in preemptions] == [(4.0, 1)]


# -- "Otherwise resident decodes are tentative: while budget is left, a waiting prefill that fits can
#     replace them and use the full budget, including in budget_left at admission." ------------------


def test_a_waiting_prefill_replaces_the_tentative_decodes_and_uses_the_full_budget():
    program = compile_program(TAKEOVER.format(slots=2, kv=20, serve=EXCLUSIVE))
    # 1: A's decode (1 token of the 4) is tentative; B's header reads budget_left = 4, not 3, so it
    # takes 4 units and its whole prompt in one iteration, alone
    assert batches(program) == [
        (0.0, ((0, "prefill", 2.0),)),
        (1.0, ((1, "prefill", 4.0),)),
        (2.0, ((0, "decode", 1.0),)),
        (3.0, ((0, "decode", 1.0),)),
    ]
    selections = records(program, "step/select-prefill")
    assert [(r["time"], r["session"], r["tokens"], len(r["displaced"])) for r in selections] == \
        [(0.0, 0, 2.0, 0), (1.0, 1, 4.0, 1)]
    result = run(program)
    assert samples(result, "allocation") == [(0, 2.0), (1, 7.0)]  # B's 4 beside A's 3
    assert by_session(result, "first") == {0: [1.0], 1: [2.0]}
    assert by_session(result, "done") == {0: [4.0], 1: [2.0]}


def test_without_exclusive_prefill_the_waiting_prefill_gets_what_the_decodes_leave():
    program = compile_program(TAKEOVER.format(slots=2, kv=20, serve=""))
    assert batches(program)[1] == (1.0, ((0, "decode", 1.0), (1, "prefill", 3.0)))
    assert samples(run(program), "allocation") == [(0, 2.0), (1, 6.0)]


def test_only_while_budget_is_left():
    program = compile_program(EXHAUSTED)
    # 0: the two decodes spend the budget of 2, so the waiting prefill is not tried (though it fits);
    # 1: they are served alone again; 2: it is admitted and prefills in two iterations of 2
    assert batches(program) == [
        (0.0, ((0, "decode", 1.0), (1, "decode", 1.0))),
        (1.0, ((0, "decode", 1.0), (1, "decode", 1.0))),
        (2.0, ((2, "prefill", 2.0),)),
        (3.0, ((2, "prefill", 2.0),)),
    ]
    result = run(program)
    assert samples(result, "admitted") == [(0, 0.0), (1, 0.0), (2, 2.0)]
    assert by_session(result, "done") == {0: [2.0], 1: [2.0], 2: [4.0]}


@pytest.mark.parametrize("slots, kv", [(1, 20), (2, 4)], ids=["no slot", "no memory"])
def test_only_a_waiting_prefill_that_fits(slots, kv):
    # one request slot, or 4 units of KV where B reserves its prompt of 4 beside A's 3: B is admitted
    # only when A has ended, and until then A's decodes run
    program = compile_program(TAKEOVER.format(slots=slots, kv=kv, serve=EXCLUSIVE))
    assert batches(program) == [
        (0.0, ((0, "prefill", 2.0),)),
        (1.0, ((0, "decode", 1.0),)),
        (2.0, ((0, "decode", 1.0),)),
        (3.0, ((1, "prefill", 4.0),)),
    ]
    assert records(program, "step/admit-stop")


def test_a_resumed_request_admitted_as_a_decode_is_tentative_too():
    program = compile_program(RESUMED)
    # 0: session 0 (a decode) is admitted and served first, tentatively; session 1's prefill, admitted
    # next with the whole budget, replaces it
    assert batches(program)[:2] == [(0.0, ((1, "prefill", 4.0),)), (1.0, ((0, "decode", 1.0),))]
    (selection,) = records(program, "step/select-prefill")
    (decode,) = [r for r in records(program, "step/schedule") if r["time"] == 0.0 and r["mode"] == "decode"]
    assert selection["displaced"] == [decode["job"]]
    result = run(program)
    assert samples(result, "admitted") == [(0, 0.0), (1, 0.0)]
    assert by_session(result, "done") == {0: [4.0], 1: [1.0]}


# -- "Once a prefill is selected, no further waiting request is admitted in that iteration." --------------


def test_a_selected_prefill_stops_admission_though_budget_is_left():
    program = compile_program(CHUNKS)
    # 0: A admitted, 4 of its 6 alone; 1: its last 2 alone, with 2 left and B and C waiting, none admitted;
    # 2: A's decode is displaced by B (admitted), and so on: admissions at 0, 2, 4
    result = run(program)
    assert samples(result, "admitted") == [(0, 0.0), (1, 2.0), (2, 4.0)]
    assert engine_record(result).iterations == 7
    trail = [r for r in trace(program) if r["rule"] in ("step/select-prefill", "step/admit")]
    assert [(r["rule"], r["time"]) for r in trail] == [
        ("step/admit", 0.0), ("step/select-prefill", 0.0), ("step/select-prefill", 1.0),
        ("step/admit", 2.0), ("step/select-prefill", 2.0), ("step/select-prefill", 3.0),
        ("step/admit", 4.0), ("step/select-prefill", 4.0), ("step/select-prefill", 5.0)]
    assert [r["left"] for r in trail if r["rule"] == "step/select-prefill" and r["time"] % 2 == 1] == [2.0, 2.0, 2.0]


# -- "Displaced decodes keep any newly acquired allocation but neither execute nor advance computed KV." ---------


def test_a_displaced_decode_keeps_its_growth_and_neither_executes_nor_advances():
    program = compile_program(TAKEOVER.format(slots=2, kv=20, serve=EXCLUSIVE))
    kv = [p.name for p in program.pools].index("kv")
    s = [stage.name for stage in program.stages].index("engine")
    after = {}
    for rule, c in configurations(program):
        if rule == "step/iteration-end" and c.time in (2.0, 3.0):
            session = c.sessions[0]
            (a,) = [a for h in session.holds for a in h.allocations if a.pool == kv]
            job = next(r for r in c.stages[s].jobs if r.owner == 0)
            after[c.time] = (a.units, a.position, job.remaining)
    # after the iteration at 1 (which displaced it): 3 units (the growth stays), position 2, 2 tokens left
    assert after[2.0] == (3.0, 2.0, 2.0)
    assert after[3.0] == (3.0, 3.0, 1.0)  # at 2 its token needs no growth: it kept the unit
    grows = [(r["time"], r["session"]) for r in records(program, "pool/grow")]
    assert grows == [(1.0, 0), (3.0, 0)]
    # A computed 2 + 2 tokens, and caches 4 (5 had the displaced token been applied)
    result = run(program)
    assert by_session(result, "extent") == {0: [4.0], 1: [4.0]}


# -- "Ordinary fit and no-admission-after-preemption gates remain" --------------------------------------


def test_no_admission_in_an_iteration_that_preempted():
    program = compile_program(PREEMPTION)
    # 4: A's tentative decode grows and preempts B; C has waited since 3.5 and fits, but that iteration
    # admits nothing: C is admitted at 5, replaces A's decode and prefills alone
    assert batches(program)[4:6] == [(4.0, ((0, "decode", 1.0),)), (5.0, ((2, "prefill", 2.0),))]
    iteration = next(r for r in records(program, "step/iteration") if r["time"] == 4.0)
    assert iteration["preempted"] is True
    result = run(program)
    assert by_session(result, "admitted")[2] == [5.0]
    assert by_session(result, "done")[2] == [6.0]


def test_a_waiting_prefill_that_preempts_itself_leaves_the_decode_batch():
    program = compile_program(SELF_PREEMPTION)
    # 1 and 2: B is admitted, its prefill must grow by 3 beside A's 4, and B, admitted last, is its own
    # victim: the pass ends, no prefill is selected, and A's tentative decode executes
    assert batches(program) == [
        (0.0, ((0, "prefill", 2.0),)),
        (1.0, ((0, "decode", 1.0),)),
        (2.0, ((0, "decode", 1.0),)),
        (3.0, ((1, "prefill", 4.0),)),
    ]
    assert not [r for r in records(program, "step/select-prefill") if r["time"] in (1.0, 2.0)]
    assert run(program).pools[1].preemptions == 2


def test_a_resident_prefill_waiting_to_grow_is_not_selected():
    # preempt none: B's prefill waits to grow (it gets nothing), so it is not the prefill that runs alone,
    # and A's decodes go on; A's end makes room and B grows and prefills (a decision: docs/semantics.md)
    program = compile_program(WAITING_GROWTH)
    assert batches(program) == [
        (0.0, ((0, "prefill", 2.0),)),
        (1.0, ((0, "decode", 1.0),)),
        (2.0, ((0, "decode", 1.0),)),
        (3.0, ((1, "prefill", 3.0),)),
        (4.0, ((1, "decode", 1.0),)),
        (5.0, ((1, "decode", 1.0),)),
    ]
    result = run(program)
    assert by_session(result, "done") == {0: [3.0], 1: [6.0]}


# -- the invariants after every rule ------------------------------------------------------------------

ALL = {
    "takeover": TAKEOVER.format(slots=2, kv=20, serve=EXCLUSIVE),
    "no slot": TAKEOVER.format(slots=1, kv=20, serve=EXCLUSIVE),
    "no memory": TAKEOVER.format(slots=2, kv=4, serve=EXCLUSIVE),
    "four": FOUR.format(serve=EXCLUSIVE),
    "resident": RESIDENT.format(serve=EXCLUSIVE),
    "exhausted": EXHAUSTED,
    "chunks": CHUNKS,
    "preemption": PREEMPTION,
    "resumed": RESUMED,
    "waiting growth": WAITING_GROWTH,
    "resident growth": RESIDENT_GROWTH,
    "self-preemption": SELF_PREEMPTION,
}


@pytest.mark.parametrize("name", sorted(ALL))
def test_the_invariants_hold_after_every_rule(name):
    # including the step stage's: an exclusive iteration is one prefill alone or decodes only
    applied = 0
    for rule, c in configurations(compile_program(ALL[name])):
        try:
            check_invariants(c)
        except AssertionError as e:
            raise AssertionError(f"after {rule} at {c.time}: {e}") from None
        applied += 1
    assert applied > 20


# -- against the reference implementation -------------------------------------------------------------


def differences(program) -> list:
    """What pyserq reports differently: each observation's count and mean, each pool's counts and
    time averages, each step stage's iterations by kind (pyserq gives the kinds as rates over the
    measured time), completions and time averages."""
    theirs = report_of(program)
    mine = run(program)
    found = []

    def compare(where, key, value, expected):
        same = (expected is None and math.isnan(value)) or (expected is not None and value == pytest.approx(expected))
        if not same:
            found.append((where, key, value, expected))

    for record in mine.observes:
        summary = theirs["observes"][record.name]
        compare(record.name, "count", len(record.samples), summary["count"])
        if record.samples:
            compare(record.name, "mean", sum(s[3] for s in record.samples) / len(record.samples), summary["mean"])
    for pool, other in zip(mine.pools, theirs["pools"]):
        for key in ("admissions", "preemptions", "stuck", "rejected", "mean_used", "mean_cached", "mean_queue",
                    "mean_holders", "mean_wait"):
            compare(pool.name, key, getattr(pool, key), other[key])
    measured = mine.end - mine.warmup
    for stage, other in zip(mine.stages, theirs["stages"]):
        if stage.kind != "step":
            continue
        compare(stage.name, "iterations", stage.iterations, other["iterations"])
        for key in ("prefill_only", "decode_only", "mixed"):
            compare(stage.name, key, getattr(stage, key), other[key] * measured)
        for key in ("completed", "mean_number", "utilization", "mean_service"):
            compare(stage.name, key, getattr(stage, key), other[key])
    return found


AGREED = sorted(set(ALL) - {"waiting growth"})


@pytest.mark.parametrize("name", AGREED)
def test_pyserq_agrees(name):
    assert differences(compile_program(ALL[name])) == []


def test_pyserq_selects_a_resident_prefill_that_waits_to_grow():
    # The one difference (docs/semantics.md, "Against the reference implementation"): pyserq gives
    # the resident prefill precedence though it waits to grow, so from 2 on no iteration serves
    # anything, A never ends, and B never gets its room.
    program = compile_program(WAITING_GROWTH)
    theirs = report_of(program)
    assert theirs["observes"]["done"]["count"] == 0
    assert theirs["observes"]["first"]["count"] == 1
    assert next(s for s in theirs["stages"] if s["name"] == "engine")["iterations"] == 2
    found = {(where, key) for where, key, _, _ in differences(program)}
    assert ("done", "count") in found and ("engine", "iterations") in found
