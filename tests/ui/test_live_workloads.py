"""Conversations and trace replay through the TUI's path: flags, live panel, saved snapshot.

The live controller is built by `gputui tui`'s own `live_controller` from parsed flags and runs
headless against the simulator over loopback HTTP, as the TUI drives it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputui.cli import build_parser
from gputui.cli.options import tui_options
from gputui.frontends.live import LiveController, LiveView
from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.runner import SimProcess, start_background
from gputui.snapshot.store import load_snapshot
from gputui.ui.app import AppOptions, make_app
from gputui.ui.command import live_controller
from gputui.ui.render.spans import texts
from gputui.ui.render.workload import workload_lines
from gputui.ui.widgets.live_panels import WorkloadPanel
from tests.integration.test_trace_replay import azure_trace
from tests.support.saved import saved
from tests.ui.conftest import wait_for

GPUTUI = [sys.executable, "-m", "gputui"]


def _run_until(controller: LiveController, done: object, seconds: float) -> LiveView:
    """Start, wait until `done(view)` (bounded in time), stop and save."""
    controller.start()
    deadline = time.monotonic() + seconds
    view = controller.view()
    try:
        while time.monotonic() < deadline:
            view = controller.view()
            if callable(done) and done(view):
                break
            time.sleep(0.2)
    finally:
        controller.stop(save=True)
    return view


def test_tui_conversations_show_turns_and_save_run_keys(tmp_path: Path) -> None:
    spec = GpuProfileSpec(
        gpu="a100-80gb-pcie",
        model="llama-3.1-8b",
        served_model_name="sim",
        prompt_tokens_details=True,  # usage's cached_tokens (vLLM: --enable-prompt-tokens-details)
    )
    with start_background(spec) as sim:
        args = build_parser().parse_args(
            ["tui", "--url", sim.url, "--model", "sim", "--endpoint", "chat",
             "--sessions", "4", "--turns", "3", "--think-time", "20", "--input-tokens", "256",
             "--output-tokens", "16", "--warmup-seconds", "0", "--snapshot-dir", str(tmp_path)]
        )  # fmt: skip
        controller, _ = live_controller(tui_options(args))
        assert controller.settings.start_mode == "concurrency"
        assert controller.settings.start_level == 4.0

        def done(view: LiveView) -> bool:
            w = view.workload
            return w is not None and len(w.turns) == 3 and w.complete >= 4

        view = _run_until(controller, done, 40)
        path = controller.stop()
    progress = view.workload
    assert progress is not None and progress.kind == "conversations"
    rates = [t.hit_rate for t in progress.turns]
    assert rates[0] == 0.0 and rates[1] is not None and rates[2] is not None
    assert 0.0 < rates[1] < rates[2]  # the history is cached, more of it each turn
    lines = texts(workload_lines(view, 60, 4))
    assert lines[1].split()[:4] == ["turn", "1", "2", "3"]
    assert lines[3].split()[:2] == ["cache", "0%"]
    assert "(usage)" in lines[0] or "(server counters)" in lines[0]  # the hit rate's source
    assert path is not None
    snap = load_snapshot(path)
    assert snap.conversations is not None and snap.conversations["sessions"] == 4
    rows = saved(snap.conversations)["turns_by_turn"]
    assert [r["turn"] for r in rows] == [1, 2, 3]
    assert rows[1]["input_tokens_mean"] == 256 + 16 + 256  # token-exact, as in `gputui run`
    step = snap.steps[0]
    assert step.turns is not None and step.prefix_cache_hit_rate is not None
    assert step.conversations is not None


@pytest.mark.alone  # its client's dispatch lateness (p99 < 10 ms) is what a busy neighbour moves
def test_tui_trace_replay_shows_lateness_and_saves_the_trace(
    fixed_sim: SimProcess, tmp_path: Path
) -> None:
    trace = tmp_path / "azure.csv"
    azure_trace(trace, 200, 3.0)
    args = build_parser().parse_args(
        ["tui", "--url", fixed_sim.url, "--model", "sim", "--trace", str(trace),
         "--snapshot-dir", str(tmp_path)]
    )  # fmt: skip
    controller, values = live_controller(tui_options(args))
    assert controller.settings.start_mode == "rate" and values["warmup_seconds"] == 0.0
    view = _run_until(controller, lambda v: v.workload is not None and v.workload.sent >= 200, 30)
    path = controller.stop()
    progress = view.workload
    assert progress is not None and progress.kind == "trace"
    assert (progress.sent, progress.requests) == (200, 200)
    assert progress.duration_s == pytest.approx(3.0, abs=1e-3)
    assert progress.lateness_p99_ms is not None and progress.lateness_p99_ms < 10.0
    lines = texts(workload_lines(view, 70, 4))
    assert "200 of 200 sent" in lines[0] and "dispatch p99" in lines[1]
    assert path is not None
    snap = load_snapshot(path)
    assert snap.trace is not None and snap.trace["sent"] == 200
    assert saved(snap.trace)["dispatch_lateness"]["count"] == 200
    assert saved(snap.trace)["schedule_error"] < 0.01
    assert snap.steps[0].dispatch_lateness is not None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--time-scale", "2"], "--trace-format, --time-scale and --trace-window need --trace"),
        (["--think-time", "nope:1"], "--think-time"),
        (["--sessions", "2", "--trace", "x.csv"], "give --trace or --sessions/--turns, not both"),
    ],
)
def test_tui_source_flag_errors_are_one_line(argv: list[str], message: str) -> None:
    result = subprocess.run(
        [*GPUTUI, "tui", "--url", "http://127.0.0.1:9", "--model", "m", *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert message in result.stderr


async def test_the_workload_panel_is_on_the_live_screen(
    fixed_sim: SimProcess, tmp_path: Path
) -> None:
    trace = tmp_path / "azure.csv"
    azure_trace(trace, 60, 1.5)
    args = build_parser().parse_args(
        ["tui", "--url", fixed_sim.url, "--model", "sim", "--trace", str(trace),
         "--snapshot-dir", str(tmp_path)]
    )  # fmt: skip
    controller, _ = live_controller(tui_options(args))
    app = make_app(controller, AppOptions(snapshot_dir=tmp_path))
    app.animation_level = "none"
    controller.start()
    try:
        async with app.run_test(size=(160, 48)) as pilot:

            def all_sent() -> bool:
                w = controller.view().workload
                return w is not None and w.sent >= 60

            await wait_for(pilot, all_sent, timeout_s=20)
            await pilot.pause(1.0)  # a refresh of the screen after the last account
            panel = app.screen.query_one("#workload", WorkloadPanel)
            assert panel.display and panel.border_title == "Trace replay"
            shown = [
                "".join(segment.text for segment in panel.render_line(y))
                for y in range(panel.content_size.height)
            ]
            assert "60 of 60 sent" in shown[0], shown
            assert "dispatch p99" in shown[1], shown
    finally:
        controller.stop(save=False)
