"""The JSON Schema of the IR, written from the IR's declaration.

``python -m ir_schema.generate`` writes ``ir_schema/ir.schema.json`` from the
``@node`` and ``union`` declarations of ``semantics/ir.py`` (the vocabulary:
``semantics/irspec.py``); ``--check`` only compares, exiting 1 when the file
is not this command's output. tests/test_ir_declaration.py checks that the
committed file is. Nothing here names a node: a new statement reaches the
schema through its declaration alone (docs/ir.md).

How a declaration is written: a struct node is an object with exactly its
fields (those declared ``Absent`` not required); a tuple node a ``prefixItems``
array; a newtype its field's schema; a union a ``oneOf`` whose unit members
are one ``enum`` (or ``const``) first, then one single-key object per tagged
member; a node, union or named type with a name in ``$defs`` is a ``$ref``,
any other is written inline where it is used.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from semantics import ir
from semantics import irspec as spec

SCHEMA_PATH = Path(__file__).resolve().parent / "ir.schema.json"

#: The schema's head: what it is and where it says it comes from.
HEAD: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": f"https://serq-ref.invalid/ir/{ir.IR_VERSION}/ir.schema.json",
    "title": f"serQ IR, version {ir.IR_VERSION}",
    "description": (
        "The JSON encoding of a serQ program (../shared/ir/FORMAT.md) as semantics/codec.py writes it: structs with "
        "additionalProperties false, enums externally tagged (a unit variant a bare string, a payload variant a "
        "single-key object), numbers floats or \"inf\"/\"-inf\"."
    ),
}

#: The two primitive types the declarations name (``INDEX``, ``NUMBER``), first in ``$defs``.
PRIMITIVE_DEFS: dict[str, Any] = {
    "Number": {
        "title": "number",
        "description": "A float; infinity is the string \"inf\" or \"-inf\" (JSON has no infinity).",
        "oneOf": [{"type": "number"}, {"enum": ["inf", "-inf"]}],
    },
    "Index": {
        "description": "A slot, a block id, an index or a count: a non-negative integer.",
        "type": "integer",
        "minimum": 0,
    },
}

PRIMITIVES: dict[str, Any] = {
    "Index": {"$ref": "#/$defs/Index"},
    "Number": {"$ref": "#/$defs/Number"},
    "Str": {"type": "string"},
    "Bool": {"type": "boolean"},
}


def def_name(declared: spec.NodeSpec | spec.UnionSpec | spec.TypeSpec) -> str | None:
    """Its name in ``$defs``, or None when it is written inline."""
    if isinstance(declared, spec.NodeSpec):
        return declared.define
    if isinstance(declared, spec.UnionSpec):
        return declared.name if declared.define else None
    return declared.name


def tagged(tag: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A single-key object ``{tag: payload}``."""
    return {"type": "object", "properties": {tag: payload}, "required": [tag], "additionalProperties": False}


def units_schema(units: list[str]) -> dict[str, Any]:
    return {"const": units[0]} if len(units) == 1 else {"enum": list(units)}


def type_schema(t: spec.JsonType) -> dict[str, Any]:
    """The schema of a JSON type where it is used."""
    if isinstance(t, spec.Prim):
        return dict(PRIMITIVES[t.name])
    if isinstance(t, spec.Enum):
        return {"enum": list(t.values)}
    if isinstance(t, spec.Const):
        return {"const": t.value}
    if isinstance(t, spec.Opt):
        inner = type_schema(t.inner)
        if list(inner) == ["type"] and isinstance(inner["type"], str):
            return {"type": [inner["type"], "null"]}
        return {"oneOf": [{"type": "null"}, inner]}
    if isinstance(t, spec.List):
        return {"type": "array", "items": type_schema(t.item)}
    if isinstance(t, spec.Tuple):
        return tuple_schema([type_schema(i) for i in t.items])
    if isinstance(t, spec.Def):
        declared = spec.DEFS[t.name]
        name = def_name(declared)
        return {"$ref": f"#/$defs/{name}"} if name is not None else declared_schema(declared)
    if isinstance(t, spec.Wrap):
        return {"type": "object", "properties": {t.key: type_schema(t.inner)}, "required": [t.key],
                "additionalProperties": False}
    if isinstance(t, spec.UnitOr):
        return {"title": t.title, "oneOf": [units_schema(list(t.units)), tagged(t.tag, type_schema(t.payload))]}
    raise TypeError(f"no schema for {t!r}")


