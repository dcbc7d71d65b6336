"""The JSON Schema (draft 2020-12) of the serQ IR's encoding, version 13.

``ir.schema.json`` states, as data other tools can read, what
``semantics.codec`` writes (``../shared/ir/FORMAT.md``): structs are objects
with exactly their fields, enums are externally tagged (a unit variant is a
bare string, a variant with a payload a single-key object), expressions and
targets are recursive through ``$defs``, numbers are floats or ``"inf"`` /
``"-inf"``, and ``version`` is 13.

The schema checks shape only. What it cannot say (a slot below the number of
attributes, a block id that names a block, a function's arity, a context
variable read at its moment) is the codec's and the linker's to check.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

import jsonschema
from jsonschema.exceptions import best_match

from semantics.codec import LATER_NODES
from semantics.errors import ProgramError
from semantics.ir import IR_VERSION

SCHEMA_FILE = "ir.schema.json"


@functools.cache
def load_schema() -> dict[str, Any]:
    """The schema as a JSON value, read once from the package's data."""
    text = resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


@functools.cache
def get_validator() -> jsonschema.Draft202012Validator:
    """A validator of the schema, built once per process. The schema itself
    is not checked against the draft's meta-schema here (that took a few
    tenths of a second on every command): it is data of this package, and
    tests/test_ir_schema.py checks it with ``check_schema``."""
    return jsonschema.Draft202012Validator(load_schema())


def validate(obj: Any, file: str | None = None) -> None:
    """Raise ``ProgramError`` naming the JSON path of the most useful mismatch
    unless ``obj`` is a version-13 IR value: a wrong ``version`` first (the
    rest of another version's file is no evidence), else jsonschema's
    ``best_match``."""
    errors = list(get_validator().iter_errors(obj))
    version_errors = [e for e in errors if list(e.absolute_path) == ["version"]]
    error = version_errors[0] if version_errors else best_match(errors)
    if error is None:
        return
    problem = ProgramError(f"IR does not match the schema at {error.json_path}: {describe_error(error)}", file=file)
    problem.json_key = tuple(error.absolute_path)  # where in the file (semantics.pipeline locates it)
    raise problem


def describe_error(error: jsonschema.ValidationError) -> str:
    """The reason of one mismatch, in one line. A tagged union that matched no
    variant names the tag it did not know (or says it belongs to a later IR
    version) instead of jsonschema's "not valid under any of the given schemas"."""
    title = error.schema.get("title") if isinstance(error.schema, dict) else None
    if error.validator == "oneOf" and title is not None:
        return describe_union_error(title, error.schema["oneOf"], error.instance)
    return shorten(error.message)


def describe_union_error(title: str, variants: list[dict[str, Any]], instance: Any) -> str:
    """Why ``instance`` is no variant of the union ``title``."""
    tags = [tag for variant in variants for tag in get_variant_tags(variant)]
    tagged = all(get_variant_tags(variant) for variant in variants)
    tag = None
    if isinstance(instance, str):
        tag = instance
    elif isinstance(instance, dict) and len(instance) == 1:
        (tag,) = instance
    if tagged and tag in LATER_NODES:
        return f"`{tag}` is an IR node of a later serQ version; serq-ref reads version {IR_VERSION}"
    if tagged and tag is not None and tag not in tags:
        return f"unknown {title} `{tag}` (expected one of: {', '.join(tags)})"
    article = "an" if title[0] in "aeiou" else "a"
    return shorten(f"expected {article} {title}, found {json.dumps(instance)}")


def get_variant_tags(variant: dict[str, Any]) -> list[str]:
    """The tags a variant of a union accepts: a unit variant's string(s), or
    the one key of a variant with a payload; none for a plain type."""
    if "const" in variant:
        return [variant["const"]]
    if "enum" in variant:
        return list(variant["enum"])
    if variant.get("type") == "object":
        return list(variant["required"])
    return []


def shorten(message: str, limit: int = 160) -> str:
    """A message cut to ``limit`` characters, since an IR node can be a whole block."""
    return message if len(message) <= limit else message[: limit - 3] + "..."
