"""The fast engine's own loop for the step engine (semantics/fast/steploop.py)
against the definition: lib/vllm.sq's engine on the oracle's scenario programs
(the cases of oracle/campaign.draw: every knob over its whole range, the
``space`` and ``space-all`` kinds: block sizes, max_seqs, budgets, the
long-prefill threshold off to above the budget, pools from barely one request
to never tight, prefix caching on and off, arrivals together to long gaps,
synchronous and asynchronous, priorities and limits; the ``pressure`` kind,
preemption-heavy, asynchronous with priorities; the older ``scenario`` kind) and the full trace's replay
(its first sessions) give the same RunResult on both engines, byte for byte,
or the same RunError; and the loop is what the fast engine ran them with
where it applies (counted: a run it gave, a run it gave up for the fast
forms, a program it does not take).

The default run draws DEFAULT_CASES cases of each kind; the campaign
(``python3 -m pytest -m campaign -o timeout=0 -n 2 tests/test_fast_steploop.py``)
draws CAMPAIGN_CASES cases of each kind in all, in SHARDS shards, and each
shard records its counts in docs/data/steploop_campaign/shard-K.json (written
only when every case agreed), which the default run checks."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from oracle.campaign import draw
from oracle.scenario import scenario_program
from semantics import fast
from semantics.errors import RunError
from semantics.fast import engine, steploop
from semantics.smallstep import driver

#: the kinds of oracle/campaign.draw the test draws, with the seed it draws them from
KINDS = {"space": 7, "space-all": 7, "scenario": 7, "limits": 7, "pressure": 7}
DEFAULT_CASES = 6
#: per kind, in all (SHARDS shards)
CAMPAIGN_CASES, SHARDS = 400, 4
CAMPAIGN_DATA = Path(__file__).resolve().parent.parent / "docs" / "data" / "steploop_campaign"
TRACE = Path(__file__).resolve().parent.parent.parent / "shared" / "traces" / "short_base.csv"


def outcome(run, program) -> str:
    try:
        return repr(run(program))
    except RunError as e:
        return f"RunError {e.message!r} stmt={e.stmt!r} time={e.time!r}"


def both(program, patch: pytest.MonkeyPatch) -> tuple[str, str]:
    """The outcome on both engines, asserted equal, and what the loop did: ``taken`` (it gave the run),
    ``gave up`` (it met a preemption or the like: the fast forms ran it), ``not applied``."""
    definition = outcome(driver.run, program)
    done = []
    original = steploop.run

    def counted(m, progress=None):
        result = original(m, progress)
        done.append(result is not None)
        return result

    patch.setattr(steploop, "run", counted)
    try:
        assert outcome(fast.run, program) == definition
    finally:
        patch.setattr(steploop, "run", original)
    how = "not applied" if not done else "taken" if done[0] else "gave up"
    return ("run error" if definition.startswith("RunError") else "result"), how


def case_program(kind: str, seed: int, index: int):
    case = draw(kind, seed, index)
    return scenario_program(case), case


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_scenarios_agree_and_the_loop_takes_the_synchronous_engine(kind):
    hows: Counter = Counter()
    with pytest.MonkeyPatch.context() as patch:
        for index in range(DEFAULT_CASES):
            program, case = case_program(kind, KINDS[kind], index)
            _, how = both(program, patch)
            hows[how] += 1
            applies = steploop.applies(engine.machine_for(program))
            assert (how != "not applied") == applies
            if case.get("policy"):
                assert applies, "a priority order (the request queue's keys) is the loop's"
    if kind in ("space", "scenario", "limits"):  # FCFS engines: the loop's shape
        assert hows["taken"] >= DEFAULT_CASES // 2, hows


def test_the_replay_of_the_trace_agrees_and_takes_the_loop():
    """The replay program (a trace, delay stages, turns) on the first sessions of the full trace, at a
    tight and a loose pool: the loose one is the loop's throughout."""
    if not TRACE.exists():
        pytest.skip("the shared traces are not beside the repository")
    from oracle.replay import replay_program

    with pytest.MonkeyPatch.context() as patch:
        hows = []
        for blocks, sessions in ((8010, 12), (300, 6)):
            program, _ = replay_program(str(TRACE), 24, 512, 64, blocks, sessions=sessions)
            hows.append(both(program, patch)[1])
    assert hows[0] == "taken" and hows[1] in ("taken", "gave up")


