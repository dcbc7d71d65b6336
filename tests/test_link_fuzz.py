"""A malformed IR file is a ProgramError, never a crash.

IR files can come from other tools (brief B, check 6: "an out-of-range index
is a ProgramError, not an IndexError"). Each example takes an oracle IR file,
changes one of its integers (an index, a slot, a block id, a count) to another
small number, and links the result: it links, or it is refused with a
ProgramError; any other exception is a bug of the linker.
"""

from __future__ import annotations

import glob
import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from semantics import codec
from semantics.errors import ProgramError
from semantics.link import link
from shared_paths import SHARED

ORACLE = os.environ.get("SERQ_ORACLE", str(SHARED / "oracle"))
IR_FILES = sorted(glob.glob(os.path.join(ORACLE, "**", "*.ir.json"), recursive=True))


def list_integer_paths(value, path=()):
    """The paths of every integer in a JSON value (numbers the IR writes as floats are not indices)."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [path]
    if isinstance(value, dict):
        return [p for k in sorted(value) for p in list_integer_paths(value[k], path + (k,))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in list_integer_paths(v, path + (i,))]
    return []


def replace_at(value, path, new):
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: (replace_at(v, rest, new) if k == head else v) for k, v in value.items()}
    return [replace_at(v, rest, new) if i == head else v for i, v in enumerate(value)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_changing_one_integer_of_an_oracle_file_links_or_is_a_program_error(data):
    path = data.draw(st.sampled_from(IR_FILES))
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    where = data.draw(st.sampled_from(list_integer_paths(document)))
    changed = replace_at(document, where, data.draw(st.integers(0, 25)))
    try:
        program = codec.decode_program(changed)
    except codec.IRFormatError:
        return
    try:
        link(program)
    except ProgramError:
        pass
