"""The rules of a pool that shares prefixes (docs/design/shared-prefixes.md,
section 5; semantics/smallstep/sharing.py): the seven scenarios vLLM 0.33.0
answered, one per rule (tests/data/shared_prefix/), give the recorded answer,
the prefix hits included; every configuration of a sharing run holds the
invariants (a shared block counted once, the table's counts the holds'
references, the free order the cached blocks); the fast engine gives the
definition's result byte for byte; a slice of the corpus
oracle/data/campaign/shared-prefix.jsonl, synchronous and asynchronous,
agrees with vLLM without running it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oracle.scenario import run_scenario, scenario_program
from semantics import fast
from semantics.compiler import compile_source
from semantics.smallstep import driver
from semantics.smallstep.invariants import RunInvariants
from semantics.smallstep.driver import configurations
from test_smallstep_rules import PROGRAMS  # the rule-registry tests' programs: "sharing" applies every sharing rule

ROOT = Path(__file__).resolve().parent.parent
SEVEN = ROOT / "tests" / "data" / "shared_prefix"
CORPUS = ROOT / "oracle" / "data" / "campaign" / "shared-prefix.jsonl"

#: A small sharing program that applies every rule of the table: hits, a shared block revived from the free
#: order, registration as the engine schedules, tail-first release and an eviction from the free order's head
#: (the rule-registry tests trace the same program).
SHARING = PROGRAMS["sharing"]


def corpus_cases(indices) -> list[tuple[int, dict, dict]]:
    lines = CORPUS.read_text().splitlines()
    out = []
    for i in indices:
        record = json.loads(lines[i])
        case = {k: v for k, v in record["case"].items() if k != "kind"}
        out.append((i, case, record["answer"]))
    return out


#: A slice of the corpus: synchronous cases and asynchronous ones, with preemptions among them (the
#: eighteen asynchronous cases whose last fed token is cached only when vLLM applies the output among them).
SLICE = (0, 1, 2, 155, 199, 219, 1053, 1386, 1599, 2291, 2597, 2711)


@pytest.mark.parametrize("name", sorted(p.name[:-len(".out.json")] for p in SEVEN.glob("*.out.json")))
def test_the_seven_scenarios_answer_as_vllm(name):
    data = json.loads((SEVEN / f"{name}.json").read_text())
    recorded = json.loads((SEVEN / f"{name}.out.json").read_text())
    answer = run_scenario(data, str(SEVEN / f"{name}.json"))
    assert answer == {k: v for k, v in recorded.items() if k != "config"}


@pytest.mark.parametrize("index, case, recorded", corpus_cases(SLICE), ids=[f"case{i}" for i in SLICE])
def test_a_slice_of_the_corpus_agrees(index, case, recorded):
    answer = run_scenario(case, f"shared-prefix.jsonl#{index}")
    for field in ("first", "done", "preemptions", "steps", "cached"):
        assert answer[field] == recorded[field], (index, field)


def test_the_slice_has_both_engines_and_preemptions():
    cases = corpus_cases(SLICE)
    assert {bool(c.get("async")) for _, c, _ in cases} == {True, False}
    assert any(r["preemptions"] for _, _, r in cases)
    assert any(n for _, _, r in cases for n in r["cached"].values())


def walk_with_invariants(program) -> list[str]:
    checker = RunInvariants(program.warmup, program.horizon)
    rules = []
    for rule, c in configurations(program):
        checker.check(c)
        rules.append(rule)
    return rules


def test_every_configuration_of_a_sharing_run_holds_the_invariants():
    program, _ = compile_source(SHARING, "<sharing>")
    rules = set(walk_with_invariants(program))
    assert {"pool/hit", "pool/admit-shared", "pool/register", "pool/release-shared", "pool/evict-shared"} <= rules
    for index, case, _ in corpus_cases((1386, 2291)):  # asynchronous; the second preempts
        assert "pool/release-shared" in walk_with_invariants(scenario_program(case))


@pytest.mark.parametrize("which", ["sharing", "case0", "case2291"])
def test_the_fast_engine_gives_the_definitions_result(which):
    if which == "sharing":
        program, _ = compile_source(SHARING, "<sharing>")
    else:
        (_, case, _), = corpus_cases((int(which[4:]),))
        program = scenario_program(case)
    assert repr(fast.run(program)) == repr(driver.run(program))


def test_the_invariants_catch_a_block_counted_twice():
    program, _ = compile_source(SHARING, "<sharing>")
    last = None
    for _, c in configurations(program):
        table = c.pools[1].table
        if table.holds and len(table.counts) > 1:
            last = c
            break
    pool = last.pools[1]
    broken = last._replace(pools=(last.pools[0], pool._replace(allocated=pool.allocated + 4)))
    with pytest.raises(AssertionError):
        RunInvariants(program.warmup, program.horizon).check(broken)


#: Generated programs that use the extension: cases the corpus's generator draws under a seed the corpus does
#: not hold (oracle/campaign_prefix.py), each walked rule by rule with the invariants after every rule.
GENERATED_SEED, GENERATED = 7, 6


@pytest.mark.parametrize("index", range(GENERATED))
def test_generated_sharing_programs_hold_the_invariants_after_every_rule(index):
    from oracle.campaign_prefix import draw

    case, _ = draw(GENERATED_SEED, index)
    case = {k: v for k, v in case.items() if k != "kind"}
    program = scenario_program(case)
    rules = walk_with_invariants(program)
    assert "pool/admit" in rules
    if case.get("prefix_caching"):
        assert "pool/admit-shared" in rules and "pool/release-shared" in rules
