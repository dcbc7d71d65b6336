"""The example programs (examples/**/*.sq): each says what it models and
what it is checked against, compiles, validates against the IR schema,
links, and compiles to the same IR every time; the small deterministic pool
programs give, when run, the values their `// expect:` lines state; and what
each header claims (closed forms, the vLLM oracle scenarios, section 8's
predictions) holds when the IR compiled here runs, on this project's engine
and on the reference implementation's (pyserq).

Seed 002, section 1: "A serving deployment is a program"; section 5 lists the
programs and what each is checked against. A missing front end is a failure
here, not a skip: the import below is at module level on purpose.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import re
from pathlib import Path

import pytest

import ir_schema
from semantics import codec, ir
from semantics.compiler import compile_file
from semantics.link import link
from semantics.fast import run  # what `serq-ref run` runs: the fast engine (the digest holds it to the definition)
from shared_paths import SHARED

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = ROOT / "examples"
#: examples/oracle/ belongs to the front end's oracle test (not this file's).
OTHERS_DIR = EXAMPLES_DIR / "oracle"
LIBRARY_DIR = EXAMPLES_DIR / "lib"

ALL_SOURCES = sorted(p for p in EXAMPLES_DIR.glob("**/*.sq") if OTHERS_DIR not in p.parents)
LIBRARIES = [p for p in ALL_SOURCES if LIBRARY_DIR in p.parents]
PROGRAMS = [p for p in ALL_SOURCES if p not in LIBRARIES]

#: The programs the brief asks for (the seed's section 5 corpus, in this
#: project's own words), and the pool programs for the docs.
REQUIRED = (
    "single-turn/mg1_det.sq", "single-turn/mg1_exp.sq", "single-turn/mg1_erlang.sq", "single-turn/mg1_h2.sq",
    "single-turn/mm1.sq", "single-turn/ps.sq", "single-turn/mmc.sq", "single-turn/ascend_lanes.sq",
    "multi-turn/closed.sq", "multi-turn/replica.sq", "multi-turn/routing.sq", "multi-turn/vllm_agentic.sq",
    "multi-turn/vllm_chat.sq", "lib/vllm.sq", "replay/vllm_replay.sq", "pd-disaggregation/llmd_pull.sq",
    "pools/prefix_cache.sq", "pools/evict_by.sq", "pools/spill.sq", "pools/lease.sq",
)  # fmt: skip


def name_of(path: Path) -> str:
    return path.relative_to(EXAMPLES_DIR).as_posix()


def read_header(path: Path) -> list[str]:
    """The leading comment block: the lines before the first non-comment line."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("//"):
            break
        lines.append(line)
    return lines


def compile_checked(path: Path):
    """Compile, validate against the schema, link: the pipeline's checks."""
    program, smap = compile_file(str(path))
    ir_schema.validate(codec.encode_program(program), file=str(path))
    link(program, smap)
    return program


def run_here(program: ir.Program, base_dir: str | None = None):
    """Run on this project's small-step engine."""
    return run(program, base_dir=base_dir)


def run_on_reference_engine(program: ir.Program):
    """Run IR compiled here on pyserq, the reference implementation's engine
    (a peer; it reads IR version 14, whose nodes include version 13's)."""
    import pyserq  # a test dependency (extra `test`): never skipped
    value = codec.encode_program(program)
    value["version"] = 14
    for block in value["blocks"]:
        for statement in block:
            if isinstance(statement, dict) and "Choose" in statement:
                # version 14 writes a choose's count as an expression
                statement["Choose"]["count"] = {"Num": float(statement["Choose"]["count"])}
    return pyserq.run(pyserq.Program.from_json(json.dumps(value)))


# --------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------


def test_every_required_example_exists():
    missing = [name for name in REQUIRED if not (EXAMPLES_DIR / name).is_file()]
    assert missing == []


def test_the_replay_trace_is_the_shared_short_base_trace():
    # Seed 002, section 8: the replay reads "the short-context trace" (short_base.csv).
    shared = (SHARED / "traces/short_base.csv")
    assert (EXAMPLES_DIR / "replay/short_base.csv").read_bytes() == shared.read_bytes()


@pytest.mark.parametrize("path", ALL_SOURCES, ids=name_of)
def test_header_says_what_it_models_and_what_checks_it(path: Path):
    header = read_header(path)
    assert header, f"{name_of(path)} does not start with a comment"
    assert header[0].startswith(f"// {path.name}: "), "the first line names the file and what it models"
    assert any("Checked against:" in line for line in header), "the header says what the program is checked against"


