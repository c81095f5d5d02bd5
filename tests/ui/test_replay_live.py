"""The replay source and the live controller show the same view for the same frames."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from gputui.engine.backend import UNCHECKED
from gputui.engine.client import ClientConfig
from gputui.engine.commands import Command
from gputui.engine.handle import BatchCallback
from gputui.engine.load import RequestShape
from gputui.engine.preflight import PreflightResult
from gputui.engine.process import EngineConfig, EngineStatus
from gputui.engine.target import parse_target
from gputui.frontends.live import LiveController, LiveSettings, LiveView
from gputui.metrics.step import StepResult
from gputui.metrics.step_diagnosis import StepDiagnosis
from gputui.snapshot.store import load_snapshot
from gputui.telemetry.sampler import TelemetryFrame, TelemetrySampler, Traces
from gputui.ui.replay import (
    replay_frame,
    replay_telemetry,
    step_diagnosis,
    step_result,
    views_from_snapshot,
)
from tests.ui.conftest import DIAG_FIXTURE, FIXTURE


class _NoEngine:
    """Stands in for the engine process: the replay's records are already aggregated."""

    def __init__(self, on_batch: BatchCallback) -> None:
        self.on_batch = on_batch

    def start(self) -> None:
        pass

    def wait_ready(self, timeout_s: float) -> bool:
        return True

    def send(self, command: Command) -> None:
        pass

    def stop(self, *, cancel: bool, timeout_s: float) -> EngineStatus | None:
        return None


class _KeptDiagnoser:
    """Stands in for the StepDiagnoser: each step's diagnosis is the one the snapshot kept."""

    def __init__(self, kept: dict[int, StepDiagnosis | None]) -> None:
        self._kept = kept
        self.diagnoses: dict[int, StepDiagnosis] = {}

    def diagnose(self, result: StepResult) -> StepDiagnosis | None:
        kept = self._kept[result.index]
        if kept:  # a step saved without a diagnosis has none, as in the replay
            self.diagnoses[result.index] = kept
        return kept

    def stop(self) -> None:
        pass


def _answers(client: ClientConfig) -> PreflightResult:
    """Stands in for the preflight: the target answers at once."""
    return PreflightResult(models=("m",), probe_path=None, server_header="", backend=UNCHECKED)


@dataclass
class _FedTelemetry:
    frame: TelemetryFrame | None = None
    traces: Traces | None = None

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def latest(self) -> TelemetryFrame | None:
        return self.frame

    def recent(self) -> Traces | None:
        return self.traces


def _shown(view: LiveView) -> dict[str, Any]:
    """What the screen shows that the figures decide (not clocks or the sparkline's length)."""
    return {
        "steps": view.steps,
        "knee": view.knee,
        "knee_reason": view.knee_reason,
        "capacity": view.capacity,
        "capacity_reason": view.capacity_reason,
        "best_step_index": view.best_step_index,
        "frame": view.frame,
        "telemetry": view.telemetry,
        "mode": view.mode,
        "level": view.level,
        "diagnoses": dict(view.diagnoses),
        "knee_explanation": view.knee_explanation,
        "events": [(e.kind, e.text) for e in view.events if not e.text.startswith("connected")],
    }


@pytest.mark.parametrize(("fixture", "verdict_events"), [(FIXTURE, 0), (DIAG_FIXTURE, 4)])
def test_replay_and_live_controller_give_the_same_view(
    tmp_path: Path, fixture: Path, verdict_events: int
) -> None:
    snapshot = load_snapshot(fixture)
    replayed = views_from_snapshot(snapshot)
    steps = [step_result(s) for s in snapshot.steps if not s.incomplete]
    first = steps[0]
    settings = LiveSettings(
        engine=EngineConfig(
            client=ClientConfig(target=parse_target("http://127.0.0.1:8000"), model="m"),
            shape=RequestShape(16, 8),
        ),
        sla=snapshot.sla.to_sla(),
        snapshot_dir=tmp_path,
        journal=False,
        start_mode=first.mode,
        start_level=first.level,
    )
    telemetry = _FedTelemetry()
    controller = LiveController(
        settings,
        cast(TelemetrySampler, telemetry),
        engine=_NoEngine,
        check=_answers,
        frame_interval_s=None,  # the frames are the replay's
    )
    controller.start()  # connects (the injected check) and applies the first step's load
    deadline = time.monotonic() + 10.0
    while not controller.connected and time.monotonic() < deadline:
        time.sleep(0.01)
    assert controller.connected
    session = controller.session  # the live Session: its event rules, steps and frames
    kept = {s.index: step_diagnosis(s) for s in snapshot.steps}
    session.diagnosis.diagnoser = cast(
        Any, _KeptDiagnoser(kept)
    )  # verdict events: the Session's rule
    top = max(s.level for s in steps)
    knee_step = replayed[-1].level
    plan = [*((k, s) for k, s in enumerate(steps)), (len(steps), None)]
    assert len(plan) == len(replayed)
    try:
        for seq, ((k, live), expected) in enumerate(zip(plan, replayed, strict=True), start=1):
            live = live or next(s for s in steps if s.level == knee_step)
            if k > 0:  # the step before finished: the Session's own bookkeeping and events
                session.feed_step(steps[k - 1])
                controller.go_to(live.mode, live.level)
            telemetry.frame, telemetry.traces = replay_telemetry(live, top, seq)
            session.show_frame(replay_frame(seq, k, live))  # as the loop shows its own frames
            assert _shown(controller.view()) == _shown(expected), f"view {seq}"
    finally:
        controller.stop(save=False)
    assert replayed[-1].best_step_index is not None
    assert any(e.kind == "throttle" for e in replayed[-1].events)
    assert sum("bound by" in e.text for e in replayed[-1].events) == verdict_events


@pytest.mark.parametrize("index", [0, -1])
def test_the_replayed_events_are_the_live_rules(index: int) -> None:
    view = views_from_snapshot(load_snapshot(FIXTURE))[index]
    assert view.events[0].text == "connected to http://127.0.0.1:8000"
    assert all(a.t_s <= b.t_s for a, b in zip(view.events, view.events[1:], strict=False))
