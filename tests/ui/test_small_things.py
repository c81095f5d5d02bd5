"""Issue 28's small things: the footer's + and -, `?` lists l once, a paused step says so."""

from __future__ import annotations

from dataclasses import replace

from gputui.metrics.step import StepSpec
from gputui.metrics.window import RollingWindow
from gputui.session.frames import build_frame
from gputui.session.steady import StepPhase
from gputui.ui.render.spans import text_of
from gputui.ui.render.status import header_lines
from gputui.ui.screens.help import KEYS
from gputui.ui.widgets.key_footer import KeyFooter
from tests.ui.conftest import replay_app, replay_views

S = 1_000_000_000


async def test_the_footer_shows_plus_and_minus_as_the_readme_does() -> None:
    app, _ = replay_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        shown = {text: key for key, text in app.screen.query_one(KeyFooter).items()}
    assert shown["Load ×"] == "+"
    assert shown["Load ÷"] == "-"


def test_help_lists_each_key_once_and_l_for_the_events() -> None:
    keys = [key for key, _ in KEYS]
    assert len(keys) == len(set(keys)), keys
    assert dict(KEYS)["l"].startswith("every event")
    assert dict(KEYS)["e"].startswith("SLA and price")


def _frame(now_s: float, paused_at_s: float | None) -> float:
    step = StepSpec(0, "concurrency", 8.0, 10 * S, 11 * S, -1)
    frame = build_frame(
        seq=1,
        step=step,
        now_ns=round(now_s * S),
        window=RollingWindow(5.0).stats(round(now_s * S)),
        phase=StepPhase(),
        status=None,
        client_cpu_percent=0.0,
        busiest_cpu_percent=0.0,
        run_wait_percent=None,
        client_state=None,
        rtt_last_s=None,
        steps_finished=0,
        workers=1,
        paused=paused_at_s is not None,
        paused_at_ns=None if paused_at_s is None else round(paused_at_s * S),
    )
    return frame.step_elapsed_s


def test_a_paused_steps_clock_stands_and_the_header_says_paused() -> None:
    assert _frame(25.0, None) == 15.0
    assert _frame(25.0, 18.0) == 8.0  # paused at 18 s: the clock stands at 8 s of the step
    assert _frame(40.0, 18.0) == 8.0
    view = replay_views()[-1]
    assert view.frame is not None
    paused = replace(view, paused=True, frame=replace(view.frame, paused=True, measured_n=40))
    top = text_of(header_lines(paused, 160, 3)[0])
    assert "❚❚ paused" in top
    assert " paused" in top.split("step", 1)[1] and "measuring" not in top
