"""semantics/results.py's records are the classes the dataclass decorator
makes of their fields (``@dataclass(frozen=True)``): the same fields,
constructor, docstring, repr, comparison and hash, value for value, though
their repr, __eq__ and __hash__ are written once (results._Record) rather than
compiled per class at import."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from semantics import results

CLASSES = (results.ObserveRecord, results.GaugeRecord, results.StageRecord, results.StepStageRecord,
           results.PoolRecord, results.RunResult)


def reference(cls, made: dict):
    """The class ``@dataclass(frozen=True)`` makes of ``cls``'s fields (its base's first)."""
    base = cls.__bases__[0]
    bases = (made[base],) if base in made else ()
    own = [f for f in dataclasses.fields(cls) if bases == () or f.name not in {g.name for g in dataclasses.fields(base)}]
    spec = [(f.name, f.type, dataclasses.field(default=f.default)) if f.default is not dataclasses.MISSING
            else (f.name, f.type) for f in own]
    made[cls] = dataclasses.make_dataclass(cls.__name__, spec, bases=bases, frozen=True)
    made[cls].__qualname__ = cls.__qualname__
    return made[cls]


REFERENCES: dict = {}
for _cls in CLASSES:
    reference(_cls, REFERENCES)


def sample_values(cls, variant: int) -> dict:
    values = {}
    for i, f in enumerate(dataclasses.fields(cls)):
        values[f.name] = (f"{f.name}-{variant}", i + variant, float("nan"), (i, variant), None)[(i + variant) % 5]
    return values


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_same_class(cls):
    ref = REFERENCES[cls]
    assert [(f.name, f.type, f.default) for f in dataclasses.fields(cls)] == \
        [(f.name, f.type, f.default) for f in dataclasses.fields(ref)]
    assert str(inspect.signature(cls)) == str(inspect.signature(ref))
    assert cls.__match_args__ == ref.__match_args__
    if cls is not results.StepStageRecord:  # its own docstring; the others' the decorator's signature line
        assert cls.__doc__ == ref.__doc__
    assert cls.__dataclass_params__.frozen and dataclasses.is_dataclass(cls)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_same_values(cls):
    ref = REFERENCES[cls]
    nan = float("nan")
    for a_values in (sample_values(cls, 0), sample_values(cls, 1)):
        a, a_ref = cls(**a_values), ref(**a_values)
        assert repr(a) == repr(a_ref)
        assert hash(a) == hash(a_ref)
        first = dataclasses.fields(cls)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(a, first, "other")
        for b_values in (sample_values(cls, 0), sample_values(cls, 1), {**a_values, first: "other"}):
            b, b_ref = cls(**b_values), ref(**b_values)
            assert (a == b) == (a_ref == b_ref) and (a != b) == (a_ref != b_ref)
        assert (a == a_ref) is False and a.__eq__(a_ref) is NotImplemented  # another class: not equal
        assert repr(dataclasses.replace(a, **{first: "x"})) == repr(dataclasses.replace(a_ref, **{first: "x"}))
    one = sample_values(cls, 2)
    first = next(iter(one))
    for make in (cls, ref):  # two NaNs, two objects: not equal; the same NaN object: equal (a tuple's comparison)
        assert (make(**{**one, first: float("nan")}) == make(**{**one, first: float("nan")})) is False
        assert make(**{**one, first: nan}) == make(**{**one, first: nan})
