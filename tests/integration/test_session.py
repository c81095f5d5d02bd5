"""The Session facade against the simulator: frames, steps, level changes, pause."""

from __future__ import annotations

import time

from gputui.engine.client import ClientConfig
from gputui.engine.load import RequestShape
from gputui.engine.process import EngineConfig
from gputui.engine.target import parse_target
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult
from gputui.session import Session, StatsFrame
from gputui.sim.runner import SimProcess


def make_session(url: str, **kwargs: object) -> Session:
    config = EngineConfig(
        client=ClientConfig(target=parse_target(url), model="sim", extra_body={"ignore_eos": True}),
        shape=RequestShape(16, 8),
        probe_path="/health",
        probe_interval_s=0.5,
    )
    return Session(config, Sla(0.1, 0.01, 0.0), warmup_s=0.3, **kwargs)  # type: ignore[arg-type]


def test_frames_at_a_fixed_rate_with_live_statistics(fixed_sim: SimProcess) -> None:
    frames: list[StatsFrame] = []
    session = make_session(fixed_sim.url, on_frame=frames.append)
    session.start(frame_interval_s=0.25)
    session.set_load("concurrency", 4)
    time.sleep(3.0)
    last = session.latest  # the last frame under load (stopping drains what is in flight)
    assert last is not None
    session.stop(cancel=False, drain_timeout_s=10)
    seqs = [f.seq for f in frames]
    assert seqs == sorted(seqs)
    assert 9 <= len(frames) <= 15  # 4 Hz for ~3 s
    assert last.mode == "concurrency"
    assert last.level == 4
    assert last.in_flight == 4
    assert last.window.ttft_s.mean is not None
    assert 0.019 < last.window.ttft_s.mean < 0.030
    # 8 tokens, 20 + 7 x 5 = 55 ms per request: 4 streams give ~73 req/s, ~580 tok/s
    assert 55 < last.window.requests_per_s < 80
    assert last.rtt_last_s is not None and last.rtt_last_s < 0.05
    assert 0 < last.client_cpu_percent < 100
    assert last in frames


def test_level_changes_pause_and_bursts_make_steps(fixed_sim: SimProcess) -> None:
    finished: list[StepResult] = []
    session = make_session(fixed_sim.url, on_step_finished=finished.append)
    session.start(frame_interval_s=None)
    session.set_load("concurrency", 2)
    time.sleep(1.5)
    session.set_load("concurrency", 8)
    time.sleep(1.0)
    session.burst(10)
    time.sleep(1.0)
    session.pause()
    time.sleep(0.5)
    status = session.status
    assert status is not None
    assert status.paused
    assert status.in_flight == 0
    session.resume()
    session.set_load("rate", 20)
    time.sleep(1.5)
    session.stop(cancel=False, drain_timeout_s=10)
    results = session.finished_steps()
    assert [r.level for r in results] == [2, 8, 20]
    assert [r.mode for r in results] == ["concurrency", "concurrency", "rate"]
    assert len(finished) == 3
    assert all(r.requests_failed == 0 for r in results)
    # step 2 holds its 8 streams for 2 s minus the paused 0.5 s, plus the burst of 10
    assert results[1].requests_ok > results[0].requests_ok
    specs = {s.index: s for s in session.step_specs()}
    measured = [  # sent after it settled and before it closed (`metrics.step`)
        r
        for r in session.all_records()
        if specs[r.step_index].measure_start_ns <= r.sent_ns < specs[r.step_index].end_ns
        and not r.burst  # the burst's: in no step's figures, counted apart
    ]
    # the step's own requests in flight under the burst are counted apart too (`burst_window`)
    assert sum(r.requests_ok + r.requests_under_burst for r in results) == len(measured)
    assert results[1].requests_under_burst > 0 and results[1].burst_window_s > 0
    assert sum(r.requests_burst for r in results) == 10
    assert len(measured) < len(session.all_records())  # the warm-ups were excluded
