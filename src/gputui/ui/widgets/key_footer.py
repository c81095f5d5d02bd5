"""`KeyFooter`: the screen's shown bindings on one row, or on two when one is too narrow."""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from gputui.ui.render.keys import KeyItem, key_rows


class KeyFooter(Widget):
    """Every key the screen shows, never cut off: the rows grow with the keys (at 80 columns)."""

    DEFAULT_CSS = """
    KeyFooter { height: auto; dock: bottom; background: $footer-background; }
    KeyFooter > .key-footer--key { color: $footer-key-foreground; text-style: bold; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"key-footer--key"}

    def on_mount(self) -> None:
        """Redraw when the screen's bindings change."""
        self.screen.bindings_updated_signal.subscribe(self, lambda _s: self.refresh(layout=True))

    def items(self) -> list[KeyItem]:
        """The shown bindings, one per action, in the screen's order."""
        seen: set[str] = set()
        out: list[KeyItem] = []
        for active in self.screen.active_bindings.values():
            binding = active.binding
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            out.append((self.app.get_key_display(binding), binding.description))
        return out

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:  # noqa: ARG002
        """As many rows as the keys need at this width."""
        return max(len(key_rows(self.items(), width)), 1)

    def render_line(self, y: int) -> Strip:
        """One row of keys."""
        width = self.content_size.width
        rows = key_rows(self.items(), width)
        base = self.rich_style
        if y >= len(rows):
            return Strip.blank(width, base)
        key_style = base + self.get_component_rich_style("key-footer--key", default=Style.null())
        segments = [Segment(text, key_style if role == "key" else base) for text, role in rows[y]]
        return Strip(segments).crop_extend(0, width, base)
