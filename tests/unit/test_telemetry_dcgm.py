"""dcgm-exporter series -> GpuSample: exporter text, the simulator's lines, old names, MIG."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from gputui.catalog.specs import GPUS
from gputui.errors import MetricsUnavailable
from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.telemetry import dcgm
from gputui.telemetry.dcgm import DcgmSource, gpu_samples, has_dcgm, identities
from gputui.telemetry.prom import parse
from gputui.telemetry.server_metrics import read_metrics

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"
MIB = 1 << 20


def test_exporter_text_two_gpus() -> None:
    index = parse((FIXTURES / "dcgm_exporter.txt").read_text())
    assert has_dcgm(index)
    g0, g1 = gpu_samples(index, 9)
    assert (g0.index, g1.index) == (0, 1)
    assert g0.uuid == "GPU-11111111-2222-3333-4444-555555555555"
    assert g0.name == "NVIDIA H100 80GB HBM3"
    assert g0.source == "dcgm"
    assert g0.t_ns == 9
    assert g0.temperature_c == 63
    assert (g0.sm_clock_mhz, g0.mem_clock_mhz) == (1980, 2619)
    assert g0.power_w == pytest.approx(631.2)  # already W
    assert g0.utilization_gpu_pct == 100
    assert g0.memory_used_bytes == 74000 * MIB
    assert g0.memory_reserved_bytes == 759 * MIB
    assert g0.memory_total_bytes == (74000 + 6800 + 759) * MIB
    assert g0.throttle_reasons == ()
    assert g1.throttle_reasons == ("sw_power_cap", "sw_thermal_slowdown")
    assert g1.sm_clock_mhz == 1755
    assert g0.fan_pct is None  # not in the default counters
    (i0, _) = identities(index, (g0, g1))
    assert i0.driver_version == "570.133.20"
    assert i0.pci_bus_id == "00000000:18:00.0"


def test_blank_sentinel_and_old_namespace_and_compat_names() -> None:
    text = (
        "# TYPE dcgm_gpu_temp gauge\n"
        'dcgm_gpu_temp{gpu="0",uuid="GPU-aaaa"} 9223372036854775794\n'
        "# TYPE dcgm_sm_clock gauge\n"
        'dcgm_sm_clock{gpu="0",uuid="GPU-aaaa"} 1410\n'
        "# TYPE dcgm_power_usage gauge\n"
        'dcgm_power_usage{gpu="0",uuid="GPU-aaaa"} 250.5\n'
    )
    (g,) = gpu_samples(parse(text), 0)
    assert g.uuid == "GPU-aaaa"
    assert g.temperature_c is None
    assert g.sm_clock_mhz == 1410
    assert g.power_w == pytest.approx(250.5)


def test_mig_instance_series_only_set_mig_mode() -> None:
    text = (
        "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
        'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-m",modelName="NVIDIA A100-SXM4-80GB"} 50\n'
        "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
        'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-m",GPU_I_PROFILE="1g.10gb",GPU_I_ID="7"} 900\n'
    )
    (g,) = gpu_samples(parse(text), 0)
    assert g.mig_mode is True
    assert g.temperature_c == 50
    assert g.memory_used_bytes is None


@pytest.mark.parametrize("gpu", ["a100-80gb-pcie", "rtx4090-48gb"])
def test_simulator_dcgm_lines(gpu: str) -> None:
    profile = GpuProfileSpec(gpu=gpu, model="llama-3.1-8b").build()
    view = read_metrics(profile.prometheus_text(), 3)
    assert view.backend == "vllm"
    (g,) = view.gpus
    spec = GPUS[gpu]
    assert g.name == spec.nvml_name
    assert g.uuid == profile.uuid
    assert g.memory_total_bytes == spec.memory_bytes
    assert g.mem_clock_mhz == spec.mem_clock_mhz
    assert g.temperature_c is not None
    assert g.temperature_c >= spec.ambient_c - 1
    assert g.power_w is not None
    assert g.power_w > 0
    assert g.sm_clock_mhz is not None
    assert g.throttle_reasons == ("gpu_idle",)
    assert view.server is not None
    assert view.server.kv_blocks_total == profile.device.plan.num_blocks


def _source(body: str) -> DcgmSource:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, text=body))
    return DcgmSource("http://h:9400/metrics", client=httpx.Client(transport=transport))


def test_source_scrapes_identities_and_health() -> None:
    source = _source((FIXTURES / "dcgm_exporter.txt").read_text())
    assert [i.uuid for i in source.identities()][1] == "GPU-66666666-7777-8888-9999-000000000000"
    assert len(source.sample()) == 2
    assert source.health(0).ecc_volatile_corrected is None  # ECC fields off by default
    source.close()


def test_source_needs_dcgm_series() -> None:
    source = _source((FIXTURES / "vllm_v1.txt").read_text())
    with pytest.raises(MetricsUnavailable, match="no DCGM_FI_"):
        source.sample()
    source.close()
    assert dcgm.FIELDS["power_w"][0] == "DCGM_FI_DEV_POWER_USAGE"
