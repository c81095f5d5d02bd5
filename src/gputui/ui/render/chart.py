"""Line charts of (x, y) series, in braille dots (2x4 per cell) or in plain ASCII (one per cell).

`line_chart` draws series against a left axis and, optionally, a second (right) axis, each linear
or logarithmic, plus dashed horizontal lines (e.g. SLA bounds, on either axis), dashed vertical
lines (e.g. the knee), whiskers (a 95 % interval: a solid vertical line with capped ends, an open
end a short dotted stub) and a marker character on each data point. A series may be
dashed (`dash`: dots on, dots off), so that series stay apart by glyph and line style without
colour (--no-color).
Layout: tick labels in a gutter on each side, the x tick labels on the last row. When two things
land in one braille cell, the one drawn later gives the cell its role; markers and labels are drawn
last, over everything.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from gputui.ui.render.spans import Line

AxisSide = Literal["left", "right"]

_BRAILLE_BASE = 0x2800
_BRAILLE_BITS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))
"""Bit of the dot at [row][column] inside one braille cell."""


@dataclass(frozen=True, slots=True)
class Axis:
    """A value range mapped onto the plot, linear or log10."""

    lo: float
    hi: float
    log: bool = False
    fmt: Callable[[float], str] = str

    def fraction(self, value: float) -> float:
        """0 at `lo`, 1 at `hi` (outside that range when the value is)."""
        if self.log:
            lo, hi = math.log10(self.lo), math.log10(self.hi)
            v = math.log10(max(value, 1e-12))
        else:
            lo, hi, v = self.lo, self.hi, value
        return 0.5 if hi == lo else (v - lo) / (hi - lo)

    def value_at(self, fraction: float) -> float:
        """The inverse of `fraction`."""
        if self.log:
            lo, hi = math.log10(self.lo), math.log10(self.hi)
            return float(10 ** (lo + fraction * (hi - lo)))
        return self.lo + fraction * (self.hi - self.lo)


@dataclass(frozen=True, slots=True)
class Series:
    """Points joined by lines; `marker` (one character) drawn on each point when given."""

    points: Sequence[tuple[float, float]]
    role: str
    axis: AxisSide = "left"
    marker: str | None = None
    dash: tuple[int, int] | None = None
    """(dots drawn, dots skipped) along the line; None is a solid line."""


@dataclass(frozen=True, slots=True)
class HLine:
    """A dashed horizontal line at `y` on one axis."""

    y: float
    role: str
    axis: AxisSide = "right"


@dataclass(frozen=True, slots=True)
class VLine:
    """A dashed vertical line at `x`, with an optional label on the top row."""

    x: float
    role: str
    label: str = ""


@dataclass(frozen=True, slots=True)
class Whisker:
    """A vertical interval [lo, hi] at `x` (a 95 % CI): capped ends; None = open to the edge."""

    x: float
    lo: float | None
    hi: float | None
    role: str
    axis: AxisSide = "left"
    mid: float | None = None
    """The point the interval is about: when given, the whisker reaches at most a fifth of the
    plot's height either side of it (a wider interval is cut there, uncapped: "beyond")."""


@dataclass(frozen=True, slots=True)
class Mark:
    """One character at a point (e.g. the live value of the current step)."""

    x: float
    y: float
    char: str
    role: str
    axis: AxisSide = "left"


