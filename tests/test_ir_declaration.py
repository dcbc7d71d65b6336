"""The IR declared once (issue 22 §3): each class of semantics/ir.py carries
its JSON form (``@node``), each union is declared from its ``typing.Union``,
and the codec and the JSON Schema are derived from the declarations.

"One declaration of each IR node from which the codec, the JSON Schema ...
are derived, so that adding a statement ... touches one place." These check
that every node and union is declared, that the committed schema is the
generator's output, that neither the codec nor the generator names a node,
that a statement added in semantics/ir.py alone is encoded, decoded and in
the schema, that every example and generated program round-trips and
validates, and that the Lean fragment's mirror (lean_bridge/syntax.py, which
imports nothing of the core) has the fields of the IR nodes it corresponds to.
"""

from __future__ import annotations

import ast as pyast
import dataclasses
import json
import os
import subprocess
import sys
import typing
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings

import ir_schema
from ir_schema import generate
from semantics import codec, ir, irspec
from semantics.compiler import compile_file, compile_source
from semantics.errors import ProgramError
from strategies import generated

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("**/*.sq"))
UNIONS = ("Target", "Arg", "Expr", "Stmt", "StageKind", "Arrival")


def ir_classes() -> list[type]:
    return [c for c in vars(ir).values()
            if isinstance(c, type) and dataclasses.is_dataclass(c) and c.__module__ == ir.__name__]


# --------------------------------------------------------------------------
# Every node and union declared
# --------------------------------------------------------------------------


def test_every_class_of_the_ir_is_declared_with_its_fields():
    classes = ir_classes()
    assert len(classes) >= 45
    for cls in classes:
        spec = irspec.NODES.get(cls)
        assert spec is not None, f"ir.{cls.__name__} has no @node declaration"
        names = [f.name for f in dataclasses.fields(cls) if f.name != spec.tag_field]
        assert [name for name, _ in spec.fields] == names


def test_every_union_is_declared_with_its_members_in_order():
    assert tuple(irspec.UNIONS) == UNIONS
    for name in UNIONS:
        assert irspec.UNIONS[name].members == typing.get_args(getattr(ir, name))


def test_every_name_a_declaration_uses_is_declared():
    """A ``Def`` to nothing would fail only when a file uses it: every one resolves."""

    def walk(t):
        if isinstance(t, irspec.Absent):
            yield from walk(t.inner)
        elif isinstance(t, irspec.Def):
            yield t.name
        elif isinstance(t, (irspec.Opt, irspec.Wrap)):
            yield from walk(t.inner)
        elif isinstance(t, irspec.List):
            yield from walk(t.item)
        elif isinstance(t, irspec.Tuple):
            for item in t.items:
                yield from walk(item)
        elif isinstance(t, irspec.UnitOr):
            yield from walk(t.payload)

    used = {name for spec in irspec.NODES.values() for _, t in spec.fields for name in walk(t)}
    used |= {name for spec in irspec.DECLARED if isinstance(spec, irspec.TypeSpec) for name in walk(spec.type)}
    assert used and used <= set(irspec.DEFS), used - set(irspec.DEFS)


def test_a_class_whose_declaration_misses_a_field_is_refused_at_import():
    with pytest.raises(TypeError, match=r"declares fields \['a'\], the class has \['a', 'b'\]"):
        @irspec.node(irspec.TUPLE, a=irspec.INDEX)
        @dataclasses.dataclass(frozen=True)
        class Broken:
            a: int
            b: int


# --------------------------------------------------------------------------
# The schema is the generator's output
# --------------------------------------------------------------------------


def test_the_committed_schema_is_the_declarations_byte_for_byte():
    assert generate.render() == generate.SCHEMA_PATH.read_text(encoding="utf-8")
    assert generate.SCHEMA_PATH == Path(ir_schema.__file__).parent / ir_schema.SCHEMA_FILE


def test_the_check_command_says_so(capsys):
    assert generate.main(["--check"]) == 0
    assert "is the declaration's schema" in capsys.readouterr().out


def test_the_program_fields_are_the_declarations():
    fields = irspec.NODES[ir.Program].fields
    assert codec.PROGRAM_FIELDS == tuple(n for n, t in fields if not isinstance(t, irspec.Absent))
    assert {n for n, t in fields if isinstance(t, irspec.Absent)} == {"arrivals", "share", "gauges"}


# --------------------------------------------------------------------------
# One place: nothing per node in what is derived
# --------------------------------------------------------------------------


