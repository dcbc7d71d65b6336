"""The example programs (examples/**/*.sq): each says what it models and
what it is checked against, compiles, validates against the IR schema,
links, and compiles to the same IR every time; the small deterministic pool
programs give, when run, the values their `// expect:` lines state.

Seed 002, section 1: "A serving deployment is a program"; section 5 lists the
programs and what each is checked against. A missing front end is a failure
here, not a skip: the import below is at module level on purpose.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import ir_schema
from semantics import codec
from semantics.compiler import compile_file
from semantics.errors import RunError
from semantics.link import link
from semantics.smallstep.driver import run

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

#: Examples the front end does not compile yet, though they follow the seed;
#: the reason names the front end's defect. Not strict: once the front end is
#: fixed the example simply passes (and this entry should go).
FRONT_END_DEFECTS = {
    "pd-disaggregation/llmd_pull.sq": (
        "front end: (1) a gateway route's `set`/`choose` names are read as `gw.NAME` "
        "(desugar.py queue_subst renames names_set_in(entry.body) for every queue, while attribute_name "
        "exempts gateways), so `choose i ...; P[i].prefill (prompt);` fails with unknown name `gw.i` "
        "(seed 002: the route 'sets the ones the session reads back'); (2) an `at admission` binding in a "
        "queue entry is keyed `P.hit` but read as the dotted path P.hit, which substitute() skips "
        "(path.simple is None): unknown name `P.hit` (the seed's own queue P snippet binds hit this way)"
    ),
}


def name_of(path: Path) -> str:
    return path.relative_to(EXAMPLES_DIR).as_posix()


def mark_defects(paths: list[Path]) -> list:
    out = []
    for p in paths:
        reason = FRONT_END_DEFECTS.get(name_of(p))
        marks = [pytest.mark.xfail(reason=reason, strict=False)] if reason else []
        out.append(pytest.param(p, id=name_of(p), marks=marks))
    return out


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


# --------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------


def test_every_required_example_exists():
    missing = [name for name in REQUIRED if not (EXAMPLES_DIR / name).is_file()]
    assert missing == []


def test_the_replay_trace_is_the_shared_short_base_trace():
    # Seed 002, section 8: the replay reads "the short-context trace" (short_base.csv).
    shared = Path("/work/shared/traces/short_base.csv")
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


@pytest.mark.parametrize("path", mark_defects(PROGRAMS))
def test_example_compiles_validates_and_links(path: Path):
    program = compile_checked(path)
    assert program.observes, "an example observes something"


@pytest.mark.parametrize("path", mark_defects(PROGRAMS))
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


@pytest.mark.parametrize("path", mark_defects(PROGRAMS))
def test_example_runs_briefly_and_observes(path: Path):
    program = compile_checked(path)
    horizon = min(program.horizon, SMOKE_HORIZON.get(name_of(path), 30.0))
    program = dataclasses.replace(program, horizon=horizon, warmup=0.0)
    try:
        result = run(program, base_dir=str(path.parent))
    except RunError as error:
        if "not implemented yet" in error.message:  # the engine says so itself (step stages, for now)
            pytest.xfail(f"the small-step engine: {error.message}")
        raise
    assert result.end == horizon
    assert any(record.samples for record in result.observes), "no observation was taken"
