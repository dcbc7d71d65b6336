"""The IR's JSON codec (semantics/codec.py) against the files the reference
implementation wrote, and its refusals.

FORMAT.md: "Files are pretty-printed with a 2-space indent and end with a
newline." and "Loading a different `version` is an error that names both
versions." The seed (002, preamble): "The definition of a serQ program is its
IR", so reading an IR file and writing it again must not change a byte.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from semantics import codec, ir
from shared_paths import SHARED

ORACLE = (SHARED / "oracle")
ORACLE_IR_FILES = sorted(ORACLE.glob("**/*.ir.json"))


def test_the_oracle_has_ir_files():
    # The oracle directory holds the seven vLLM scenarios, four serve orders and the cache replay.
    assert len(ORACLE_IR_FILES) >= 12


@pytest.mark.parametrize("path", ORACLE_IR_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_oracle_file_round_trips_byte_for_byte(path: Path):
    text = path.read_text(encoding="utf-8")
    program = codec.loads(text)
    assert program.version == ir.IR_VERSION
    assert codec.dumps(program) == text


@pytest.mark.parametrize("path", ORACLE_IR_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_oracle_file_decodes_to_the_same_program_twice(path: Path):
    program = codec.loads(path.read_text(encoding="utf-8"))
    assert codec.loads(codec.dumps(program)) == program


def load_oracle_json(name: str) -> dict:
    return json.loads((ORACLE / name).read_text(encoding="utf-8"))


def test_a_different_version_names_both_versions():
    value = load_oracle_json("vllm/alone.ir.json")
    value["version"] = 14
    with pytest.raises(codec.IRFormatError) as caught:
        codec.decode_program(value)
    assert caught.value.path == "version"
    assert "14" in caught.value.message and "13" in caught.value.message


@pytest.mark.parametrize("node", codec.LATER_NODES)
def test_a_later_version_statement_is_refused_with_its_name_and_place(node: str):
    # FORMAT.md: later versions' nodes (fork/join, claims, registers, ...) are rejected
    # "with a clear message rather than a crash".
    value = load_oracle_json("vllm/alone.ir.json")
    value["blocks"][2][1] = {node: [1, 2]}
    with pytest.raises(codec.IRFormatError) as caught:
        codec.decode_program(value)
    assert caught.value.path == "blocks[2][1]"
    assert f"`{node}`" in caught.value.message
    assert "later serQ version" in caught.value.message


def test_a_later_version_expression_is_refused_with_its_place():
    value = load_oracle_json("vllm/alone.ir.json")
    value["blocks"][0][0] = {"Set": [9, {"Binary": ["Add", {"Num": 1.0}, {"Register": 0}]}]}
    with pytest.raises(codec.IRFormatError) as caught:
        codec.decode_program(value)
    assert caught.value.path == "blocks[0][0].Set[1].Binary[2]"
    assert "`Register`" in caught.value.message


def test_a_delay_stage_kind_is_refused_and_the_ps_spelling_named():
    # FORMAT.md: "Version 13 has no delay kind: `stage g : delay;` compiles to {"Ps": {"Ctx": "N"}}".
    value = load_oracle_json("vllm/alone.ir.json")
    value["stages"][1]["kind"] = {"Delay": None}
    with pytest.raises(codec.IRFormatError, match="Ps"):
        codec.decode_program(value)


@pytest.mark.parametrize(
    ("mutate", "path", "words"),
    [
        (lambda v: v["pools"][0].pop("cap"), "pools[0]", "missing field `cap`"),
        (lambda v: v["pools"][0].__setitem__("colour", "red"), "pools[0]", "unknown field `colour`"),
        (lambda v: v["blocks"][2].__setitem__(0, {"Teleport": 1}), "blocks[2][0]", "unknown statement `Teleport`"),
        (lambda v: v["blocks"][0][0]["Set"].__setitem__(1, {"Ctx": "Mood"}), "blocks[0][0].Set[1].Ctx", "`Mood`"),
        (lambda v: v["blocks"][0][0]["Set"].__setitem__(0, -1), "blocks[0][0].Set[0]", "non-negative integer"),
        (lambda v: v["pools"][1].__setitem__("cap", True), "pools[1].cap", "boolean"),
    ],
    ids=["missing-field", "extra-field", "unknown-statement", "unknown-context", "negative-slot", "boolean-number"],
)
def test_malformed_ir_is_refused_with_a_path(mutate, path: str, words: str):
    value = load_oracle_json("vllm/alone.ir.json")
    mutate(value)
    with pytest.raises(codec.IRFormatError) as caught:
        codec.decode_program(value)
    assert caught.value.path == path
    assert words in caught.value.message


def test_text_that_is_not_json_says_where():
    with pytest.raises(codec.IRFormatError) as caught:
        codec.loads('{"version": 13,\n  "attrs": [}\n')
    assert caught.value.path == "line 2 column 13"


def test_infinity_is_the_string_inf_and_comes_back():
    # FORMAT.md: "infinity is the string "inf" (or "-inf"), in Num and in a pool's cap".
    program = codec.loads((ORACLE / "vllm/alone.ir.json").read_text(encoding="utf-8"))
    wide = dataclasses.replace(program.pools[0], cap=math.inf)
    blocks = ((ir.Set(9, ir.Num(-math.inf)),),) + program.blocks[1:]
    changed = dataclasses.replace(program, pools=(wide,) + program.pools[1:], blocks=blocks)
    text = codec.dumps(changed)
    value = json.loads(text)
    assert value["pools"][0]["cap"] == "inf"
    assert value["blocks"][0][0] == {"Set": [9, {"Num": "-inf"}]}
    assert codec.loads(text) == changed


def test_nan_has_no_encoding():
    with pytest.raises(ValueError, match="NaN"):
        codec.encode_expr(ir.Num(math.nan))