@pytest.mark.parametrize("module", ["semantics/codec.py", "ir_schema/generate.py"])
def test_the_derivations_name_no_node(module: str):
    """The codec and the schema generator use the declarations only: no
    ``ir.Hold``, no ``case ir.Run(...)``; the program alone is named (the
    file's root), and the unions in type annotations."""
    tree = pyast.parse((ROOT / module).read_text(encoding="utf-8"))
    named = {node.attr for node in pyast.walk(tree)
             if isinstance(node, pyast.Attribute) and isinstance(node.value, pyast.Name) and node.value.id == "ir"
             and node.attr[:1].isupper()}
    assert named <= {"Program", "IR_VERSION", *UNIONS}, named
    assert not [n for n in pyast.walk(tree) if isinstance(n, pyast.Match)]


ADD_A_STATEMENT = r'''
import json, sys, types
import jsonschema
import semantics
source = open("semantics/ir.py", encoding="utf-8").read()
old = "Stmt = Union[Turn, Set,"
assert source.count(old) == 1
source = source.replace(old, """@node(TUPLE, ticks=INDEX, why=Opt(Def("Expr")))
@dataclass(frozen=True, slots=True)
class Pause:
    ticks: int
    why: "Expr | None"


Stmt = Union[Turn, Pause, Set,""")
module = types.ModuleType("semantics.ir")
module.__package__ = "semantics"
sys.modules["semantics.ir"] = module
semantics.ir = module
exec(compile(source, "semantics/ir.py", "exec"), module.__dict__)
from semantics import codec, ir
from ir_schema import generate
program = codec.loads(open(sys.argv[1], encoding="utf-8").read())
blocks = ((ir.Pause(3, ir.Num(1.5)), ir.Pause(0, None)) + program.blocks[0],) + program.blocks[1:]
changed = program.__class__(**{**{f: getattr(program, f) for f in program.__dataclass_fields__}, "blocks": blocks})
text = codec.dumps(changed)
value = json.loads(text)
assert value["blocks"][0][:2] == [{"Pause": [3, {"Num": 1.5}]}, {"Pause": [0, None]}], value["blocks"][0][:2]
assert codec.loads(text) == changed
schema = generate.build_schema()
jsonschema.Draft202012Validator(schema).validate(value)
value["blocks"][0][0] = {"Pause": [3]}
assert list(jsonschema.Draft202012Validator(schema).iter_errors(value))
try:
    codec.decode_program(value)
except codec.IRFormatError as e:
    print("refused:", e)
print("ok")
'''


def test_a_statement_added_in_ir_py_alone_is_encoded_decoded_and_in_the_schema():
    """Adding a node is one place: a new statement declared in (a copy of)
    semantics/ir.py, with nothing else changed, round-trips through the codec,
    validates against the generated schema, and a malformed one is refused by
    both, located."""
    alone = ROOT.parent / "shared" / "oracle" / "vllm" / "alone.ir.json"
    if not alone.is_file():
        from shared_paths import SHARED
        alone = SHARED / "oracle" / "vllm" / "alone.ir.json"
    done = subprocess.run([sys.executable, "-c", ADD_A_STATEMENT, str(alone)], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["refused: blocks[0][0].Pause: expected 2 items, found 1", "ok"]


# --------------------------------------------------------------------------
# Every example and generated program: round trip and schema
# --------------------------------------------------------------------------


def round_trips_and_validates(program: ir.Program) -> None:
    text = codec.dumps(program)
    assert codec.loads(text) == program
    assert codec.dumps(codec.loads(text)) == text
    ir_schema.validate(json.loads(text))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.relative_to(ROOT / "examples").as_posix())
def test_every_example_round_trips_and_validates(path: Path):
    try:
        program, _ = compile_file(str(path))
    except ProgramError:
        assert "lib" in path.parts or "bad" in path.name, f"{path} does not compile"
        return
    round_trips_and_validates(program)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated())
def test_every_generated_program_round_trips_and_validates(g):
    program, _ = compile_source(g.text, "generated.sq")
    round_trips_and_validates(program)


# --------------------------------------------------------------------------
# The Lean fragment's mirror against the declaration
# --------------------------------------------------------------------------

