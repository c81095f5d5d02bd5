"""The server dies under the live TUI's controller: the view says so at once, keeps the finished
steps, and the load resumes when a server comes back on the same port."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from gputui.engine.client import ClientConfig
from gputui.engine.load import RequestShape
from gputui.engine.process import EngineConfig
from gputui.engine.target import parse_target
from gputui.frontends.live import LiveController, LiveSettings, LiveView
from gputui.metrics.sla import Sla
from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import start_background
from gputui.snapshot.store import load_snapshot
from tests.e2e.tmux import wait_for

pytestmark = pytest.mark.timeout(60)

PROFILE = FixedProfileSpec(ttft_ms=20, itl_ms=2, served_model_name="sim")
DIE_AFTER_S = 1.5


def live_controller(
    url: str,
    folder: Path,
    *,
    window_s: float = 3.0,
    start_level: float = 4.0,
    api_key: str | None = None,
) -> LiveController:
    """A live session as `gputui tui` runs it, with 16-token requests and no warm-up."""
    settings = LiveSettings(
        engine=EngineConfig(
            client=ClientConfig(target=parse_target(url), model="sim", api_key=api_key),
            shape=RequestShape(16, 16),
        ),
        sla=Sla(1.0, 0.05, None),
        warmup_s=0.0,
        window_s=window_s,
        start_level=start_level,
        snapshot_dir=folder,
    )
    return LiveController(settings)


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return True
    return False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _errors(view: LiveView) -> list[str]:
    return [e.text for e in view.events if e.kind == "error"]


def test_the_view_shows_a_dead_server_at_once_and_resumes(tmp_path: Path) -> None:
    port = _free_port()
    sim = start_background(PROFILE, port=port, die_after_s=DIE_AFTER_S)
    controller = live_controller(sim.url, tmp_path)
    try:
        controller.start()
        view = controller.view
        wait_for(view, lambda v: v.target_state == "ok" and v.frame is not None, 20)
        time.sleep(0.7)
        controller.step_up()  # 4 -> 8: step 1 finished before the crash
        wait_for(view, lambda v: len(v.steps) == 1, 10)
        wait_for(lambda: _refused(port), bool, 10)  # the crash (the listener is gone)
        died = time.monotonic()
        down = wait_for(view, lambda v: v.target_state.startswith("unreachable"), 5)
        assert time.monotonic() - died < 2.0
        assert down.target_state == "unreachable: requests cannot connect"
        assert any("target unreachable" in e for e in _errors(down))
        assert any(e.endswith("x connect") for e in _errors(down))  # counted by reason
        (before,) = down.steps  # the finished step is kept as it was
        assert before.level == 4 and before.requests_ok > 0 and before.requests_failed == 0
        assert down.frame is not None and down.frame.window.errors.get("connect", 0) > 0

        with start_background(PROFILE, port=port):  # a server comes back on the same port
            back = wait_for(view, lambda v: v.target_state == "ok", 10)
            assert any(e.text == "target answers again" for e in back.events)
            controller.step_up()  # 8 -> 16, a step wholly after the return
            wait_for(view, lambda v: v.frame is not None and v.frame.level == 16, 5)
            time.sleep(0.8)
            controller.step_down()
            wait_for(view, lambda v: len(v.steps) == 3, 10)
            path = controller.stop(save=True, label="death")
    finally:
        controller.stop(save=False)
        sim.stop()
    assert path is not None
    crash, after = load_snapshot(path).steps[1:3]
    assert crash.level == 8 and crash.requests_failed > 0
    assert set(crash.errors) <= {"connect", "stream_broken"}
    assert after.level == 16 and after.requests_ok > 0 and after.requests_failed == 0
