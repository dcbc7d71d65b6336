"""The definition's record updates (semantics/smallstep/configuration.py:
``records`` gives each record type its ``_replace``, ``setter`` a function per
field list): each gives the record the standard NamedTuple update gives, the
named fields set and every other field the record's own, of the record's type.
"""

from __future__ import annotations

import collections

import pytest

from semantics.smallstep import configuration, stages  # noqa: F401 (stages registers its kinds' records)
from semantics.smallstep.configuration import Configuration, Session, setter
from semantics.smallstep.stages import step


def standard(record, **changes) -> tuple:
    """The standard update (collections.namedtuple's ``_replace``) of a record of the same fields, as a tuple."""
    twin = collections.namedtuple(type(record).__name__, type(record)._fields)
    return tuple(twin._make(record)._replace(**changes))

RECORD_TYPES = [Configuration, Session, configuration.PoolState, configuration.Statistics, step.Iteration,
                step.StepStats]


def a_record(record_type):
    return record_type._make(f"{name}-value" for name in record_type._fields)


@pytest.mark.parametrize("record_type", RECORD_TYPES, ids=lambda t: t.__name__)
def test_replace_is_the_standard_update(record_type):
    record = a_record(record_type)
    assert record_type._replace.__module__ == configuration.__name__  # records() installed its own
    fields = record_type._fields
    for names in (fields[:1], fields[-1:], fields[1:4], fields[::2]):
        changes = {name: (name, "new") for name in names}
        got = record._replace(**changes)
        want = standard(record, **changes)
        assert type(got) is record_type and got == want
        assert all(getattr(got, name) == (changes[name] if name in changes else getattr(record, name))
                   for name in fields)
    assert record._replace() == record
    with pytest.raises(KeyError):
        record._replace(no_such_field=1)


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5])
def test_setter_sets_the_fields_named_in_order(count):
    record = a_record(Configuration)
    names = Configuration._fields[2:2 + count]
    values = [f"v{k}" for k in range(count)]
    got = setter(Configuration, *names)(record, *values)
    assert type(got) is Configuration
    assert got == standard(record, **dict(zip(names, values)))
    if count <= 3:
        with pytest.raises(TypeError):  # one, two and three fields: the arity is the field list's
            setter(Configuration, *names)(record, *values, "one too many")
