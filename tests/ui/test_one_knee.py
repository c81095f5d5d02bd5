"""Issue 28: one knee, one capacity, one bound on every screen and in every file.

A TUI session (real keys, `App.run_test`) against the simulated RTX 4090 24GB serving
llama-3.1-8b goes past its knee (8, 32, 128 streams, `+` at factor 4), quits, and saves. The live
view's last frame, the snapshot, `gputui compare --format json` and the HTML report must then
name the same knee, the same capacity and the same bound.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gputui.cli import build_parser, main
from gputui.cli.options import tui_options
from gputui.frontends.live import LiveController
from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.runner import start_background
from gputui.snapshot.store import load_snapshot
from gputui.ui.app import AppOptions, make_app
from gputui.ui.command import live_controller
from gputui.ui.render.breakdown import knee_label
from gputui.ui.render.status import header_lines
from tests.ui.conftest import wait_for

STEP_S = 3.0
LEVELS = (8, 32, 128)


def _at_level(controller: LiveController, level: float) -> Callable[[], bool]:
    def reached() -> bool:
        frame = controller.view().frame
        return frame is not None and frame.level == level

    return reached


def _measured(controller: LiveController) -> int:
    frame = controller.view().frame
    return 0 if frame is None else frame.measured_n


def _compare(path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> str:
    """`gputui compare PATH --format FMT` (its `main`, in this process: a second faster)."""
    capsys.readouterr()
    assert main(["compare", str(path), "--format", fmt]) == 0
    return capsys.readouterr().out


def _text(lines: list[list[tuple[str, str]]]) -> str:
    return "\n".join("".join(t for t, _ in line) for line in lines)


@pytest.mark.timeout(120)
async def test_the_live_view_the_snapshot_compare_and_the_report_name_one_knee(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with start_background(GpuProfileSpec(gpu="rtx4090-24gb", model="llama-3.1-8b")) as sim:
        args = build_parser().parse_args(
            ["tui", "--url", sim.url, "--model", "llama-3.1-8b", "--input-tokens", "512",
             "--output-tokens", "32", "--warmup-seconds", "1", "--snapshot-dir", str(tmp_path),
             "--gpu-telemetry", "none", "--no-host-telemetry", "--sla-ttft-p95", "2",
             "--sla-tpot-p95", "0.1", "--start-level", "8", "--factor", "4",
             "--request-timeout", "20"]
        )  # fmt: skip
        controller, _ = live_controller(tui_options(args))
        app = make_app(controller, AppOptions(snapshot_dir=tmp_path))
        app.animation_level = "none"
        controller.start()
        try:
            async with app.run_test(size=(160, 48)) as pilot:
                for level in LEVELS:
                    await wait_for(pilot, _at_level(controller, level))
                    started = time.perf_counter()
                    await wait_for(pilot, lambda: _measured(controller) > 0, timeout_s=40)
                    await pilot.pause(max(STEP_S - (time.perf_counter() - started), 0.0))
                    if level < LEVELS[-1]:
                        await pilot.press("plus")
        finally:
            path = controller.stop(save=True)
    assert path is not None
    view = controller.view()  # the last frame: every step finished, the session stopped
    steps = [(s.level, s.output_tokens_per_s, s.incomplete) for s in view.steps]
    assert view.knee is not None, (steps, view.knee_reason)
    assert view.capacity is not None, view.capacity_reason
    bound = view.knee_bound
    header = _text(header_lines(view, 160, 3))
    assert re.search(rf"capacity ~?{view.capacity.level:g}\b", header), header
    last = saved.steps[-1] if (saved := load_snapshot(path)).steps else None
    assert last is not None and f": {last.sla_verdict}, as saved" in header  # the saved verdict
    label = knee_label(view)
    assert label.startswith(f"knee {view.knee.level:g}")
    if bound is not None:  # the chart's knee mark names the bound the file saves
        assert label == f"knee {view.knee.level:g} · {bound.verdict}" + (
            "?" if bound.low_confidence else ""
        )

    saved = load_snapshot(path)
    assert [s.index for s in saved.steps] == list(range(len(view.steps)))
    assert saved.knee is not None and saved.capacity is not None
    assert saved.knee.level == view.knee.level
    assert saved.capacity.level == view.capacity.level
    assert saved.knee.bound_by == (bound.verdict if bound else None)
    assert saved.knee.bound_at == (bound.level if bound else None)

    row = json.loads(_compare(path, "json", capsys))["rows"][0]
    assert row["knee_level"] == view.knee.level
    assert row["qualified_level"] == view.capacity.level
    assert (row["bound_by"], row["bound_at"]) == (
        (bound.verdict, bound.level) if bound else (None, None)
    )
    html = _compare(path, "html", capsys)
    # The report's ring at the knee and square at the capacity, at the same levels.
    assert f": knee at {view.knee.level:g}</title>" in html
    assert f": qualified capacity at {view.capacity.level:g}</title>" in html
    if bound is not None:
        assert f"<td>{bound.verdict}" in html or f">{bound.verdict}<" in html
    print("steps:", steps, "knee:", label, "capacity:", view.capacity.level)