@pytest.mark.parametrize("library", LIBRARIES, ids=name_of)
def test_every_library_is_used_by_an_example(library: Path):
    # Seed 002, section 2: `use "file.sq";` reads the definitions of a library next to the file.
    users = [
        p for p in PROGRAMS
        if any((p.parent / m).resolve() == library for m in re.findall(r'^use "([^"]+)";', p.read_text(), re.M))
    ]  # fmt: skip
    assert users, f"{name_of(library)} is used by no example"


# --------------------------------------------------------------------------
# Every program compiles, validates, links, deterministically
# --------------------------------------------------------------------------


@pytest.mark.parametrize("path", PROGRAMS, ids=name_of)
def test_example_compiles_validates_and_links(path: Path):
    program = compile_checked(path)
    assert program.observes, "an example observes something"


@pytest.mark.parametrize("path", PROGRAMS, ids=name_of)
def test_example_compiles_to_the_same_ir_twice(path: Path):
    # common rules: "Same input, same output byte for byte."
    first = codec.dumps(compile_file(str(path))[0])
    second = codec.dumps(compile_file(str(path))[0])
    assert first == second


# --------------------------------------------------------------------------
# The pool programs: their expect lines against a run
# --------------------------------------------------------------------------

EXPECT = re.compile(r"^// expect: (\w+) = (-?[0-9.]+)$")
POOL_PROGRAMS = [p for p in PROGRAMS if p.parent.name == "pools"]


def read_expectations(path: Path) -> dict[str, float]:
    return {m.group(1): float(m.group(2)) for line in read_header(path) if (m := EXPECT.match(line))}


@pytest.mark.parametrize("path", POOL_PROGRAMS, ids=name_of)
def test_pool_program_gives_its_expected_values(path: Path):
    """Each `// expect: NAME = VALUE` line: observe NAME was taken, and every
    sample equals VALUE (the programs are deterministic, seed 002 section 3,
    "Pools")."""
    expected = read_expectations(path)
    assert expected, "a pool program states what it expects"
    result = run(compile_checked(path), base_dir=str(path.parent))
    samples = {record.name: [value for *_, value in record.samples] for record in result.observes}
    for name, value in expected.items():
        assert samples.get(name), f"observe {name} was never taken"
        assert samples[name] == [value] * len(samples[name]), f"observe {name}"


#: Pool programs that use a serq-ref extension the reference implementation does not have: prefixes shared
#: across requests (docs/design/shared-prefixes.md; pyserq's cache is a session's own, docs/conformance.md),
#: KV cache groups (docs/design/sliding-window.md; pyserq's pool is one full-attention group).
#: tests/test_shared_prefix_example.py checks the first against the real vLLM scheduler's recorded answer.
BEYOND_THE_REFERENCE = ("pools/shared_prefix.sq", "pools/sliding_window.sq", "pools/cpu_offload.sq")


def test_the_programs_beyond_the_reference_use_the_extension():
    for name in BEYOND_THE_REFERENCE:
        program = compile_checked(EXAMPLES_DIR / name)
        assert any(p.share_prefixes or p.groups for p in program.pools), name


@pytest.mark.parametrize("path", [p for p in POOL_PROGRAMS if name_of(p) not in BEYOND_THE_REFERENCE], ids=name_of)
def test_pool_program_gives_its_expected_values_on_the_reference_engine(path: Path):
    """The same expect lines, run by the reference implementation's engine:
    the hand computation, this project's engine and the reference agree."""
    report = run_on_reference_engine(compile_checked(path))
    for name, value in read_expectations(path).items():
        record = report.observe(name)
        assert record is not None and record.count > 0, f"observe {name} was never taken"
        assert list(record.samples) == [value] * record.count, f"observe {name}"


def test_the_expect_lines_name_observations_of_their_program():
    for path in POOL_PROGRAMS:
        program = compile_file(str(path))[0]
        assert set(read_expectations(path)) <= set(program.observes), name_of(path)


# --------------------------------------------------------------------------
# Every program runs a little (no run-time error on its first moments)
# --------------------------------------------------------------------------

#: Simulated time each program runs in the smoke test; enough for every
#: construct to be reached at least once, little enough to stay fast.
SMOKE_HORIZON = {"replay/vllm_replay.sq": 40.0, "pd-disaggregation/llmd_pull.sq": 20.0}


@pytest.mark.parametrize("path", PROGRAMS, ids=name_of)
def test_example_runs_briefly_and_observes(path: Path):
    program = compile_checked(path)
    horizon = min(program.horizon, SMOKE_HORIZON.get(name_of(path), 30.0))
    program = dataclasses.replace(program, horizon=horizon, warmup=0.0)
    result = run_here(program, str(path.parent))
    assert result.end == horizon
    assert any(record.samples for record in result.observes), "no observation was taken"


