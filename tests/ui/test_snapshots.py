"""SVG snapshots of every screen, fed the replayed sweep (never live timing)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.pilot import Pilot

from gputui.frontends.live import LiveView
from gputui.metrics.capacity_caveats import judged_capacity
from gputui.session.events import LiveEvent
from gputui.session.frames import Handover
from gputui.ui.app import AppOptions, GputuiApp, make_app
from gputui.ui.replay import load_views
from gputui.ui.screens.detail import DetailScreen
from gputui.ui.screens.dialogs import SaveSnapshotScreen
from gputui.ui.screens.help import HelpScreen
from gputui.ui.screens.settings import SessionSettingsScreen
from gputui.ui.source import ReplaySource
from gputui.ui.widgets.live_panels import EventLog, LatencyTable, StepsTable, SweepChart
from gputui.ui.widgets.panel import LivePanel
from tests.ui.conftest import DIAG_FIXTURE, replay_app, replay_views, wait_for

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


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_settings_dialog(snap_compare: Any, size: tuple[int, int]) -> None:
    app, _ = replay_app()

    async def open_settings(pilot: Pilot[Any]) -> None:
        await _drawn(pilot)
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SessionSettingsScreen))

    assert snap_compare(app, terminal_size=size, run_before=open_settings)


def test_settings_dialog_refuses_a_bare_tpot_in_seconds(snap_compare: Any) -> None:
    app, _ = replay_app()

    async def mistype(pilot: Pilot[Any]) -> None:
        await _drawn(pilot)
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SessionSettingsScreen))
        await pilot.press("tab", "3", "5", "enter")
        await wait_for(
            pilot,
            lambda: "implausible" in str(pilot.app.screen.query_one("#settings-error").render()),
        )

    assert snap_compare(app, terminal_size=(120, 40), run_before=mistype)


def _steps_sla(pilot: Pilot[Any]) -> float | None:
    """The TTFT bound the steps table was last drawn with."""
    view = pilot.app.screen.query_one(StepsTable).view
    return view.sla.ttft_p95_s if view is not None else None


def test_live_screen_after_tightening_the_sla(snap_compare: Any) -> None:
    app, source = replay_app()

    async def tighten(pilot: Pilot[Any]) -> None:
        await _drawn(pilot)
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SessionSettingsScreen))
        await pilot.press(*"150ms", *["tab"] * 5, "7", "enter")  # and a price of 7/h
        await wait_for(pilot, lambda: source.terms != [])
        assert source.terms[0].price_per_hour == 7.0
        await wait_for(pilot, lambda: _steps_sla(pilot) == 0.15)

    assert snap_compare(app, terminal_size=(160, 48), run_before=tighten)


CI_FIXTURE = Path(__file__).parent / "fixtures" / "sweep-a100-ci.json"
"""A sweep saved with issue 16's intervals and verdicts (`gputui demo --headless`, 20 s steps)."""


class PanelsApp(App[None]):
    """Only the sweep chart and the latency table, over one replayed view.

    The panels alone, so these snapshots change with the panels and not with the rest of the
    live screen.
    """

    CSS_PATH = ["../../src/gputui/ui/styles/global.tcss"]  # noqa: RUF012 - Textual's own type
    CSS = "#sweep { height: 2fr; } #latency { height: 1fr; }"

    def __init__(self, view: LiveView, *, ascii: bool = False) -> None:
        super().__init__()
        self.shown = view
        self.ascii = ascii

    def compose(self) -> ComposeResult:
        """The two panels."""
        yield SweepChart(id="sweep", ascii=self.ascii)
        yield LatencyTable(id="latency", ascii=self.ascii)

    def on_mount(self) -> None:
        """Draw the view."""
        for panel in self.query(LivePanel):
            panel.view = self.shown


def _ci_view(index: int = -1) -> LiveView:
    return load_views(CI_FIXTURE)[index]


