"""Pilot tests of issue 23's keys on a live session: `e` changes the SLA and price, `w` exports.

Both drive the real app over a LiveController against the fixed simulator on 127.0.0.1 (20 ms
TTFT, 5 ms a token: a 16-in, 8-out request takes about 55 ms), pressing real keys.
"""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from gputui.engine.client import ClientConfig
from gputui.engine.load import RequestShape
from gputui.engine.process import EngineConfig
from gputui.engine.target import parse_target
from gputui.frontends.live import LiveController, LiveSettings
from gputui.metrics.sla import Sla
from gputui.metrics.verdict import judge_step
from gputui.sim.runner import SimProcess
from gputui.ui.app import AppOptions, GputuiApp, make_app
from gputui.ui.render.spans import texts
from gputui.ui.screens.live import LiveScreen
from gputui.ui.screens.settings import SessionSettingsScreen
from gputui.ui.widgets.live_panels import SessionHeader, SweepChart
from tests.ui.conftest import files, wait_for


def _controller(url: str, folder: Path) -> LiveController:
    settings = LiveSettings(
        engine=EngineConfig(
            client=ClientConfig(target=parse_target(url), model="sim"),
            shape=RequestShape(16, 8),
            probe_path="/health",
        ),
        sla=Sla(0.5, 0.05, 0.01),  # the fixed sim passes it easily
        warmup_s=0.2,
        window_s=5.0,
        start_level=2,
        snapshot_dir=folder,
        journal=False,
        price_per_hour=7.0,
        label="settings",
    )
    return LiveController(settings)


def _decided(controller: LiveController, level: float) -> bool:
    """The open step at `level` has a decided verdict (59 requests and more)."""
    frame = controller.view().frame
    progress = frame.verdict_progress if frame is not None else None
    return frame is not None and frame.level == level and bool(progress and progress.decided)


async def _two_passing_steps(pilot: Pilot[Any], controller: LiveController) -> None:
    """Run 2 then 4 streams until each verdict is decided; step up to 8 to finish both."""
    for level in (2.0, 4.0):
        await wait_for(pilot, partial(_decided, controller, level), 30)
        await pilot.press("plus")
    await wait_for(pilot, lambda: len(controller.view().steps) == 2, 30)


def _event(controller: LiveController, text: str) -> str | None:
    """The newest event containing `text`, if any."""
    return next((e.text for e in reversed(controller.view().events) if text in e.text), None)


def _header(app: GputuiApp) -> list[str]:
    header = app.screen.query_one(SessionHeader)
    view = header.view
    assert view is not None
    return texts(header.draw(view, 160, 3))


