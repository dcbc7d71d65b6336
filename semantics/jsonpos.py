"""Where each value of a JSON text starts (line and column, 1-based), by its
path: ``("blocks", 3, 0, "Hold", "pools")``. A JSON file has no source map;
this is what lets an error about one of its nodes read ``FILE:LINE:COL:
error:``: an IR node the Lean translation refuses (lean_bridge/translate.py),
a field of a vLLM scenario that is no scenario's (oracle/scenario.py).

A small scanner over text that ``json.loads`` has already accepted: it finds
where values start and skips over them, decoding nothing but keys.
"""

from __future__ import annotations

import json.decoder
import re

_WS = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")

Path = tuple  # of str (object keys) and int (array indices)


def positions(text: str) -> dict[Path, tuple[int, int]]:
    """Every value's (line, column), by path; the whole document is ``()``."""
    line_starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            line_starts.append(i + 1)
    out: dict[Path, tuple[int, int]] = {}

    def where(offset: int) -> tuple[int, int]:
        lo, hi = 0, len(line_starts) - 1
        while lo < hi:  # the last line start at or before offset
            mid = (lo + hi + 1) // 2
            if line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, offset - line_starts[lo] + 1

    def skip(i: int) -> int:
        return _WS.match(text, i).end()

    def value(i: int, path: Path) -> int:
        i = skip(i)
        out[path] = where(i)
        ch = text[i]
        if ch == "{":
            i = skip(i + 1)
            if text[i] == "}":
                return i + 1
            while True:
                key, i = json.decoder.scanstring(text, skip(i) + 1)
                i = skip(i)
                assert text[i] == ":"
                i = skip(value(i + 1, path + (key,)))
                if text[i] == "}":
                    return i + 1
                assert text[i] == ","
                i += 1
        if ch == "[":
            i = skip(i + 1)
            if text[i] == "]":
                return i + 1
            k = 0
            while True:
                i = skip(value(i, path + (k,)))
                k += 1
                if text[i] == "]":
                    return i + 1
                assert text[i] == ","
                i += 1
        if ch == '"':
            return json.decoder.scanstring(text, i + 1)[1]
        match = _SCALAR.match(text, i)
        assert match, f"not JSON at offset {i}"
        return match.end()

    value(0, ())
    return out


def nearest(table: dict[Path, tuple[int, int]], path: Path) -> tuple[int, int] | None:
    """The (line, column) of ``path`` in ``table`` (``positions``), else of its
    nearest ancestor there; None when not even the document is."""
    for n in range(len(path), -1, -1):
        if path[:n] in table:
            return table[path[:n]]
    return None
