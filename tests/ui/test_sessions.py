"""The sessions screen: saved snapshots listed, overlaid on the live sweep, cleared and deleted."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from gputui.ui.app import AppOptions
from gputui.ui.screens.dialogs import ConfirmScreen
from gputui.ui.screens.live import LiveScreen
from gputui.ui.screens.sessions import SessionsScreen
from gputui.ui.widgets.live_panels import StepsTable, SweepChart
from tests.ui.conftest import replay_app, wait_for

SAVED = Path(__file__).parents[1] / "fixtures" / "snapshots"
NEWEST, OLDER = "a100-80gb-pcie", "rtx4090-48gb"
"""The fixtures' labels, newest first (their `created_at` is fixed, so the order is too)."""


def saved_sessions(folder: Path) -> Path:
    """Two real snapshots and one corrupt file in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in (f"{NEWEST}.json", f"{OLDER}.json"):
        shutil.copy(SAVED / name, folder / name)
    (folder / "broken.json").write_text("{nope")
    return folder


async def open_sessions(pilot: Pilot[Any], key: str = "o") -> SessionsScreen:
    """Press `key` on the live screen and wait for the list."""
    app = pilot.app
    await wait_for(pilot, lambda: app.screen.query_one(StepsTable).view is not None)
    await pilot.press(key)
    await wait_for(
        pilot, lambda: isinstance(app.screen, SessionsScreen) and app.screen.listings > 0
    )
    screen = app.screen
    assert isinstance(screen, SessionsScreen)
    return screen


def live(pilot: Pilot[Any]) -> LiveScreen | None:
    screen = pilot.app.screen
    return screen if isinstance(screen, LiveScreen) else None


async def test_overlay_clear_and_delete(tmp_path: Path) -> None:
    folder = saved_sessions(tmp_path / "sessions")
    app, _ = replay_app(options=AppOptions(snapshot_dir=folder))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_sessions(pilot)
        assert [s.name for s in screen.sessions] == [NEWEST, OLDER]
        assert [name for name, _ in screen.skipped] == ["broken.json"]
        assert "not valid JSON" in screen.skipped[0][1]

        await pilot.press("down", "enter")  # overlay the older one: back to the chart
        await wait_for(pilot, lambda: (s := live(pilot)) is not None and bool(s.overlays))
        chart = app.screen.query_one(SweepChart)
        await wait_for(pilot, lambda: chart.overlays == live(pilot).overlays)  # type: ignore[union-attr]
        (overlay,) = chart.overlays
        assert overlay.label == OLDER and overlay.path == folder / f"{OLDER}.json"
        assert overlay.curve.levels == (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
        assert chart.render_line(1).text.strip().startswith(f"saved:  ○ {OLDER}")

        screen = await open_sessions(pilot, "S")  # the overlaid row is marked
        table = screen.query_one(DataTable)
        assert table.get_row(str(folder / f"{OLDER}.json"))[0] == "○"
        assert table.get_row(str(folder / f"{NEWEST}.json"))[0] == ""
        await pilot.press("o")  # the newest (the cursor's row) joins it
        await wait_for(pilot, lambda: (s := live(pilot)) is not None and len(s.overlays) == 2)
        assert [o.label for o in chart.overlays] == [OLDER, NEWEST]

        screen = await open_sessions(pilot)
        await pilot.press("x")  # clear: the chart follows when the screen closes
        assert screen.overlays == ()
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")  # not deleted
        await wait_for(pilot, lambda: app.screen is screen)
        assert (folder / f"{NEWEST}.json").exists()
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: screen.listings == 2)
        assert not (folder / f"{NEWEST}.json").exists()
        assert [s.name for s in screen.sessions] == [OLDER]
        await pilot.press("escape")
        await wait_for(pilot, lambda: live(pilot) is not None)
        assert chart.overlays == ()


async def test_x_on_the_live_screen_clears_and_an_empty_folder_says_so(tmp_path: Path) -> None:
    folder = saved_sessions(tmp_path / "sessions")
    app, _ = replay_app(options=AppOptions(snapshot_dir=folder))
    async with app.run_test(size=(120, 40)) as pilot:
        await open_sessions(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: (s := live(pilot)) is not None and bool(s.overlays))
        await pilot.press("x")
        chart = app.screen.query_one(SweepChart)
        await wait_for(pilot, lambda: chart.overlays == ())
        for path in folder.iterdir():
            path.unlink()
        screen = await open_sessions(pilot)
        assert screen.sessions == [] and screen.skipped == []
        await pilot.press("o", "d")  # nothing selected: nothing happens
        assert app.screen is screen


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_sessions_screen(
    snap_compare: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    """At 80x24 too, each session's capacity and knee show without scrolling sideways."""
    monkeypatch.setenv("HOME", str(tmp_path))  # the title shows ~/sessions, the same every run
    folder = saved_sessions(tmp_path / "sessions")
    app, _ = replay_app(options=AppOptions(snapshot_dir=folder))
    assert snap_compare(app, terminal_size=size, run_before=open_sessions)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_live_screen_with_an_overlay(
    snap_compare: Any, tmp_path: Path, size: tuple[int, int]
) -> None:
    """At 80x24 the overlay draws its throughput only, so the live curves stay readable."""
    folder = saved_sessions(tmp_path / "sessions")
    app, _ = replay_app(options=AppOptions(snapshot_dir=folder))

    async def overlay_older(pilot: Pilot[Any]) -> None:
        await open_sessions(pilot)
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: (s := live(pilot)) is not None and bool(s.overlays))
        pilot.app.clear_notifications()

    assert snap_compare(app, terminal_size=size, run_before=overlay_older)


async def test_an_unreadable_folder_is_a_note_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def denied(folder: Path, on_skip: object = None) -> list[object]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("gputui.ui.screens.sessions.list_sessions", denied)
    app, _ = replay_app(options=AppOptions(snapshot_dir=tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_sessions(pilot)
        assert screen.sessions == []
        assert screen.skipped == [(str(tmp_path), "Permission denied")]
