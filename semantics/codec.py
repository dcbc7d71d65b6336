"""The IR's JSON encoding (version 13), both ways.

``encode_program`` writes the reference implementation's encoding: structs as
objects with fields in the IR's order, enums externally tagged, numbers as
floats, infinity as the string ``"inf"``, pretty-printed with a two-space
indent and a final newline (``../shared/ir/FORMAT.md``). ``decode_program``
reads it back; ``dumps(loads(text)) == text`` for every file this encoding
writes. Malformed input raises ``IRFormatError`` with a JSON path.

Nothing here is written per node: the encoder and the decoder of every node
and union are derived from its declaration in ``semantics.ir`` (``@node``,
``union``; the vocabulary is ``semantics.irspec``), so a new node needs no
change in this file (docs/ir.md).
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable

from . import ir
from . import irspec as spec

# A JSON value as Python builds it.
Json = Any


class IRFormatError(ValueError):
    """An IR file that is not the version-13 encoding; ``path`` says where."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


# --------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------


def encode_number(x: float) -> Json:
    """A float, or "inf"/"-inf" (JSON has no infinity). NaN has no encoding."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if math.isnan(x):
        raise ValueError("NaN has no IR encoding")
    return float(x)


def decode_number(v: Json, path: str) -> float:
    if isinstance(v, bool):
        raise IRFormatError(path, "expected a number, found a boolean")
    if isinstance(v, (int, float)):
        return float(v)
    if v == "inf":
        return math.inf
    if v == "-inf":
        return -math.inf
    raise IRFormatError(path, f"expected a number, found {json.dumps(v)}")


def decode_int(v: Json, path: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < 0:
        raise IRFormatError(path, f"expected a non-negative integer, found {json.dumps(v)}")
    return int(v)


# --------------------------------------------------------------------------
# Both ways, derived from the declaration (semantics/irspec.py)
# --------------------------------------------------------------------------

#: IR nodes of later versions that this project does not run (FORMAT.md, last paragraph).
LATER_NODES = ("Fork", "Join", "Claim", "Register", "Iteration", "Await", "Signal")

#: An encoder: an IR value to its JSON; a decoder: JSON at a path to the IR value.
Encoder = Callable[[Any], Json]
Decoder = Callable[[Json, str], Any]

_ENCODERS: dict[str, Encoder] = {}
_DECODERS: dict[str, Decoder] = {}


def _at(path: str, name: str) -> str:
    """The path of an object's field: ``pools[0].cap``; a top-level field is its name."""
    return f"{path}.{name}" if path else name


def _show(v: Json) -> str:
    return json.dumps(v)[:80]


def _tag(v: Json, path: str) -> tuple[str, Json]:
    if isinstance(v, str):
        return v, None
    if isinstance(v, dict) and len(v) == 1:
        ((k, payload),) = v.items()
        return k, payload
    raise IRFormatError(path, f"expected an externally tagged variant, found {_show(v)}")


def _list(v: Json, path: str, n: int | None = None) -> list:
    if not isinstance(v, list):
        raise IRFormatError(path, f"expected a list, found {_show(v)}")
    if n is not None and len(v) != n:
        raise IRFormatError(path, f"expected {n} items, found {len(v)}")
    return v


