"""Progress bars for long runs, drawn on a terminal's stream only.

Two kinds:

- ``ProgressBar(stream)``, one run's: the fraction of simulated time done;
- ``CaseProgress(total, label)``, a command over many independent cases or
  points (``serq-ref sweep``, the oracle's and the peer's campaigns, ``oracle
  check``, ``oracle regenerate``, ``lean check``, ``peer check``): cases done of the total, the rate and an estimate of the time
  left, drawn by tqdm (a well-kept library: its rate smoothing and time-left
  estimate are what a hand-written bar would have to redo).

Both write to standard error and only when it is a terminal; anywhere else
(a file, a pipe, CI, a test's buffer) they write nothing, so what a command
prints on standard output, and on standard error besides the bar, is the same
bytes whether or not a bar was drawn.

``ProgressBar(stream)`` is called with the fraction of the run done (simulated
time over the horizon, as the driver sees it) and redraws one line in place
when the whole percentage changes. On a stream that is not a terminal (a file,
a pipe, a test's buffer) it writes nothing at all, so the report printed
after it is the same bytes wherever it goes.
"""

from __future__ import annotations

import math
import sys
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


class CaseProgress:
    """``label: 42%|####      | 2100/5000 [00:40<00:55, 52.1 case/s]`` on
    ``stream`` (default: standard error) when it is a TTY; nothing otherwise.

    ``advance(n)`` after each n cases done (in any order), ``close()`` at the
    end (the line is cleared); also a context manager. ``done`` counts the
    cases advanced, bar or not; ``draw`` False: never a bar (a caller of the
    library rather than the command line), ``write`` still writes.
    """

    def __init__(self, total: int, label: str, stream: TextIO | None = None, unit: str = "case", done: int = 0,
                 draw: bool = True):
        self.stream = sys.stderr if stream is None else stream
        self.total = total
        self.done = done
        self.bar = None
        if draw and check_terminal(self.stream):
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, desc=label, unit=unit, file=self.stream, leave=False,
                            dynamic_ncols=True, mininterval=0.25, smoothing=0.1)

    def advance(self, count: int = 1) -> None:
        self.done += count
        if self.bar is not None:
            self.bar.update(count)

    def write(self, line: str) -> None:
        """A line on the bar's stream above the bar (a warning while cases run), the bar redrawn below it."""
        if self.bar is not None:
            self.bar.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)

    def print(self, line: str) -> None:
        """A line of the command's output on standard output: the bar, if one is drawn, is cleared first and
        redrawn after it (a terminal shows both streams on one screen); without a bar, a plain print."""
        if self.bar is not None:
            self.bar.write(line, file=sys.stdout)
        else:
            print(line, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> "CaseProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
