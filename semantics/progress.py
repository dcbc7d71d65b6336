"""A progress bar for long runs, drawn on a terminal's stream only.

``ProgressBar(stream)`` is called with the fraction of the run done (simulated
time over the horizon, as the driver sees it) and redraws one line in place
when the whole percentage changes. On a stream that is not a terminal (a file,
a pipe, a test's buffer) it writes nothing at all, so the report printed
after it is the same bytes wherever it goes.
"""

from __future__ import annotations

import math
from typing import TextIO

#: Characters of the bar between its brackets.
BAR_WIDTH = 40


class ProgressBar:
    """Draws ``[#####.....]  42%`` on ``stream`` when it is a TTY."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.enabled = check_terminal(stream)
        #: The percentage last drawn; None before the first drawing.
        self.drawn: int | None = None

    def __call__(self, fraction: float) -> None:
        """Show ``fraction`` (clamped to [0, 1]; NaN shows as 0) of the run done."""
        if not self.enabled:
            return
        percent = calculate_percent(fraction)
        if percent == self.drawn:
            return
        self.drawn = percent
        self.stream.write("\r" + format_bar(percent))
        self.stream.flush()

    def close(self) -> None:
        """Clear the bar's line, if one was drawn, so the next output starts clean."""
        if self.enabled and self.drawn is not None:
            self.stream.write("\r" + " " * len(format_bar(self.drawn)) + "\r")
            self.stream.flush()
        self.drawn = None
        self.enabled = False


def check_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is an interactive terminal (False when it cannot tell)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except (OSError, ValueError):
        return False


def calculate_percent(fraction: float) -> int:
    """The whole percentage of ``fraction``, rounded down, within 0..100."""
    if math.isnan(fraction):
        return 0
    return int(math.floor(min(max(fraction, 0.0), 1.0) * 100))


def format_bar(percent: int) -> str:
    """``[####......]  42%``: a bar of ``BAR_WIDTH`` cells and the percentage."""
    filled = percent * BAR_WIDTH // 100
    return "[" + "#" * filled + "." * (BAR_WIDTH - filled) + f"] {percent:3d}%"
