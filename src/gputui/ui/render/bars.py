"""Horizontal bars and gauges: a fraction of a width, in eighth-blocks or ASCII."""

from __future__ import annotations

from gputui.ui.render.spans import Line

_EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(fraction: float | None, width: int, *, ascii: bool = False) -> tuple[str, str]:
    """(filled, empty) parts of a bar `width` cells long; None draws an empty bar."""
    if width <= 0:
        return "", ""
    if fraction is None:
        return "", ("-" if ascii else "·") * width
    f = min(max(fraction, 0.0), 1.0)
    if ascii:
        full = round(f * width)
        return "#" * full, "-" * (width - full)
    eighths = round(f * width * 8)
    full, part = divmod(eighths, 8)
    filled = "█" * full + (_EIGHTHS[part] if part else "")
    return filled, "░" * (width - len(filled))


def gauge(
    label: str,
    fraction: float | None,
    width: int,
    text: str,
    *,
    role: str,
    ascii: bool = False,
    label_width: int = 6,
) -> Line:
    """`label  [bar]  text` in exactly `width` cells: the bar takes what the texts leave."""
    bar_width = max(width - label_width - len(text) - 2, 0)
    filled, empty = bar(fraction, bar_width, ascii=ascii)
    line: Line = [(label.ljust(label_width)[:label_width], "label"), (filled, role)]
    line += [(empty, "dim"), (" " + text + " ", "")]
    return [(t, r) for t, r in line if t]


def level_role(fraction: float | None, warn: float = 0.8, crit: float = 0.95) -> str:
    """The role of a fill level: "ok", "warn" or "crit"; "dim" when unknown."""
    if fraction is None:
        return "dim"
    if fraction >= crit:
        return "crit"
    return "warn" if fraction >= warn else "ok"