def test_the_asynchronous_engine_and_a_priority_order_are_taken():
    """Schedule ahead (lib/vllm.sq's default) is the loop's (its parked sessions: step/park, step/apply); so is
    a priority order (the request queue's keys: the head the definition's select_head chooses), as long as no
    request is preempted; the priority scenarios agree on both engines."""
    assert steploop.applies(engine.machine_for(scenario_program(draw("priority", 7, 0))))
    hows: Counter = Counter()
    with pytest.MonkeyPatch.context() as patch:
        for index in range(12):
            hows[both(scenario_program(draw("priority", 7, index)), patch)[1]] += 1
    assert hows["taken"] >= 3 and hows["not applied"] == 0, hows
    taken = 0
    with pytest.MonkeyPatch.context() as patch:
        for index in range(6):
            program = scenario_program({**draw("space", 11, index), "async": True})
            taken += both(program, patch)[1] == "taken"
    assert taken >= 3


def test_a_setting_the_loop_does_not_know_falls_back():
    """A stage, step kind or pool with a field the loop does not know (an extension's), set, is not the loop's."""
    import dataclasses

    from semantics import ir

    program = scenario_program(draw("space", 7, 0))
    assert steploop.applies(engine.machine_for(program))
    s = next(k for k, stage in enumerate(program.stages) if isinstance(stage.kind, ir.Step))

    @dataclasses.dataclass(frozen=True)
    class ExtendedStep(ir.Step):
        offload: int = 0

    @dataclasses.dataclass(frozen=True)
    class ExtendedStage(ir.Stage):
        placement: int = 0

    kind = program.stages[s].kind
    fields = {f.name: getattr(kind, f.name) for f in dataclasses.fields(kind)}
    for stage in (dataclasses.replace(program.stages[s], kind=ExtendedStep(**fields, offload=1)),
                  ExtendedStage(program.stages[s].name, program.stages[s].index, kind, placement=1)):
        stages = list(program.stages)
        stages[s] = stage
        assert not steploop.applies(engine.machine_for(dataclasses.replace(program, stages=tuple(stages))))

    @dataclasses.dataclass(frozen=True)
    class ExtendedPool(ir.Pool):
        tier: int = 0

    pool = program.pools[1]
    pools = list(program.pools)
    pools[1] = ExtendedPool(**{f.name: getattr(pool, f.name) for f in dataclasses.fields(pool)}, tier=2)
    assert not steploop.applies(engine.machine_for(dataclasses.replace(program, pools=tuple(pools))))


def test_a_cost_of_numbers_and_zeros_times_the_context_is_its_sum():
    """steploop._constant_cost: a sum of numbers and of zeros times a step stage's context variables is that
    sum (the context is finite and at least 0 in the loop), in the tree's order, with the variables it reads;
    anything else is no constant."""
    from semantics import ir

    def zero_times(var, sign=1.0):
        return ir.Binary("Mul", ir.Num(0.0 * sign), ir.Ctx(var))

    clock = ir.Binary("Add", ir.Binary("Add", ir.Num(1.0), zero_times("Ndec")),
                      ir.Binary("Mul", ir.Ctx("Attn"), ir.Num(0.0)))
    assert steploop._constant_cost(clock) == (1.0, frozenset({"Ndec", "Attn"}))
    negative = steploop._constant_cost(zero_times("Kvb", -1.0))
    assert negative is not None and negative[0] == 0.0 and str(negative[0]) == "-0.0"
    assert steploop._constant_cost(ir.Binary("Add", ir.Num(0.004), ir.Binary("Mul", ir.Num(4e-5), ir.Ctx("Ndec")))) is None
    assert steploop._constant_cost(ir.Binary("Sub", ir.Num(1.0), zero_times("Ndec"))) is None
    assert steploop._constant_cost(ir.Num(float("inf"))) is None
    assert steploop._constant_cost(ir.Binary("Add", ir.Num(1e308), ir.Num(1e308))) is None  # its sum is inf
    assert steploop._constant_cost(zero_times("Now")) is None  # not a step stage's context


@pytest.mark.parametrize("engine_sets, outcome_kind, how", [
    ({}, "result", "taken"),  # lib/vllm.sq's cost model: the cost read from the context
    ({"c_it": 1, "d_decoder": 0, "e_context": 0, "a_prefill": 0, "b_attention": 0}, "result", "taken"),  # the step clock
    # the step clock, a prompt whose attention is past the largest double: 0 * inf, the definition's RunError
    ({"c_it": 1, "d_decoder": 0, "e_context": 0, "a_prefill": 0, "b_attention": 0, "mean_prompt": 1e160,
      "blocks": 1e200, "token_budget": 1e200}, "run error", "gave up"),
])
def test_a_cost_read_once_or_per_iteration_agrees_with_the_definition(engine_sets, outcome_kind, how):
    """The loop reads a constant cost once (_constant_cost) and any other per iteration; both give the
    definition's result, and an attention that overflows gives its RunError (the loop gives the run up)."""
    import dataclasses

    from semantics.compiler import compile_file

    program, _ = compile_file("examples/guide/vllm_poisson.sq", sets={
        "rate": 2, "mean_prompt": 300, "mean_out": 20, "blocks": 2000, "async_scheduling": 0, **engine_sets})
    program = dataclasses.replace(program, horizon=30.0, warmup=0.0)
    with pytest.MonkeyPatch.context() as patch:
        assert both(program, patch) == (outcome_kind, how)


