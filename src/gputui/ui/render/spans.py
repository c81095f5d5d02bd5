"""Lines of styled spans: the common output of every render function."""

from __future__ import annotations

from collections.abc import Iterable

Span = tuple[str, str]
"""(text, role); role "" is the widget's default style."""
Line = list[Span]


def text_of(line: Line) -> str:
    """The plain text of a line."""
    return "".join(text for text, _ in line)


def texts(lines: Iterable[Line]) -> list[str]:
    """The plain text of each line (what the tests compare)."""
    return [text_of(line) for line in lines]


def width_of(line: Line) -> int:
    """Cells a line takes (every character gputui draws is one cell wide)."""
    return sum(len(text) for text, _ in line)


def fit(line: Line, width: int) -> Line:
    """The line cut or padded with spaces to exactly `width` cells."""
    out: Line = []
    left = width
    for text, role in line:
        if left <= 0:
            break
        piece = text[:left]
        out.append((piece, role))
        left -= len(piece)
    if left > 0:
        out.append((" " * left, ""))
    return out


def plain(text: str, role: str = "") -> Line:
    """A line of one span."""
    return [(text, role)]


def join(*parts: Line) -> Line:
    """Concatenate lines into one."""
    return [span for part in parts for span in part]
