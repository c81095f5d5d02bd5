"""The snapshot's hardware and telemetry sections: small, relative times, loadable by the schema."""

from __future__ import annotations

import json

import pytest

from gputui.snapshot.models import SlaBounds, Snapshot, Target, Workload
from gputui.telemetry.nvml import NvmlSource
from gputui.telemetry.sampler import TelemetrySampler, Traces
from gputui.telemetry.samples import GpuSample, HostSample, ServerSample
from gputui.telemetry.snapshot_sections import (
    hardware_section,
    sections_from_sampler,
    telemetry_section,
)
from tests.fakes.fake_nvml import A100_80GB_PCIE, RTX_4090, FakeNvml

ORIGIN_NS = 10_000_000_000


def traces(n: int) -> Traces:
    gpu = tuple(
        GpuSample(
            index=i,
            uuid=f"GPU-{i}",
            name="X",
            t_ns=ORIGIN_NS + k * 250_000_000,
            temperature_c=60.0 + k * 0.001,
            sm_clock_mhz=1410,
            mem_clock_mhz=1512,
            power_w=250.0 + k * 0.01,
            utilization_gpu_pct=97.0,
            memory_used_bytes=77309411328,
            throttle_reasons=("sw_power_cap",),
            throttle_mask=4,
            fan_pct=None,
            pstate=0,
        )
        for k in range(n)
        for i in (0, 1)
    )
    server = tuple(
        ServerSample(t_ns=ORIGIN_NS + k * 1_000_000_000, backend="vllm", requests_running=k)
        for k in range(n)
    )
    host = (HostSample(t_ns=ORIGIN_NS - 500_000_000, cpu_pct=12.5),)
    return Traces(gpu=gpu, server=server, host=host)


def test_telemetry_section_is_downsampled_and_relative() -> None:
    section = telemetry_section(traces(5000), ORIGIN_NS, max_points=600)
    gpu0 = [p for p in section["gpu"] if p["index"] == 0]
    assert len(gpu0) == 600
    assert len(section["gpu"]) == 1200
    assert gpu0[0]["t_s"] == 0.0
    assert gpu0[-1]["t_s"] == pytest.approx(4999 * 0.25)
    assert gpu0[0]["throttle_reasons"] == ["sw_power_cap"]
    assert "uuid" not in gpu0[0]  # static fields live in `hardware`
    assert len(section["server"]) == 600
    assert section["server"][-1]["requests_running"] == 4999
    assert "fan_pct" not in gpu0[0]  # n/a fields are left out, not written as null
    assert section["host"] == [{"t_s": -0.5, "cpu_pct": 12.5}]
    assert len(json.dumps(section)) < 350_000  # ~125 kB per GPU: two GPUs and the server


def test_sections_from_a_sampler_fit_in_a_snapshot() -> None:
    nvml = FakeNvml(cards=(A100_80GB_PCIE, RTX_4090))
    sampler = TelemetrySampler(gpu=NvmlSource(nvml), nvml_status="ok", gpu_interval_s=0.01)
    with sampler:
        while len(sampler.traces().gpu) < 6:
            pass
    hardware, telemetry = sections_from_sampler(sampler, origin_ns=0)
    assert hardware["nvml"] == "ok"
    assert hardware["gpu_source"] == "nvml"
    assert hardware["driver_version"] == "570.133.20"
    assert hardware["cuda_version"] == "12.8"
    assert [g["name"] for g in hardware["gpus"]] == [A100_80GB_PCIE.name, RTX_4090.name]
    assert hardware["host"]["cpu_count"] >= 1
    assert telemetry["sources"]["gpu"] == "nvml: ok"
    assert len(telemetry["gpu"]) >= 6
    base = Snapshot(
        complete=True,
        target=Target(url="http://x/v1", model="m", endpoint="completions"),
        workload=Workload(input_tokens=1, output_tokens=1, endpoint="completions"),
        sla=SlaBounds(),
    )
    snapshot = Snapshot.model_validate(
        {**base.model_dump(), "hardware": hardware, "telemetry": telemetry}
    )
    dumped = snapshot.model_dump(mode="json")
    again = Snapshot.model_validate_json(json.dumps(dumped))
    assert again.model_dump(mode="json")["hardware"] == hardware


def test_hardware_without_gpus() -> None:
    section = hardware_section([], nvml_status="unavailable: NVML: library not found")
    assert section["gpus"] == []
    assert section["driver_version"] is None
    assert section["nvml"].startswith("unavailable")
