"""Typed forms of the snapshot's analysis sections: plan, validation, bursts, hardware, telemetry.

Contract: every field is optional and every model keeps keys it does not know (`extra="allow"`),
so files written before these types (and by other tools) still load; a model dumps only the
fields that were set, so such a file re-saves byte for byte the same keys. `Snapshot` stores
all five as these types. A malformed `hardware` or `telemetry` from another tool still loads:
`Snapshot`'s before-validator turns it into None, read as unknown. Keys a model does not name
(`telemetry.spec_decode`, `hardware.acceptance`) are in its `model_extra`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")

    @model_serializer(mode="wrap")
    def _set_fields_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        data: dict[str, object] = handler(self)
        keep = self.model_fields_set | set(self.model_extra or {})
        return {k: v for k, v in data.items() if k in keep}


class PlanSection(_Section):
    """What the run was asked to do."""

    mode: str | None = None
    levels: list[float] | None = None
    step_seconds: float | None = None
    warmup_seconds: float | None = None
    seed: int | None = None
    auto_reason: str | None = None
    step_isolation: str | None = None
    """How a step is kept to its own load (`STEP_ISOLATION`; None in files from before it)."""
    handover_s: float | None = None
    """The time all the steps' hand-overs added to the run (each step's `handover_s`, summed)."""
    burst_isolation: str | None = None
    """How a step is kept from a burst's load (`BURST_ISOLATION`; None in files from before it)."""
    burst_window_s: float | None = None
    """The time left out of the steps' rates for bursts (each step's `burst_window_s`, summed)."""


STEP_ISOLATION = (
    "hand-over: a changed level starts only once every measured request of the step before has"
    " finished; that step's load runs on, unmeasured, meanwhile (its time: each step's handover_s)"
)
"""The snapshot's `plan.step_isolation` (`session.loads`: issue 28)."""

BURST_ISOLATION = (
    "window: a burst's requests are in no step's figures; a step it fires in (gputui run --burst)"
    " stays open, and its requests in flight from the burst's first send until its last request is"
    " back plus one lifetime are left out of its figures (counted: requests_under_burst), that time"
    " out of its rates (burst_window_s); the TUI's b closes the step, fires, then re-settles it"
)
"""The snapshot's `plan.burst_isolation` (`metrics.burst_window`: issue 28)."""


class ValidationSection(_Section):
    """The rate hold near the knee that confirms the capacity (`control.plans.ValidateRate`)."""

    rate: float | None = None
    seconds: float | None = None
    step_index: int | None = None
    sla_ok: bool | None = None
    requests_per_s: float | None = None
    output_tokens_per_s: float | None = None
    ttft_p95_s: float | None = None
    tpot_p95_s: float | None = None
    error_rate: float | None = None
    queue_bounded: bool | None = None
    in_flight_mean: float | None = None
    in_flight_max: int | None = None
    in_flight_growth: float | None = None
    queue_reason: str | None = None
    holds: bool | None = None


class BurstSection(_Section):
    """One burst and how long the server took to recover from it (`sweep.burst_recoveries`)."""

    at_s: float | None = None
    count: int | None = None
    ttft_bound_s: float | None = None
    ttft_recovery_s: float | None = None
    queue_baseline: float | None = None
    queue_recovery_s: float | None = None
    recovery_s: float | None = None
    recovered: bool | None = None


class GpuIdentitySection(_Section):
    """One GPU as the run saw it (static fields only: the trace carries what changes)."""

    index: int | None = None
    uuid: str | None = None
    name: str | None = None
    memory_total_bytes: int | None = None


class HostSection(_Section):
    """The load generator's host."""

    cpu_count: int | None = None
    mem_total_bytes: int | None = None


class HardwareSection(_Section):
    """What the run ran on."""

    gpus: list[GpuIdentitySection] | None = None
    gpu_source: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    host: HostSection | None = None
    nvml: str | None = None
    server_backend: str | None = None


class TelemetrySection(_Section):
    """Downsampled traces (points are plain objects: which fields a point has varies)."""

    gpu: list[dict[str, object]] | None = None
    server: list[dict[str, object]] | None = None
    host: list[dict[str, object]] | None = None
    sources: list[object] | dict[str, object] | None = None
