"""The event log as it reads on screen: repeats collapsed, every event whole (issue 23).

A GPU that throttles every few seconds would otherwise push the SLA and knee events out of view,
so `collapse` folds identical events into one `EventGroup` that says how often and since when
("GPU 0 throttling: sw_power_cap since 0:01:32, x9"), shown where its latest repeat happened.
Warnings, errors, throttling and the like fold wherever they repeat; an "info" event (a load
change, a save) folds only into the one just before it, so the log still reads as a history.
Errors, throttling and preemptions fold even when only their figures differ ("the client is
saturated (6 % CPU ...)" then "(9 % CPU ...)"): the line shows the latest figures.
`events_lines` wraps each group's text under its time and kind, never cutting it off.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from gputui.session.events import EventKind, LiveEvent
from gputui.ui.render import format as fmt
from gputui.ui.render.spans import Line, fit

EVENT_ROLES = {
    "error": "crit",
    "sla": "crit",
    "throttle": "warn",
    "preemption": "warn",
    "warning": "warn",
}
_FIGURES = re.compile(r"(?<!GPU )\d+(\.\d+)?")
"""Figures in an event's text; a GPU's index is its identity, not a figure."""
_FOLD_FIGURES = frozenset({"error", "throttle", "preemption"})
"""Kinds whose repeats fold whatever their figures (a step number would: warnings, SLA, info)."""
_KIND_NAMES = {"preemption": "preempt"}
"""Kinds shown shorter, so that the kind column takes 9 cells."""
_KIND_W = 9
_PREFIX_W = 8 + _KIND_W
"""'0:01:32 ' and the kind column: where an event's text starts (and its wrapped lines)."""
_NARROW = 44
"""Below this width the text wraps under the time only (the kind column would leave too little)."""


@dataclass(frozen=True, slots=True)
class EventGroup:
    """One event, or the identical events folded into it."""

    kind: EventKind
    text: str
    first_s: float
    """Session time of the first occurrence."""
    last_s: float
    """Session time of the latest occurrence (the group's place in the log)."""
    count: int = 1

    @property
    def line_text(self) -> str:
        """The text as shown: a repeat says since when and how often."""
        if self.count == 1:
            return self.text
        return f"{self.text} since {fmt.clock(self.first_s)}, x{self.count}"


def collapse(events: Sequence[LiveEvent]) -> list[EventGroup]:
    """The events with repeats folded (module docstring), oldest first by their latest time."""
    groups: list[EventGroup] = []
    where: dict[tuple[str, str], int] = {}
    for event in events:
        text = _FIGURES.sub("#", event.text) if event.kind in _FOLD_FIGURES else event.text
        key = (event.kind, text)
        at = where.get(key)
        foldable = at is not None and (event.kind != "info" or at == len(groups) - 1)
        if at is not None and foldable:
            old = groups[at]
            groups[at] = EventGroup(event.kind, event.text, old.first_s, event.t_s, old.count + 1)
            continue
        where[key] = len(groups)
        groups.append(EventGroup(event.kind, event.text, event.t_s, event.t_s))
    return sorted(groups, key=lambda g: g.last_s)


def group_lines(group: EventGroup, width: int) -> list[Line]:
    """One group's lines: time, kind and text, the text wrapped under itself."""
    role = EVENT_ROLES.get(group.kind, "dim")
    text_role = "crit" if role == "crit" else ""
    narrow = width < _NARROW
    indent = 2 if narrow else _PREFIX_W
    wrapped = textwrap.wrap(group.line_text, max(width - indent, 8)) or [""]
    kind = _KIND_NAMES.get(group.kind, group.kind)
    head: Line = [(fmt.clock(group.last_s) + " ", "dim"), (kind.ljust(_KIND_W), role)]
    if narrow:
        body = [[(" " * indent, ""), (part, text_role)] for part in wrapped]
        return [fit(head, width), *(fit(line, width) for line in body)]
    head.append((wrapped[0], text_role))
    rest = [[(" " * indent, ""), (part, text_role)] for part in wrapped[1:]]
    return [fit(head, width), *(fit(line, width) for line in rest)]


def events_lines(events: Sequence[LiveEvent], width: int, height: int) -> list[Line]:
    """The newest whole events that fit `height` lines, oldest of them first, padded."""
    out: list[Line] = []
    for group in reversed(collapse(events)):
        lines = group_lines(group, width)
        if len(out) + len(lines) > height:
            if not out:  # the newest alone is taller than the panel: its start
                out = lines[:height]
            break
        out = lines + out
    return out + [fit([], width) for _ in range(height - len(out))]


def all_events_lines(events: Sequence[LiveEvent], width: int) -> list[Line]:
    """Every event (repeats folded), whole, oldest first: the event log's own screen."""
    return [line for group in collapse(events) for line in group_lines(group, width)]
