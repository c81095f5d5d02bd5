"""Turn a finished Session into a Snapshot (the file a run leaves behind)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gputui.engine.load import LoadMode
from gputui.engine.target import Endpoint
from gputui.engine.target import Target as EngineTarget
from gputui.metrics.capacity import qualified_capacity
from gputui.metrics.knee import knee_from_steps
from gputui.session import Session
from gputui.snapshot.models import (
    CapacityModel,
    Client,
    KneeModel,
    Network,
    SlaBounds,
    Snapshot,
    Stats,
    Target,
    Workload,
    step_from_result,
)


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What the run was asked to do, for the snapshot header."""

    label: str | None
    target: EngineTarget
    model: str
    endpoint: Endpoint
    mode: LoadMode
    levels: list[float]
    input_tokens: int
    output_tokens: int
    step_seconds: float
    warmup_seconds: float
    complete: bool
    arrival: str | None = None
    burstiness: float | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    probe_path: str | None = None
    server_header: str = ""
    interrupted_by: str | None = None
    backend: str | None = None
    auto_reason: str | None = None
    hardware: dict[str, Any] | None = None
    telemetry: dict[str, Any] | None = None
    client_extra: dict[str, Any] = field(default_factory=dict)
    """Load-generator facts beyond the Client model's fields (workers, saturation)."""
    validation: dict[str, Any] | None = None
    bursts: list[dict[str, Any]] = field(default_factory=list)


def build_snapshot(session: Session, info: RunInfo) -> Snapshot:
    """The snapshot of everything the session measured."""
    status = session.status
    results = session.finished_steps()
    knee = knee_from_steps(results, mode=info.mode) if results else None
    capacity = qualified_capacity(results, session.sla) if results else None
    extra_body = {k: v for k, v in info.extra_body.items() if k.lower() != "authorization"}
    return Snapshot(
        label=info.label,
        complete=info.complete,
        target=Target(
            url=info.target.api_url,
            model=info.model,
            endpoint=info.endpoint,
            backend=info.backend,
            server_header=info.server_header or None,
        ),
        workload=Workload(
            input_tokens=info.input_tokens,
            output_tokens=info.output_tokens,
            endpoint=info.endpoint,
            arrival=info.arrival,
            burstiness=info.burstiness,
            extra_body=extra_body,
            ignore_eos=bool(extra_body.get("ignore_eos", False)),
            input_tokens_method="approximate (common words; measured from usage)",
        ),
        sla=SlaBounds.from_sla(session.sla),
        steps=tuple(step_from_result(result) for result in results),
        knee=KneeModel.from_knee(knee.knee) if knee and knee.knee else None,
        knee_reason=knee.reason if knee else "no finished step",
        capacity=CapacityModel.from_capacity(capacity.capacity)
        if capacity and capacity.capacity
        else None,
        capacity_reason=capacity.reason if capacity else "no finished step",
        network=Network(
            rtt_s=Stats.from_summary(session.rtt_summary()),
            probe_path=info.probe_path,
            probes_failed=session.probes_failed,
        ),
        client=Client(
            cpu_s=status.cpu_s if status else 0.0,
            wall_s=status.wall_s if status else 0.0,
            event_loop="uvloop" if status and status.uvloop else "asyncio",
            uvloop=bool(status and status.uvloop),
            connections_opened=status.connections_opened if status else 0,
            **info.client_extra,
        ),
        plan={
            "mode": info.mode,
            "levels": info.levels,
            "step_seconds": info.step_seconds,
            "warmup_seconds": info.warmup_seconds,
            "seed": info.seed,
            "auto_reason": info.auto_reason,
        },
        validation=info.validation,
        hardware=info.hardware,
        telemetry=info.telemetry,
        bursts=tuple(info.bursts),
        interrupted_by=info.interrupted_by,
        requests_cancelled=session.cancelled,
    )