def test_a_local_rule_of_the_definition_runs_on_the_sessions_record():
    """A statement the loop hands to the definition's rule (choose, its keys drawing and reading a queue) takes
    the session's record built from the loop's state and gives its fields back: the same run on both engines,
    the loop's."""
    body = """  turn;
  set t0 = now;
  choose c in 3 by (~uniform(0, 1), -queued(reqs));
  set prompt = 1 + floor(~erlang(4, mean_prompt)) + 100 * c;
  vllm_request(prompt, o, 0, t0);
  observe latency = now - t0;
  observe chosen = c;
  end;"""
    program = _probe(body, {"blocks": 2000, "async_scheduling": 0}, run="horizon 30; warmup 0; seed 1;",
                     path="examples/guide/choose_probe.sq")
    with pytest.MonkeyPatch.context() as patch:
        assert both(program, patch) == ("result", "taken")
    chosen = next(o for o in fast.run(program).observes if o.name == "chosen")
    assert {value for *_, value in chosen.samples} == {0.0, 1.0, 2.0}


# -- the campaign --------------------------------------------------------------------------------------------------


@pytest.mark.campaign
@pytest.mark.parametrize("shard", range(SHARDS))
def test_campaign_the_loop_gives_the_definitions_result(shard):
    counts: dict = {kind: Counter() for kind in KINDS}
    per_shard = CAMPAIGN_CASES // SHARDS
    with pytest.MonkeyPatch.context() as patch:
        for kind, seed in KINDS.items():
            for index in range(shard * per_shard, (shard + 1) * per_shard):
                program, _ = case_program(kind, seed + 1000, index)
                end, how = both(program, patch)
                counts[kind][end] += 1
                counts[kind][how] += 1
    CAMPAIGN_DATA.mkdir(exist_ok=True)
    (CAMPAIGN_DATA / f"shard-{shard}.json").write_text(json.dumps({
        "shard": shard, "cases_per_kind": per_shard, "differences": 0,
        "counts": {kind: dict(sorted(c.items())) for kind, c in counts.items()}}, indent=1) + "\n")


def test_the_recorded_campaign_held_the_loop_to_the_definition():
    """docs/data/steploop_campaign: at least 2,000 cases, every one the same on both engines, the loop
    taken in hundreds of them and given up (a preemption: the fast forms) in others."""
    total: Counter = Counter()
    cases = 0
    for shard in range(SHARDS):
        data = json.loads((CAMPAIGN_DATA / f"shard-{shard}.json").read_text())
        assert data["differences"] == 0 and data["cases_per_kind"] == CAMPAIGN_CASES // SHARDS
        for kind in KINDS:
            total.update(data["counts"][kind])
            cases += data["counts"][kind]["result"] + data["counts"][kind].get("run error", 0)
    assert cases == CAMPAIGN_CASES * len(KINDS) >= 2000
    # every kind is the loop's shape (priority orders included); a preemption gives the run up
    assert total["taken"] >= 1000 and total["gave up"] > 0 and total["not applied"] == 0


def _probe(body: str, sets: dict, run: str = "horizon 30; warmup 2; seed 3;",
           path: str = "examples/guide/written_probe.sq"):
    """A program of lib/vllm.sq's engine with an open workload, its session's statements ``body`` and its run
    clause ``run``, compiled with ``sets``."""
    from semantics.compiler import compile_source

    text = """use "../lib/vllm.sq";
let rate = 2;
let mean_prompt = 300;
let mean_out = 20;
workload { arrive poisson(rate); hidden o; turn { set o = 1 + floor(~exp(mean_out)); } }
session {
""" + body + """
}
run { """ + run + """ }
"""
    return compile_source(text, path, sets=sets)[0]


