"""NVML through the fake module: both cards, NotSupported fields, missing library and no GPU."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gputui.errors import NvmlUnavailable
from gputui.telemetry.nvml import NvmlSource
from tests.fakes.fake_nvml import (
    A100_80GB_PCIE,
    RTX_4090,
    FakeNvml,
    NVMLError,
    NVMLError_GpuIsLost,
    NVMLError_NotSupported,
)

SRC = Path(__file__).resolve().parents[2] / "src" / "gputui"
MIB = 1 << 20


def test_fake_errors_behave_like_pynvml() -> None:
    err = NVMLError(3)
    assert type(err) is NVMLError_NotSupported
    assert isinstance(err, NVMLError)
    assert err.value == 3
    assert str(err) == "Not Supported"
    assert isinstance(NVMLError(15), NVMLError_GpuIsLost)


def test_fake_matches_the_real_error_codes_and_constants() -> None:
    pynvml = pytest.importorskip("pynvml")
    fake = FakeNvml()
    for name in (
        "NVML_ERROR_NOT_SUPPORTED",
        "NVML_ERROR_LIBRARY_NOT_FOUND",
        "NVML_ERROR_GPU_IS_LOST",
    ):
        assert getattr(fake, name) == getattr(pynvml, name)
    for name in ("NVML_CLOCK_SM", "NVML_CLOCK_MEM", "NVML_TEMPERATURE_GPU", "nvmlMemory_v2"):
        assert getattr(fake, name) == getattr(pynvml, name)
    real_functions = {n for n in dir(pynvml) if n.startswith("nvml")}
    fake_functions = {n for n in dir(FakeNvml) if n.startswith("nvml") and n != "nvmlMemory_v2"}
    assert fake_functions <= real_functions


def test_a100_reads_every_field_but_the_fan() -> None:
    nvml = FakeNvml(cards=(A100_80GB_PCIE,))
    source = NvmlSource(nvml)
    (s,) = source.sample()
    assert s.name == "NVIDIA A100 80GB PCIe"
    assert s.uuid == A100_80GB_PCIE.uuid
    assert s.temperature_c == 61.0
    assert (s.sm_clock_mhz, s.sm_clock_max_mhz) == (1410, 1410)
    assert (s.mem_clock_mhz, s.mem_clock_max_mhz) == (1512, 1512)
    assert s.power_w == pytest.approx(251.43)  # mW -> W
    assert s.power_limit_w == 300.0
    assert s.utilization_gpu_pct == 97.0
    assert s.memory_total_bytes == 81920 * MIB
    assert s.memory_used_bytes == 73728 * MIB
    assert s.memory_reserved_bytes == 594 * MIB  # the v2 call
    assert s.throttle_reasons == ("sw_power_cap",)
    assert s.throttle_mask == 0x4
    assert s.fan_pct is None  # passive data-center card: NotSupported -> n/a
    assert (s.pcie_gen, s.pcie_width) == (4, 16)
    assert s.ecc_volatile_errors == 2
    assert s.mig_mode is False
    assert s.pstate == 0
    assert s.source == "nvml"
    assert source.errors["nvmlDeviceGetFanSpeed"] == "Not Supported"
    (ident,) = source.identities()
    assert ident.driver_version == "570.133.20"
    assert ident.cuda_version == "12.8"
    assert ident.ecc_mode is True
    assert ident.serial == "1324021012345"
    assert ident.pci_bus_id == "00000000:17:00.0"
    health = source.health(0)
    assert health.ecc_mode is True
    assert health.ecc_volatile_corrected == 2
    assert health.ecc_aggregate_uncorrected == 0
    assert health.remapped_rows_correctable == 0
    assert health.remapped_rows_failure is False
    assert health.retired_pages_sbe is None  # row remapping replaced page retirement on Ampere


def test_geforce_not_supported_fields_become_none() -> None:
    source = NvmlSource(FakeNvml(cards=(RTX_4090,)))
    (s,) = source.sample()
    assert s.name == "NVIDIA GeForce RTX 4090"
    assert s.fan_pct == 78.0
    assert s.throttle_reasons == ("sw_power_cap", "sw_thermal_slowdown")
    assert s.ecc_volatile_errors is None
    assert s.mig_mode is None
    assert s.memory_reserved_bytes == 434 * MIB  # v2 memory works on GeForce
    (ident,) = source.identities()
    assert (ident.ecc_mode, ident.mig_mode, ident.serial) == (None, None, None)
    health = source.health(0)
    assert all(value is None for value in health.to_dict().values())


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("no_library", "libnvidia-ml.so.1"),
        ("no_driver", "driver is not loaded"),
        ("no_gpu", "no NVIDIA GPU"),
    ],
)
def test_missing_library_driver_or_gpu_is_a_clear_error(mode: str, message: str) -> None:
    nvml = FakeNvml(mode=mode)  # type: ignore[arg-type]
    with pytest.raises(NvmlUnavailable, match=message):
        NvmlSource(nvml)
    assert nvml.init_count == 0  # initialised nothing or shut down again


def test_real_pynvml_without_a_driver_raises_unavailable() -> None:
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver")
    with pytest.raises(NvmlUnavailable):
        NvmlSource()


def test_old_driver_falls_back_to_older_calls() -> None:
    nvml = FakeNvml(
        cards=(A100_80GB_PCIE,),
        function_not_found=frozenset(
            {
                "nvmlDeviceGetMemoryInfo_v2",
                "nvmlDeviceGetTemperatureV",
                "nvmlDeviceGetCurrentClocksEventReasons",
                "nvmlSystemGetCudaDriverVersion_v2",
            }
        ),
    )
    source = NvmlSource(nvml)
    (s,) = source.sample()
    assert s.memory_total_bytes == 81920 * MIB
    assert s.memory_reserved_bytes is None  # v1 has no reserved field
    assert s.temperature_c == 61.0
    assert s.throttle_mask == 0x4
    assert source.cuda_version == "12.8"
    assert nvml.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 1


def test_slow_fields_are_cached_between_fast_samples() -> None:
    now = [0]
    nvml = FakeNvml(cards=(A100_80GB_PCIE, RTX_4090))
    source = NvmlSource(nvml, slow_interval_s=5.0, clock=lambda: now[0])
    for step in range(8):  # 2 s at 4 Hz
        now[0] = step * 250_000_000
        samples = source.sample()
    assert [s.index for s in samples] == [0, 1]
    assert nvml.calls["nvmlDeviceGetPowerUsage"] == 16
    assert nvml.calls["nvmlDeviceGetEnforcedPowerLimit"] == 2  # once per GPU
    now[0] = 5_000_000_000
    source.sample()
    assert nvml.calls["nvmlDeviceGetEnforcedPowerLimit"] == 4


def test_a_lost_gpu_yields_nones_not_an_exception() -> None:
    nvml = FakeNvml(cards=(A100_80GB_PCIE, RTX_4090))
    source = NvmlSource(nvml, slow_interval_s=0.0)
    nvml.lost.add(1)
    lost = source.sample()[1]
    assert lost.uuid == RTX_4090.uuid  # identity read at start
    assert lost.temperature_c is None
    assert lost.power_w is None
    assert source.errors["nvmlDeviceGetPowerUsage"] == "GPU is lost"


def test_readings_change_between_samples() -> None:
    nvml = FakeNvml(cards=(RTX_4090,))
    source = NvmlSource(nvml)
    nvml.set_card(0, temperature_c=91, throttle_mask=0x48, pstate=32)
    (s,) = source.sample()
    assert s.temperature_c == 91.0
    assert s.throttle_reasons == ("hw_slowdown", "hw_thermal_slowdown")
    assert s.pstate is None  # 32 = unknown


def test_close_shuts_nvml_down_once() -> None:
    nvml = FakeNvml()
    source = NvmlSource(nvml)
    assert nvml.init_count == 1
    source.close()
    source.close()
    assert nvml.init_count == 0


def test_only_nvml_py_imports_pynvml() -> None:
    importers = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n.split(".")[0] == "pynvml" for n in names):
                importers.append(path.relative_to(SRC).as_posix())
    assert importers == ["telemetry/nvml.py"]


@pytest.mark.gpu
def test_real_gpu_reads_identity_and_live_fields() -> None:
    """On a machine with an NVIDIA GPU: the real library through the same code path."""
    try:
        source = NvmlSource()
    except NvmlUnavailable as exc:
        pytest.skip(f"no NVIDIA GPU here: {exc}")
    try:
        identities = source.identities()
        samples = source.sample()
    finally:
        source.close()
    assert identities
    assert identities[0].driver_version
    assert identities[0].uuid.startswith(("GPU-", "MIG-"))
    assert samples[0].memory_total_bytes
    assert samples[0].temperature_c is not None
    assert samples[0].throttle_reasons is not None
