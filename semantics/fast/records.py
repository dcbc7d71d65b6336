"""The fast engine's record updates: a NamedTuple's fields set by a
function written out as Python source per record type and field list (one
``tuple.__new__`` call), where the definition's (semantics/smallstep/
configuration.setter, build) go through ``_make``."""

from __future__ import annotations


def setter(record_type, *names: str):
    """The function ``(record, value, ...) -> record`` with the fields
    ``names`` set, in that order: the update a hot rule makes, written with
    positional arguments and one tuple build (a keyword ``_replace`` of a
    14-field record binds 14 parameters and costs about twice as much;
    docs/semantics.md, Speed). ``setter(Configuration, "time", "events")(c, t, e)``
    is ``c._replace(time=t, events=e)``."""
    fields = record_type._fields
    unknown = [name for name in names if name not in fields]
    assert not unknown, f"{record_type.__name__} has no field {unknown}"
    old = [f"_{i}" for i in range(len(fields))]
    items = [name if name in names else old[i] for i, name in enumerate(fields)]
    source = (f"def set_fields(record, {', '.join(names)}):\n"
              f"    {', '.join(old)}, = record\n"
              f"    return new(record_type, ({', '.join(items)},))\n")
    namespace = {"new": tuple.__new__, "record_type": record_type}
    exec(source, namespace)
    function = namespace["set_fields"]
    function.__name__ = function.__qualname__ = f"set_{record_type.__name__}_{'_'.join(names)}"
    return function


#: ``build(Record, (field, ...))`` is ``Record(field, ...)`` without the
#: constructor's Python frame (a NamedTuple's ``__new__`` is a Python
#: function; the hot rules build their records this way, 0.1 µs each).
build = tuple.__new__
