"""Make screenshots/*.svg from the replayed A100 sweep (deterministic: the same files every run).

The replay is a real run against the built-in simulator (`gputui demo --concurrency
1,2,4,8,16,32,64,128 --step-seconds 12 --warmup-seconds 2 --label "demo a100-80gb-pcie
llama-3.1-8b"`, with its intervals, verdicts and each step's diagnosis), saved as
tests/ui/fixtures/sweep-a100-diag.json; `gputui.ui.replay` turns it into the live screen's views.
The sessions screen lists the saved runs in tests/fixtures/snapshots (an RTX 4090 and an A100),
copied to a temporary ~/sessions, and the overlay screenshot shows the RTX 4090's sweep under the
live A100 one. Usage: `python scripts/screenshots.py [OUT_DIR]` (default screenshots/).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from gputui.ui.app import AppOptions, GputuiApp, make_app
from gputui.ui.replay import load_views
from gputui.ui.screens.help import HelpScreen
from gputui.ui.screens.live import LiveScreen
from gputui.ui.screens.sessions import SessionsScreen
from gputui.ui.source import ReplaySource
from gputui.ui.widgets.live_panels import StepsTable

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "ui" / "fixtures" / "sweep-a100-diag.json"
SAVED = ROOT / "tests" / "fixtures" / "snapshots"
SIZES = ((80, 24), (160, 48))


def _app(folder: Path) -> GputuiApp:
    source = ReplaySource(load_views(FIXTURE))
    while source.advance():
        pass
    app = make_app(source, AppOptions(snapshot_dir=folder))
    app.animation_level = "none"
    return app


async def _until(pilot: Pilot[Any], check: Callable[[], bool]) -> None:
    for _ in range(100):
        if check():
            return
        await pilot.pause(0.05)
    raise RuntimeError("the screen did not get ready")


async def _sessions(pilot: Pilot[Any]) -> None:
    app = pilot.app
    await pilot.press("o")
    await _until(pilot, lambda: isinstance(app.screen, SessionsScreen) and app.screen.listings > 0)


async def _shoot(out: Path, name: str, size: tuple[int, int], folder: Path) -> Path:
    app = _app(folder)
    async with app.run_test(size=size) as pilot:
        await _until(pilot, lambda: app.screen.query_one(StepsTable).view is not None)
        if name == "help":
            await pilot.press("question_mark")
            await _until(pilot, lambda: isinstance(app.screen, HelpScreen))
        elif name == "sessions":
            await _sessions(pilot)
        elif name == "live-overlay":
            await _sessions(pilot)
            await pilot.press("down", "enter")  # the RTX 4090 (the older of the two)
            await _until(
                pilot, lambda: isinstance(app.screen, LiveScreen) and bool(app.screen.overlays)
            )
            app.clear_notifications()
        await pilot.pause(0.1)
        path = out / f"{name}-{size[0]}x{size[1]}.svg"
        path.write_text(app.export_screenshot(title=f"gputui {size[0]}x{size[1]}"))
    return path


async def main(out: Path) -> None:
    """Every screen at every size (`out` exists)."""
    with tempfile.TemporaryDirectory() as home:
        os.environ["HOME"] = home  # the sessions screen shows ~/sessions
        folder = Path(home) / "sessions"
        folder.mkdir()
        for snapshot in ("a100-80gb-pcie.json", "rtx4090-48gb.json"):
            shutil.copy(SAVED / snapshot, folder / snapshot)
        shots = [(name, size) for size in SIZES for name in ("live-knee", "help")]
        shots += [("sessions", (120, 40)), ("live-overlay", (160, 48))]
        shots += [("sessions", (80, 24)), ("live-overlay", (80, 24))]
        for name, size in shots:
            path = await _shoot(out, name, size, folder)
            sys.stdout.write(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}\n")


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "screenshots"
    target.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(target))
