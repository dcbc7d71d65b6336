"""Every rule is one function registered under its trace name (issue 8, part 1).

The registry (semantics.smallstep.rules.REGISTRY), the names the step traces
print, and the rule tables of docs/semantics.md are the same set: a rule that
is registered but never printed, printed but not registered, or documented
under another name fails here. The traces are those of the reference
implementation's vLLM programs under ../shared/oracle and of the programs
below, which between them apply every rule, and those of every example that
runs. An example is traced to EXAMPLE_HORIZON here; to CAMPAIGN_HORIZON
(some 1.2 million records, a minute of a core) under the campaign marker,
which records the rules each example applies in docs/data/example_rules.json,
held here to the registry and to the short traces:

    python3 -m pytest -m campaign -o timeout=0 tests/test_smallstep_rules.py
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from irbuild import Builder, add, lt
from semantics import codec, ir
from shared_paths import SHARED
from semantics.compiler import compile_source
from semantics.errors import ProgramError, RunError
from semantics.pipeline import Overrides, load
from semantics.smallstep.driver import all_rules, trace
from semantics.smallstep.rules import REGISTRY

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: how far the default run traces every example, and the campaign
EXAMPLE_HORIZON, CAMPAIGN_HORIZON = 20.0, 200.0
#: the campaign's record: per example, the rules its trace to CAMPAIGN_HORIZON applied
EXAMPLE_RULES = ROOT / "docs" / "data" / "example_rules.json"


def shared_request(kv: str, budget: int, gate: str, sets: str, content: str) -> str:
    """A program of four requests through a step engine over a pool ``kv`` that shares prefixes, each hit
    within its prompt less one and cached whole at its release (lib/vllm.sq's vllm_request with a content
    clause): the programs "sharing" and "shared groups" below, which differ only in the pool's options, the
    budget, the gaps before the requests, their sizes and their content."""
    return f"""
pool reqs {{ cap 2; queue fifo; admit via engine; }}
pool kv {{ {kv} }}
stage engine : step {{ budget {budget}; cost 1; chunk 0; serve admission; memory kv; }}
stage gate : delay;
workload {{ arrive batch(4); hidden o; }}
session {{
  run gate ({gate});
  {sets}
  hold reqs (1), kv (hit + min(prompt - hit, budget_left(engine))) reserve (prompt)
       reuse (prompt - 1) content ({content})
       at admission (hit = min(cachedin(kv), prompt - 1)) {{
    prefill (prompt - cached) growing kv;
    decode (o - 1) growing kv;
  }} cache (prompt + o - 1);
  observe hit = cached;
  end;
}}
run {{ horizon 100; seed 1; }}
"""


#: Programs that between them apply every rule (text syntax).
PROGRAMS = {
    # sessions, fifo / ps / delay stages, choose, branch, loop, observe, end, a closed workload
    "statements": """
stage srv : fifo(1);
stage cpu : ps(2);
stage d : delay;
workload { arrive closed(3); }
session {
  set x = serial;
  choose j in 2 by (serial);
  branch (serial < 1) { run d (1); } else { run srv (1); }
  run d (0);
  loop { run cpu (0.5); branch (now > 3) { observe late = now; end; } }
}
run { horizon 8; seed 1; }
""",
    # pools: admission, reject, consume, eviction by block and entry, spill and landing, lease, release, drop, load
    "pools": """
pool kv { cap 48; block 8; evict lru; spill host via link (1) when (size >= 8); }
pool host { cap 64; block 8; }
stage link : ps(1);
stage d : delay;
workload { arrive batch(5); turn { set n = 8 + 8 * serial; } }
session {
  turn;
  branch (serial == 4) { hold kv (64) { run d (1); } }
  hold kv (n) { load kv (4); run d (1 + serial); } cache (n);
  hold kv (n) reuse (n) { run d (1); release kv; run d (1); } cache (n) lease kv (2);
  hold kv (8) { run d (1); } cache (8) lease kv (inf);
  run d (1);
  release kv;
  drop kv;
}
run { horizon 40; seed 2; }
""",
    # a pool that shares prefixes (docs/design/shared-prefixes.md): hit, admit-shared, register, release-shared,
    # evict-shared
    "sharing": shared_request("cap 40; block 4; evict lru; preempt lifo; share prefixes;", 16, "serial * 2",
                              "set prompt = 10 + 2 * serial; set o = 4; set key = serial < 3 ? 1 : 2;", "key : 8"),
    # a pool with KV cache groups (docs/design/sliding-window.md): admit-groups, slide
    "groups": """
