"""The JSON Schema (draft 2020-12) of the step trace's lines, and two ways to
check a line against it (docs/step-trace.md).

``steptrace.schema.json`` is ``semantics.smallstep.steptrace.schema()``
written out (tests/test_trace_contract.py checks they are the same). It says
which fields each rule's record has (exactly those, in any order) and what
each holds.

- ``validator()``: jsonschema's validator of the schema: the reference, slow
  (it tries the record against every rule's case, some milliseconds a line).
- ``checker()``: the same schema compiled into one Python check per rule, a
  few microseconds a line, which the test suite runs on every record every
  test's trace writes (tests/trace_contract.py). It reads only the keywords
  the schema uses (``KEYWORDS``) and refuses a schema with any other. It is
  also stricter than JSON Schema in what the JSON data model cannot say and
  the format promises: the fields come in the documented order, a count is
  a Python int (written without a fraction) and every other number a float
  (written with one), so that one field is always written one way.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from typing import Any, Callable

import jsonschema

SCHEMA_FILE = "steptrace.schema.json"

#: the keywords the schema may use (the checker compiles these)
KEYWORDS = frozenset(("$schema", "$id", "$ref", "$defs", "title", "description", "type", "enum", "const", "minimum",
                      "minLength", "minItems", "pattern", "items", "properties", "required", "additionalProperties",
                      "anyOf", "allOf", "if", "then"))


@functools.cache
def load_schema() -> dict[str, Any]:
    """The schema as a JSON value, read once from the package's data."""
    return json.loads(resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


@functools.cache
def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_schema())


@functools.cache
def case_validator(rule: str | None) -> jsonschema.Draft202012Validator:
    """jsonschema's validator of one case of the schema: a rule's record (None: the header)."""
    schema = load_schema()
    name = "header" if rule is None else "rule." + rule.replace("/", ".")
    return jsonschema.Draft202012Validator({"$defs": schema["$defs"], "$ref": f"#/$defs/{name}"})


def errors(line: Any) -> list[str]:
    """What jsonschema finds wrong with one line of a trace (the header or a record); [] if nothing. A
    record of a known rule is validated by its rule's case, which names the field at fault; any other
    line by the whole schema."""
    rule = line.get("rule") if isinstance(line, dict) else None
    known = isinstance(line, dict) and (rule is None or rule in _rules())
    found = [f"{e.json_path}: {e.message}" for e in (case_validator(rule) if known else validator()).iter_errors(line)]
    if known and not found and list(validator().iter_errors(line)):  # the case and the whole schema disagree
        found = [f"{e.json_path}: {e.message}" for e in validator().iter_errors(line)]
    return found


@functools.cache
def _rules() -> frozenset:
    return frozenset(case["if"]["properties"]["rule"]["const"] for case in load_schema()["anyOf"][1]["allOf"])


# -- the compiled checker --------------------------------------------------------------------


class TraceLineError(ValueError):
    """A trace line that does not match the schema (or the format's order and number types)."""


