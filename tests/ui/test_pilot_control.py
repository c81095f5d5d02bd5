"""Pilot tests of issue 16's keys: `h` holds, `a` runs the auto sweep; load keys end both."""

from __future__ import annotations

import time
from pathlib import Path

from gputui.cli import build_parser
from gputui.cli.options import tui_options
from gputui.engine.client import ClientConfig
from gputui.engine.load import RequestShape
from gputui.engine.process import EngineConfig
from gputui.engine.target import parse_target
from gputui.frontends.live import LiveController, LiveSettings
from gputui.metrics.sla import Sla
from gputui.metrics.window import RollingWindow
from gputui.session import StatsFrame
from gputui.sim.runner import SimProcess
from gputui.snapshot.store import load_snapshot
from gputui.ui.app import AppOptions, make_app
from gputui.ui.command import live_controller
from gputui.ui.widgets.live_panels import SessionHeader
from tests.ui.conftest import replay_app, wait_for

_NO_FRAME = StatsFrame(
    seq=0,
    mode="concurrency",
    level=0.0,
    step_index=-1,
    step_elapsed_s=0.0,
    in_warmup=False,
    in_flight=0,
    paused=False,
    window=RollingWindow(1.0).stats(1),
    client_cpu_percent=0.0,
    loop_lag_max_ms=0.0,
    rtt_last_s=None,
    steps_finished=0,
)


def _frame(controller: LiveController) -> StatsFrame:
    """The latest frame (before the first one: a frame of nothing, level 0)."""
    frame = controller.view().frame
    return frame if frame is not None else _NO_FRAME


def _controller(url: str, folder: Path, max_step_s: float | None = None) -> LiveController:
    settings = LiveSettings(
        engine=EngineConfig(
            client=ClientConfig(target=parse_target(url), model="sim"),
            shape=RequestShape(16, 8),
            probe_path="/health",
        ),
        sla=Sla(5.0, 0.5, 0.5),  # lenient: the fixed sim passes, so the ramp goes on
        warmup_s=0.2,
        window_s=5.0,
        snapshot_dir=folder,
        journal=False,
        target_precision=0.1,
        max_step_s=max_step_s,
    )
    return LiveController(settings)


async def test_auto_sweep_fills_the_chart_and_a_load_key_takes_control_back(
    fixed_sim: SimProcess, tmp_path: Path
) -> None:
    controller = _controller(fixed_sim.url, tmp_path, max_step_s=0.6)  # short auto steps
    app = make_app(controller, AppOptions(snapshot_dir=tmp_path))
    app.animation_level = "none"
    controller.start()
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            view = controller.view
            await wait_for(pilot, lambda: _frame(controller).level == 1)
            await pilot.press("plus")
            await wait_for(pilot, lambda: _frame(controller).level == 2)

            await pilot.press("a")  # the auto sweep, from 2
            assert controller.control == "auto" and view().control == "auto"
            # It ramps 2, 4, 8 ... by itself; each finished step is a point on the chart.
            await wait_for(pilot, lambda: {2, 4} <= {s.level for s in view().steps})
            shown = view()
            assert shown.frame is not None and shown.frame.step_phase == "auto"
            assert shown.level == shown.frame.level  # the header follows the sweep
            header = app.screen.query_one(SessionHeader)
            await wait_for(pilot, lambda: "AUTO" in header.render_line(0).text)

            await pilot.press("plus")  # a load key: the operator has the load again
            assert controller.control == "operator"
            reached = view().level / 2
            assert reached >= 4  # stepped up from where the sweep had got to, not from 2
            await wait_for(pilot, lambda: _frame(controller).level == reached * 2)
            await pilot.pause(0.8)
            frame = view().frame
            assert frame is not None
            assert frame.level == reached * 2 and frame.step_phase != "auto"  # it stopped

            await pilot.press("h")  # hold this level
            assert controller.control == "holding", [e.text for e in view().events][-8:]
            await wait_for(pilot, lambda: _frame(controller).step_phase == "holding")
            await wait_for(pilot, lambda: _frame(controller).measured_n > 0)
            await pilot.press("minus")
            assert controller.control == "operator"
            await wait_for(pilot, lambda: _frame(controller).level == reached)
    finally:
        controller.stop(save=False)


async def test_hold_and_auto_keys_reach_the_source_and_load_keys_end_them() -> None:
    app, source = replay_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("a")
        assert source.view().control == "auto"
        header = app.screen.query_one(SessionHeader)
        await wait_for(pilot, lambda: header.view is not None and header.view.control == "auto")
        assert "AUTO" in header.render_line(0).text
        await pilot.press("space")
        assert source.view().control == "operator"
        await pilot.press("h")
        assert source.view().control == "holding"
        await wait_for(pilot, lambda: "HOLD" in header.render_line(0).text)
        await pilot.press("r")
        assert source.view().control == "operator"
        assert source.calls == ["start_auto", "toggle_pause", "hold_until_precise", "toggle_mode"]