def tuple_schema(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "array", "prefixItems": items, "items": False, "minItems": len(items)}


def field_schema(t: spec.FieldType) -> dict[str, Any]:
    if isinstance(t, spec.Absent):
        inner = type_schema(t.inner)
        return {"description": t.description, **inner} if t.description else inner
    return type_schema(t)


def payload_schema(node: spec.NodeSpec) -> dict[str, Any]:
    """A node's own schema: an object of its fields, an array of them, or its one field's."""
    if node.shape == spec.NEWTYPE:
        return field_schema(node.fields[0][1])
    if node.shape == spec.TUPLE:
        return tuple_schema([field_schema(t) for _, t in node.fields])
    assert node.shape == spec.STRUCT, node
    return {
        "type": "object",
        "properties": {name: field_schema(t) for name, t in node.fields},
        "required": [name for name, t in node.fields if not isinstance(t, spec.Absent)],
        "additionalProperties": False,
    }


def union_schema(union: spec.UnionSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"title": union.title}
    if union.description:
        out["description"] = union.description
    units = [spec.NODES[cls].tag for cls in union.members if spec.NODES[cls].shape == spec.UNIT]
    variants = [units_schema(units)] if units else []
    for cls in union.members:
        node = spec.NODES[cls]
        if node.shape == spec.UNIT:
            continue
        payload = {"$ref": f"#/$defs/{node.define}"} if node.define else payload_schema(node)
        for tag in node.tags if node.tag_field else (node.tag,):
            variant = tagged(tag, payload)
            if node.description and not node.define:
                variant["description"] = node.description
            variants.append(variant)
    out["oneOf"] = variants
    return out


def declared_schema(declared: spec.NodeSpec | spec.UnionSpec | spec.TypeSpec) -> dict[str, Any]:
    """The schema of a declaration, as ``$defs`` holds it or as it is written inline."""
    if isinstance(declared, spec.UnionSpec):
        return union_schema(declared)
    if isinstance(declared, spec.TypeSpec):
        head = {k: v for k, v in (("title", declared.title), ("description", declared.description)) if v}
        return {**head, **type_schema(declared.type)}
    body = payload_schema(declared)
    return {"description": declared.description, **body} if declared.description and declared.define else body


def build_schema() -> dict[str, Any]:
    """The whole schema: the program's object, then ``$defs`` in declaration order."""
    program = declared_schema(spec.NODES[ir.Program])
    defs = dict(PRIMITIVE_DEFS)
    for declared in spec.DECLARED:
        name = def_name(declared)
        if name is not None:
            defs[name] = declared_schema(declared)
    root = {**HEAD, "type": program["type"], "required": program["required"], "properties": program["properties"],
            "additionalProperties": program["additionalProperties"]}  # the order the file has always had
    return {**root, "$defs": defs}


def render() -> str:
    """The schema file's text: two-space indent, a final newline."""
    return json.dumps(build_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ir_schema.generate", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with ir_schema/ir.schema.json; write nothing")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if SCHEMA_PATH.read_text(encoding="utf-8") != text:
            print("ir_schema/ir.schema.json is not the declaration's schema: run python -m ir_schema.generate",
                  file=sys.stderr)
            return 1
        print("ir_schema/ir.schema.json is the declaration's schema")
        return 0
    SCHEMA_PATH.write_text(text, encoding="utf-8")
    print(f"wrote ir_schema/ir.schema.json ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
