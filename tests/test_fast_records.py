"""The fast engine's setters (semantics/fast/records.py): each is
``_replace`` with its fields, compiled at its first call (the function keeps
its identity: a module that imported it calls the compiled code too)."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from semantics.fast import records, step
from semantics.fast.records import setter
from semantics.smallstep.configuration import Configuration


class Record(NamedTuple):
    a: int
    b: str
    c: float


def test_same_as_replace():
    record = Record(1, "x", 2.5)
    for names in (("a",), ("c", "a"), ("a", "b", "c"), ("b",)):
        function = setter(Record, *names)
        values = [{"a": 7, "b": "y", "c": 9.5}[name] for name in names]
        for _ in range(2):  # the first call compiles, the second runs the compiled code
            updated = function(record, *values)
            assert updated == record._replace(**dict(zip(names, values))) and type(updated) is Record


def test_compiled_at_first_call():
    function = setter(Record, "b", "c")
    assert function.__code__ is records._FIRST_CALL and function.__name__ == "set_Record_b_c"
    assert function(Record(1, "x", 2.5), "y", 3.0) == Record(1, "y", 3.0)
    code = function.__code__
    assert code is not records._FIRST_CALL and code.co_varnames[:3] == ("record", "b", "c")
    assert function(Record(1, "x", 2.5), "z", 4.0) == Record(1, "z", 4.0) and function.__code__ is code


def test_wrong_arguments():
    function = setter(Record, "a", "c")
    with pytest.raises(TypeError):
        function(Record(1, "x", 2.5), 3)  # the first call, too few values: the compiled code's error
    with pytest.raises(TypeError):
        function(Record(1, "x", 2.5), 3, 4.0, 5)
    with pytest.raises(AssertionError, match="no field"):
        setter(Record, "d")


def test_the_engines_setters():
    """Every setter a fast module defines sets what it names on the records it was made for."""
    c = None
    for name in dir(step):
        function = getattr(step, name)
        if name.startswith("_set_") and getattr(function, "__globals__", {}).get("record_type") is Configuration:
            if c is None:
                c = Configuration(*range(len(Configuration._fields)))
            names = function.__globals__["names"]
            values = [f"new {n}" for n in names]
            assert function(c, *values) == c._replace(**dict(zip(names, values)))