# --------------------------------------------------------------------------
# lib/vllm.sq against the real vLLM scheduler's answers
# --------------------------------------------------------------------------

ORACLE_VLLM = (SHARED / "oracle/vllm")
SCENARIOS = sorted(p for p in ORACLE_VLLM.glob("*.json") if p.name.count(".") == 1 and p.stem != "a100_engine")

def build_scenario_program(scenario: dict):
    """The library's engine with the scenario's configuration, on the step
    clock, and its requests as explicit sessions (examples/oracle/vllm_scenario.sq
    through the oracle harness: oracle/scenario.py)."""
    from oracle.scenario import scenario_program

    return scenario_program(scenario)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_library_request_reproduces_the_vllm_scheduler(path: Path):
    """Seed 002, section 7: the program "reproduces the real scheduler request
    for request" (first-token step, last-token step, preemption count)."""
    scenario = json.loads(path.read_text(encoding="utf-8"))
    answer = json.loads(path.with_suffix(".out.json").read_text(encoding="utf-8"))
    program = build_scenario_program(scenario)
    result = run_here(program)
    times = {record.name: {serial: time for time, serial, _, _ in record.samples} for record in result.observes}
    first = {str(serial): round(time) for serial, time in times["ttft"].items()}
    done = {str(serial): round(time) for serial, time in times["done"].items()}
    kv = next(pool for pool in result.pools if pool.name == "kv")
    assert (first, done, kv.preemptions) == (answer["first"], answer["done"], answer["preemptions"])


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_library_request_compiled_here_and_run_by_the_reference_engine(path: Path):
    """The same comparison with the IR this project compiles run by pyserq, the
    reference implementation's engine (a peer: IR version 14 reads version 13's
    nodes): a check of the library and of the front end, independent of this
    project's small-step engine."""
    scenario = json.loads(path.read_text(encoding="utf-8"))
    answer = json.loads(path.with_suffix(".out.json").read_text(encoding="utf-8"))
    report = run_on_reference_engine(build_scenario_program(scenario))
    ttft, done = report.observe("ttft"), report.observe("done")
    first = {str(serial): round(time) for serial, time in zip(ttft.sessions, ttft.times)}
    last = {str(serial): round(time) for serial, time in zip(done.sessions, done.times)}
    assert (first, last, report.pool("kv").preemptions) == (answer["first"], answer["done"], answer["preemptions"])


# --------------------------------------------------------------------------
# replay/vllm_replay.sq against section 8's predictions
# --------------------------------------------------------------------------

#: Seed 002, section 8: the model's predictions (TTFT in s, full-hit rate) for
#: the full trace at each spacing, with the calibrated c_it = 4 ms, c0 = 40 ms.
#: 2.5 s is the collapsed run (39.1 s predicted).
SECTION_8_PREDICTIONS = {5.0: (0.168, 0.947), 4.2: (0.264, 0.878), 3.5: (0.422, 0.821), 3.0: (0.605, 0.775)}


def compile_full_replay(spacing: float) -> ir.Program:
    path = EXAMPLES_DIR / "replay/vllm_replay.sq"
    # section 8's rows are the synchronous engine's (docs/section8.md)
    program, smap = compile_file(str(path), sets={"sessions": 333, "spacing": spacing, "async_scheduling": 0})
    link(program, smap)
    return dataclasses.replace(program, horizon=3000.0, trace=str(path.parent / program.trace))


@pytest.mark.parametrize("spacing", sorted(SECTION_8_PREDICTIONS))
def test_full_replay_on_the_reference_engine_gives_section_8_predictions(spacing: float):
    """The replay compiled here and run by the reference implementation's
    engine: mean TTFT within 10 % and full-hit rate within 0.02 of section 8's
    predictions (the program is deterministic: an ordered trace, no draws)."""
    report = run_on_reference_engine(compile_full_replay(spacing))
    ttft, full_hit = SECTION_8_PREDICTIONS[spacing]
    assert report.observe("ttft").count == 3321  # every request of the trace (section 7: "3 321 requests")
    assert report.observe("ttft").mean == pytest.approx(ttft, rel=0.10)
    assert report.observe("full_hit").mean == pytest.approx(full_hit, abs=0.02)


def test_full_replay_collapses_at_2_5_seconds_on_the_reference_engine():
    # Section 8: "2.5 s (collapsed) 34.6 / 39.1" (TTFT measured / model, seconds).
    report = run_on_reference_engine(compile_full_replay(2.5))
    assert report.observe("ttft").mean > 10
    assert report.observe("full_hit").mean < 0.4


