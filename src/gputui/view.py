"""What the live screen shows, built by one pure function from frames, steps and events.

Contract: `build_view` turns a `ViewInputs` (the front end's state, the latest frames, the
finished steps and the event log) into a frozen `LiveView`; it derives knee, capacity and the best
step and nothing else, so the live controller and a replayed snapshot (`ui.replay`) get the same
screen from the same figures. The event rules live here too: `EventWatcher` turns successive
frames and telemetry into events (errors, a saturated client, a target that stops answering,
throttling, preemptions), `step_events` a finished step (its warnings, a missed SLA), and
`load_event` a load change. Nothing here reads a clock or imports Textual.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gputui.engine.load import LoadMode
from gputui.metrics.capacity import Capacity, qualified_capacity
from gputui.metrics.knee import Knee, knee_from_steps
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult
from gputui.metrics.step_quality import step_warnings
from gputui.session import StatsFrame
from gputui.telemetry.sampler import TelemetryFrame, Traces

EventKind = Literal["info", "error", "throttle", "preemption", "sla", "warning"]
TARGET_DOWN = "unreachable: requests cannot connect"
"""The target state while a server that answered stops accepting connections."""


@dataclass(frozen=True, slots=True)
class LiveEvent:
    """One line of the event log."""

    t_s: float
    """Seconds since the session started."""
    kind: EventKind
    text: str


@dataclass(frozen=True, slots=True)
class LiveView:
    """Everything the live screen shows, at one instant (never mutated)."""

    seq: int
    target_url: str
    model: str
    target_state: str
    """"connecting", "ok", or "unreachable: <reason>"."""
    backend: str | None
    mode: LoadMode
    level: float
    factor: float
    paused: bool
    session_s: float
    frame: StatsFrame | None
    steps: tuple[StepResult, ...]
    knee: Knee | None
    knee_reason: str
    capacity: Capacity | None
    capacity_reason: str
    telemetry: TelemetryFrame | None
    traces: Traces | None
    """Recent telemetry history for the GPU traces."""
    events: tuple[LiveEvent, ...]
    sla: Sla
    gpu_description: str | None
    last_saved: Path | None = None
    notices: tuple[str, ...] = field(default_factory=tuple)
    throughput_history: tuple[float, ...] = ()
    """Rolling output tok/s, one value per frame, oldest first."""
    error_rate_history: tuple[float, ...] = ()
    """Rolling error rate (0..1), one value per frame, oldest first."""
    ui_cpu_percent: float | None = None
    """CPU of this (the UI) process over the last second, 100 = one core."""
    best_step_index: int | None = None
    """Index in `steps` of the SLA-qualified step (the capacity), if any."""
    label: str | None = None
    journal_path: Path | None = None
    stopped: bool = False


@dataclass(frozen=True, slots=True)
class ViewInputs:
    """Everything a view is built from."""

    seq: int
    target_url: str
    model: str
    target_state: str
    backend: str | None
    mode: LoadMode
    level: float
    factor: float
    paused: bool
    session_s: float
    sla: Sla
    frame: StatsFrame | None
    steps: tuple[StepResult, ...]
    events: tuple[LiveEvent, ...]
    telemetry: TelemetryFrame | None = None
    traces: Traces | None = None
    gpu_description: str | None = None
    throughput_history: tuple[float, ...] = ()
    error_rate_history: tuple[float, ...] = ()
    ui_cpu_percent: float | None = None
    label: str | None = None
    last_saved: Path | None = None
    journal_path: Path | None = None
    stopped: bool = False


def build_view(inputs: ViewInputs) -> LiveView:
    """The view of these inputs (see the module docstring)."""
    steps = inputs.steps
    knee = knee_from_steps(steps, mode=inputs.mode) if steps else None
    capacity = qualified_capacity(steps, inputs.sla) if steps else None
    return LiveView(
        seq=inputs.seq,
        target_url=inputs.target_url,
        model=inputs.model,
        target_state=inputs.target_state,
        backend=inputs.backend,
        mode=inputs.mode,
        level=inputs.level,
        factor=inputs.factor,
        paused=inputs.paused,
        session_s=inputs.session_s,
        frame=inputs.frame,
        steps=steps,
        knee=knee.knee if knee else None,
        knee_reason=knee.reason if knee else "no finished step yet",
        capacity=capacity.capacity if capacity else None,
        capacity_reason=capacity.reason if capacity else "no finished step yet",
        telemetry=inputs.telemetry,
        traces=inputs.traces,
        events=inputs.events,
        sla=inputs.sla,
        gpu_description=inputs.gpu_description,
        last_saved=inputs.last_saved,
        throughput_history=inputs.throughput_history,
        error_rate_history=inputs.error_rate_history,
        ui_cpu_percent=inputs.ui_cpu_percent,
        best_step_index=best_step_index(steps, capacity.capacity if capacity else None),
        label=inputs.label,
        journal_path=inputs.journal_path,
        stopped=inputs.stopped,
    )


def best_step_index(steps: tuple[StepResult, ...], capacity: Capacity | None) -> int | None:
    """The last complete step at the capacity's level and mode (the one its numbers come from)."""
    if capacity is None:
        return None
    for i in range(len(steps) - 1, -1, -1):
        step = steps[i]
        if step.level == capacity.level and step.mode == capacity.mode and not step.incomplete:
            return i
    return None