def _obj(v: Json, path: str, fields: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    if not isinstance(v, dict):
        raise IRFormatError(path, f"expected an object, found {_show(v)}")
    for f in fields:
        if f not in v:
            raise IRFormatError(path, f"missing field `{f}`")
    extra = sorted(set(v) - set(fields) - set(optional))
    if extra:
        raise IRFormatError(path, f"unknown field `{extra[0]}`")
    return v


def _later(tag: str, path: str) -> IRFormatError:
    return IRFormatError(
        path, f"`{tag}` is an IR node of a later serQ version; serq-ref runs version {ir.IR_VERSION}"
    )


def _decode_str(v: Json, path: str) -> str:
    if not isinstance(v, str):
        raise IRFormatError(path, f"expected a string, found {_show(v)}")
    return v


def _decode_bool(v: Json, path: str) -> bool:
    if v is not True and v is not False:
        raise IRFormatError(path, f"expected true or false, found {_show(v)}")
    return v


_PRIMS: dict[str, tuple[Encoder, Decoder]] = {
    "Index": (lambda x: x, decode_int),
    "Number": (encode_number, decode_number),
    "Str": (lambda x: x, _decode_str),
    "Bool": (lambda x: x, _decode_bool),
}


def _encoder(t: spec.JsonType) -> Encoder:
    """The encoder of a JSON type."""
    if isinstance(t, spec.Prim):
        return _PRIMS[t.name][0]
    if isinstance(t, (spec.Enum, spec.Const)):
        return lambda x: x
    if isinstance(t, spec.Opt):
        inner = _encoder(t.inner)
        return lambda x: None if x is None else inner(x)
    if isinstance(t, spec.List):
        item = _encoder(t.item)
        return lambda xs: [item(x) for x in xs]
    if isinstance(t, spec.Tuple):
        items = tuple(_encoder(i) for i in t.items)
        return lambda xs: [f(x) for f, x in zip(items, xs, strict=True)]
    if isinstance(t, spec.Def):
        name = t.name
        return lambda x: _ENCODERS[name](x)
    if isinstance(t, spec.Wrap):
        inner, key = _encoder(t.inner), t.key
        return lambda x: {key: inner(x)}
    if isinstance(t, spec.UnitOr):
        payload, tag, units, none = _encoder(t.payload), t.tag, t.units, t.none
        if none:
            return lambda x: units[0] if x is None else {tag: payload(x)}
        return lambda x: x if isinstance(x, str) else {tag: payload(x)}
    raise TypeError(f"no encoder for {t!r}")


def _decoder(t: spec.JsonType) -> Decoder:
    """The decoder of a JSON type: its errors name the path of the value."""
    if isinstance(t, spec.Prim):
        return _PRIMS[t.name][1]
    if isinstance(t, spec.Enum):
        values, what = t.values, t.what

        def enum(v: Json, path: str) -> str:
            if not isinstance(v, str) or v not in values:
                if what is None:
                    raise IRFormatError(path, f"expected one of {', '.join(map(json.dumps, values))}, found {_show(v)}")
                if isinstance(v, str):
                    raise IRFormatError(path, f"unknown {what} `{v}`")
                raise IRFormatError(path, f"expected the name of a {what}, found {_show(v)}")
            return v

        return enum
    if isinstance(t, spec.Const):
        value = t.value

        def const(v: Json, path: str) -> Any:
            if v != value or isinstance(v, bool):
                raise IRFormatError(path, f"expected {json.dumps(value)}, found {_show(v)}")
            return v

        return const
    if isinstance(t, spec.Opt):
        inner = _decoder(t.inner)
        return lambda v, path: None if v is None else inner(v, path)
    if isinstance(t, spec.List):
        item = _decoder(t.item)
        return lambda v, path: tuple(item(x, f"{path}[{i}]") for i, x in enumerate(_list(v, path)))
    if isinstance(t, spec.Tuple):
        items = tuple(_decoder(i) for i in t.items)
        n = len(items)
        return lambda v, path: tuple(f(x, f"{path}[{i}]") for i, (f, x) in enumerate(zip(items, _list(v, path, n))))
    if isinstance(t, spec.Def):
        name = t.name
        return lambda v, path: _DECODERS[name](v, path)
    if isinstance(t, spec.Wrap):
        inner, key = _decoder(t.inner), t.key
        return lambda v, path: inner(_obj(v, path, (key,))[key], f"{path}.{key}")
    if isinstance(t, spec.UnitOr):
        payload, tag_, units, none, what = _decoder(t.payload), t.tag, t.units, t.none, t.what

        def unit_or(v: Json, path: str) -> Any:
            tag, x = _tag(v, path)
            if tag in units and x is None:
                return None if none else tag
            if tag == tag_:
                return payload(x, f"{path}.{tag}")
            raise IRFormatError(path, f"unknown {what} `{tag}`")

        return unit_or
    raise TypeError(f"no decoder for {t!r}")


def _field(t: spec.FieldType) -> tuple[spec.JsonType, bool]:
    """A field's JSON type, and whether it may be absent."""
    return (t.inner, True) if isinstance(t, spec.Absent) else (t, False)


def _node_codec(node: spec.NodeSpec) -> tuple[Encoder, Decoder]:
    """A node's payload both ways: its fields as an object, an array or its one value."""
    cls = node.cls
    names = tuple(name for name, _ in node.fields)
    encoders = tuple(_encoder(_field(t)[0]) for _, t in node.fields)
    decoders = tuple(_decoder(_field(t)[0]) for _, t in node.fields)
    if node.shape == spec.UNIT:
        instance = cls()
        return (lambda x: None), (lambda v, path: instance)
    if node.shape == spec.NEWTYPE:
        ((name, _),), (enc,), (dec,) = node.fields, encoders, decoders
        return (lambda x: enc(getattr(x, name))), (lambda v, path: cls(dec(v, path)))
    if node.shape == spec.TUPLE:
        n = len(names)

        def encode_tuple(x: Any) -> Json:
            return [enc(getattr(x, name)) for name, enc in zip(names, encoders)]

        def decode_tuple(v: Json, path: str) -> Any:
            items = _list(v, path, n)
            return cls(*(dec(item, f"{path}[{i}]") for i, (dec, item) in enumerate(zip(decoders, items))))

        return encode_tuple, decode_tuple
    required = tuple(name for name, t in node.fields if not isinstance(t, spec.Absent))
    optional = tuple(name for name, t in node.fields if isinstance(t, spec.Absent))
    plan = tuple((name, t if isinstance(t, spec.Absent) else None, enc, dec)
                 for (name, t), enc, dec in zip(node.fields, encoders, decoders))
    tag_field = node.tag_field

    def encode_struct(x: Any) -> Json:
        out: dict[str, Json] = {}
        for name, absent, enc, _ in plan:
            value = getattr(x, name)
            if absent is not None and value == absent.default:
                continue
            out[name] = enc(value)
        return out

    def decode_struct(v: Json, path: str, tag: str | None = None) -> Any:
        o = _obj(v, path, required, optional)
        values = {} if tag_field is None else {tag_field: tag}
        for name, absent, _, dec in plan:
            if absent is not None:
                raw = o.get(name)
                if name not in o or (raw is None and absent.null):
                    values[name] = absent.default
                    continue
            values[name] = dec(o[name], _at(path, name))
        return cls(**values)

    return encode_struct, decode_struct


def _union_codec(union: spec.UnionSpec) -> tuple[Encoder, Decoder]:
    """A union both ways: a member's tag, and its payload (a unit member: the bare tag)."""
    by_class: dict[type, tuple[str | None, Encoder]] = {}
    by_tag: dict[str, tuple[spec.NodeSpec, Decoder]] = {}
    for cls in union.members:
        node = spec.NODES[cls]
        enc, dec = _NODE_CODECS[cls]
        for tag in node.tags if node.tag_field else (node.tag,):
            by_tag[tag] = (node, dec)
        by_class[cls] = (None if node.tag_field else node.tag, enc)
    refusals = dict(union.refusals)
    name, what, later = union.name, union.what, union.later

    def encode_union(x: Any) -> Json:
        found = by_class.get(type(x))
        if found is None:
            raise TypeError(f"not an IR {union.title}: {x!r}")
        tag, enc = found
        node = spec.NODES[type(x)]
        if node.shape == spec.UNIT:
            return tag
        if tag is None:
            tag = getattr(x, node.tag_field)
        return {tag: enc(x)}

    def decode_union(v: Json, path: str) -> Any:
        tag, x = _tag(v, path)
        found = by_tag.get(tag)
        if found is not None:
            node, dec = found
            if node.shape == spec.UNIT:
                if x is None:
                    return dec(x, path)
            elif node.tag_field is not None:
                return dec(x, f"{path}.{tag}", tag)
            else:
                return dec(x, f"{path}.{tag}")
        if tag in refusals:
            raise IRFormatError(f"{path}.{tag}", refusals[tag])
        if later and tag in LATER_NODES:
            raise _later(tag, path)
        raise IRFormatError(path, f"unknown {what} `{tag}`")

    return encode_union, decode_union


_NODE_CODECS: dict[type, tuple[Encoder, Decoder]] = {cls: _node_codec(node) for cls, node in spec.NODES.items()}
for _name, _declared in spec.DEFS.items():
    if isinstance(_declared, spec.NodeSpec):
        _ENCODERS[_name], _DECODERS[_name] = _NODE_CODECS[_declared.cls]
    elif isinstance(_declared, spec.UnionSpec):
        _ENCODERS[_name], _DECODERS[_name] = _union_codec(_declared)
    else:
        _ENCODERS[_name], _DECODERS[_name] = _encoder(_declared.type), _decoder(_declared.type)

#: The fields every IR file has, in order (the optional ones follow: ``arrivals``, ``share``, ``gauges``).
PROGRAM_FIELDS = tuple(name for name, t in spec.NODES[ir.Program].fields if not isinstance(t, spec.Absent))

encode_expr: Callable[[ir.Expr], Json] = _ENCODERS["Expr"]
encode_stmt: Callable[[ir.Stmt], Json] = _ENCODERS["Stmt"]
encode_program: Callable[[ir.Program], Json] = _ENCODERS["Program"]
decode_expr: Callable[[Json, str], ir.Expr] = _DECODERS["Expr"]
decode_stmt: Callable[[Json, str], ir.Stmt] = _DECODERS["Stmt"]


def dumps(p: ir.Program) -> str:
    """The IR file's text: 2-space indent, final newline."""
    return json.dumps(encode_program(p), indent=2, ensure_ascii=False) + "\n"


def decode_program(v: Json) -> ir.Program:
    """An IR file's value as the program: its version first (the rest of
    another version's file is no evidence), then every node as declared."""
    if not isinstance(v, dict):
        raise IRFormatError("", "an IR file is a JSON object")
    version = v.get("version")
    if version != ir.IR_VERSION or isinstance(version, bool):
        raise IRFormatError("version", f"IR version {version} is not IR version {ir.IR_VERSION}, which serq-ref reads")
    return _DECODERS["Program"](v, "")


def loads(text: str) -> ir.Program:
    """Parse IR text. Raises ``IRFormatError`` (invalid JSON included)."""
    try:
        v = json.loads(text)
    except json.JSONDecodeError as e:
        raise IRFormatError(f"line {e.lineno} column {e.colno}", f"not JSON: {e.msg}") from None
    return decode_program(v)