async def test_tightening_the_sla_mid_session_rejudges_the_finished_steps(
    fixed_sim: SimProcess, tmp_path: Path
) -> None:
    controller = _controller(fixed_sim.url, tmp_path)
    app = make_app(controller, AppOptions(snapshot_dir=tmp_path, label="settings"))
    app.animation_level = "none"
    controller.start()
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_for(pilot, lambda: _decided(controller, 2.0), 30)
            await wait_for(pilot, lambda: "SLA verdict: pass (n=" in _header(app)[2])
            await pilot.press("plus")
            await wait_for(pilot, lambda: _decided(controller, 4.0), 30)
            await pilot.press("plus")
            await wait_for(pilot, lambda: len(controller.view().steps) == 2, 30)
            before = controller.view()
            assert [s.sla_verdict for s in before.steps] == ["pass", "pass"], [
                (s.requests_ok, s.requests_failed, judge_step(s, before.sla).reasons)
                for s in before.steps
            ]
            assert before.capacity is not None and before.capacity.level == 4
            await wait_for(pilot, lambda: "/M out tok at 4" in _header(app)[2])
            third = _header(app)[2]
            assert "SLA TTFT p95 500 ms · TPOT p95 50 ms · errors ≤ 1 %" in third
            assert re.search(r"price 7/h  cost [\d.]+(-[\d.]+)?/M out tok at 4", third), third

            await pilot.press("e")
            await wait_for(pilot, lambda: isinstance(app.screen, SessionSettingsScreen))
            await pilot.press(*"fast", "enter")  # the TTFT field has the focus, all selected
            error = app.screen.query_one("#settings-error")
            assert "TTFT p95: not a duration: 'fast'" in str(error.render())
            assert isinstance(app.screen, SessionSettingsScreen)  # still open
            # TTFT, TPOT, E2E, TTFAT, error rate, price: five tabs reach the price
            await pilot.press(*["backspace"] * 4, *"5ms", *["tab"] * 5)
            await pilot.press(*"4", "enter")  # the price field had "7" selected: now 4
            await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
            await wait_for(pilot, lambda: controller.view().sla.ttft_p95_s == 0.005, 10)

            after = controller.view()
            assert [s.sla_verdict for s in after.steps] == ["fail", "fail"]
            assert [s.sla_ok for s in after.steps] == [False, False]
            assert all(s.goodput_output_tokens_per_s == 0 for s in after.steps)
            assert after.capacity is None and after.price_per_hour == 4.0
            # The unchanged figures stay what they were.
            assert [s.ttft_s for s in after.steps] == [s.ttft_s for s in before.steps]
            await wait_for(pilot, lambda: "TTFT p95 5 ms" in _header(app)[2])
            assert "cost - (no qualified capacity yet)" in _header(app)[2]
            events = [e.text for e in after.events]
            assert any(
                "settings: TTFT p95 500 ms -> 5 ms, price 7/h -> 4/h; finished steps re-judged" in t
                for t in events
            ), events
            chart = app.screen.query_one(SweepChart)
            assert chart.view is not None
            drawn = "\n".join(texts(chart.draw(chart.view, 90, 30)))
            assert "TTFT p95 5 ms" in drawn and "TPOT p95 50 ms" in drawn
    finally:
        path = controller.stop()
    assert path is not None
    saved = json.loads(path.read_text())
    assert saved["sla"] == {
        "ttft_p95_s": 0.005,
        "tpot_p95_s": 0.05,
        "max_error_rate": 0.01,
        "e2e_p95_s": None,
        "ttfat_p95_s": None,
    }
    assert saved["price_per_hour"] == 4.0
    (change,) = saved["settings_changes"]
    assert change["old"] == {"ttft_p95_s": 0.5, "price_per_hour": 7.0}
    assert change["new"] == {"ttft_p95_s": 0.005, "price_per_hour": 4.0}
    assert change["t_s"] > 0
    assert [s["sla_verdict"] for s in saved["steps"][:2]] == ["fail", "fail"]


async def test_w_exports_the_session_as_an_html_report(
    fixed_sim: SimProcess, tmp_path: Path
) -> None:
    controller = _controller(fixed_sim.url, tmp_path)
    app = make_app(controller, AppOptions(snapshot_dir=tmp_path, label="settings"))
    app.animation_level = "none"
    controller.start()
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_for(pilot, lambda: controller.view().frame is not None, 30)
            await pilot.press("w")  # nothing finished yet: no file, an event says so
            await wait_for(pilot, lambda: _event(controller, "no report yet") is not None)
            assert files(tmp_path, "*.html") == []
            await _two_passing_steps(pilot, controller)
            steps = controller.view().steps
            await pilot.press("w")
            await wait_for(pilot, lambda: len(files(tmp_path, "*.html")) == 1, 15)
            (report,) = files(tmp_path, "*.html")
            await wait_for(pilot, lambda: _event(controller, "report written") is not None)
            assert str(report) in (_event(controller, "report written") or "")
    finally:
        controller.stop(save=False)
    assert re.fullmatch(r"\d{8}-\d{6}-settings\.html", report.name)
    page = report.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<h1>gputui session: settings</h1>" in page
    # Saved while the session ran, not interrupted: no such warning, and the run says so.
    assert "gputui compare" not in page and "interrupted" not in page
    assert '<td class="t">saved mid-session</td>' in page
    # One dot per step on each of the three sweep charts, drawn for a desktop and for a phone.
    assert page.count('r="2.5"') == 2 * 3 * len(steps) == 12
    tok_s = f"<td>{steps[1].output_tokens_per_s:.1f}"  # the qualified capacity's tok/s
    table = page[page.index("Qualified capacity table") : page.index('<h2 id="sweeps">Sweeps')]
    assert tok_s in table, (tok_s, table)
    assert f"<td>{7 / (steps[1].output_tokens_per_s * 3600) * 1e6:.2f}</td>" in page  # its cost
