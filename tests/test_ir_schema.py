"""The IR's JSON Schema (ir_schema/ir.schema.json) against the codec and the
oracle's IR files.

FORMAT.md: "Structs are JSON objects with these field names", "Enums are
externally tagged", "infinity is the string "inf" (or "-inf")"; the schema
must accept exactly what semantics/codec.py writes and point at the place of
anything else.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ir_schema
from semantics import codec, ir
from semantics.errors import ProgramError
from shared_paths import SHARED

ORACLE = (SHARED / "oracle")
ORACLE_IR_FILES = sorted(ORACLE.glob("**/*.ir.json"))


def load_alone() -> dict:
    return json.loads((ORACLE / "vllm/alone.ir.json").read_text(encoding="utf-8"))


def get_schema_error(value: object) -> str:
    with pytest.raises(ProgramError) as caught:
        ir_schema.validate(value, file="x.ir.json")
    assert caught.value.file == "x.ir.json"
    return caught.value.message


# --------------------------------------------------------------------------
# The schema itself
# --------------------------------------------------------------------------


def test_schema_is_draft_2020_12_and_shipped_with_the_package():
    schema = ir_schema.load_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["version"] == {"const": ir.IR_VERSION}
    assert schema["additionalProperties"] is False


def test_schema_fields_are_the_codecs_fields():
    # FORMAT.md, Program: the required fields, then `arrivals`, `share`, `gauges` omitted when empty.
    schema = ir_schema.load_schema()
    assert tuple(schema["required"]) == codec.PROGRAM_FIELDS
    assert set(schema["properties"]) == set(codec.PROGRAM_FIELDS) | {"arrivals", "share", "gauges"}


def get_union_tags(union: dict) -> list[str]:
    return [tag for variant in union["oneOf"] for tag in ir_schema.get_variant_tags(variant)]


def test_schema_vocabulary_is_the_irs():
    """The context variables, distributions, functions and operators of the
    schema are those of semantics/ir.py, in the same order."""
    defs = ir_schema.load_schema()["$defs"]
    expr = {variant["required"][0]: variant["properties"] for variant in defs["Expr"]["oneOf"]}
    assert expr["Ctx"]["Ctx"]["enum"] == list(ir.CONTEXT_VARIABLES)
    assert expr["Sample"]["Sample"]["prefixItems"][0]["enum"] == list(ir.DISTRIBUTIONS)
    assert expr["Call"]["Call"]["prefixItems"][0]["enum"] == list(ir.FUNCTIONS)
    assert expr["Unary"]["Unary"]["prefixItems"][0]["enum"] == list(ir.UNARY_OPS)
    assert expr["Binary"]["Binary"]["prefixItems"][0]["enum"] == list(ir.BINARY_OPS)
    assert get_union_tags(defs["Stmt"]) == [
        "Turn", "End", "Set", "Observe", "Hold", "Grow", "Drop", "Release", "Load", "Run", "Branch", "Loop", "While", "Choose",
    ]  # fmt: skip
    assert get_union_tags(defs["Target"]) == ["Pool", "Stage", "Joint"]


# --------------------------------------------------------------------------
# The oracle's files
# --------------------------------------------------------------------------


@pytest.mark.parametrize("path", ORACLE_IR_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_oracle_file_validates(path: Path):
    ir_schema.validate(json.loads(path.read_text(encoding="utf-8")))


def test_the_cache_replay_uses_while_and_joint_and_validates():
    # codec.py: `While` and the `Joint` cost target are version-13 nodes the oracle's replay uses.
    text = (ORACLE / "prefix_cache/cache_trace.ir.json").read_text(encoding="utf-8")
    assert '"While"' in text and '"Joint"' in text
    ir_schema.validate(json.loads(text))


# --------------------------------------------------------------------------
# Targeted mutations: refused, with the place
# --------------------------------------------------------------------------


def test_wrong_version_is_refused_at_version():
    value = load_alone()
    value["version"] = 12
    assert get_schema_error(value) == "IR does not match the schema at $.version: 13 was expected"


def test_wrong_version_is_named_before_anything_else():
    # FORMAT.md: "Loading a different `version` is an error"; the rest of such a file proves nothing.
    assert get_schema_error({"version": 14}) == "IR does not match the schema at $.version: 13 was expected"


def test_unknown_statement_is_named():
    value = load_alone()
    value["blocks"][2][0] = {"Teleport": {"to": 3}}
    message = get_schema_error(value)
    assert message.startswith("IR does not match the schema at $.blocks[2][0]: unknown statement `Teleport`")
    assert "Hold" in message  # the variants it could have been


def test_later_version_statement_is_named_as_such():
    value = load_alone()
    value["blocks"][2][0] = {"Fork": [3, 4]}
    assert get_schema_error(value) == (
        "IR does not match the schema at $.blocks[2][0]: `Fork` is an IR node of a later serQ version; serq-ref reads version 13"
    )


def test_missing_field_is_named():
    value = load_alone()
    del value["stages"][0]["kind"]["Step"]["memory"]
    assert get_schema_error(value) == "IR does not match the schema at $.stages[0].kind.Step: 'memory' is a required property"


def test_extra_field_is_named():
    value = load_alone()
    value["pools"][1]["colour"] = "blue"
    assert get_schema_error(value) == (
        "IR does not match the schema at $.pools[1]: Additional properties are not allowed ('colour' was unexpected)"
    )


def test_missing_program_field_is_named_at_the_root():
    value = load_alone()
    del value["hidden"]
    assert get_schema_error(value) == "IR does not match the schema at $: 'hidden' is a required property"


def test_deep_expression_error_points_inside_the_expression():
    value = load_alone()
    chunk = value["stages"][0]["kind"]["Step"]["chunk"]
    chunk["Cond"][0]["Binary"][1]["Binary"][1] = {"Ctx": "Mood"}
    message = get_schema_error(value)
    assert message.startswith("IR does not match the schema at $.stages[0].kind.Step.chunk.Cond[0].Binary[1].Binary[1].Ctx: 'Mood'")


def test_a_number_that_is_a_word_is_refused_but_inf_is_a_number():
    value = load_alone()
    value["pools"][0]["cap"] = "inf"
    ir_schema.validate(value)
    value["pools"][0]["cap"] = "lots"
    assert get_schema_error(value) == 'IR does not match the schema at $.pools[0].cap: expected a number, found "lots"'


# The codec and the schema agree on these refusals (each is also a codec error).
MUTATIONS = {
    "version": lambda v: v.__setitem__("version", 14),
    "unknown-statement": lambda v: v["blocks"][2].__setitem__(0, {"Teleport": 1}),
    "later-node": lambda v: v["blocks"][2].__setitem__(0, {"Join": 1}),
    "missing-field": lambda v: v["pools"][0].pop("queue"),
    "extra-field": lambda v: v["stages"][1].__setitem__("speed", 2.0),
    "extra-program-field": lambda v: v.__setitem__("comment", "x"),
    "wrong-arity": lambda v: v["blocks"][0][0].__setitem__("Set", [9]),
    "unknown-mode": lambda v: v["blocks"][2][0]["Run"].__setitem__("mode", "Fast"),
    "bad-side": lambda v: v["sides"][0].__setitem__(0, "Client"),
    "bad-share": lambda v: v.__setitem__("share", "Fair"),
    "boolean-number": lambda v: v.__setitem__("horizon", False),
    "two-tags": lambda v: v["blocks"][2].__setitem__(1, {"Turn": None, "End": None}),
}


@pytest.mark.parametrize("name", MUTATIONS)
def test_schema_and_codec_both_refuse(name: str):
    value = load_alone()
    MUTATIONS[name](value)
    with pytest.raises(ProgramError, match=r"^IR does not match the schema at \$"):
        ir_schema.validate(value)
    with pytest.raises(codec.IRFormatError):
        codec.decode_program(copy.deepcopy(value))


# --------------------------------------------------------------------------
# Random programs: what the codec writes, the schema accepts
# --------------------------------------------------------------------------

indexes = st.integers(min_value=0, max_value=40)
numbers = st.floats(allow_nan=False)  # infinities included: they encode as "inf" / "-inf"
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
families = st.builds(lambda kind, base, count: ir.CostTarget(kind, base, count), st.sampled_from(["Pool", "Stage"]), indexes, indexes)
targets = st.recursive(families, lambda inner: st.builds(ir.JointTarget, st.lists(inner, max_size=3).map(tuple)), max_leaves=4)


def extend_expressions(inner: st.SearchStrategy) -> st.SearchStrategy:
    """Compound expressions over ``inner`` (the recursive case of ``expressions``)."""
    refs = st.builds(ir.Ref, indexes, indexes, st.none() | inner)
    args = st.one_of(st.builds(ir.ExprArg, inner), st.builds(ir.PoolArg, refs), st.builds(ir.StageArg, refs))
    return st.one_of(
        st.builds(ir.Sample, st.sampled_from(list(ir.DISTRIBUTIONS)), st.lists(inner, max_size=2).map(tuple)),
        st.builds(ir.Call, st.sampled_from(list(ir.FUNCTIONS)), st.lists(args, max_size=3).map(tuple)),
        st.builds(ir.Unary, st.sampled_from(ir.UNARY_OPS), inner),
        st.builds(ir.Binary, st.sampled_from(ir.BINARY_OPS), inner, inner),
        st.builds(ir.Cond, inner, inner, inner),
        st.builds(ir.Cost, targets, inner),
    )


leaves = st.one_of(
    st.builds(ir.Num, numbers), st.builds(ir.Attr, indexes), st.builds(ir.Ctx, st.sampled_from(list(ir.CONTEXT_VARIABLES)))
)
expressions = st.recursive(leaves, extend_expressions, max_leaves=8)
optional_expressions = st.none() | expressions
keys = st.lists(expressions, max_size=2).map(tuple)
refs = st.builds(ir.Ref, indexes, indexes, optional_expressions)

statements = st.one_of(
    st.just(ir.Turn()),
    st.just(ir.End()),
    st.builds(ir.Set, indexes, expressions),
    st.builds(ir.Observe, indexes, expressions),
    st.builds(
        ir.Hold,
        st.lists(st.builds(ir.HoldPool, refs, expressions, optional_expressions), min_size=1, max_size=2).map(tuple),
        optional_expressions,
        indexes,
        optional_expressions,
        st.none() | st.builds(ir.Lease, refs, expressions),
    ),
    st.builds(ir.Grow, refs, expressions),
    st.builds(ir.Drop, refs),
    st.builds(ir.Release, refs),
    st.builds(ir.Load, refs, expressions),
    st.builds(
        ir.Run, refs, st.sampled_from(ir.RUN_MODES), expressions, st.none() | refs, st.none() | st.lists(refs, max_size=2).map(tuple)
    ),
    st.builds(ir.Branch, expressions, indexes, indexes),
    st.builds(ir.Loop, indexes),
    st.builds(ir.While, expressions, indexes),
    st.builds(ir.Choose, indexes, indexes, keys),
)

pools = st.builds(
    ir.Pool,
    names,
    st.none() | indexes,
    st.floats(min_value=0, allow_nan=False),
    st.none() | st.floats(min_value=1, max_value=64),
    st.none() | keys,
    st.none() | keys,
    st.none() | keys,
    st.none() | st.builds(ir.Spill, indexes, indexes, expressions, expressions),
    st.none() | indexes,
)
stage_kinds = st.one_of(
    st.builds(ir.Fifo, indexes),
    st.builds(ir.Ps, expressions),
    st.builds(ir.Step, expressions, expressions, expressions, st.none() | keys, st.none() | indexes,
              st.sampled_from(ir.SELF_PREEMPTION)),
)
stages = st.builds(ir.Stage, names, st.none() | indexes, stage_kinds)
pairs = st.lists(st.tuples(indexes, numbers), max_size=3).map(tuple)
arrivals = st.one_of(
    st.builds(ir.Poisson, st.floats(min_value=0, allow_nan=False)),
    st.builds(ir.Renewal, expressions),
    st.builds(ir.Closed, indexes),
    st.builds(ir.Batch, indexes),
    st.just(ir.NoArrival()),
    st.builds(ir.Sessions, st.lists(st.builds(ir.SessionSpec, pairs, st.none() | st.lists(pairs, max_size=2).map(tuple)), max_size=3).map(tuple)),
)
attr_types = st.one_of(st.sampled_from(["Size", "Value"]), targets)


@st.composite
def programs(draw: st.DrawFn) -> ir.Program:
    """A random ir.Program: every node kind and option of version 13, with
    indexes that need not name anything (the schema checks shape, not links)."""
    attrs = draw(st.lists(names, max_size=4).map(lambda extra: ir.BUILTIN_ATTRS + tuple(extra)))
    blocks = draw(st.lists(st.lists(statements, max_size=3).map(tuple), min_size=1, max_size=4).map(tuple))
    return ir.Program(
        version=ir.IR_VERSION,
        attrs=attrs,
        attr_types=tuple(draw(attr_types) for _ in attrs),
        sides=tuple(tuple(draw(st.sampled_from(ir.SIDES)) for _ in block) for block in blocks),
        observes=draw(st.lists(names, max_size=2).map(tuple)),
        pools=draw(st.lists(pools, max_size=2).map(tuple)),
        stages=draw(st.lists(stages, max_size=2).map(tuple)),
        arrival=draw(arrivals),
        trace=draw(st.none() | st.just("trace.csv")),
        trace_ordered=draw(st.booleans()),
        init=draw(indexes),
        turn=draw(indexes),
        session=draw(indexes),
        blocks=blocks,
        horizon=draw(st.floats(min_value=0, allow_nan=False)),
        warmup=draw(st.floats(min_value=0, allow_nan=False, allow_infinity=False)),
        seed=draw(st.integers(min_value=0, max_value=2**63 - 1)),
        arrivals=draw(st.none() | indexes),
        slot_cached=0,
        slot_serial=1,
        slot_turn=2,
        slot_new=3,
        slot_out=4,
        slot_think=5,
        slot_more=6,
        slot_forced=7,
        slot_computed=8,
        hidden=draw(st.lists(indexes, max_size=2).map(tuple)),
        share=draw(st.none() | st.sampled_from(["MaxMin", "Bottleneck"])),
        gauges=draw(st.lists(st.builds(ir.Gauge, names, expressions), max_size=2).map(tuple)),
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_program_encodes_to_valid_json_and_decodes_back_equal(program: ir.Program):
    text = codec.dumps(program)
    # FORMAT.md: "infinity is the string "inf" (or "-inf")"; JSON has no Infinity or NaN token.
    assert "Infinity" not in text and "NaN" not in text
    value = json.loads(text)
    ir_schema.validate(value)
    assert codec.decode_program(value) == program
    assert codec.dumps(codec.loads(text)) == text


#: Fields the encoding may omit (FORMAT.md: `index` of a single pool or stage,
#: a run's `also`, a session's `turns`, the program's `arrivals`, `share`, `gauges`).
OPTIONAL_FIELDS = {"index", "also", "turns", "arrivals", "share", "gauges", "self_preemption"}


def list_objects(value, path=()) -> list[tuple]:
    """The paths of every JSON object in ``value``, the root included."""
    found = [path] if isinstance(value, dict) else []
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        found.extend(list_objects(child, path + (key,)))
    return found


def get_at(value, path: tuple):
    for key in path:
        value = value[key]
    return value


def assert_both_refuse(value) -> None:
    with pytest.raises(ProgramError, match=r"^IR does not match the schema at \$"):
        ir_schema.validate(value)
    with pytest.raises(codec.IRFormatError):
        codec.decode_program(value)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.data())
def test_schema_and_codec_both_refuse_an_extra_field_anywhere(program: ir.Program, data: st.DataObject):
    # FORMAT.md: "Structs are JSON objects with these field names" (and no others).
    value = codec.encode_program(program)
    path = data.draw(st.sampled_from(list_objects(value)))
    get_at(value, path)["colour"] = "red"
    assert_both_refuse(value)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.data())
def test_schema_and_codec_both_refuse_a_missing_field_anywhere(program: ir.Program, data: st.DataObject):
    value = codec.encode_program(program)
    fields = [(path, key) for path in list_objects(value) for key in get_at(value, path) if key not in OPTIONAL_FIELDS]
    path, key = data.draw(st.sampled_from(fields))
    del get_at(value, path)[key]
    assert_both_refuse(value)
