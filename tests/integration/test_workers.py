"""`--workers N`: the load is split across engine processes and their records merge."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputui.engine.client import ClientConfig
from gputui.engine.commands import Burst, Load, Pause
from gputui.engine.load import RequestShape
from gputui.engine.pool import split_command, split_whole
from gputui.engine.process import EngineConfig
from gputui.engine.target import parse_target
from gputui.metrics.sla import Sla
from gputui.session import Session
from gputui.sim.runner import SimProcess
from gputui.snapshot.store import load_snapshot


@pytest.mark.parametrize(
    ("total", "parts", "shares"),
    [(8, 2, [4, 4]), (7, 2, [4, 3]), (1, 2, [1, 0]), (10, 3, [4, 3, 3])],
)
def test_whole_shares(total: int, parts: int, shares: list[int]) -> None:
    assert split_whole(total, parts) == shares
    assert sum(split_whole(total, parts)) == total


def test_commands_split_across_workers() -> None:
    assert split_command(Load("concurrency", 7, 2), 2) == [
        Load("concurrency", 4.0, 2),
        Load("concurrency", 3.0, 2),
    ]
    assert split_command(Load("rate", 9.0, 0), 3) == [Load("rate", 3.0, 0)] * 3
    assert split_command(Burst(1), 2) == [Burst(1), None]  # a worker with no share gets nothing
    assert split_command(Pause(), 2) == [Pause(), Pause()]


def test_two_workers_share_a_closed_loop_and_merge(fixed_sim: SimProcess) -> None:
    config = EngineConfig(
        client=ClientConfig(target=parse_target(fixed_sim.url), model="sim"),
        shape=RequestShape(16, 8),
    )
    session = Session(config, Sla(), warmup_s=0.3, workers=2)
    session.start()
    session.set_load("concurrency", 7)
    time.sleep(2.5)
    status = session.status
    assert status is not None
    assert status.in_flight == 7  # 4 + 3 across the two processes
    session.burst(6)
    # Bursts are apart from steps (issue 28): the step leaves the burst's window (until it is
    # back, plus a lifetime) out of its figures, so it needs time of its own after it.
    time.sleep(1.5)
    session.stop(cancel=False, drain_timeout_s=10)
    records = session.all_records()
    ids = [r.request_id for r in records]
    assert len(ids) == len(set(ids))  # ids interleave: worker 0 even, worker 1 odd
    assert {i % 2 for i in ids} == {0, 1}
    (step,) = session.finished_steps()
    assert step.requests_failed == 0
    # 7 streams of 20 + 7 x 5 = 55 ms requests: ~127 req/s (the burst's 6 are in no step)
    assert 105 < step.requests_per_s < 140
    assert len(session.worker_cpu_percent()) == 2


def test_run_with_two_workers(fixed_sim: SimProcess, tmp_path: Path) -> None:
    out = tmp_path / "w2.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputui",
            "run",
            "--url",
            fixed_sim.url,
            "--model",
            "sim",
            "--rate",
            "40",
            "--arrival",
            "constant",
            "--step-seconds",
            "3",
            "--warmup-seconds",
            "0.5",
            "--input-tokens",
            "16",
            "--output-tokens",
            "8",
            "--workers",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    snap = load_snapshot(out)
    (step,) = snap.steps
    assert step.requests_per_s == pytest.approx(40, rel=0.1)  # two streams of 20 req/s
    assert step.requests_failed == 0
    assert snap.client is not None
    assert snap.client.workers == 2  # type: ignore[attr-defined]
    assert step.ttft_s.mean is not None and step.ttft_s.mean == pytest.approx(0.020, abs=0.004)


def test_the_live_controller_runs_two_workers(fixed_sim: SimProcess, tmp_path: Path) -> None:
    from gputui.frontends.live import LiveController, LiveSettings

    settings = LiveSettings(
        engine=EngineConfig(
            client=ClientConfig(target=parse_target(fixed_sim.url), model="sim"),
            shape=RequestShape(16, 8),
        ),
        sla=Sla(),
        warmup_s=0.2,
        snapshot_dir=tmp_path,
        workers=2,
        journal=False,
    )
    controller = LiveController(settings)
    controller.start()
    try:
        deadline = time.monotonic() + 20
        while controller.view().target_state != "ok" and time.monotonic() < deadline:
            time.sleep(0.1)
        controller.step_up()  # 1 -> 2
        controller.step_up()  # 2 -> 4: two streams per worker
        time.sleep(1.5)
        frame = controller.view().frame
        assert frame is not None
        assert frame.workers == 2
        assert frame.in_flight == 4
    finally:
        controller.stop(save=False)


def test_a_saturated_client_is_an_event() -> None:
    from dataclasses import replace

    from gputui.frontends.live import LiveController, LiveSettings
    from gputui.metrics.window import RollingWindow
    from gputui.session import StatsFrame

    settings = LiveSettings(
        engine=EngineConfig(
            client=ClientConfig(target=parse_target("http://127.0.0.1:9"), model="m"),
            shape=RequestShape(16, 8),
        ),
        sla=Sla(),
        journal=False,
    )
    controller = LiveController(settings)
    frame = StatsFrame(
        seq=1,
        mode="concurrency",
        level=64,
        step_index=0,
        step_elapsed_s=5.0,
        in_warmup=False,
        in_flight=64,
        paused=False,
        window=RollingWindow(10).stats(time.perf_counter_ns()),
        client_cpu_percent=97.0,
        loop_lag_max_ms=3.0,
        rtt_last_s=None,
        steps_finished=0,
        workers=1,
        busiest_worker_cpu_percent=97.0,
        client_saturated=True,
    )
    controller.session.observe(frame)
    controller.session.observe(replace(frame, seq=2))
    saturated = [e for e in controller.view().events if "saturated" in e.text]
    assert len(saturated) == 1  # once per episode, not once per frame
    assert "restart with more --workers" in saturated[0].text