async def test_gputui_tui_step_flags_bound_the_hold(fixed_sim: SimProcess, tmp_path: Path) -> None:
    """`--target-precision` and `--max-step-seconds` of `gputui tui` reach the hold's rules.

    A precision no step reaches (0.0001) is held only as long as `--max-step-seconds 1` allows
    (without the flag: 300 s), then the step ends imprecise and the operator has control again.
    """
    args = build_parser().parse_args(
        ["tui", "--url", fixed_sim.url, "--model", "sim", "--input-tokens", "16",
         "--output-tokens", "8", "--warmup-seconds", "0.2", "--snapshot-dir", str(tmp_path),
         "--gpu-telemetry", "none", "--no-host-telemetry", "--sla-ttft-p95", "5s",
         "--sla-tpot-p95", "0.5s", "--target-precision", "0.0001", "--max-step-seconds", "1"]
    )  # fmt: skip
    controller, _ = live_controller(tui_options(args))
    assert (controller.settings.target_precision, controller.settings.max_step_s) == (0.0001, 1.0)
    app = make_app(controller, AppOptions(snapshot_dir=tmp_path))
    app.animation_level = "none"
    controller.start()
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            view = controller.view
            await wait_for(pilot, lambda: _frame(controller).level == 1)
            await pilot.press("h")
            assert controller.control == "holding"
            held_from = time.perf_counter_ns()
            await wait_for(pilot, lambda: controller.control == "operator")
            held_s = (time.perf_counter_ns() - held_from) / 1e9
            assert held_s < 10.0  # bounded by the flag's 1 s (plus the step's finishing)
            held = view().steps[-1]
            assert held.level == 1 and held.imprecise is True
            assert held.duration_s < 5.0  # not the 300 s a hold runs without the flag
    finally:
        controller.stop(save=False)


async def test_a_hold_then_a_load_key_keeps_every_finished_step(
    fixed_sim: SimProcess, tmp_path: Path
) -> None:
    """`h` ends on its looks or its limit, opens no step by itself; `+` after it loses nothing.

    The saved file numbers its steps 0, 1, 2 (the hold's carry-on takes no number), and the held
    step is saved with the verdict the hold ended on, as the event log said it.
    """
    controller = _controller(fixed_sim.url, tmp_path, max_step_s=4.0)
    app = make_app(controller, AppOptions(snapshot_dir=tmp_path))
    app.animation_level = "none"
    controller.start()
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            view = controller.view
            await wait_for(pilot, lambda: _frame(controller).level == 1)
            # A level left before it measured anything is not a step: let this one measure.
            await wait_for(pilot, lambda: _frame(controller).measured_n > 0)
            await pilot.press("plus")
            await wait_for(pilot, lambda: _frame(controller).level == 2)
            await pilot.press("h")
            assert controller.control == "holding"
            header = app.screen.query_one(SessionHeader)
            # While it holds, the header shows the verdict the hold will save (its looks').
            await wait_for(
                pilot, lambda: any("hold verdict: " in header.render_line(y).text for y in range(3))
            )
            await wait_for(pilot, lambda: controller.control == "operator", timeout_s=20.0)
            held = view().steps[-1]
            assert held.level == 2 and held.verdict_basis is not None
            assert held.duration_s < 6.0  # its 4 s limit (or a look before it)
            # The basis says which rule ended it: a look decided it, its last look, or its limit.
            rules = (", decided at look ", ": its last look", " at its 4-s limit: final look (n=")
            assert any(rule in held.verdict_basis for rule in rules), held.verdict_basis
            # No step opened by itself: the header says so, and nothing is measured.
            await wait_for(pilot, lambda: _frame(controller).step_phase == "unmeasured")
            await wait_for(pilot, lambda: "no step open" in header.render_line(0).text)
            ended = [e.text for e in view().events if e.text.startswith("hold ended")]
            assert ended and f"step {len(view().steps)} {held.verdict_basis}" in ended[-1]
            await pilot.press("plus")
            await wait_for(pilot, lambda: _frame(controller).level == 4)
            await wait_for(pilot, lambda: _frame(controller).measured_n > 0)
    finally:
        path = controller.stop(save=True)
    assert path is not None
    saved = load_snapshot(path)
    assert [s.index for s in saved.steps] == list(range(len(saved.steps)))
    assert [s.level for s in saved.steps] == [1, 2, 4]  # every finished step, none hidden
    kept = saved.steps[1]
    assert kept.sla_verdict == held.sla_verdict
    assert (kept.model_extra or {}).get("verdict_basis") == held.verdict_basis
