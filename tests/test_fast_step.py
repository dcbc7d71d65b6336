"""The step engine's fast forms (semantics/fast/step.py) against the definition:
the oracle's scenario programs (lib/vllm.sq's engine with the corpora's cases:
synchronous and asynchronous, with and without the prefix cache, preemptions,
chunked prefill, limits) and generated step-engine programs
(tests/strategies.py) give the same RunResult on both engines, byte for byte,
or the same RunError; and the forms are what the fast engine ran them with
(``applies``, and the forms counted as they are taken). Programs the forms do
not take (speculate, serve by, exclusive prefill, shared prefixes, an IR
field they do not know) fall back, and still agree."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from oracle.scenario import scenario_program
from semantics import fast, ir
from semantics.errors import RunError
from semantics.fast import engine, step, steploop
from semantics.smallstep import driver
from strategies import loaded_programs

CAMPAIGN = Path(__file__).resolve().parent.parent / "oracle" / "data" / "campaign"
#: (corpus, cases taken from its start): synchronous, asynchronous, preemption-heavy, serve orders (fallback)
CORPORA = (("scenarios.jsonl", 6), ("async-scenarios.jsonl", 6), ("async-priority-pressure.jsonl", 4),
           ("replays.jsonl", 1), ("async-replays.jsonl", 1), ("limits.jsonl", 3), ("serve.jsonl", 2),
           ("spec-decode.jsonl", 2), ("shared-prefix.jsonl", 2))


def outcome(run, program) -> str:
    try:
        return repr(run(program))
    except RunError as e:
        return f"RunError {e.message!r} stmt={e.stmt!r} time={e.time!r}"


class Counting:
    """Counts the fast forms taken while it is active."""

    def __init__(self, patch: pytest.MonkeyPatch):
        self.counts = {"form_iteration": 0, "end_iteration": 0}
        for name in self.counts:
            original = getattr(step, name)

            def counted(*args, _original=original, _name=name, **kwargs):
                self.counts[_name] += 1
                return _original(*args, **kwargs)

            patch.setattr(step, name, counted)


def both(program: ir.Program) -> tuple[str, dict]:
    """The outcome on both engines, asserted equal, and how often the fast engine took each form (its own
    loop for the step engine, steploop.py, held off: tests/test_fast_steploop.py holds that one)."""
    definition = outcome(driver.run, program)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(steploop, "applies", lambda m: False)
        counting = Counting(patch)
        assert outcome(fast.run, program) == definition
    return definition, counting.counts


def cases(corpus: str, n: int) -> list[dict]:
    lines = (CAMPAIGN / corpus).read_text().splitlines()[:n]
    return [json.loads(line)["case"] for line in lines]


def scenario(case: dict) -> ir.Program:
    if case.get("kind") == "replay":
        pytest.skip("a replay case: tests/test_oracle_replay*.py")
    return scenario_program(case)


@pytest.mark.parametrize("corpus,n", CORPORA)
def test_the_oracles_scenarios_agree_on_both_engines(corpus, n):
    taken = 0
    for case in cases(corpus, n):
        if case.get("kind") not in (None, "scenario"):
            continue
        program = scenario_program(case)
        applies = any(step.applies(engine.build_machine(program)))
        _, counts = both(program)
        if applies:  # (a case whose every request is refused forms no iteration)
            taken += counts["form_iteration"] > 0 and counts["end_iteration"] > 0
        else:
            assert counts["form_iteration"] == 0
    if corpus in ("scenarios.jsonl", "async-scenarios.jsonl", "async-priority-pressure.jsonl", "limits.jsonl"):
        assert taken > 0, f"no case of {corpus} took the fast forms"
    if corpus in ("spec-decode.jsonl", "shared-prefix.jsonl"):
        assert taken == 0, f"a case of {corpus} took the fast forms, which do not model it"


def test_lib_vllm_takes_the_forms_and_an_unknown_setting_falls_back():
    case = cases("async-scenarios.jsonl", 1)[0]
    program = scenario_program(case)
    s = next(k for k, stage in enumerate(program.stages) if isinstance(stage.kind, ir.Step))
    assert step.applies(engine.build_machine(program))[s]

    @dataclasses.dataclass(frozen=True)
    class Extended(ir.Step):  # a step stage with a setting the forms do not know (a new extension)
        sliding: int = 0

    kind = program.stages[s].kind
    fields = {f.name: getattr(kind, f.name) for f in dataclasses.fields(kind)}

    def with_kind(new):
        stages = list(program.stages)
        stages[s] = dataclasses.replace(stages[s], kind=new)
        return dataclasses.replace(program, stages=tuple(stages))

    assert step.applies(engine.build_machine(with_kind(Extended(**fields))))[s]  # at its default: nothing new
    assert not step.applies(engine.build_machine(with_kind(Extended(**fields, sliding=4))))[s]

    @dataclasses.dataclass(frozen=True)
    class ExtendedPool(ir.Pool):  # a pool with a setting the forms of pool rules do not know
        window: int = 0

    def with_pool(window):
        pool = program.pools[0]
        pools = (ExtendedPool(**{f.name: getattr(pool, f.name) for f in dataclasses.fields(pool)}, window=window),)
        return dataclasses.replace(program, pools=pools + program.pools[1:])

    assert engine.build_machine(with_pool(0)).fast_pools and step.applies(engine.build_machine(with_pool(0)))[s]
    m = engine.build_machine(with_pool(16))
    assert not m.fast_pools and not any(step.applies(m))

    @dataclasses.dataclass(frozen=True)
    class ExtendedProgram(ir.Program):  # a program-wide setting (a connector, say) the forms do not know
        connector: str | None = None

    fields = {f.name: getattr(program, f.name) for f in dataclasses.fields(program)}
    assert engine.build_machine(ExtendedProgram(**fields)).fast_pools
    m = engine.build_machine(ExtendedProgram(**fields, connector="remote"))
    assert not m.fast_pools and not any(step.applies(m))


COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                   HealthCheck.filter_too_much])


@settings(max_examples=15, derandomize=True, **COMMON)
@given(loaded_programs())
def test_generated_step_programs_agree_on_both_engines(loaded):
    assume(loaded.program is not None)
    assume(any(step.applies(engine.build_machine(loaded.program))))
    both(loaded.program)


# -- make_room_lru (semantics/fast/pools.py): runs of whole blocks evicted at once ----------------------------------

LRU_PROGRAM = """
pool kv {{ cap {cap}; block {block}; evict lru; }}
stage d : delay;
workload {{ arrive batch(1); }}
session {{ hold kv (1) {{ run d (1); }} end; }}
run {{ horizon 10; }}
"""


@st.composite
def rooms(draw):
    """A pool evicting lru (whole numbers of units, or not), its entries, its counts, and the room asked."""
    whole = draw(st.booleans())
    block = draw(st.sampled_from([16.0, 4.0, 1.0] if whole else [0.3, 2.5, 16.0]))
    cap = draw(st.sampled_from([1000.0, 4096.0] if whole else [1000.0, 1000.1]))
    sizes = st.integers(1, 40).map(lambda k: k * block) if whole else \
        st.floats(0.1, 100.0, allow_nan=False).map(lambda x: round(x, 2))
    entries = draw(st.lists(sizes, min_size=1, max_size=8))
    cached = sum(entries)
    assume(cached <= cap)
    allocated = draw(st.sampled_from([0.0, 16.0, cap - cached]))
    assume(0.0 <= allocated <= cap - cached)
    need = draw(st.sampled_from([1.0, block, 3 * block, 17.0, cap - allocated, 0.5]))
    assume(allocated + need <= cap)
    counted = draw(st.sampled_from([0.0, 48.0, 0.1]))
    return cap, block, entries, allocated, need, counted


@settings(max_examples=60, derandomize=True, **COMMON)
@given(rooms())
def test_make_room_lru_evicts_as_the_definitions_rules_do(room):
    from semantics.compiler import compile_source
    from semantics.fast import pools as fast_pools
    from semantics.smallstep import pools as definition_pools
    from semantics.smallstep.configuration import CacheEntry, replace_at
    from semantics.smallstep.driver import initial_configuration

    cap, block, entries, allocated, need, counted = room
    program, _ = compile_source(LRU_PROGRAM.format(cap=cap, block=block), "<lru>")
    m = engine.machine_for(program)
    c = initial_configuration(m)
    pool = c.pools[0]._replace(allocated=allocated, cached=sum(entries),
                               entries=tuple(CacheEntry(None, k, u, 0.0, k) for k, u in enumerate(entries)))
    stats = c.statistics._replace(pools=(c.statistics.pools[0]._replace(evicted_units=counted),))
    c = c._replace(pools=replace_at(c.pools, 0, pool), statistics=stats)
    assert repr(fast_pools.make_room_lru(m, c, 0, need)) == repr(definition_pools.make_room(m, c, 0, need))
