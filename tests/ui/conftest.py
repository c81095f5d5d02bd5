"""UI test helpers: apps over the replayed A100 sweep, and bounded waits (never chained pauses)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from gputui.frontends.live import LiveView
from gputui.ui.app import AppOptions, GputuiApp, make_app
from gputui.ui.replay import load_views
from gputui.ui.source import ReplaySource

FIXTURE = Path(__file__).parent / "fixtures" / "sweep-a100.json"
DIAG_FIXTURE = Path(__file__).parent / "fixtures" / "sweep-a100-diag.json"
"""A sweep saved with each step's diagnosis (issue 18): verdicts, TTFT breakdowns, the knee's."""


def replay_views(fixture: Path = FIXTURE) -> list[LiveView]:
    """The replayed sweep: one view per finished step, then back at the knee."""
    return load_views(fixture)


def replay_app(
    *, at_knee: bool = True, options: AppOptions | None = None, fixture: Path = FIXTURE
) -> tuple[GputuiApp, ReplaySource]:
    """An app over the replay, at its last view (the knee) or its first."""
    source = ReplaySource(replay_views(fixture))
    while at_knee and source.advance():
        pass
    app = make_app(source, options or AppOptions())
    app.animation_level = "none"
    return app, source


async def wait_for(pilot: Pilot[Any], condition: Callable[[], bool], timeout_s: float = 20) -> None:
    """Let the app run until `condition()` holds; fail after `timeout_s`."""
    for _ in range(int(timeout_s / 0.1)):
        if condition():
            return
        await pilot.pause(0.1)
    assert condition(), "timed out waiting"


@pytest.fixture(autouse=True)
def _no_blink(monkeypatch: pytest.MonkeyPatch) -> None:
    """The input cursor never blinks: screens are the same on every run."""
    from textual.widgets import Input

    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)


def files(folder: Path, pattern: str) -> list[Path]:
    """Files in `folder` matching `pattern` (sync: the async tests call it between waits)."""
    return sorted(folder.glob(pattern))
