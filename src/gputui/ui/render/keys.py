"""The key bar's layout: every shown binding, flowed into as few rows as the width allows.

Textual's own footer stops at the screen's edge, so at 80 columns the last keys could not be
found; `key_rows` never drops one: what does not fit goes on the next row (issue 23).
"""

from __future__ import annotations

from collections.abc import Sequence

from gputui.ui.render.spans import Line

KeyItem = tuple[str, str]
"""(key as shown, description)."""


def key_rows(items: Sequence[KeyItem], width: int) -> list[Line]:
    """The items as 'key description' spans, a space apart, in rows of at most `width` cells."""
    rows: list[Line] = [[]]
    used = 0
    for key, description in items:
        size = len(key) + 1 + len(description)
        if rows[-1] and used + 1 + size > max(width, 1):
            rows.append([])
            used = 0
        if rows[-1]:
            rows[-1].append((" ", ""))
            used += 1
        rows[-1] += [(f" {key} ", "key"), (description, "")]
        used += size + 1
    return rows if rows[0] else []
