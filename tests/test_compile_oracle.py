"""The oracle test of the front end: examples/oracle/vllm_request.sq, compiled
with a scenario's engine constants (--set) and given the scenario's explicit
sessions, is exactly the reference compiler's IR of that scenario.

Seed 002, section 5: "vllm_request.sq — one vLLM v1 request on the step
clock; compiled per scenario to tools/oracle/*.ir.json", and the oracle
README: "The serQ program of one vLLM request (its engine as constants, the
scenario's requests as explicit sessions: attrs prompt, o = out, arrive),
compiled to IR version 13 by the reference implementation".
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from semantics import codec, ir
from semantics.compiler import compile_file, compile_source
from shared_paths import SHARED

ROOT = Path(__file__).resolve().parent.parent
ORACLE = (SHARED / "oracle/vllm")
PROGRAM = ROOT / "examples" / "oracle" / "vllm_request.sq"
SCENARIOS = ("alone", "chunked", "hol", "longchunk", "mixed", "preempt", "seqcap")


def scenario_sets(scenario: dict) -> dict[str, float]:
    """The engine of a scenario as the program's let constants. The pool has
    num_blocks - 1 blocks: one is vLLM's null block (oracle README)."""
    return {
        "bs": scenario["block_size"],
        "B": scenario["budget"],
        "blocks": scenario["num_blocks"] - 1,
        "max_seqs": scenario["max_seqs"],
        "chunk": scenario.get("chunk", 0),
    }


def scenario_sessions(scenario: dict, program: ir.Program) -> ir.Sessions:
    """The scenario's requests as explicit sessions: prompt, o = out, arrive."""
    slot = {name: program.attrs.index(name) for name in ("prompt", "o", "arrive")}
    return ir.Sessions(tuple(
        ir.SessionSpec(((slot["prompt"], float(r["prompt"])), (slot["o"], float(r["out"])),
                        (slot["arrive"], float(r.get("arrive", 0)))), None)
        for r in scenario["requests"]))


@pytest.mark.parametrize("name", SCENARIOS)
def test_vllm_request_compiles_to_the_oracle_ir(name: str) -> None:
    scenario = json.loads((ORACLE / f"{name}.json").read_text())
    program, _ = compile_file(str(PROGRAM), sets=scenario_sets(scenario))
    program = dataclasses.replace(program, arrival=scenario_sessions(scenario, program))
    assert codec.dumps(program) == (ORACLE / f"{name}.ir.json").read_text()


def test_vllm_request_source_map_names_the_hold_and_the_observations() -> None:
    """Every IR statement has a span in the source (the SourceMap contract)."""
    program, source_map = compile_file(str(PROGRAM))
    for block_id, block in enumerate(program.blocks):
        for index in range(len(block)):
            assert source_map.stmt(block_id, index) is not None, (block_id, index)
    hold_index = next(i for i, s in enumerate(program.blocks[program.session]) if isinstance(s, ir.Hold))
    span = source_map.stmt(program.session, hold_index)
    line = PROGRAM.read_text().splitlines()[span.line - 1]
    assert line[span.col - 1:].startswith("hold reqs (1)")
    assert source_map.pools[0].line < source_map.pools[1].line
    assert source_map.run is not None and source_map.arrival is not None


SERVE_ORACLE = (SHARED / "oracle/serve")


@pytest.mark.parametrize("name", ("admission", "newest_first", "newest_first_preempt", "prefill_first"))
def test_vllm_request_with_a_serve_order_compiles_to_the_serve_oracle_ir(name: str) -> None:
    """The oracle's serve/ scenarios: the same program with the engine's
    residents served by the scenario's key, `serve by (KEY);` (oracle README)."""
    scenario = json.loads((SERVE_ORACLE / f"{name}.json").read_text())
    text = PROGRAM.read_text()
    assert "cost 1; memory kv;" in text
    text = text.replace("cost 1; memory kv;", f"cost 1; serve by ({scenario['serve']}); memory kv;")
    program, _ = compile_source(text, str(PROGRAM), sets=scenario_sets(scenario))
    program = dataclasses.replace(program, arrival=scenario_sessions(scenario, program))
    assert codec.dumps(program) == (SERVE_ORACLE / f"{name}.ir.json").read_text()
