"""What the live screen shows, built by one pure function from frames, steps and events.

Contract: `build_view` turns a `ViewInputs` (the front end's state, the latest frames, the
finished steps and the event log) into a frozen `LiveView`; it derives knee, capacity, bound and
the best step and nothing else (the knee, capacity and bound by `metrics.knee_summary`, the one
function the saved snapshot uses too), so the live controller and a replayed snapshot
(`ui.replay`) get the same screen from the same figures (the event rules they share are
`gputui.session.events`). Nothing here reads a clock or imports Textual.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from gputui.diagnosis.step import knee_explanation
from gputui.engine.load import LoadMode
from gputui.metrics.capacity import Capacity
from gputui.metrics.knee import Knee
from gputui.metrics.knee_summary import KneeBound, knee_summary
from gputui.metrics.precision import DEFAULT_TARGET_PRECISION
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult
from gputui.metrics.step_diagnosis import StepDiagnosis
from gputui.session import StatsFrame
from gputui.session.events import TARGET_DOWN as TARGET_DOWN
from gputui.session.events import EventKind as EventKind
from gputui.session.events import EventWatcher as EventWatcher
from gputui.session.events import LiveEvent as LiveEvent
from gputui.session.events import load_event as load_event
from gputui.session.events import step_events as step_events
from gputui.telemetry.sampler import TelemetryFrame, Traces
from gputui.workloads.live_progress import WorkloadProgress


@dataclass(frozen=True, slots=True)
class LiveView:
    """Everything the live screen shows, at one instant (never mutated)."""

    seq: int
    target_url: str
    model: str
    target_state: str
    """"connecting", "ok", or "unreachable: <reason>"."""
    backend: str | None
    server_version: str | None
    """The engine's version as it reports it (engine.identity), beside the backend."""
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
    workload: WorkloadProgress | None = None
    """Conversations or a trace replay: their live account (the workload panel)."""
    control: str = "operator"
    """Who sets the load: "operator", "holding" (until precise) or "auto" (the sweep)."""
    target_precision: float = DEFAULT_TARGET_PRECISION
    """The relative CI half-width a step is precise at (the header's ± turns ok under it)."""
    diagnoses: Mapping[int, StepDiagnosis] = field(default_factory=lambda: _EMPTY)
    """Each finished step's diagnosis by step index (`bottleneck`, `ttft_breakdown`, ...)."""
    knee_explanation: str | None = None
    """'knee at 32: bound by queue at 64; ...': the verdict of the first step past the knee."""
    price_per_hour: float | None = None
    """The node's hourly price (--price-per-hour, or the settings dialog), for the cost."""
    knee_bound: KneeBound | None = None
    """What bound the first step past the knee (`metrics.knee_summary`): 'queue at 64'."""

    def diagnosis(self, step: StepResult) -> StepDiagnosis:
        """The step's diagnosis (every part None when it has none)."""
        return self.diagnoses.get(step.index) or _UNDIAGNOSED


_EMPTY: Mapping[int, StepDiagnosis] = MappingProxyType({})
_UNDIAGNOSED = StepDiagnosis()


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
    workload: WorkloadProgress | None = None
    diagnoses: Mapping[int, StepDiagnosis] = field(default_factory=lambda: _EMPTY)
    control: str = "operator"
    target_precision: float = DEFAULT_TARGET_PRECISION
    notices: tuple[str, ...] = ()
    price_per_hour: float | None = None
    server_version: str | None = None


def build_view(inputs: ViewInputs) -> LiveView:
    """The view of these inputs (see the module docstring)."""
    steps = inputs.steps
    summary = knee_summary(steps, inputs.sla, inputs.diagnoses, mode=inputs.mode)
    return LiveView(
        seq=inputs.seq,
        target_url=inputs.target_url,
        model=inputs.model,
        target_state=inputs.target_state,
        backend=inputs.backend,
        server_version=inputs.server_version,
        mode=inputs.mode,
        level=inputs.level,
        factor=inputs.factor,
        paused=inputs.paused,
        session_s=inputs.session_s,
        frame=inputs.frame,
        steps=steps,
        knee=summary.knee,
        knee_reason=summary.knee_reason,
        capacity=summary.capacity,
        capacity_reason=summary.capacity_reason,
        telemetry=inputs.telemetry,
        traces=inputs.traces,
        events=inputs.events,
        sla=inputs.sla,
        gpu_description=inputs.gpu_description,
        last_saved=inputs.last_saved,
        throughput_history=inputs.throughput_history,
        error_rate_history=inputs.error_rate_history,
        ui_cpu_percent=inputs.ui_cpu_percent,
        best_step_index=best_step_index(steps, summary.capacity),
        label=inputs.label,
        journal_path=inputs.journal_path,
        stopped=inputs.stopped,
        workload=inputs.workload,
        diagnoses=inputs.diagnoses,
        knee_explanation=_knee_explanation(summary.knee, steps, inputs.diagnoses),
        control=inputs.control,
        target_precision=inputs.target_precision,
        notices=inputs.notices,
        price_per_hour=inputs.price_per_hour,
        knee_bound=summary.bound,
    )


def _knee_explanation(
    knee: Knee | None, steps: tuple[StepResult, ...], diagnoses: Mapping[int, StepDiagnosis]
) -> str | None:
    """The knee's explanation from the diagnosed steps (the one `gputui run` writes)."""
    if knee is None or not diagnoses:
        return None
    rows = [
        {"level": s.level, **diagnoses[s.index].fields()}
        for s in steps
        if s.index in diagnoses and s.mode == knee.mode and s.requests_ok + s.requests_failed
    ]
    return knee_explanation(knee.level, rows)


def best_step_index(steps: tuple[StepResult, ...], capacity: Capacity | None) -> int | None:
    """The last complete step at the capacity's level and mode (the one its numbers come from)."""
    if capacity is None:
        return None
    for i in range(len(steps) - 1, -1, -1):
        step = steps[i]
        if step.level == capacity.level and step.mode == capacity.mode and not step.incomplete:
            return i
    return None
