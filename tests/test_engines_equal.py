"""The fast engine against the definition (issue 22 §1): any program the
generators of tests/strategies.py write (pools with every option, fifo, ps,
delay and step stages, flows, every workload; explicit sessions too) gives the
same RunResult on both, byte for byte (its repr: every float to the last
bit), or the same RunError (message, statement, time). Any difference is a
bug of the fast engine.

The default run draws DEFAULT_EXAMPLES programs, derandomized; the campaign
(``python3 -m pytest -m campaign -o timeout=0 -n 3 tests/test_engines_equal.py``)
draws, in SHARDS shards each of its own Hypothesis seed (the shard's number),
CAMPAIGN_EXAMPLES generated programs and CAMPAIGN_EXPLICIT programs of
explicit sessions in all, and each shard records the outcomes and the
features its programs reached in docs/data/engines_campaign/shard-K.json
(written only when every program agreed), which the default run checks.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings

from semantics import fast
from semantics.fast import chunks
from semantics.errors import RunError
from semantics.smallstep import driver
from strategies import FEATURES, Loaded, explicit_programs, loaded_programs

DEFAULT_EXAMPLES = 12
CAMPAIGN_EXAMPLES, CAMPAIGN_EXPLICIT = 1800, 300
SHARDS = 6
CAMPAIGN_DATA = Path(__file__).resolve().parent.parent / "docs" / "data" / "engines_campaign"


def outcome(run, program) -> str:
    """What a run gave: its RunResult's repr, or its RunError's class, message, statement and time."""
    try:
        return repr(run(program))
    except RunError as e:
        return f"RunError {e.message!r} stmt={e.stmt!r} time={e.time!r}"


def compare(loaded: Loaded) -> str:
    """Run ``loaded``'s program on both engines, assert they agree, and say how it ended."""
    if loaded.program is None:
        return "refused"
    definition = outcome(driver.run, loaded.program)
    assert outcome(fast.run, loaded.program) == definition, loaded.generated.text
    return "run error" if definition.startswith("RunError") else "result"


COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                   HealthCheck.filter_too_much])


@settings(max_examples=DEFAULT_EXAMPLES, derandomize=True, **COMMON)
@given(loaded_programs())
def test_the_fast_engine_gives_the_definitions_result(loaded):
    compare(loaded)


@settings(max_examples=DEFAULT_EXAMPLES, derandomize=True, **COMMON)
@given(loaded_programs())
def test_the_fast_engine_in_short_chunks_gives_the_definitions_result(loaded):
    """The same with the fast engine keeping every line and event list of more than 4 in chunks of 2
    (semantics/fast/chunks.py), so that its chunked paths (an event scheduled, cancelled, taken off; a
    job joining, leaving, starting) run in every kind of program, not only in long ones."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chunks, "LONG", 4)
        patch.setattr(chunks, "SIZE", 2)
        compare(loaded)


@settings(max_examples=5, derandomize=True, **COMMON)
@given(explicit_programs())
def test_the_fast_engine_gives_the_definitions_result_for_explicit_sessions(loaded):
    compare(loaded)


@pytest.mark.campaign
@pytest.mark.parametrize("shard", range(SHARDS))
def test_campaign_the_fast_engine_gives_the_definitions_result(shard):
    outcomes: Counter = Counter()
    features: Counter = Counter()

    def note(loaded: Loaded) -> None:
        outcomes[compare(loaded)] += 1
        if loaded.program is not None:
            features.update(loaded.generated.features)

    @seed(shard)
    @settings(max_examples=CAMPAIGN_EXAMPLES // SHARDS, database=None, **COMMON)
    @given(loaded_programs())
    def generated(loaded):
        note(loaded)

    @seed(SHARDS + shard)
    @settings(max_examples=CAMPAIGN_EXPLICIT // SHARDS, database=None, **COMMON)
    @given(explicit_programs())
    def explicit(loaded):
        note(loaded)

    generated()
    explicit()
    ran = outcomes["result"] + outcomes["run error"]
    CAMPAIGN_DATA.mkdir(exist_ok=True)
    (CAMPAIGN_DATA / f"shard-{shard}.json").write_text(json.dumps({
        "shard": shard, "examples": (CAMPAIGN_EXAMPLES + CAMPAIGN_EXPLICIT) // SHARDS,
        "programs": sum(outcomes.values()), "ran": ran, "outcomes": dict(sorted(outcomes.items())),
        "differences": 0, "features": {name: features[name] for name in FEATURES}}, indent=1) + "\n")
    assert sum(outcomes.values()) >= (CAMPAIGN_EXAMPLES + CAMPAIGN_EXPLICIT) // SHARDS


def recorded() -> dict:
    """The shards' records added up."""
    total: dict = {"examples": 0, "programs": 0, "ran": 0, "differences": 0, "outcomes": Counter(),
                   "features": Counter()}
    for shard in range(SHARDS):
        data = json.loads((CAMPAIGN_DATA / f"shard-{shard}.json").read_text())
        for key in ("examples", "programs", "ran", "differences"):
            total[key] += data[key]
        total["outcomes"].update(data["outcomes"])
        total["features"].update(data["features"])
    return total


def test_the_recorded_campaign_held_the_engines_equal():
    """docs/data/engines_campaign.json: at least 2,000 programs, every one the same on both engines,
    step stages and pools among those that ran."""
    data = recorded()
    assert data["examples"] == CAMPAIGN_EXAMPLES + CAMPAIGN_EXPLICIT >= 2000
    assert data["programs"] >= 2000 and data["differences"] == 0
    assert data["outcomes"]["result"] > 0 and data["outcomes"]["run error"] > 0
    assert data["features"]["step"] > 100 and data["features"]["pool"] > 100
