"""A full screen of one panel: every event (`e`) or every step (`t`), scrolled, never cut.

The live screen's panels show what fits; this one sizes its panel to the whole log or table,
so an operator can read any event whole and find any step of a long session. It pulls the
source's view like the live screen, twice a second.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal, cast

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen

from gputui.frontends.view import LiveView
from gputui.ui.render.events import all_events_lines
from gputui.ui.widgets.key_footer import KeyFooter
from gputui.ui.widgets.live_panels import EventLog, StepsTable
from gputui.ui.widgets.panel import LivePanel

if TYPE_CHECKING:
    from gputui.ui.host import AppHost

DetailKind = Literal["events", "steps"]
_TITLES = {"events": "Events · all, repeats folded", "steps": "Steps · every finished step"}
_STEPS_SPARE = 8
"""Lines under the steps' rows: the header, the newest step's bar, the knee's explanation."""


class DetailScreen(Screen[None]):
    """Every event or every step, in a panel as tall as they need."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Back", id="close_detail", tooltip="Back to the live screen"),
        Binding("pagedown,j", "scroll(1)", "Scroll", id="detail_down", tooltip="Scroll down"),
        Binding("pageup,k", "scroll(-1)", "Scroll up", id="detail_up", tooltip="Scroll up"),
    ]

    def __init__(self, kind: DetailKind) -> None:
        super().__init__()
        self.kind: DetailKind = kind
        self._seq = -1

    def compose(self) -> ComposeResult:
        """The panel in a scrolling column, and the keys."""
        ascii = cast("AppHost", self.app).options.ascii
        with VerticalScroll(id="detail-body"):
            if self.kind == "events":
                yield EventLog(id="detail-panel", ascii=ascii)
            else:
                yield StepsTable(id="detail-panel", ascii=ascii)
        yield KeyFooter()

    def on_mount(self) -> None:
        """Title, then pull the view twice a second."""
        self.query_one("#detail-panel").border_title = _TITLES[self.kind]
        self.set_interval(0.5, self.refresh_view)
        self.call_after_refresh(self.refresh_view)

    def refresh_view(self) -> None:
        """Size the panel to its content and hand it the newest view."""
        view = cast("AppHost", self.app).source.view()
        if view.seq == self._seq:
            return
        self._seq = view.seq
        panel = self.query_one("#detail-panel", LivePanel)
        first = panel.view is None
        panel.styles.height = self._lines(view, max(self.app.size.width - 4, 20)) + 2
        panel.view = view
        if first and self.kind == "events":  # the newest events first in view
            self.call_after_refresh(self.query_one("#detail-body").scroll_end, animate=False)

    def _lines(self, view: LiveView, width: int) -> int:
        if self.kind == "events":
            return max(len(all_events_lines(view.events, width)), 1)
        return len(view.steps) + _STEPS_SPARE

    def action_close(self) -> None:
        """Back to the live screen."""
        self.dismiss()

    def action_scroll(self, direction: int) -> None:
        """Page through the panel."""
        body = self.query_one("#detail-body", VerticalScroll)
        if direction > 0:
            body.scroll_page_down()
        else:
            body.scroll_page_up()