pool reqs { cap 4; queue fifo; admit via engine; }
pool kv { cap 64; block 4; groups (full, window (8)); evict lru; preempt lifo; }
stage engine : step { budget 16; cost 1; chunk 0; serve admission; memory kv; }
workload { arrive batch(3); }
session {
  hold reqs (1), kv (min(12, budget_left(engine))) reserve (12) {
    prefill (12) growing kv;
    decode (10) growing kv;
  }
  observe done = now;
  end;
}
run { horizon 100; seed 1; }
""",
    # a pool with KV cache groups that shares prefixes (docs/design/sliding-window.md §1 (c)): hit-groups,
    # admit-shared-groups, register-window, slide-shared
    "shared groups": shared_request(
        "cap 64; block 4; groups (full, window (8)); evict lru; preempt lifo; share prefixes;", 8, "serial * 3",
        "set prompt = 20 + 3 * serial; set o = 6;", "1 : 16"),
    # growth under preempt lifo: grow, preempt (the victim's job leaves its stage)
    "growth": """
pool kv { cap 12; block 4; preempt lifo; }
stage srv : fifo(1);
stage d : delay;
workload { arrive batch(2); }
session {
  hold kv (4) { run d (1 + serial); grow kv (8); run srv (1); } cache (4);
}
run { horizon 60; seed 3; }
""",
    # growth under preempt none: grow-wait, then grow-resume
    "waiting growth": """
pool slots { cap 6; preempt none; }
stage d : delay;
workload { arrive batch(2); }
session { hold slots (2) { run d (1); grow slots (3 - 3 * serial); run d (1); } }
run { horizon 60; seed 3; }
""",
    # a step stage that waits: the head of its queue does not fit (step/admit-stop) and it has no resident (step/idle)
    "idle step stage": """
pool reqs { cap 4; admit via e; }
pool kv { cap 32; block 16; }
stage e : step { budget 32; cost 1; memory kv; }
stage d : delay;
workload { arrive batch(2); }
session {
  branch (serial == 0) { hold kv (32) { run d (3); } }
  else { run d (1); hold reqs (1), kv (16) { run e prefill (16) growing kv; run e decode (2) growing kv; } }
}
run { horizon 20; seed 5; }
""",
    # serve exclusive prefill: a waiting prefill replaces a tentative decode (step/select-prefill)
    "exclusive prefill": """
pool reqs { cap 2; admit via engine; }
pool kv { cap 20; }
stage engine : step { budget 4; cost 1; memory kv; serve exclusive prefill; }
stage d : delay;
workload { arrive batch(2); }
session {
  run d (serial);
  hold reqs (1), kv (min(4, budget_left(engine))) { run engine prefill (2 + 2 * serial) growing kv; run engine decode (2) growing kv; }
}
run { horizon 20; seed 6; }
""",
    # flows under a share
    "flows": """
stage a : ps(1);
stage b : ps(2);
share maxmin;
workload { arrive batch(3); }
session { run a, b (2); run a (1); }
run { horizon 20; seed 4; }
""",
    # speculative decoding: drafts given with a decode, the rejected ones rolled back (step/reject)
    "speculate": """
pool kv { cap 160; block 4; preempt lifo; }
pool reqs { cap 4; admit via engine; }
stage engine : step { budget 64; cost 1; memory kv; speculate (3) accept (serial == 0 ? 3 : 1); }
workload { arrive batch(2); }
session { hold reqs (1), kv (10) { prefill (10) growing kv; decode (11) growing kv; } }
run { horizon 20; seed 1; }
""",
    # speculative decoding's edges: a one-token prefill admitted while a decode runs is padded (step/pad), one
    # the budget left cannot pad is not admitted (step/pad-stop); lookahead slots, draft slots and a model length
    "speculate-edges": """
