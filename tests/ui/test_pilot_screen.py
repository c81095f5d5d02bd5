"""Pilot tests of issue 23's screen: `r` keeps both sweeps, events fold, every key is shown."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gputui.frontends.live import LiveController
from gputui.session.events import LiveEvent
from gputui.sim.runner import SimProcess
from gputui.ui.app import AppOptions, make_app
from gputui.ui.render.events import collapse
from gputui.ui.screens.detail import DetailScreen
from gputui.ui.screens.live import LiveScreen
from gputui.ui.source import ReplaySource
from gputui.ui.widgets.key_footer import KeyFooter
from gputui.ui.widgets.live_panels import EventLog, StepsTable, SweepChart
from tests.ui.conftest import replay_views, wait_for
from tests.ui.test_pilot_control import _controller, _frame


def _text(panel: EventLog | SweepChart | StepsTable | KeyFooter, rows: int) -> list[str]:
    return [panel.render_line(y).text for y in range(rows)]


async def test_r_keeps_both_sweeps_and_resumes_the_operators_level(
    fixed_sim: SimProcess, tmp_path: Path
) -> None:
    controller: LiveController = _controller(fixed_sim.url, tmp_path)
    app = make_app(controller, AppOptions(snapshot_dir=tmp_path))
    app.animation_level = "none"
    controller.start()
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            view = controller.view
            await wait_for(pilot, lambda: _frame(controller).level == 1)
            for level in (2, 4):
                # each level held until its step has measured requests: a level left while it
                # settles is no step (issue 28), and the sweep kept here is of held levels
                await wait_for(pilot, lambda: _frame(controller).measured_n > 4)
                await pilot.press("plus")
                await wait_for(pilot, lambda lv=level: _frame(controller).level == lv)  # type: ignore[misc]
            await wait_for(pilot, lambda: _frame(controller).measured_n > 8)
            await pilot.press("r")  # to arrival rate, at about the same load
            await wait_for(pilot, lambda: _frame(controller).mode == "rate")
            chart = app.screen.query_one(SweepChart)
            await wait_for(pilot, lambda: "◌ by concurrency" in _text(chart, 1)[0])
            concurrency = [s.level for s in view().steps if s.mode == "concurrency"]
            assert concurrency == [1, 2, 4]  # the concurrency sweep is kept, all of it
            await wait_for(pilot, lambda: _frame(controller).measured_n > 8)

            await pilot.press("r")  # back: the level the operator had, not the in-flight count
            await wait_for(pilot, lambda: _frame(controller).mode == "concurrency")
            assert view().level == 4 and _frame(controller).level == 4
            await wait_for(pilot, lambda: "◌ by rate" in _text(chart, 1)[0])
            assert {s.mode for s in view().steps} == {"concurrency", "rate"}
    finally:
        controller.stop(save=False)


async def test_a_flood_of_throttle_notices_takes_one_line() -> None:
    views = replay_views()
    flood = [
        LiveEvent(92.0 + 8 * k, "throttle", "GPU 0 throttling: sw_power_cap") for k in range(9)
    ]
    last = views[-1]
    source = ReplaySource([replace(last, events=(*last.events, *flood))])
    app = make_app(source)
    app.animation_level = "none"
    async with app.run_test(size=(160, 48)) as pilot:
        log = app.screen.query_one(EventLog)
        await wait_for(pilot, lambda: log.view is not None)
        lines = _text(log, log.content_size.height)
        heads = [k for k, line in enumerate(lines) if " throttle " in line]
        assert len(heads) == 1  # ten notices, one event
        # at 160x48, on one line
        folded = lines[heads[0]].rstrip()
        assert folded == "0:02:36 throttle GPU 0 throttling: sw_power_cap since 0:00:57, x10"
        assert any("step 8 (128) missed the SLA" in line for line in lines)


async def test_every_shown_key_is_in_the_footer_at_80x24() -> None:
    app = make_app(ReplaySource(replay_views()))
    app.animation_level = "none"
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
        footer = app.screen.query_one(KeyFooter)
        await wait_for(pilot, lambda: footer.size.height in (2, 3))  # never cut: it grows
        shown = " ".join(_text(footer, footer.size.height))
        for binding in LiveScreen.BINDINGS:
            assert not isinstance(binding, tuple)
            if binding.show:
                key = app.get_key_display(replace(binding, key=binding.key.split(",")[0]))
                assert f" {key} {binding.description}" in shown, binding.description
        await pilot.press("h")  # and the keys it lists work: h reaches the source
        assert app.screen.query_one(KeyFooter).region.bottom == 24


async def test_e_shows_every_event_whole_and_t_every_step() -> None:
    views = replay_views()
    long = "the client is saturated (97 % CPU, 1 worker(s)): its timings include its own " * 2
    last = views[-1]
    source = ReplaySource([replace(last, events=(*last.events, LiveEvent(80.0, "error", long)))])
    app = make_app(source)
    app.animation_level = "none"
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen))
        panel = app.screen.query_one(EventLog)
        await wait_for(pilot, lambda: panel.view is not None and panel.size.height > 20)
        text = " ".join(" ".join(_text(panel, panel.size.height)).split())
        assert " ".join(long.split()) in text  # whole, however long
        for event in collapse(source.view().events):
            assert event.line_text.split(":")[0] in text
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, LiveScreen))
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen))
        steps = app.screen.query_one(StepsTable)
        await wait_for(pilot, lambda: steps.view is not None)
        rows = [line.split() for line in _text(steps, len(last.steps) + 1)[1:]]
        assert [row[0].lstrip("★┊~") for row in rows] == [
            str(k + 1) for k in range(len(last.steps))
        ]
