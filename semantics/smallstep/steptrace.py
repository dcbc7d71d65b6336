"""The step trace: one JSON-serialisable dict per applied rule
(docs/step-trace.md): ``{"rule": name, "time": t, ...what it changed...}``,
keys in a fixed order (rule, time, then the rule's own fields in the order
the rule lists them). Non-finite numbers are written as the strings "inf",
"-inf" and "nan" so that the dict is strict JSON.
"""

from __future__ import annotations

import math


def _plain(value):
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def describe_rule(rule: str, time: float, fields: dict) -> dict:
    record = {"rule": rule, "time": _plain(time)}
    for key, value in fields.items():
        record[key] = _plain(value)
    return record