async def _panels_drawn(pilot: Pilot[Any]) -> None:
    await wait_for(pilot, lambda: pilot.app.query_one(SweepChart).view is not None)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_sweep_whiskers_and_latency_plus_minus(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(PanelsApp(_ci_view()), terminal_size=size, run_before=_panels_drawn)


def test_sweep_whiskers_ascii(snap_compare: Any) -> None:
    app = PanelsApp(_ci_view(), ascii=True)
    assert snap_compare(app, terminal_size=(120, 40), run_before=_panels_drawn)


def test_the_ci_fixture_has_what_the_snapshots_show() -> None:
    view = _ci_view()
    assert {s.sla_verdict for s in view.steps} >= {"pass", "fail"}
    assert all(s.output_tokens_per_s_ci is not None for s in view.steps)
    assert all(s.ttft_s.p95_ci is not None for s in view.steps)


def _replayed(change: Callable[[LiveView], LiveView]) -> GputuiApp:
    """The app over the replay's last view, changed."""
    last = replay_views()[-1]
    app = make_app(ReplaySource([change(last)]))
    app.animation_level = "none"
    return app


def test_live_screen_collapsed_event(snap_compare: Any) -> None:
    """Ten throttle notices read as one line ('since 0:00:57, x10'); the SLA miss stays."""
    flood = [
        LiveEvent(92.0 + 8 * k, "throttle", "GPU 0 throttling: sw_power_cap") for k in range(9)
    ]
    app = _replayed(lambda v: replace(v, events=(*v.events, *flood)))
    assert snap_compare(app, terminal_size=(160, 48), run_before=_drawn)


def test_live_screen_80x24_in_rate_mode_keeps_the_concurrency_sweep(snap_compare: Any) -> None:
    """After `r`: the concurrency sweep stays on the chart (◌) with its knee in the legend."""
    app = _replayed(lambda v: replace(v, mode="rate", level=8.5, frame=None, knee=None))
    assert snap_compare(app, terminal_size=(80, 24), run_before=_drawn)


def test_events_screen_80x24(snap_compare: Any) -> None:
    """`e`: every event whole, repeats folded, newest in view."""
    flood = [
        LiveEvent(92.0 + 8 * k, "throttle", "GPU 0 throttling: sw_power_cap") for k in range(9)
    ]
    app = _replayed(lambda v: replace(v, events=(*v.events, *flood)))

    async def open_events(pilot: Pilot[Any]) -> None:
        await _drawn(pilot)
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, DetailScreen))
        panel = pilot.app.screen.query_one(EventLog)
        await wait_for(pilot, lambda: panel.view is not None)

    assert snap_compare(app, terminal_size=(80, 24), run_before=open_events)


def _diag_app(change: Callable[[LiveView], LiveView] = lambda v: v) -> GputuiApp:
    """The app over the diagnosed replay's last view (`sweep-a100-diag.json`), changed."""
    app = make_app(ReplaySource([change(replay_views(DIAG_FIXTURE)[-1])]))
    app.animation_level = "none"
    return app


def _undecided(view: LiveView) -> LiveView:
    """The passing steps' P95 TTFT intervals open above (too few requests): none is decisive."""
    steps = tuple(
        s
        if s.level >= 32
        else replace(s, sla_verdict="inconclusive", ttft_s=replace(s.ttft_s, p95_ci=(0.0, None)))
        for s in view.steps
    )
    judged = judged_capacity(steps, view.sla, diagnoses=view.diagnoses)
    return replace(view, steps=steps, capacity=judged.capacity, capacity_reason=judged.reason)


def test_live_screen_provisional_capacity(snap_compare: Any) -> None:
    """No step decisive: the header shows "capacity ~16 provisional (32: fail)", not none."""
    view = _undecided(replay_views(DIAG_FIXTURE)[-1])
    assert view.capacity is not None and view.capacity.provisional and view.capacity.level == 16
    assert snap_compare(_diag_app(_undecided), terminal_size=(160, 48), run_before=_drawn)


def test_live_screen_bound_by_at_the_knee(snap_compare: Any) -> None:
    """Knee at 64: the label and the steps table name the bound of the failing 128 (queue)."""
    view = replay_views(DIAG_FIXTURE)[-1]
    assert view.knee is not None and view.knee.level == 64
    assert view.knee_explanation is not None and "bound by queue at 128" in view.knee_explanation
    assert snap_compare(_diag_app(), terminal_size=(160, 48), run_before=_drawn)


def _handing_over(view: LiveView) -> LiveView:
    """Step 9 closes at 64 (12 of its requests still out) before 128 starts (issue 28)."""
    assert view.frame is not None
    closing = Handover(index=8, level=64, requests_left=12, eta_s=3.4, next_level=128)
    frame = replace(view.frame, level=128, step_phase="handover", handover=closing)
    return replace(view, frame=frame, level=128)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_live_screen_during_a_hand_over(snap_compare: Any, size: tuple[int, int]) -> None:
    """The header says the closing step, its requests left at the old level, and what follows."""
    assert snap_compare(_diag_app(_handing_over), terminal_size=size, run_before=_drawn)