#: lean_bridge/syntax.py's constructs that are an IR node with other names: the IR class, and the IR field of
#: each of the fragment's fields (None: the IR has no such field; the fragment's are the IR's it keeps).
LEAN_NODES = {
    "Attr": ("Attr", {"slot": "slot"}),
    "Cond": ("Cond", {"c": "test", "a": "then", "b": "otherwise"}),
    "Set": ("Set", {"slot": "slot", "e": "expr"}),
    "Observe": ("Observe", {"index": "index", "e": "expr"}),
    "Turn": ("Turn", {}),
    "Finish": ("End", {}),
    "Use": ("HoldPool", {"pool": "ref", "units": "units", "reserve": "reserve"}),
    "Hold": ("Hold", {"uses": "pools", "reuse": "reuse", "body": "body", "cache": "cache"}),
    "Branch": ("Branch", {"guard": "guard", "then_block": "then_block", "else_block": "else_block"}),
    "Spec": ("SessionSpec", {"attrs": "attrs", "turns": "turns"}),
}


def test_the_lean_fragments_nodes_have_the_declared_nodes_fields_in_order():
    """The fragment is its own abstract syntax (a Lean inductive), so it is no
    derivation of the declaration; but where a construct of it is an IR node
    it has that node's fields, in the IR's order, of the same kind (an index
    for an index, an optional for an optional)."""
    from lean_bridge import syntax as lean

    for name, (ir_name, fields) in LEAN_NODES.items():
        mirror = [f.name for f in dataclasses.fields(getattr(lean, name))]
        spec = irspec.NODES[getattr(ir, ir_name)]
        declared = dict(spec.fields)
        assert mirror == list(fields), name
        order = [n for n, _ in spec.fields if n in fields.values()]
        assert [fields[f] for f in mirror] == order, name
        for lean_field, ir_field in fields.items():
            t = declared[ir_field]
            if t == irspec.INDEX:
                assert lean_field in ("slot", "index", "body", "then_block", "else_block"), (name, lean_field)
            assert isinstance(t, irspec.Opt) == (lean_field in ("reserve", "reuse", "cache")), (name, lean_field)


def test_the_lean_fragments_vocabulary_is_the_declarations():
    from lean_bridge import syntax as lean

    spellings = set(ir.CONTEXT_VARIABLES.values())
    assert {c.value for c in lean.Ctx} <= spellings
    binary = {op.lower() for op in ir.BINARY_OPS} | {f.lower() for f in ("Min", "Max")}
    assert set(lean.BINARY_OPS) <= binary
    assert {m.value for m in lean.Mode} <= {m.lower() for m in ir.RUN_MODES}
    for name in ("Queued", "CachedIn", "Holders", "BudgetLeft"):
        assert name in ir.FUNCTIONS, name
    assert len(lean.SelfPreemption) == len(ir.SELF_PREEMPTION)


# --------------------------------------------------------------------------
# The IR's printer: one function per declared node
# --------------------------------------------------------------------------


def test_the_ir_printer_has_a_function_for_every_declared_expression_and_argument():
    """semantics/link/names.py prints IR expressions in the source's syntax
    (the linker's messages) through one table per union; a node added to the
    union without its printer fails here. (``serq-ref fmt`` prints the parse
    tree, not the IR: its dispatch is by grammar rule, docs/ir.md.)"""
    from semantics.link import names

    assert set(names.SHOW_EXPR) == set(irspec.UNIONS["Expr"].members)
    assert set(names.SHOW_ARG) == set(irspec.UNIONS["Arg"].members)
    one, two = ir.Num(1.0), ir.Num(2.0)
    program = ir.Program(**{**{f.name: () for f in dataclasses.fields(ir.Program)}, "attrs": ("prompt",),
                            "pools": (ir.Pool("kv", None, 10.0, None, None, None, None, None, None),)})
    shown = [names.show_expr(program, e) for e in (
        ir.Num(2.5), ir.Attr(0), ir.Ctx("N"), ir.Sample("Exp", (one,)),
        ir.Call("Used", (ir.PoolArg(ir.Ref(0, 1, None)),)),
        ir.Unary("Neg", ir.Binary("Add", one, two)), ir.Binary("Pow", one, two), ir.Cond(one, two, ir.Num(-1.0)),
        ir.Cost(ir.CostTarget("Pool", 0, 1), ir.Binary("Mul", ir.Attr(0), two)))]
    assert shown == ["2.5", "prompt", "present", "~exp(1)", "used(kv)", "-(1 + 2)", "pow(1, 2)", "1 ? 2 : (-1)",
                     "prompt * 2"]
