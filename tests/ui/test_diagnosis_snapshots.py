"""Issue 18 on screen: SVG snapshots of the steps table's verdicts and TTFT bars, and a pilot test
that a changed verdict reaches the event log as the replayed sweep runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.pilot import Pilot

import gputui.ui
from gputui.frontends.live import LiveView
from gputui.ui.widgets.live_panels import EventLog, StepsTable
from tests.ui.conftest import DIAG_FIXTURE, replay_app, replay_views, wait_for

STYLES = Path(gputui.ui.__file__).parent / "styles" / "global.tcss"


class StepsApp(App[None]):
    """The steps panel alone, over one replayed view (the live screen's own widget and styles)."""

    CSS_PATH = [str(STYLES)]  # noqa: RUF012 - Textual's own type

    def __init__(self, view: LiveView, *, ascii: bool = False) -> None:
        super().__init__()
        self._view = view
        self._ascii = ascii

    def compose(self) -> ComposeResult:
        """One panel, filling the screen."""
        yield StepsTable(id="steps", ascii=self._ascii)

    def on_mount(self) -> None:
        """Hand the panel its view."""
        panel = self.query_one(StepsTable)
        panel.border_title = "Steps"
        panel.styles.height = "1fr"
        panel.view = self._view


@pytest.mark.parametrize(
    ("size", "ascii"),
    [((160, 14), False), ((80, 14), False), ((160, 14), True)],
    ids=["160-bars", "80-newest-bar", "160-ascii"],
)
def test_steps_table_with_verdicts(snap_compare: Any, size: tuple[int, int], ascii: bool) -> None:
    """Bound by (SUSPECT, unsure SLA, ★, ┊), the TTFT bar per row or the newest step's, the knee."""
    view = replay_views(DIAG_FIXTURE)[-1]
    assert snap_compare(StepsApp(view, ascii=ascii), terminal_size=size)


def _event_texts(pilot: Pilot[Any]) -> list[str]:
    panel = pilot.app.screen.query_one(EventLog)
    width, height = panel.content_size
    if panel.view is None:
        return []
    return ["".join(text for text, _ in line) for line in panel.draw(panel.view, width, height)]


async def test_a_changed_verdict_lands_in_the_event_log() -> None:
    app, source = replay_app(at_knee=False, fixture=DIAG_FIXTURE)
    async with app.run_test(size=(160, 48)) as pilot:
        seen: list[str] = []
        while source.advance():
            await wait_for(pilot, lambda: pilot.app.screen.query_one(EventLog).view is not None)
            await pilot.pause(0.3)  # the 4 Hz pull hands the panel the new view
            seen += [t for t in _event_texts(pilot) if "bound by" in t and t not in seen]
        shown = [t.split(" info ")[-1].split(" warning ")[-1].strip() for t in seen]
        expected = [
            "step 1 (1): bound by decode-bandwidth",
            "step 6 (32): bound by client (was decode-bandwidth)",
            "step 7 (64): bound by none (was client)",
            "step 8 (128): bound by queue (was none)",
        ]
        assert len(shown) == len(expected), shown
        for text, full in zip(shown, expected, strict=True):
            assert full.startswith(text) and len(text) >= 35, (text, full)  # cut at the panel
        kinds = {e.text: e.kind for e in source.view().events}
        assert [kinds[t] for t in expected] == ["info", "warning", "info", "info"]
