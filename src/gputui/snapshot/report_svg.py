"""SVG building blocks of the HTML report that keep text from colliding, without a browser.

Contract: a page has no script, so text is laid out here, in Python: `text_width` estimates a
label's width from DejaVu Sans' advances (the widest common sans, and what Linux browsers map
`system-ui` to; narrower fonts only leave more room); `fit_text` and `wrap_text` shorten or wrap
to a width; `thin_labels` keeps the axis labels that fit (the ends first, then round values);
`legend` lays coloured swatches out in rows under the title; `chart_head` opens a chart with a
viewBox (it scales to its box), a title that wraps, the legend under it and a `clipPath` of the
plot area; `chart_pair` draws a chart for a desktop and for a phone. All pure and
deterministic: the same input gives the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Final, Protocol

WIDTH: Final = 640
"""The desktop charts' width (a grid column; CSS scales it to the column)."""
NARROW: Final = 360
"""The phone charts' width."""
FONT_PX: Final = 11.0
TITLE_PX: Final = 13.0
LINE_PX: Final = 16.0
"""The height of one row of 11 px text (legend rows, wrapped titles)."""
_ADVANCE: Final = dict(
    zip(
        "abcdefghijklmnopqrstuvwxyz",
        (0.613, 0.635, 0.550, 0.635, 0.615, 0.352, 0.635, 0.634, 0.278, 0.278, 0.579, 0.278,
         0.974, 0.634, 0.612, 0.635, 0.635, 0.411, 0.521, 0.392, 0.634, 0.592, 0.818, 0.592,
         0.592, 0.525),
        strict=True,
    )
)  # fmt: skip
_NARROW: Final = {" ": 0.318, ".": 0.318, ",": 0.318, ":": 0.337, "/": 0.337, "-": 0.361,
                  "(": 0.390, ")": 0.390, "'": 0.275, "|": 0.337, "!": 0.400, "…": 1.0,
                  "%": 0.950, "°": 0.500, "~": 0.838, "—": 1.0, "×": 0.838}  # fmt: skip


def text_width(text: str, size: float = FONT_PX, *, bold: bool = False) -> float:
    """Estimated advance of `text` in px (DejaVu Sans; bold about 10 % wider)."""
    em = 0.0
    for ch in text:
        if ch in _ADVANCE:
            em += _ADVANCE[ch]
        elif ch in _NARROW:
            em += _NARROW[ch]
        elif ch.isdigit():
            em += 0.636
        elif ch.isupper():
            em += 0.98 if ch in "MW" else 0.75
        else:
            em += 0.70
    return em * size * (1.1 if bold else 1.0)


def fit_text(text: str, width: float, size: float = FONT_PX, *, bold: bool = False) -> str:
    """`text`, or its longest prefix + "…" that fits `width` ("" when not even "…" fits)."""
    if text_width(text, size, bold=bold) <= width:
        return text
    for end in range(len(text) - 1, 0, -1):
        short = text[:end].rstrip() + "…"
        if text_width(short, size, bold=bold) <= width:
            return short
    return "…" if text_width("…", size, bold=bold) <= width else ""


def wrap_text(
    text: str, width: float, size: float = FONT_PX, *, bold: bool = False, lines: int = 2
) -> list[str]:
    """`text` broken at spaces into at most `lines` lines of `width` (the last one shortened)."""
    out: list[str] = []
    words = text.split(" ")
    while words and len(out) < lines - 1:
        take = 1
        while (
            take < len(words) and text_width(" ".join(words[: take + 1]), size, bold=bold) <= width
        ):
            take += 1
        line = " ".join(words[:take])
        if text_width(line, size, bold=bold) > width:
            break  # one word too long for a line: the last line shortens it
        out.append(line)
        words = words[take:]
    if words:
        out.append(fit_text(" ".join(words), width, size, bold=bold))
    return out


def thin_labels(
    labels: Sequence[tuple[float, str]],
    *,
    gap: float = 6.0,
    size: float = FONT_PX,
    rank: Callable[[int], int] | None = None,
    within: tuple[float, float] = (-math.inf, math.inf),
) -> list[bool]:
    """Which centred labels at (x, text) to show so that none overlaps another.

    The first and last come first, then by `rank` (lower first; e.g. powers of two on a log
    axis), then left to right; each is kept if it lies `within` (x from, x to: e.g. right of
    the y axis' labels) and clears every label kept so far by `gap`.
    """
    n = len(labels)

    def priority(i: int) -> tuple[int, int, int]:
        return (0 if i in (0, n - 1) else 1, rank(i) if rank else 0, i)

    kept: list[tuple[float, float]] = []
    keep = [False] * n
    for i in sorted(range(n), key=priority):
        x, text = labels[i]
        half = text_width(text, size) / 2
        lo, hi = x - half, x + half
        inside = within[0] <= lo and hi <= within[1]
        if inside and all(hi + gap <= a or lo >= b + gap for a, b in kept):
            kept.append((lo, hi))
            keep[i] = True
    return keep


