"""Make screenshots/*.svg from the replayed A100 sweep (deterministic: the same files every run).

The replay is a real run against the built-in simulator (`gputui demo --concurrency
1,2,4,8,16,32,64,128`), saved as tests/ui/fixtures/sweep-a100.json; `gputui.ui.replay` turns it into
the live screen's views. Usage: `python scripts/screenshots.py [OUT_DIR]` (default screenshots/).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from gputui.ui.app import AppOptions, GputuiApp, make_app
from gputui.ui.replay import load_views
from gputui.ui.screens.help import HelpScreen
from gputui.ui.source import ReplaySource
from gputui.ui.widgets.live_panels import StepsTable

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "ui" / "fixtures" / "sweep-a100.json"
SIZES = ((80, 24), (160, 48))


def _app(*, ascii: bool = False) -> GputuiApp:
    source = ReplaySource(load_views(FIXTURE))
    while source.advance():
        pass
    app = make_app(source, AppOptions(ascii=ascii))
    app.animation_level = "none"
    return app


async def _until(pilot: Pilot[Any], check: Callable[[], bool]) -> None:
    for _ in range(100):
        if check():
            return
        await pilot.pause(0.05)
    raise RuntimeError("the screen did not get ready")


async def _shoot(out: Path, name: str, size: tuple[int, int], *, help: bool = False) -> Path:
    app = _app()
    async with app.run_test(size=size) as pilot:
        await _until(pilot, lambda: app.screen.query_one(StepsTable).view is not None)
        if help:
            await pilot.press("question_mark")
            await _until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause(0.1)
        path = out / f"{name}-{size[0]}x{size[1]}.svg"
        path.write_text(app.export_screenshot(title=f"gputui {size[0]}x{size[1]}"))
    return path


async def main(out: Path) -> None:
    """Every screen at every size (`out` exists)."""
    for size in SIZES:
        for name, help in (("live-knee", False), ("help", True)):
            path = await _shoot(out, name, size, help=help)
            sys.stdout.write(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}\n")


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(folder))
