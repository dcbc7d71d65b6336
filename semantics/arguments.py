"""The types of command-line values every command shares (argparse ``type=``):
a number, a whole number at least 0, a whole number at least 1, and the run
settings every command that takes a program has (``cli_common``): a horizon,
a warm-up, an arrival limit, a ``--set NAME=VALUE``. A value that is none of
them is an ``argparse.ArgumentTypeError``, which the command line reports as
a usage error naming the option (exit 2)."""

from __future__ import annotations

import argparse
import math


def number(text: str) -> float:
    """A number (inf allowed), never NaN; a finite numeral beyond a float's
    range (1e400, which Python reads as inf) or a non-zero one below it
    (1e-400, read as 0) is refused rather than read as another number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if math.isnan(value):
        raise argparse.ArgumentTypeError("NaN is not a value here")
    spelled = text.strip().lstrip("+-").lower()
    if math.isinf(value) and spelled not in ("inf", "infinity"):
        raise argparse.ArgumentTypeError(f"{text.strip()} overflows: a number is at most about 1.8e308 "
                                         "(write inf for an infinite one)")
    if value == 0 and any(c in "123456789" for c in spelled.partition("e")[0]):
        raise argparse.ArgumentTypeError(f"{text.strip()} underflows: it is not 0, and a non-zero number is at "
                                         "least about 5e-324")
    return value


def whole(text: str) -> int:
    """A whole number, at least 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return value


def positive(text: str) -> int:
    """A whole number, at least 1."""
    value = whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text}")
    return value


def arrival_count(text: str) -> int:
    """An arrival limit: a whole number, at least 1."""
    value = whole(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1: an arrival limit of 0 would measure nothing")
    return value


def horizon(text: str) -> float:
    """A run's deadline: a positive time (inf too)."""
    value = number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive (a time, or inf with --arrivals N): {text}")
    return value


def warmup(text: str) -> float:
    """The time the statistics start: finite, 0 or later."""
    value = number(text)
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite time, 0 or later: {text}")
    return value


def assignment(text: str) -> tuple[str, float]:
    """``NAME=VALUE``: a constant's name and its number."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, found {text!r}")
    return name.strip(), number(value.strip())
