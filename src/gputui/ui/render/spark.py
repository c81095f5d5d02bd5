"""Sparklines: one row of block characters (or ASCII) for a series' recent trend."""

from __future__ import annotations

from collections.abc import Sequence

BLOCKS = " ▁▂▃▄▅▆▇█"
ASCII_LEVELS = " _.-~=*#"


def sparkline(
    values: Sequence[float],
    width: int,
    *,
    lo: float | None = None,
    hi: float | None = None,
    ascii: bool = False,
) -> str:
    """The last `width` values as one row, scaled between `lo` and `hi` (default: their range).

    A value at `lo` still shows the lowest mark (so a flat series reads as a line), and the row
    is left-padded with spaces when there are fewer values than cells.
    """
    if width <= 0:
        return ""
    recent = list(values[-width:])
    if not recent:
        return " " * width
    low = min(recent) if lo is None else lo
    high = max(recent) if hi is None else hi
    levels = ASCII_LEVELS if ascii else BLOCKS
    top = len(levels) - 1
    span = high - low
    chars = []
    for v in recent:
        f = 0.0 if span <= 0 else (min(max(v, low), high) - low) / span
        chars.append(levels[max(1, round(f * top))])
    return " " * (width - len(chars)) + "".join(chars)