@pytest.mark.campaign
def test_full_replay_on_this_engine_gives_section_8_prediction_at_5_seconds():
    result = run_here(compile_full_replay(5.0))
    samples = {record.name: [value for *_, value in record.samples] for record in result.observes}
    assert len(samples["ttft"]) == 3321
    assert sum(samples["ttft"]) / 3321 == pytest.approx(0.168, rel=0.10)
    assert sum(samples["full_hit"]) / len(samples["full_hit"]) == pytest.approx(0.947, abs=0.02)


# --------------------------------------------------------------------------
# replay/vllm_replay.sq against the real scheduler's prefix-cache replay
# --------------------------------------------------------------------------

#: oracle/README.md, "prefix_cache/": 3 sessions of 3 turns (examples/data/
#: cache_trace.csv is a copy of its trace), spacing 3, budget 64, max_seqs 4,
#: 20 blocks, iteration cost 1, no front-end delay.
CACHE_REPLAY_SETS = {
    "sessions": 3, "spacing": 3, "token_budget": 64, "max_seqs": 4, "blocks": 20,
    "c_it": 1, "d_decoder": 0, "e_context": 0, "a_prefill": 0, "b_attention": 0, "c0": 0,
    "async_scheduling": 0,  # ../shared/oracle's answers are the synchronous engine's (oracle/data/README.md)
}  # fmt: skip
CACHE_REPLAY_ANSWER = (SHARED / "oracle/prefix_cache/cache_trace.out.csv")


def compile_cache_replay() -> ir.Program:
    """The replay of examples/replay/vllm_replay.sq on the oracle's cache trace, linked with that trace
    (the linker reads a trace's columns from the file it names: issue 13)."""
    program, smap = compile_file(str(EXAMPLES_DIR / "replay/vllm_replay.sq"), sets=CACHE_REPLAY_SETS)
    program = dataclasses.replace(program, trace=str(EXAMPLES_DIR / "data/cache_trace.csv"), horizon=1000.0)
    link(program, smap)
    return program


def read_cache_replay_answer() -> dict[tuple[int, int], tuple[float, float, float]]:
    """(session, turn) -> (first, done, cached) of the real scheduler."""
    with CACHE_REPLAY_ANSWER.open(encoding="utf-8") as f:
        return {
            (int(row["session"]), int(row["turn"])): (float(row["first"]), float(row["done"]), float(row["cached"]))
            for row in csv.DictReader(f)
        }


def test_the_cache_trace_is_the_oracles():
    shared = (SHARED / "oracle/prefix_cache/cache_trace.csv")
    assert (EXAMPLES_DIR / "data/cache_trace.csv").read_bytes() == shared.read_bytes()


def test_replay_reproduces_the_real_schedulers_prefix_cache_replay_on_the_reference_engine():
    """oracle/README.md: "Per (session, turn): sent + ttft = first, sent +
    response = done, cached tokens = cached" (the observation times are first
    and done on the step clock)."""
    report = run_on_reference_engine(compile_cache_replay())
    got: dict[tuple[int, int], dict[str, float]] = {}
    for name in ("ttft", "response", "prefix_hit"):
        record = report.observe(name)
        for session, turn, time, value in zip(record.sessions, record.turns, record.times, record.samples):
            got.setdefault((session, turn), {})[name] = value if name == "prefix_hit" else time
    answer = read_cache_replay_answer()
    assert {key: (g["ttft"], g["response"], g["prefix_hit"]) for key, g in got.items()} == answer


def test_replay_reproduces_the_real_schedulers_prefix_cache_replay():
    result = run_here(compile_cache_replay())
    got: dict[tuple[int, int], dict[str, float]] = {}
    for record in result.observes:
        for time, session, turn, value in record.samples:
            got.setdefault((session, turn), {})[record.name] = value if record.name == "prefix_hit" else time
    answer = read_cache_replay_answer()
    assert {key: (g["ttft"], g["response"], g["prefix_hit"]) for key, g in got.items() if "ttft" in g} == answer


# --------------------------------------------------------------------------
# The closed-form programs on the reference engine, at their own horizons
# --------------------------------------------------------------------------

