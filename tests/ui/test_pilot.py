"""Pilot tests: real keys on the real app, driving a live controller against the simulator."""

from __future__ import annotations

from pathlib import Path

from gputui.engine.client import ClientConfig
from gputui.engine.load import RequestShape
from gputui.engine.process import EngineConfig
from gputui.engine.target import parse_target
from gputui.frontends.live import LiveController, LiveSettings
from gputui.metrics.sla import Sla
from gputui.sim.runner import SimProcess
from gputui.snapshot.store import load_snapshot
from gputui.ui.app import AppOptions, make_app
from gputui.ui.screens.dialogs import SaveSnapshotScreen
from gputui.ui.screens.help import HelpScreen
from gputui.ui.widgets.live_panels import SessionHeader
from tests.ui.conftest import files, replay_app, wait_for


def _controller(url: str, folder: Path) -> LiveController:
    settings = LiveSettings(
        engine=EngineConfig(
            client=ClientConfig(target=parse_target(url), model="sim"),
            shape=RequestShape(16, 8),
            probe_path="/health",
        ),
        sla=Sla(0.5, 0.05, 0.01),
        warmup_s=0.2,
        window_s=5.0,
        snapshot_dir=folder,
        label="pilot",
    )
    return LiveController(settings)


async def test_keys_step_the_engine_save_and_quit(fixed_sim: SimProcess, tmp_path: Path) -> None:
    controller = _controller(fixed_sim.url, tmp_path)
    app = make_app(controller, AppOptions(label="pilot", snapshot_dir=tmp_path))
    app.animation_level = "none"
    controller.start()
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            view = controller.view

            def level() -> float | None:
                frame = view().frame
                return frame.level if frame is not None else None

            def measured() -> bool:
                frame = view().frame
                return frame is not None and frame.handover is None and frame.measured_n > 0

            await wait_for(pilot, lambda: level() == 1)
            await wait_for(pilot, measured)
            for key, target in (("plus", 2), ("up", 4), ("minus", 2), ("plus", 4)):
                await pilot.press(key)
                await wait_for(pilot, lambda t=target: level() == t)  # type: ignore[misc]
                # A level left before it measured anything is no step (issue 28): wait for one.
                await wait_for(pilot, measured)
            await wait_for(pilot, lambda: len(view().steps) >= 4)
            assert [s.level for s in view().steps][:4] == [1, 2, 4, 2]
            # A step closed inside its warm-up records the warm-up it used: all of it.
            assert all(
                s.warmup_s == 0.2 or (s.warmup_s < 0.2 and s.duration_s == 0) for s in view().steps
            )

            await pilot.press("right_square_bracket")
            assert view().factor == 3.0
            await pilot.press("up")
            await wait_for(pilot, lambda: level() == 12)

            await pilot.press("s")
            await wait_for(pilot, lambda: isinstance(app.screen, SaveSnapshotScreen))
            await pilot.press("ctrl+u", *"my run", "enter")
            await wait_for(pilot, lambda: bool(files(tmp_path, "*-my-run.json")))
            saved = load_snapshot(files(tmp_path, "*-my-run.json")[0])
            assert saved.label == "my run"
            assert [s.level for s in saved.steps][:5] == [1, 2, 4, 2, 4]
            assert files(tmp_path, "*.journal")  # the session is still journalled

            await pilot.press("q")
            await wait_for(pilot, lambda: app.return_value is not None, timeout_s=30)
        final = app.return_value
        assert final is not None
        snap = load_snapshot(final)
        assert snap.label == "pilot"
        assert [s.level for s in snap.steps] == [1, 2, 4, 2, 4, 12]
        assert not files(tmp_path, "*.journal")  # deleted after the clean save
    finally:
        controller.stop(save=False)


async def test_mode_pause_burst_and_help_reach_the_source() -> None:
    app, source = replay_app()
    async with app.run_test(size=(120, 40)) as pilot:
        for key in ("r", "space", "b", "left_square_bracket", "down"):
            await pilot.press(key)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("plus")  # keys of the live screen do nothing under the help
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SaveSnapshotScreen))
        await pilot.press("escape")  # cancelled: nothing saved
        await wait_for(pilot, lambda: not isinstance(app.screen, SaveSnapshotScreen))
        assert source.calls == ["toggle_mode", "toggle_pause", "burst", "factor:-1", "step_down"]
        await pilot.press("q")
        await wait_for(pilot, lambda: source.calls[-1].startswith("stop:"))
    assert source.calls[-1] == "stop::None:True"


async def test_compact_layout_below_120_columns() -> None:
    app, _ = replay_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.screen.has_class("-compact"))
        await pilot.press("pagedown")
        await pilot.resize_terminal(160, 48)
        await wait_for(pilot, lambda: not app.screen.has_class("-compact"))


async def test_an_unreachable_target_is_shown_and_retried(tmp_path: Path) -> None:
    controller = _controller("http://127.0.0.1:9", tmp_path)  # nothing listens on port 9
    app = make_app(controller, AppOptions(snapshot_dir=tmp_path))
    controller.start()
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: controller.view().target_state.startswith("unreachable"))
            header = app.screen.query_one(SessionHeader)
            await wait_for(pilot, lambda: header.view is not None and header.view.seq > 1)
            text = " ".join(s.text for s in (header.render_line(0), header.render_line(1)))
            assert "unreachable: cannot reach http://127.0.0.1:9" in text
            assert "(retrying)" in text
            await pilot.press("q")
            await wait_for(pilot, lambda: app.return_value is None and controller.view().stopped)
    finally:
        controller.stop(save=False)
    assert files(tmp_path, "*") == []  # nothing measured, nothing saved, no journal left
