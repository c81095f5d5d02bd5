"""The base of every live panel: holds the current `LiveView`, draws it with a render function."""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.events import Resize
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from gputui.frontends.view import LiveView
from gputui.ui.render.spans import Line

ROLES = (
    *("ok", "warn", "crit", "dim", "label", "accent", "s1", "s2", "s3", "knee", "live", "best"),
    *("o1", "o2", "o3"),
    "inconclusive",
    *("bnet", "bqueue", "bprefill", "bserver", "bclient"),
)
"""Roles a render function may give a span; each is a component class styled in global.tcss."""


class LivePanel(Widget):
    """A panel that redraws from its `view` reactive (the screen sets it at most at 4 Hz).

    It uses Textual's line API: the render function's lines become strips once per view (or
    resize, or theme change), with each role's style looked up once, so a repaint costs no more
    than the draw itself (measured: about half the CPU of rendering a Rich `Text`).
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {f"role--{role}" for role in ROLES}

    view: reactive[LiveView | None] = reactive(None, init=False, always_update=True)
    """The view to draw; the screen assigns it only when its `seq` changed."""

    def __init__(self, *, ascii: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ascii = ascii
        """Draw charts and bars in plain ASCII (--ascii)."""
        self._strips: list[Strip] | None = None
        self._role_styles: dict[str, Style] = {}

    def data_key(self, view: LiveView) -> object:
        """What this panel shows of a view: the screen skips views whose key it has drawn."""
        return view.seq

    def draw(self, view: LiveView, width: int, height: int) -> list[Line]:
        """The panel's lines for this view and content size (subclasses call a render function)."""
        raise NotImplementedError

    def _watch_view(self) -> None:
        self._strips = None

    def _on_resize(self, _event: Resize) -> None:
        self._strips = None

    def notify_style_update(self) -> None:
        """The theme or classes changed: look the role styles up again."""
        super().notify_style_update()
        self._role_styles.clear()
        self._strips = None

    def render_line(self, y: int) -> Strip:
        """One line of the panel's content."""
        if self._strips is None:
            self._strips = self._build()
        if y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.content_size.width, self.rich_style)

    def _build(self) -> list[Strip]:
        width, height = self.content_size
        base = self.rich_style
        if self.view is None:
            lines: list[Line] = [[("waiting for the first frame…", "dim")]]
        else:
            lines = self.draw(self.view, width, height)
        strips = []
        for line in lines[: max(height, 0)]:
            segments = [Segment(text, base + self._style(role)) for text, role in line if text]
            strips.append(Strip(segments).crop_extend(0, width, base))
        return strips

    def _style(self, role: str) -> Style:
        style = self._role_styles.get(role)
        if style is None:
            style = (
                self.get_component_rich_style(f"role--{role}", default=Style.null())
                if role
                else Style.null()
            )
            self._role_styles[role] = style
        return style
