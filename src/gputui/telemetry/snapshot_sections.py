"""The snapshot's `hardware` and `telemetry` sections, as plain JSON-ready dicts.

Contract: `hardware_section` lists each GPU's identity (name, UUID, memory, driver, CUDA, power
limit, MIG/ECC mode), the host's CPU count and memory, and the NVML status ("ok", or why not).
`telemetry_section` turns sampler traces into series with `t_s` = seconds since `origin_ns` (the
run's start on the same `perf_counter_ns` clock as its steps), at most `max_points` per series
(600 by default). Static fields (UUID, name, totals, limits) live in `hardware` only, so each trace
point carries only what changes, and a field that is n/a is left out of the point rather than
written as null: a 600-point GPU trace is about 125 kB of JSON. `Snapshot` types them as
`snapshot.sections.HardwareSection` and `TelemetrySection`; keys those do not name (`spec_decode`)
are kept as extras.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Final

from gputui.telemetry.sampler import TelemetrySampler, Traces, downsample, flatten_states
from gputui.telemetry.samples import GpuIdentity, GpuSample, HostSample, ServerSample
from gputui.telemetry.spec_decode import run_spec_decode

MAX_POINTS: Final = 600

GPU_TRACE_FIELDS: Final = (
    "index",
    "temperature_c",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "power_w",
    "utilization_gpu_pct",
    "memory_used_bytes",
    "throttle_reasons",
    "fan_pct",
    "pstate",
)
SERVER_TRACE_FIELDS: Final = (
    "requests_running",
    "requests_waiting",
    "kv_cache_usage",
    "preemptions_total",
    "prompt_tokens_total",
    "generation_tokens_total",
    "spec_draft_tokens_total",
    "spec_accepted_tokens_total",
    "spec_accept_rate",
)
HOST_TRACE_FIELDS: Final = (
    "cpu_pct",
    "cpu_busiest_core_pct",
    "mem_used_bytes",
    "swap_used_bytes",
    "swap_in_pages_per_s",
    "swap_out_pages_per_s",
)


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, tuple):
        return list(value)
    return value


def trace_point(
    sample: GpuSample | ServerSample | HostSample, fields: Sequence[str], origin_ns: int
) -> dict[str, Any]:
    """One trace point: `t_s` from `origin_ns` and the fields that are not n/a."""
    point: dict[str, Any] = {"t_s": round((sample.t_ns - origin_ns) / 1e9, 3)}
    for name in fields:
        value = getattr(sample, name)
        if value is not None:
            point[name] = _round(value)
    return point


def hardware_section(
    identities: Sequence[GpuIdentity],
    *,
    nvml_status: str,
    gpu_source: str | None = None,
    host_mem_total_bytes: int | None = None,
    backend: str | None = None,
) -> dict[str, Any]:
    """What the run ran on (see the module docstring)."""
    return {
        "gpus": [i.to_dict() for i in identities],
        "gpu_source": gpu_source,
        "driver_version": next((i.driver_version for i in identities if i.driver_version), None),
        "cuda_version": next((i.cuda_version for i in identities if i.cuda_version), None),
        "host": {"cpu_count": os.cpu_count(), "mem_total_bytes": host_mem_total_bytes},
        "nvml": nvml_status,
        "server_backend": backend,
    }


def telemetry_section(
    traces: Traces, origin_ns: int, max_points: int = MAX_POINTS
) -> dict[str, Any]:
    """Downsampled GPU, server and host series with times relative to `origin_ns`."""
    by_gpu: dict[int, list[GpuSample]] = {}
    for sample in traces.gpu:
        by_gpu.setdefault(sample.index, []).append(sample)
    gpu = [
        trace_point(s, GPU_TRACE_FIELDS, origin_ns)
        for index in sorted(by_gpu)
        for s in downsample(by_gpu[index], max_points)
    ]
    return {
        "gpu": gpu,
        "server": [
            trace_point(s, SERVER_TRACE_FIELDS, origin_ns)
            for s in downsample(traces.server, max_points)
        ],
        "host": [
            trace_point(s, HOST_TRACE_FIELDS, origin_ns)
            for s in downsample(traces.host, max_points)
        ],
    }


def hardware_from_sampler(sampler: TelemetrySampler) -> dict[str, Any]:
    """The hardware section, from a running or stopped sampler."""
    frame = sampler.latest()
    server = frame.server
    identities = sampler.identities() or tuple(
        # No GPU port (e.g. the GPU comes from the server's DCGM lines): the samples say who.
        GpuIdentity(
            index=g.index, uuid=g.uuid, name=g.name, memory_total_bytes=g.memory_total_bytes
        )
        for g in frame.gpus
    )
    return hardware_section(
        identities,
        nvml_status=sampler.nvml_status,
        gpu_source=sampler.gpu_source,
        host_mem_total_bytes=frame.host.mem_total_bytes if frame.host else None,
        backend=server.backend if server else None,
    )


def sections_from_sampler(
    sampler: TelemetrySampler, origin_ns: int, max_points: int = MAX_POINTS
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(hardware, telemetry) for a snapshot, from a running or stopped sampler."""
    frame = sampler.latest()
    hardware = hardware_from_sampler(sampler)
    telemetry = telemetry_section(sampler.traces(downsample_to=None), origin_ns, max_points)
    telemetry["sources"] = flatten_states(frame.states)
    spec = run_spec_decode(sampler.traces(downsample_to=None).server)
    if spec is not None:
        telemetry["spec_decode"] = spec
    return hardware, telemetry