def test_a_run_of_sets_observes_and_branches_written_out_agrees_with_the_definition():
    """The sets, observes and branches of nothing else that the loop writes into one function (_written_run):
    expressions written out and those called as compiled (a draw, a query alone), a draw inside a written
    expression or a comparison guard reading an attribute set just before, a branch inside a branch's block, a guard of an attribute
    and one of a comparison, an observe after a set of what it reads: the same run on both engines, the
    loop's, on the synchronous and the asynchronous engine."""
    body = """  turn;
  set t0 = now;
  set prompt = 1 + floor(~erlang(4, mean_prompt));
  set big = prompt > 400;
  observe waiting = queued(reqs);
  branch (big) {
    set prompt = prompt - 50;
    branch (~uniform(prompt - 0.5, prompt) < 500) { observe lucky = prompt; }
    branch (prompt > 600) { observe huge = prompt; } else { set small = min(prompt, 500) + ~uniform(0, prompt); observe smaller = small; }
    observe big_prompt = max(prompt, 0) / 2;
  }
  vllm_request(prompt, o, 0, t0);
  set lat = now - t0;
  observe latency = lat;
  branch (lat < 3) { observe quick = lat; set t0 = -0; } else { observe slow = floor(-lat); }
  end;"""
    for asynchronous in (0, 1):
        program = _probe(body, {"blocks": 2000, "async_scheduling": asynchronous})
        with pytest.MonkeyPatch.context() as patch:
            assert both(program, patch) == ("result", "taken")
        names = {o.name for o in fast.run(program).observes if o.samples}
        assert {"waiting", "big_prompt", "smaller", "lucky", "latency", "quick"} <= names


def test_a_guard_neither_1_nor_0_in_a_written_run_is_the_definitions_run_error():
    """A branch written into a run whose guard is 2: the loop gives the run up where the definition raises its
    RunError, which the fast forms give."""
    body = """  turn;
  set t0 = now;
  set g = 1 + (now > 3);
  branch (g) { observe one = g; }
  vllm_request(100, o, 0, t0);
  end;"""
    program = _probe(body, {"blocks": 2000, "async_scheduling": 0})
    with pytest.MonkeyPatch.context() as patch:
        assert both(program, patch) == ("run error", "gave up")


def test_branches_nested_deeper_than_a_written_run_takes_agree_with_the_definition():
    """Thirty branches of sets and observes, each inside the one before: the outer ones are written into one
    run (at most _MAX_WRITTEN_NESTING deep), the rest run as the loop's statements; the same run on both
    engines, the loop's."""
    inner = "observe deep = prompt;"
    for depth in range(30):
        inner = f"branch (prompt > {depth}) {{ set prompt = prompt + 1; {inner} }}"
    body = f"""  turn;
  set t0 = now;
  set prompt = 1 + floor(~erlang(4, mean_prompt));
  {inner}
  vllm_request(prompt, o, 0, t0);
  end;"""
    program = _probe(body, {"blocks": 2000, "async_scheduling": 0})
    with pytest.MonkeyPatch.context() as patch:
        assert both(program, patch) == ("result", "taken")


@pytest.mark.parametrize("block", [0.0, 0.5, 1.0, 16.0, 3.7, 1e-300, 1e300])
def test_the_loops_block_rounding_is_the_machines(block):
    """steploop._up and _down, the machine's round_up and round_down on a block size, give the machine's value
    bit for bit, past the largest double and for inf and NaN too."""
    import math
    import struct

    from semantics.smallstep.machine import Machine

    m = Machine.__new__(Machine)
    m.block_sizes = (block,)
    for units in (0.0, -0.0, 1e-12, 0.3, 1.0, 15.999999999, 16.0, 16.000000001, 1e15, 1e308, math.inf, -math.inf,
                  math.nan, -3.5):
        for ours, theirs in ((steploop._up(units, block), m.round_up(0, units)),
                             (steploop._down(units, block), m.round_down(0, units))):
            assert struct.pack("<d", float(ours)) == struct.pack("<d", float(theirs)) or (ours != ours and theirs != theirs)


def test_a_session_holding_the_memory_twice_under_a_cost_that_reads_it_agrees_with_the_definition():
    """Nested holds on the KV pool (an outer hold of the request pool and some KV blocks around vllm_request's)
    under lib/vllm.sq's fitted cost, which reads kv_decode: a growth of the inner hold is written into its
    allocation at once (_grow: the memory's units per resident are read, and the session holds the memory
    twice), not kept on the resident. Over the pool's size, the chunk cap and both engines: the same run on
    both engines, the loop taking some of them and writing growths at once in those."""
    body = """  turn;
  set t0 = now;
  set prompt = 1 + floor(~erlang(4, mean_prompt));
  hold reqs (1), kv (16 * floor(~uniform(1, 5))) {
    vllm_request(prompt, o, 0, t0);
    observe latency = now - t0;
  }
  end;"""
    written = []
    original = steploop._set_allocations

    def counting(*args):
        written.append(1)
        return original(*args)

    taken = 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(steploop, "_set_allocations", counting)
        for seed in range(6):
            program = _probe(body, {"blocks": 60 + 40 * (seed % 4), "async_scheduling": seed % 2,
                                    "chunk_cap": [0, 32, 100][seed % 3]}, run=f"horizon 40; warmup 2; seed {seed};")
            taken += both(program, patch) == ("result", "taken")
    assert taken >= 1 and written