#: What each closed-form program's header says its observations converge to
#: (seed 002, section 5: "M/M/1 sojourn, PK for four laws, PS insensitivity,
#: MVA"; Erlang C for fifo(2)). Each run block is long enough for 3 %.
CLOSED_FORMS = {
    # Pollaczek-Khinchine: W = lambda E[S^2] / (2 (1 - rho)), lambda 0.8, E[S] 1
    "single-turn/mg1_det.sq": {"wait": 0.8 * 1 / 0.4, "sojourn": 0.8 * 1 / 0.4 + 1},
    "single-turn/mg1_exp.sq": {"wait": 0.8 * 2 / 0.4, "sojourn": 0.8 * 2 / 0.4 + 1},
    "single-turn/mg1_erlang.sq": {"wait": 0.8 * 1.25 / 0.4, "sojourn": 0.8 * 1.25 / 0.4 + 1},
    "single-turn/mg1_h2.sq": {"wait": 0.8 * 5 / 0.4, "sojourn": 0.8 * 5 / 0.4 + 1},
    # M/M/1, lambda 0.8, mu 1: sojourn ~ Exp(0.2)
    "single-turn/mm1.sq": {"sojourn": 5.0, "wait": 4.0, "slow": math.exp(-2.0)},
    # M/G/1-PS, rho 0.7: E[T] = E[S] / (1 - rho), and E[T | x] / x the same
    "single-turn/ps.sq": {"sojourn": 1 / 0.3, "slowdown": 1 / 0.3},
    # Erlang C, c = 2, a = 1.6: C = 0.7111, Wq = C / (c mu - lambda)
    "single-turn/mmc.sq": {"delayed": 0.64 / 0.9, "wait": 0.64 / 0.9 / 0.4, "sojourn": 0.64 / 0.9 / 0.4 + 1},
    # MVA for N = 8, S = 1, Z = 4
    "multi-turn/closed.sq": {"response": 4.2510},
}


def test_the_mva_figure_is_mean_value_analysis():
    """MVA (seed 002, section 5): R(n) = S (1 + Q(n-1)), X(n) = n / (R(n) + Z), Q(n) = X(n) R(n)."""
    queue = 0.0
    for n in range(1, 9):
        response = 1.0 * (1 + queue)
        queue = n / (response + 4.0) * response
    assert response == pytest.approx(CLOSED_FORMS["multi-turn/closed.sq"]["response"], abs=5e-5)


@pytest.mark.parametrize("name", sorted(CLOSED_FORMS))
def test_closed_form_program_on_the_reference_engine_is_within_3_percent(name: str):
    report = run_on_reference_engine(compile_checked(EXAMPLES_DIR / name))
    for observation, value in CLOSED_FORMS[name].items():
        assert report.observe(observation).mean == pytest.approx(value, rel=0.03), observation


# --------------------------------------------------------------------------
# What the multi-turn and lane programs' headers claim, on the reference engine
# --------------------------------------------------------------------------


def compile_with(name: str, **sets: float) -> ir.Program:
    program, smap = compile_file(str(EXAMPLES_DIR / name), sets=sets or None)
    link(program, smap)
    return program


def test_replica_without_a_memory_limit_always_finds_its_context():
    # replica.sq: "with kv_tokens = inf ... every turn after the first finds its whole context".
    report = run_on_reference_engine(compile_with("multi-turn/replica.sq", kv_tokens=math.inf))
    assert report.observe("full_hit").count > 100
    assert report.observe("full_hit").mean == 1


def test_replica_under_memory_pressure_loses_some_prefixes():
    report = run_on_reference_engine(compile_with("multi-turn/replica.sq"))
    assert 0.5 < report.observe("full_hit").mean < 1


def test_routing_by_affinity_keeps_sessions_with_their_context():
    # routing.sq: full_hit near 1 with affinity, near 1/4 of later turns with shortest queue.
    affinity = run_on_reference_engine(compile_with("multi-turn/routing.sq", affinity=1)).observe("full_hit").mean
    shortest = run_on_reference_engine(compile_with("multi-turn/routing.sq", affinity=0)).observe("full_hit").mean
    assert affinity > 0.95
    assert 0.1 < shortest < 0.5


def test_ascend_lanes_serve_immediate_then_short_then_long():
    # ascend_lanes.sq: "mean wait of immediate < short < long".
    report = run_on_reference_engine(compile_with("single-turn/ascend_lanes.sq"))
    waits = [report.observe(name).mean for name in ("wait_immediate", "wait_short", "wait_long")]
    assert waits == sorted(waits) and waits[0] < waits[2]


def test_ascend_aging_bounds_the_long_lanes_wait():
    # ascend_lanes.sq: "its longest wait stays within half a second of the threshold".
    aged = run_on_reference_engine(compile_with("single-turn/ascend_lanes.sq")).observe("wait_long")
    unaged = run_on_reference_engine(compile_with("single-turn/ascend_lanes.sq", aging=math.inf)).observe("wait_long")
    assert max(aged.samples) < 3 + 0.5 < max(unaged.samples)
