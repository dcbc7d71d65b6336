"""The types of command-line values every command shares (argparse ``type=``):
a number, a whole number at least 0, a whole number at least 1. A value that
is none of them is an ``argparse.ArgumentTypeError``, which the command line
reports as a usage error naming the option (exit 2)."""

from __future__ import annotations

import argparse
import math


def number(text: str) -> float:
    """A number (inf allowed), never NaN."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if math.isnan(value):
        raise argparse.ArgumentTypeError("NaN is not a value here")
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