@dataclass(slots=True)
class Canvas:
    """A grid of cells, each holding braille dots (or one ASCII char), a role and an overlay."""

    cols: int
    rows: int
    ascii: bool = False
    dots: list[list[int]] = field(init=False)
    chars: list[list[str]] = field(init=False)
    roles: list[list[str]] = field(init=False)

    def __post_init__(self) -> None:
        self.dots = [[0] * self.cols for _ in range(self.rows)]
        self.chars = [[""] * self.cols for _ in range(self.rows)]
        self.roles = [[""] * self.cols for _ in range(self.rows)]

    @property
    def width_px(self) -> int:
        """Horizontal resolution in dots."""
        return self.cols * (1 if self.ascii else 2)

    @property
    def height_px(self) -> int:
        """Vertical resolution in dots."""
        return self.rows * (1 if self.ascii else 4)

    def dot(self, x: int, y: int, role: str, char: str = "*") -> None:
        """Set one dot (x right, y down); ASCII mode writes `char` unless an overlay is there."""
        if not (0 <= x < self.width_px and 0 <= y < self.height_px):
            return
        if self.ascii:
            row, col = y, x
            if not self.chars[row][col]:
                self.dots[row][col] = ord(char)
        else:
            row, col = y // 4, x // 2
            self.dots[row][col] |= _BRAILLE_BITS[y % 4][x % 2]
        self.roles[row][col] = role

    def line(
        self,
        x0: int,
        y0: int,
        x1: int,
        y1: int,
        role: str,
        char: str = "*",
        dash: tuple[int, int] | None = None,
    ) -> None:
        """Bresenham's line between two dots, solid or dashed (`dash`: dots on, dots off)."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        on, period = (dash[0], dash[0] + dash[1]) if dash else (1, 1)
        n = 0
        while True:
            if n % period < on or (x0 == x1 and y0 == y1):
                self.dot(x0, y0, role, char)
            n += 1
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def put(self, col: int, row: int, text: str, role: str) -> None:
        """Overlay text at a cell (clipped at the edge)."""
        if not 0 <= row < self.rows:
            return
        for i, char in enumerate(text):
            if 0 <= col + i < self.cols:
                self.chars[row][col + i] = char
                self.roles[row][col + i] = role

    def lines(self) -> list[Line]:
        """The canvas as lines of spans (neighbouring cells of one role merged)."""
        out: list[Line] = []
        for r in range(self.rows):
            line: Line = []
            for c in range(self.cols):
                char = self.chars[r][c]
                if not char:
                    bits = self.dots[r][c]
                    if self.ascii:
                        char = chr(bits) if bits else " "
                    else:
                        char = chr(_BRAILLE_BASE + bits) if bits else " "
                role = self.roles[r][c] if char != " " else ""
                if line and line[-1][1] == role:
                    line[-1] = (line[-1][0] + char, role)
                else:
                    line.append((char, role))
            out.append(line)
        return out


def _ticks(axis: Axis, rows: int) -> dict[int, str]:
    """Tick labels for the top, middle and bottom rows of a plot `rows` high."""
    if rows <= 0:
        return {}
    picks = {0: 1.0, rows - 1: 0.0}
    if rows >= 5:
        picks[(rows - 1) // 2] = 1.0 - ((rows - 1) // 2) / (rows - 1)
    return {row: axis.fmt(axis.value_at(f)) for row, f in picks.items()}


def line_chart(
    series: Sequence[Series],
    width: int,
    height: int,
    *,
    x: Axis,
    left: Axis,
    right: Axis | None = None,
    hlines: Sequence[HLine] = (),
    vlines: Sequence[VLine] = (),
    marks: Sequence[Mark] = (),
    x_ticks: Sequence[float] = (),
    ascii: bool = False,
    axis_role: str = "dim",
    whiskers: Sequence[Whisker] = (),
) -> list[Line]:
    """The chart, exactly `height` lines of exactly `width` cells (see the module docstring)."""
    rows = height - 1
    left_ticks = _ticks(left, rows)
    right_ticks = _ticks(right, rows) if right is not None else {}
    lw = max((len(t) for t in left_ticks.values()), default=0) + 1
    rw = max((len(t) for t in right_ticks.values()), default=0) + 1 if right is not None else 0
    cols = width - lw - rw
    if rows < 2 or cols < 4:
        return [[(" " * max(width, 0), "")] for _ in range(max(height, 0))]
    canvas = Canvas(cols, rows, ascii=ascii)
    wpx, hpx = canvas.width_px, canvas.height_px

    def px(value: float) -> int:
        return round(x.fraction(value) * (wpx - 1))

    def py(value: float, side: AxisSide) -> int:
        axis = right if side == "right" and right is not None else left
        return round((1.0 - axis.fraction(value)) * (hpx - 1))

    dash_h, dash_v = ("-", "|") if ascii else ("", "")
    for h in hlines:
        y = py(h.y, h.axis)
        for xx in range(0, wpx, 2 if ascii else 3):
            canvas.dot(xx, y, h.role, dash_h or "-")
    for v in vlines:
        xx = px(v.x)
        for y in range(0, hpx, 2):
            canvas.dot(xx, y, v.role, dash_v or "|")
    for w in whiskers:
        _whisker(canvas, px(w.x), w, py)
    for s in series:
        pts = [(px(a), py(b, s.axis)) for a, b in s.points]
        for (x0, y0), (x1, y1) in itertools.pairwise(pts):
            canvas.line(x0, y0, x1, y1, s.role, "." if ascii else "*", s.dash)
        if len(pts) == 1:
            canvas.dot(*pts[0], s.role)
    scale_x, scale_y = (1, 1) if ascii else (2, 4)
    for s in series:
        if s.marker:
            for a, b in s.points:
                canvas.put(px(a) // scale_x, py(b, s.axis) // scale_y, s.marker, s.role)
    for m in marks:
        canvas.put(px(m.x) // scale_x, py(m.y, m.axis) // scale_y, m.char, m.role)
    for v in vlines:
        if v.label:
            col = px(v.x) // scale_x
            start = col + 1 if col + 1 + len(v.label) <= cols else col - len(v.label)
            canvas.put(start, 0, v.label, v.role)

    out: list[Line] = []
    bar = "|" if ascii else "│"
    for r, line in enumerate(canvas.lines()):
        row: Line = [(left_ticks.get(r, "").rjust(lw - 1) + bar, axis_role), *line]
        if right is not None:
            row.append((bar + right_ticks.get(r, "").ljust(rw - 1), axis_role))
        out.append(row)
    out.append(_x_labels(x_ticks, [px(t) // scale_x for t in x_ticks], x, lw, cols, width))
    for line in out:
        line[:] = [(text, role) for text, role in line if text]
    return [_role_axis(line, axis_role) for line in out]


def _whisker(canvas: Canvas, x: int, w: Whisker, py: Callable[[float, AxisSide], int]) -> None:
    """One interval: solid between its ends, capped where an end lies on the plot.

    An open end (None) is a short dotted stub past the other end, uncapped: "more, unknown",
    without a full-height line that would read as a grid line.
    """
    edge = canvas.height_px - 1
    reach = max(canvas.height_px // 12, 3)
    top = py(w.hi, w.axis) if w.hi is not None else None
    bottom = py(w.lo, w.axis) if w.lo is not None else None
    if top is None and bottom is None:
        return
    cut_top = cut_bottom = False
    if w.mid is not None:  # a short whisker: never a full-height line that reads as a grid line
        centre, most = py(w.mid, w.axis), max(canvas.height_px // 5, 4)
        if top is not None and top < centre - most:
            top, cut_top = centre - most, True
        if bottom is not None and bottom > centre + most:
            bottom, cut_bottom = centre + most, True
    char = ":" if canvas.ascii else "*"
    solid_top = top if top is not None else bottom
    solid_bottom = bottom if bottom is not None else top
    if solid_top is None or solid_bottom is None:
        return
    for y in range(
        max(min(solid_top, solid_bottom), 0), min(max(solid_top, solid_bottom), edge) + 1
    ):
        canvas.dot(x, y, w.role, char)
    if top is None:
        for y in range(solid_top - 2, solid_top - reach - 1, -2):
            canvas.dot(x, y, w.role, char)
    if bottom is None:
        for y in range(solid_bottom + 2, solid_bottom + reach + 1, 2):
            canvas.dot(x, y, w.role, char)
    if canvas.ascii:
        return
    for end, cut in ((top, cut_top), (bottom, cut_bottom)):
        if end is not None and not cut and 0 <= end <= edge:  # a clipped end has no cap
            for dx in (-1, 1):
                canvas.dot(x + dx, end, w.role)


def _x_labels(
    ticks: Sequence[float], cols_at: Sequence[int], x: Axis, lw: int, cols: int, width: int
) -> Line:
    """The bottom row: each tick's label centred under its column, skipping any that overlap."""
    row = [" "] * width
    taken_until = lw - 1
    for value, col in zip(ticks, cols_at, strict=True):
        label = x.fmt(value)
        start = max(lw, min(lw + col - len(label) // 2, lw + cols - len(label)))
        if start <= taken_until:
            continue
        row[start : start + len(label)] = list(label)
        taken_until = start + len(label)
    return [("".join(row[:width]), "")]


def _role_axis(line: Line, axis_role: str) -> Line:
    """The x label row takes the axis role too."""
    if len(line) == 1 and line[0][1] == "":
        return [(line[0][0], axis_role)]
    return line


def nice_max(value: float) -> float:
    """A round upper bound at or above `value` (1, 2, 2.5, 5 x 10^n)."""
    if value <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if value <= step * exp:
            return float(step * exp)
    return float(10 * exp)
