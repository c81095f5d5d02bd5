"""The live controller's Session: warnings and history arrive without the UI polling."""

from __future__ import annotations

import time
from pathlib import Path

from gputui.engine.client import ClientConfig
from gputui.engine.load import RequestShape
from gputui.engine.process import EngineConfig
from gputui.engine.target import parse_target
from gputui.frontends.live import LiveController, LiveSettings
from gputui.metrics.sla import Sla
from gputui.sim.runner import SimProcess


def test_step_warnings_reach_the_event_log(fixed_sim: SimProcess, tmp_path: Path) -> None:
    settings = LiveSettings(
        engine=EngineConfig(
            client=ClientConfig(target=parse_target(fixed_sim.url), model="sim"),
            shape=RequestShape(16, 200),  # 20 ms + 199 x 5 ms: about 1 s a request
            probe_path="/health",
        ),
        sla=Sla(0.5, 0.05, 0.01),
        warmup_s=0.1,
        window_s=5.0,
        start_level=2,
        snapshot_dir=tmp_path,
    )
    controller = LiveController(settings)
    controller.start()
    try:
        deadline = time.monotonic() + 20
        while controller.view().frame is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.5)  # no view() in between: the frame thread keeps the history
        controller.step_up()
        while not controller.view().steps and time.monotonic() < deadline:
            time.sleep(0.1)
        view = controller.view()
    finally:
        controller.stop(save=False)
    warnings = [e.text for e in view.events if e.kind == "warning"]
    assert any("step 1: the step" in w and "request lifetimes" in w for w in warnings), warnings
    assert len(view.throughput_history) >= 5  # 4 frames a second while nobody looked
    assert max(view.throughput_history) > 100  # 2 streams at 200 tok/s each, give or take


def test_the_quit_snapshot_keeps_the_label_of_the_last_save(
    fixed_sim: SimProcess, tmp_path: Path
) -> None:
    settings = LiveSettings(
        engine=EngineConfig(
            client=ClientConfig(target=parse_target(fixed_sim.url), model="sim"),
            shape=RequestShape(16, 8),
            probe_path="/health",
        ),
        sla=Sla(0.5, 0.05, 0.01),
        warmup_s=0.1,
        window_s=5.0,
        snapshot_dir=tmp_path,
    )
    controller = LiveController(settings)
    controller.start()
    try:
        deadline = time.monotonic() + 20
        while controller.view().frame is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        controller.step_up()
        while not controller.view().steps and time.monotonic() < deadline:
            time.sleep(0.1)
        saved = controller.save("A100 bf16")
    finally:
        final = controller.stop()
    assert saved is not None and saved.name.endswith("-A100-bf16.json")
    # q after s updates the saved file (issue 23), rather than adding a twin with its label
    assert final == saved and saved.exists()
    assert [p.name for p in tmp_path.glob("*.json")] == [saved.name]
    assert "updated " + saved.name in [e.text for e in controller.view().events]