pool kv { cap 160; block 4; preempt lifo; }
pool reqs { cap 4; admit via engine; }
stage gate : delay;
stage engine : step { budget 10; cost 1; memory kv; speculate (3) accept (0) lookahead (1) slots (0) within (100); }
workload { arrive batch(3); }
session { run gate (serial); hold reqs (1), kv (serial == 0 ? 8 : 1) { prefill (serial == 0 ? 8 : 1) growing kv;
          decode (serial == 0 ? 12 : 2) growing kv; } }
run { horizon 30; seed 1; }
""",
}


def while_program() -> ir.Program:
    """``while`` exists only in the IR (the reference's replay programs use it)."""
    b = Builder(attrs=("k",))
    d = b.delay("d")
    b.session(b.set("k", 0.0), b.while_(lt(b.attr("k"), 2.0), b.set("k", add(b.attr("k"), 1.0)), b.run(d, 1.0)))
    return b.build(arrival=ir.Batch(1), horizon=10)


def oracle_programs():
    """The reference implementation's compiled vLLM programs (the step engine
    with preemption, withdrawal, head-of-line blocking, serve orders)."""
    for path in sorted((SHARED / "oracle").rglob("*.ir.json")):
        yield codec.loads(path.read_text())


def parked_victim_program():
    """async-scenarios.jsonl case 128 (the asynchronous engine, recorded from
    vLLM 0.33.0): a request whose last token is in flight is the victim of
    another's growth (step/preempt-parked), which no example does by itself."""
    from oracle import campaign
    from oracle.scenario import scenario_program

    path = ROOT / "oracle" / "data" / "campaign" / "async-scenarios.jsonl"
    with path.open() as lines:
        record = next(r for r in map(json.loads, lines) if r["index"] == 128)
    return scenario_program(campaign._scenario(record["case"]))


def printed_names(program, base_dir=None) -> set[str]:
    try:
        return {record["rule"] for record in trace(program, base_dir=base_dir)}
    except RunError:
        return set()


def example_programs(horizon: float = EXAMPLE_HORIZON):
    """Every example that loads (not the libraries), by its path under examples/, to ``horizon``."""
    for path in sorted((ROOT / "examples").rglob("*.sq")):
        if path.parent.name == "lib":
            continue
        try:
            loaded = load(str(path), Overrides(horizon=horizon, arrivals=None, seed=None, warmup=0.0, sets=()))
        except ProgramError:
            continue
        yield path.relative_to(ROOT / "examples").as_posix(), loaded.program, loaded.base_dir


def example_rules(horizon: float = EXAMPLE_HORIZON) -> dict[str, list[str]]:
    """Per example, the rules its trace to ``horizon`` applies (none: the run stopped with a RunError)."""
    return {name: sorted(printed_names(program, base_dir)) for name, program, base_dir in example_programs(horizon)}


def recorded_example_rules() -> dict:
    return json.loads(EXAMPLE_RULES.read_text())


def deferred_free_program():
    """kv-connector-noload.jsonl case 200 (async-scenarios.jsonl case 3 with a KV consumer connector that loads
    nothing, recorded from vLLM 0.33.0): a growth whose victim the batch in flight scheduled preempts nothing
    (step/defer, docs/design/kv-connector.md), which no example does by itself."""
    from oracle import campaign
    from oracle.scenario import scenario_program

    path = ROOT / "oracle" / "data" / "campaign" / "kv-connector-noload.jsonl"
    record = json.loads(path.read_text().splitlines()[200])
    return scenario_program(campaign._scenario(record["case"]))


def remote_load_program():
    """kv-connector.jsonl case 52 (recorded from vLLM 0.33.0): two requests load a partial remote prefill with one
    request slot, so that the second's promotion waits for the slot (step/load, step/promote, step/promote-stop;
    docs/design/kv-connector.md), which no example does by itself."""
    from oracle import campaign
    from oracle.scenario import scenario_program

    path = ROOT / "oracle" / "data" / "campaign" / "kv-connector.jsonl"
    record = json.loads(path.read_text().splitlines()[52])
    return scenario_program(campaign._scenario(record["case"]))


def offload_programs():
    """Three of tests/data/cpu_offload's hand-made scenarios (answered by vLLM 0.33.0): a prefix the GPU evicted
    loaded back from the CPU tier, a request that waits for a store of its prefix (offload/land,
    offload/lookup, offload/wait, offload/park, offload/store), and a one-token prompt loaded again and again
    (offload/reload; its run bounded at step 14: vLLM's never ends; docs/design/cpu-offloading.md)."""
    import dataclasses

    from oracle.scenario import scenario_program

    for name in ("load_back", "store_pending_waits"):
        yield scenario_program(json.loads((ROOT / "tests" / "data" / "cpu_offload" / f"{name}.json").read_text()))
    one = json.loads((ROOT / "tests" / "data" / "cpu_offload" / "one_token_loads_forever.json").read_text())
    yield dataclasses.replace(scenario_program(one), horizon=14.0)


def all_printed(examples: dict[str, list[str]]) -> set[str]:
    names = set()
    for source in PROGRAMS.values():
        names |= printed_names(compile_source(source, "<rules>")[0])
    names |= printed_names(while_program())
    for program in oracle_programs():
        names |= printed_names(program)
    names |= printed_names(parked_victim_program())
    names |= printed_names(deferred_free_program())
    names |= printed_names(remote_load_program())
    for program in offload_programs():
        names |= printed_names(program)
    for rules in examples.values():
        names |= set(rules)
    return names


def documented() -> set[str]:
    """The rule names in the first column of docs/semantics.md's tables under "Rules, by name"."""
    text = (ROOT / "docs" / "semantics.md").read_text()
    section = text[text.index("## Rules, by name"):]
    section = section[:section.index("\n## ", 3)]
    names = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            names |= set(re.findall(r"`([a-z]+/[a-z-]+)`", first))
    return names


def test_every_rule_is_registered_once_under_its_trace_name():
    rules = all_rules()
    assert [r.name for r in rules] == sorted(REGISTRY, key=lambda n: tuple(n.split("/")))
    for r in rules:
        assert re.fullmatch(r"[a-z]+/[a-z-]+", r.name), r.name
        assert r.meaning and r.seed, f"{r.name}: a rule says what it does and which sentence of the seed it implements"


def test_the_registry_the_traces_and_the_docs_name_the_same_rules():
    registered = set(REGISTRY)
    printed = all_printed({"recorded " + name: rules for name, rules in recorded_example_rules()["examples"].items()})
    assert printed - registered == set(), "printed by a trace but registered as no rule"
    assert registered - printed == set(), "registered but applied by none of the programs: add one that applies it"
    assert documented() == registered, (f"docs/semantics.md lacks {sorted(registered - documented())}, "
                                        f"names no rule {sorted(documented() - registered)}")


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_rule_programs_run(name):
    program, _ = compile_source(PROGRAMS[name], f"<{name}>")
    assert printed_names(program), f"{name} stopped with a RunError"


def test_every_example_traced_applies_what_its_recorded_campaign_trace_applied_first():
    """The short traces (EXAMPLE_HORIZON) of every example are the beginnings of the campaign's
    (CAMPAIGN_HORIZON, the same seed): each applies registered rules only, and only rules the
    recorded long trace applied; the record names exactly the examples there are."""
    recorded = recorded_example_rules()
    assert recorded["horizon"] == CAMPAIGN_HORIZON
    short = example_rules()
    assert list(short) == list(recorded["examples"]), \
        "an example was added or removed: record again (python3 -m pytest -m campaign tests/test_smallstep_rules.py)"
    for name, rules in short.items():
        assert set(rules) <= set(REGISTRY), (name, sorted(set(rules) - set(REGISTRY)))
        assert set(rules) <= set(recorded["examples"][name]), (name, sorted(set(rules) - set(recorded["examples"][name])))
    assert sum(map(len, short.values())) > 0


@pytest.mark.campaign
def test_campaign_every_example_to_the_campaign_horizon():
    """Every example traced to CAMPAIGN_HORIZON, every record through the trace contract; the rules
    each applied written to docs/data/example_rules.json (the same for the same code: no times)."""
    examples = example_rules(CAMPAIGN_HORIZON)
    EXAMPLE_RULES.write_text(json.dumps({"horizon": CAMPAIGN_HORIZON, "examples": examples}, indent=1) + "\n")
    assert all_printed(examples) == set(REGISTRY)