@dataclass(frozen=True, slots=True)
class Head:
    """An opened chart: its SVG so far and where its plot area starts."""

    parts: list[str]
    plot_top: float
    clip: str
    """The id of the plot area's clipPath."""


def legend(
    items: Sequence[tuple[str, str]], left: float, width: float, top: float
) -> tuple[list[str], float]:
    """Swatches and names in rows from (left, top), wrapping at `width`; SVG and its height."""
    if not items:
        return [], 0.0
    parts: list[str] = []
    x, row = left, 0
    for name, color in items:
        shown = fit_text(name, width - 18)
        need = 18 + text_width(shown) + 14
        if x > left and x - left + need > width:
            x, row = left, row + 1
        y = top + row * LINE_PX
        parts.append(
            f'<rect x="{x:.1f}" y="{y + 4:.1f}" width="12" height="8" fill="{color}"/>'
            f'<text x="{x + 16:.1f}" y="{y + 12:.1f}">{escape(shown)}'
            f"{_tip(name, shown)}</text>"
        )
        x += need
    return parts, (row + 1) * LINE_PX


def _tip(full: str, shown: str) -> str:
    """The full text as a tooltip when it was shortened."""
    return f"<title>{escape(full)}</title>" if shown != full else ""


def chart_head(
    title: str,
    items: Sequence[tuple[str, str]],
    *,
    width: float,
    plot: tuple[float, float, float],
    uid: str,
) -> Head:
    """Title (wrapped), legend rows under it, and a clipPath of the plot area.

    `plot` is (left, right, height) of the plot area; it starts under the legend. The caller
    adds the plot and closes the element with `chart_tail`.
    """
    title_lines = wrap_text(title, width - 16, TITLE_PX, bold=True)
    parts = [
        f'<text class="title" x="8" y="{18 + i * 17}">{escape(line)}'
        f"{_tip(title, line) if i == len(title_lines) - 1 else ''}</text>"
        for i, line in enumerate(title_lines)
    ]
    top = 8 + 17 * len(title_lines)
    rows, legend_h = legend(items, 8, width - 16, top)
    parts += rows
    plot_top = top + legend_h + 12
    left, right, plot_h = plot
    clip = f"clip-{uid}"
    parts.insert(
        0,
        f'<defs><clipPath id="{clip}"><rect x="{left:.1f}" y="{plot_top:.1f}" '
        f'width="{right - left:.1f}" height="{plot_h:.1f}"/></clipPath></defs>'
        f'<rect class="plot" x="{left:.1f}" y="{plot_top:.1f}" width="{right - left:.1f}" '
        f'height="{plot_h:.1f}" fill="none"/>',
    )
    return Head(parts, plot_top, clip)


class Draw(Protocol):
    """Draws one chart `width` px wide; `uid` makes its ids unique in the page."""

    def __call__(self, *, width: int, uid: str) -> str: ...


def chart_pair(uid: str, draw: Draw) -> str:
    """One chart drawn `WIDTH` and `NARROW` px wide; the page's CSS shows the one that fits."""
    return (
        f'<div class="chart"><div class="wide">{draw(width=WIDTH, uid=uid + "w")}</div>'
        f'<div class="narrow">{draw(width=NARROW, uid=uid + "n")}</div></div>'
    )


def svg_open(width: float, height: float, label: str, css_class: str) -> str:
    """The chart's root element: a viewBox, so CSS sizes it to its box."""
    return (
        f'<svg class="{css_class}" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{escape(label)}" '
        ">"
        f'<rect width="{width:.0f}" height="{height:.0f}" fill="#fff"/>'
    )


def nice_step(span: float, ticks: int = 5) -> float:
    """A 1, 2, 2.5 or 5 times a power of ten step giving about `ticks` steps over `span`."""
    raw = span / max(ticks, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * power >= raw)


def axis(lo: float, hi: float, ticks: int = 5) -> tuple[float, float, list[float]]:
    """An axis over [lo, hi] widened to round ends: (start, end, the ticks)."""
    if hi <= lo:
        hi = lo + 1.0
    step = nice_step(hi - lo, ticks)
    start = math.floor(lo / step) * step
    end = math.ceil(hi / step) * step
    count = round((end - start) / step)
    return start, end, [start + i * step for i in range(count + 1)]


def fmt_number(value: float) -> str:
    """An axis label: thousands separated from 100 up, else the shortest form."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:g}"