Event = tuple[EventKind, str]


def load_event(mode: LoadMode, level: float) -> Event:
    """The event of a load change."""
    unit = "concurrent" if mode == "concurrency" else "req/s"
    return "info", f"load {level:g} {unit}"


def step_events(step: StepResult) -> list[Event]:
    """A finished step's warnings, and whether it missed the SLA."""
    events: list[Event] = [
        ("warning", f"step {step.index + 1}: {line}") for line in step_warnings(step)
    ]
    if not step.sla_ok and step.requests_ok + step.requests_failed > 0:
        events.append(("sla", f"step {step.index + 1} ({step.level:g}) missed the SLA"))
    return events


class EventWatcher:
    """Turns changes between successive frames and telemetry into events (one thread calls it)."""

    def __init__(self) -> None:
        self._errors_seen: Counter[str] = Counter()
        self._watched_seq = -1
        self._connect_seen = 0
        self._ok_seen = 0
        self._saturated = False
        self._throttled: dict[int, tuple[str, ...]] = {}
        self._preemptions: int | None = None

    def observe(
        self, frame: StatsFrame | None, telemetry: TelemetryFrame | None, target_state: str
    ) -> tuple[list[Event], str]:
        """The events since the last call, and the target state they imply."""
        events: list[Event] = []
        if frame is not None and frame.seq != self._watched_seq:
            self._watched_seq = frame.seq
            window = frame.window
            for reason in sorted(set(window.errors) | set(self._errors_seen)):
                count, seen = window.errors.get(reason, 0), self._errors_seen[reason]
                if count > seen:  # the window slides: compare with the last frame, not the max
                    events.append(("error", f"{count - seen} x {reason}"))
                self._errors_seen[reason] = count
            target_state = self._track_target(
                window.errors.get("connect", 0), window.requests_ok, target_state, events
            )
            if frame.client_saturated and not self._saturated:
                events.append(
                    (
                        "error",
                        f"the client is saturated ({frame.busiest_worker_cpu_percent:.0f} % CPU, "
                        f"{frame.workers} worker(s)): its timings include its own queueing; "
                        "restart with more --workers",
                    )
                )
            self._saturated = frame.client_saturated
        if telemetry is not None:
            events += self._telemetry(telemetry)
        return events, target_state

    def _telemetry(self, telemetry: TelemetryFrame) -> list[Event]:
        events: list[Event] = []
        for gpu in telemetry.gpus:
            reasons = tuple(r for r in (gpu.throttle_reasons or ()) if r != "gpu_idle")
            if reasons and reasons != self._throttled.get(gpu.index):
                events.append(("throttle", f"GPU {gpu.index} throttling: {', '.join(reasons)}"))
            self._throttled[gpu.index] = reasons
        server = telemetry.server
        if server is not None and server.preemptions_total is not None:
            if self._preemptions is not None and server.preemptions_total > self._preemptions:
                delta = server.preemptions_total - self._preemptions
                events.append(("preemption", f"{delta} preemptions (KV cache full)"))
            self._preemptions = server.preemptions_total
        return events

    def _track_target(self, connect_failures: int, ok: int, state: str, events: list[Event]) -> str:
        """A server that dies mid-run: unreachable once requests stop connecting, ok once back."""
        connect_rose, ok_rose = connect_failures > self._connect_seen, ok > self._ok_seen
        self._connect_seen, self._ok_seen = connect_failures, ok
        if state == "ok" and connect_rose and not ok_rose:
            events.append(("error", "target unreachable: connections refused; the load retries"))
            return TARGET_DOWN
        if state == TARGET_DOWN and ok_rose:
            events.append(("info", "target answers again"))
            return "ok"
        return state