def _unknown_keywords(node: Any, path: str = "#") -> list[str]:
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key not in KEYWORDS:
                found.append(f"{path}/{key}")
            if key in ("properties", "$defs"):
                for name, sub in value.items():
                    found += _unknown_keywords(sub, f"{path}/{key}/{name}")
            elif key not in ("enum", "const", "required", "title", "description", "$schema", "$id", "pattern"):
                found += _unknown_keywords(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            found += _unknown_keywords(item, f"{path}/{i}")
    return found


_TYPES = {"integer": int, "number": float, "string": str, "boolean": bool, "null": type(None), "array": list,
          "object": dict}


def _simple(node: dict) -> tuple[set, list] | None:
    """(types, values) when ``node`` is only a type or only an enum: the value's Python type is one of the
    types, or the value is one of the values (of the same type); None for another node."""
    if set(node) - {"description"} == {"type"}:
        return {_TYPES[node["type"]]}, []
    if set(node) - {"description"} == {"enum"}:
        return set(), list(node["enum"])
    return None


def _compile(node: dict, defs: dict, cache: dict) -> Callable[[Any], bool]:
    """A predicate: whether a value matches ``node`` (with the format's order and number types)."""
    if "$ref" in node:
        name = node["$ref"].removeprefix("#/$defs/")
        if name not in cache:
            cache[name] = _compile(defs[name], defs, cache)  # the schema has no recursive reference
        return cache[name]
    checks: list[Callable[[Any], bool]] = []
    kind = node.get("type")
    if kind is not None and not (kind == "object" and "properties" in node):  # properties tests the type itself
        python = _TYPES[kind]
        checks.append(lambda v: type(v) is python)
    if "anyOf" in node:
        options = [defs[o["$ref"].removeprefix("#/$defs/")] if "$ref" in o else o for o in node["anyOf"]]
        simple = [_simple(o) for o in options]
        if all(x is not None for x in simple):  # a union of types and values: one test
            types = set().union(*(x[0] for x in simple))
            values = [v for x in simple for v in x[1]]
            checks.append(lambda v: type(v) in types or any(v == a and type(v) is type(a) for a in values))
        else:
            compiled = [_compile(o, defs, cache) for o in node["anyOf"]]
            checks.append(lambda v: any(f(v) for f in compiled))
    if "enum" in node:
        allowed = node["enum"]
        checks.append(lambda v: any(v == a and type(v) is type(a) for a in allowed))
    if "const" in node:
        const = node["const"]
        checks.append(lambda v: v == const and type(v) is type(const))
    if "minimum" in node:
        least = node["minimum"]
        checks.append(lambda v: v >= least)
    if "minLength" in node:
        n = node["minLength"]
        checks.append(lambda v: len(v) >= n)
    if "pattern" in node:
        search = re.compile(node["pattern"]).search
        checks.append(lambda v: search(v) is not None)
    if "minItems" in node:
        n = node["minItems"]
        checks.append(lambda v: len(v) >= n)
    if "items" in node:
        item = _compile(node["items"], defs, cache)

        def items(v):
            for x in v:
                if not item(x):
                    return False
            return True

        checks.append(items)
    if "properties" in node:
        names = tuple(node["properties"])
        fields = tuple(_compile(sub, defs, cache) for sub in node["properties"].values())
        if node.get("additionalProperties", True) is not False or tuple(node.get("required", ())) != names:
            raise ValueError("the checker compiles closed objects whose every property is required")

        def properties(v):
            if type(v) is not dict or tuple(v) != names:  # exactly these fields, in this order (the schema: any)
                return False
            for check, x in zip(fields, v.values()):
                if not check(x):
                    return False
            return True

        checks.append(properties)
    if len(checks) == 1:
        return checks[0]

    def all_of(v):
        for check in checks:  # the type first (it is compiled first): the others read a value of that type
            if not check(v):
                return False
        return True

    return all_of


@functools.cache
def checker() -> Callable[[Any], None]:
    """A function that raises TraceLineError unless a trace line matches the schema (and the format's
    order and number types): a record by its rule's own case, the header by its. The error says what
    jsonschema finds wrong, or, when jsonschema finds nothing, that the order or a number's type is not
    the format's."""
    schema = load_schema()
    unknown = _unknown_keywords(schema)
    if unknown:
        raise ValueError(f"the step-trace schema uses keywords the checker does not compile: {unknown}")
    defs = schema["$defs"]
    cache: dict = {}
    header = _compile({"$ref": "#/$defs/header"}, defs, cache)
    rules = {}
    for case in schema["anyOf"][1]["allOf"]:
        rules[case["if"]["properties"]["rule"]["const"]] = _compile(case["then"], defs, cache)

    def check(line: Any) -> None:
        if type(line) is dict:
            rule = line.get("rule")
            case = header if rule is None else rules.get(rule)
            if case is not None and case(line):
                return
        found = errors(line)
        why = "; ".join(found) if found else (
            "the fields are not in the documented order, or a count is not an int or another number not a float")
        raise TraceLineError(f"{why}: {json.dumps(line)[:400]}")

    return check
