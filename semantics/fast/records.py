"""The fast engine's record updates: a NamedTuple's fields set by a
function written out as Python source per record type and field list (one
``tuple.__new__`` call), where the definition's (semantics/smallstep/
configuration.setter, build) go through ``_make``."""

from __future__ import annotations

from types import FunctionType

#: a setter's code until its first call: compile its own code, put it in place of this one, and apply it
_FIRST_CALL = compile("def set_fields(record, *values):\n"
                      "    return compile_setter(this)(record, *values)\n", __file__, "exec").co_consts[0]


def setter(record_type, *names: str):
    """The function ``(record, value, ...) -> record`` with the fields
    ``names`` set, in that order: the update a hot rule makes, written with
    positional arguments and one tuple build (a keyword ``_replace`` of a
    14-field record binds 14 parameters and costs about twice as much;
    docs/semantics.md, Speed). ``setter(Configuration, "time", "events")(c, t, e)``
    is ``c._replace(time=t, events=e)``.

    Its source is compiled at its first call, not here: the fast modules a
    step-loop run imports define 60 setters, the replay's run calls 6, and
    compiling the others cost that process 0.035 G instructions (cachegrind,
    2026-12-04). Until then the function's code is
    _FIRST_CALL's, which compiles the setter's and sets it as the function's
    ``__code__``, so the function (the same object wherever it was imported)
    runs the compiled code from then on, at no cost per call."""
    fields = record_type._fields
    unknown = [name for name in names if name not in fields]
    assert not unknown, f"{record_type.__name__} has no field {unknown}"
    namespace = {"new": tuple.__new__, "record_type": record_type, "compile_setter": _compile_setter}
    function = FunctionType(_FIRST_CALL, namespace, f"set_{record_type.__name__}_{'_'.join(names)}")
    function.__qualname__ = function.__name__
    namespace["this"] = function
    namespace["names"] = names
    return function


def _compile_setter(function):
    """``function`` (a setter) with its own code, compiled from its source, in place of _FIRST_CALL's."""
    namespace = function.__globals__
    names, fields = namespace["names"], namespace["record_type"]._fields
    old = [f"_{i}" for i in range(len(fields))]
    items = [name if name in names else old[i] for i, name in enumerate(fields)]
    source = (f"def set_fields(record, {', '.join(names)}):\n"
              f"    {', '.join(old)}, = record\n"
              f"    return new(record_type, ({', '.join(items)},))\n")
    code = compile(source, f"<setter {function.__name__}>", "exec").co_consts[0]
    function.__code__ = code.replace(co_name=function.__name__, co_qualname=function.__qualname__)
    return function


#: ``build(Record, (field, ...))`` is ``Record(field, ...)`` without the
#: constructor's Python frame (a NamedTuple's ``__new__`` is a Python
#: function; the hot rules build their records this way, 0.1 µs each).
build = tuple.__new__
