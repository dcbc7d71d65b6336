"""The vocabulary in which semantics/ir.py declares each IR node's JSON form.

Each IR class in ``semantics.ir`` carries one declaration, ``@node(...)``
above its ``@dataclass``: the shape of its JSON (an object of its fields, a
positional array, its one field's value, or nothing but its tag), the JSON
type of every field in the dataclass's order, and where the JSON Schema
names it. Each union (``Expr``, ``Stmt``, ...) is declared once by
``union(...)`` from its ``typing.Union``. From these declarations alone
``semantics.codec`` derives the encoder and the decoder (its errors located
at the JSON path), ``ir_schema.generate`` writes ``ir_schema/ir.schema.json``,
and tests/test_ir_declaration.py checks that every class and every union is
declared. Adding a statement is one class with its ``@node`` and its name in
the ``Stmt`` union (docs/ir.md).

This module is data only: it imports neither json nor the codec, so
``semantics.ir`` stays cheap to import (``serq-ref check`` loads it).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any


class Data:
    """A small immutable record: ``FIELDS`` and ``DEFAULTS`` (the last
    fields'), compared by value. Not a dataclass: ``serq-ref check`` imports
    semantics.ir and with it this module, and a dataclass costs its creation
    (an ``exec``) at import."""

    __slots__ = ()
    FIELDS: tuple[str, ...] = ()
    DEFAULTS: tuple = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        given = dict(zip(self.FIELDS, args))
        given.update(kwargs)
        first_default = len(self.FIELDS) - len(self.DEFAULTS)
        for k, name in enumerate(self.FIELDS):
            if name in given:
                value = given.pop(name)
            elif k >= first_default:
                value = self.DEFAULTS[k - first_default]
            else:
                raise TypeError(f"{type(self).__name__} needs `{name}`")
            object.__setattr__(self, name, value)
        if given:
            raise TypeError(f"{type(self).__name__} has no field `{next(iter(given))}`")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def values(self) -> tuple:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.values() == self.values()

    def __hash__(self) -> int:
        return hash((type(self), self.values()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self.FIELDS)})"


# --------------------------------------------------------------------------
# JSON types of fields
# --------------------------------------------------------------------------


class JsonType:
    """What a field's value is in JSON (and in the schema)."""


class Prim(JsonType, Data):
    """``Index`` (a non-negative integer), ``Number`` (a float, infinity as
    ``"inf"``), ``Str`` or ``Bool``."""

    name: str
    __slots__ = FIELDS = ('name',)


INDEX = Prim("Index")
NUMBER = Prim("Number")
STR = Prim("Str")
BOOL = Prim("Bool")


class Enum(JsonType, Data):
    """One of ``values``, a string as in Python. ``what`` names it in an
    error ("unknown distribution `X`"); without it the error lists the values."""

    values: tuple[str, ...]
    what: str | None
    __slots__ = FIELDS = ('values', 'what')
    DEFAULTS = (None,)


class Const(JsonType, Data):
    """Exactly ``value`` (the program's ``version``)."""

    value: Any
    __slots__ = FIELDS = ('value',)


class Opt(JsonType, Data):
    """``null`` (None) or the inner type."""

    inner: JsonType
    __slots__ = FIELDS = ('inner',)


class List(JsonType, Data):
    """An array of ``item`` (a tuple in Python)."""

    item: JsonType
    __slots__ = FIELDS = ('item',)


class Tuple(JsonType, Data):
    """An array of fixed length, one type per position (a tuple in Python)."""

    items: tuple[JsonType, ...]
    __slots__ = FIELDS = ('items',)


class Def(JsonType, Data):
    """A declared node, union or named type, by its name (a forward reference:
    ``Def("Expr")`` inside the expressions themselves)."""

    name: str
    __slots__ = FIELDS = ('name',)


class UnitOr(JsonType, Data):
    """A small enum written inline: one of the bare strings ``units`` or the
    single-key object ``{tag: payload}``. With ``none``, Python's None is
    ``units[0]`` (``evict``: None is ``"Lru"``, keys are ``{"By": keys}``);
    without, a unit is the same string in Python (an attribute type)."""

    units: tuple[str, ...]
    tag: str
    payload: JsonType
    title: str
    what: str
    none: bool
    __slots__ = FIELDS = ('units', 'tag', 'payload', 'title', 'what', 'none')
    DEFAULTS = (True,)


class Wrap(JsonType, Data):
    """``{key: inner}``: a value under one field of its own (``preempt``'s
    ``{"By": {"keys": [...]}}``)."""

    key: str
    inner: JsonType
    __slots__ = FIELDS = ('key', 'inner')


class Absent(Data):
    """A field left out of the JSON when its value is ``default`` (serq-ref's
    extensions of version 13 are, so files without them load and mean the
    seed's rule). ``null``: an explicit null reads as the default too.
    ``description`` goes into the schema."""

    inner: JsonType
    default: Any
    description: str | None
    null: bool
    __slots__ = FIELDS = ('inner', 'default', 'description', 'null')
    DEFAULTS = (None, None, False)


FieldType = JsonType | Absent


# --------------------------------------------------------------------------
# Nodes, unions, named types
# --------------------------------------------------------------------------

#: A node's JSON shapes: an object of its fields; a positional array of them;
#: its one field's value; nothing (a unit variant: the bare tag in a union).
STRUCT, TUPLE, NEWTYPE, UNIT = "struct", "tuple", "newtype", "unit"


class NodeSpec(Data):
    cls: type
    shape: str
    fields: tuple[tuple[str, FieldType], ...]  # (name, JSON type) in the dataclass's order
    tag: str  # its tag in a union (the class's name unless declared)
    define: str | None  # its name in the schema's $defs (None: written inline)
    description: str | None
    tag_field: str | None  # a field whose value is the tag (CostTarget.kind)
    tags: tuple[str, ...]  # the tags of a node with a tag_field
    __slots__ = FIELDS = ('cls', 'shape', 'fields', 'tag', 'define', 'description', 'tag_field', 'tags')


class UnionSpec(Data):
    name: str
    members: tuple[type, ...]
    title: str
    what: str  # "unknown {what} `X`"
    description: str | None
    define: bool  # in $defs (else inline: a stage's kind)
    later: bool  # a tag of LATER_NODES is named as a later version's node
    refusals: tuple[tuple[str, str], ...]  # tag -> a message of its own
    __slots__ = FIELDS = ('name', 'members', 'title', 'what', 'description', 'define', 'later', 'refusals')


class TypeSpec(Data):
    """A named type of the schema's $defs that is no node (``Keys``, ``Pairs``)."""

    name: str
    type: JsonType
    title: str | None
    description: str | None
    __slots__ = FIELDS = ('name', 'type', 'title', 'description')
    DEFAULTS = (None, None)


#: Every declared node by class, in declaration order.
NODES: dict[type, NodeSpec] = {}
#: Every union by name, in declaration order.
UNIONS: dict[str, UnionSpec] = {}
#: What a ``Def(name)`` names: a node (by its class's name and its $defs name), a union or a named type.
DEFS: dict[str, NodeSpec | UnionSpec | TypeSpec] = {}
#: Every declaration in order (the schema's $defs are those with a name there, in this order).
DECLARED: list[NodeSpec | UnionSpec | TypeSpec] = []


def node(shape: str, *, tag: str | None = None, define: str | None = None, description: str | None = None,
         tag_field: str | None = None, tags: tuple[str, ...] = (), **fields: FieldType):
    """Declare the dataclass below as an IR node: ``fields`` gives each of its
    fields' JSON type, by name and in order (checked here: a field added to the
    class and not declared fails at import)."""

    def declare(cls: type) -> type:
        names = [f.name for f in dataclasses.fields(cls) if f.name != tag_field]
        if list(fields) != names:
            raise TypeError(f"ir.{cls.__name__}: @node declares fields {list(fields)}, the class has {names}")
        if (shape == UNIT) != (not fields) or (shape == NEWTYPE and len(fields) != 1):
            raise TypeError(f"ir.{cls.__name__}: a {shape} node cannot have the fields {list(fields)}")
        spec = NodeSpec(cls, shape, tuple(fields.items()), tag or cls.__name__, define, description, tag_field, tags)
        NODES[cls] = spec
        DECLARED.append(spec)
        DEFS[cls.__name__] = spec
        if define is not None and define != cls.__name__:
            DEFS[define] = spec
        return cls

    return declare


def union(name: str, alias: Any, *, title: str, what: str, description: str | None = None, define: bool = True,
          later: bool = False, refusals: dict[str, str] | None = None) -> UnionSpec:
    """Declare the ``typing.Union`` ``alias`` as the IR union ``name``: its
    members are the union's classes, in its order."""
    members = typing.get_args(alias)
    for cls in members:
        if cls not in NODES:
            raise TypeError(f"ir.{name}: its member {cls.__name__} has no @node declaration")
    spec = UnionSpec(name, members, title, what, description, define, later, tuple((refusals or {}).items()))
    UNIONS[name] = spec
    DECLARED.append(spec)
    DEFS[name] = spec
    return spec


def named(name: str, type_: JsonType, *, title: str | None = None, description: str | None = None) -> TypeSpec:
    """Declare a named type of the schema's $defs."""
    spec = TypeSpec(name, type_, title, description)
    DECLARED.append(spec)
    DEFS[name] = spec
    return spec
