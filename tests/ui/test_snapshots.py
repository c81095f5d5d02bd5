"""SVG snapshots of every screen, fed the replayed sweep (never live timing)."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from gputui.ui.app import AppOptions
from gputui.ui.screens.dialogs import SaveSnapshotScreen
from gputui.ui.screens.help import HelpScreen
from gputui.ui.widgets.live_panels import StepsTable, SweepChart
from tests.ui.conftest import replay_app, wait_for

SIZES = [(80, 24), (160, 48)]


async def _drawn(pilot: Pilot[Any]) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: app.screen.query_one(SweepChart).view is not None)
    await wait_for(pilot, lambda: app.screen.query_one(StepsTable).view is not None)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_live_screen_at_the_knee(snap_compare: Any, size: tuple[int, int]) -> None:
    app, _ = replay_app()
    assert snap_compare(app, terminal_size=size, run_before=_drawn)


def test_live_screen_ascii(snap_compare: Any) -> None:
    app, _ = replay_app(options=AppOptions(ascii=True))
    assert snap_compare(app, terminal_size=(120, 40), run_before=_drawn)


def test_live_screen_first_step(snap_compare: Any) -> None:
    app, _ = replay_app(at_knee=False)
    assert snap_compare(app, terminal_size=(120, 40), run_before=_drawn)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_help_screen(snap_compare: Any, size: tuple[int, int]) -> None:
    app, _ = replay_app()

    async def open_help(pilot: Pilot[Any]) -> None:
        await _drawn(pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, HelpScreen))

    assert snap_compare(app, terminal_size=size, run_before=open_help)


def test_save_dialog(snap_compare: Any) -> None:
    app, _ = replay_app()

    async def open_save(pilot: Pilot[Any]) -> None:
        await _drawn(pilot)
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SaveSnapshotScreen))

    assert snap_compare(app, terminal_size=(120, 40), run_before=open_save)
