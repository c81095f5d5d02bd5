"""Burn: trace analysis on synthetic samples, the loop on the NumPy stand-in, acceptance section."""

from __future__ import annotations

from typing import Any

import pytest

from gputui.node.acceptance import acceptance_section
from gputui.node.backends import DeviceFailure, DeviceInfo
from gputui.node.burn import TracePoint, analyze_trace, burn_json, burn_report, run_burn
from gputui.node.hostmem import NumpyBackend, NumpyGemm
from gputui.node.vram_check import run_vram_check
from tests.unit.test_node_fakes import ScriptedPort

MIB = 1 << 20
BURN_KEYS = {
    "gpu",
    "name",
    "seconds",
    "trace",
    "first_throttle_s",
    "first_throttle_reasons",
    "steady_sm_clock_mhz",
    "max_sm_clock_mhz",
    "steady_clock_fraction",
    "max_temperature_c",
}


def _trace(n: int = 100) -> list[TracePoint]:
    """1 Hz: idle bit at 0 s, full clock, power cap from 12 s, thermal slowdown from 60 s."""
    points = []
    reasons: tuple[str, ...]
    for t in range(n):
        if t == 0:
            clock, reasons, mask = 2520, (), 0x1
        elif t < 12:
            clock, reasons, mask = 2520, (), 0x0
        elif t < 60:
            clock, reasons, mask = 2400, ("sw_power_cap",), 0x4
        else:
            clock, reasons, mask = 2100 + (t % 3), ("sw_power_cap", "sw_thermal_slowdown"), 0x24
        points.append(
            TracePoint(
                t_s=float(t),
                sm_clock_mhz=clock,
                sm_clock_max_mhz=3120,
                temperature_c=60.0 + t * 0.3,
                power_w=440.0,
                throttle_mask=mask,
                throttle_reasons=reasons,
            )
        )
    return points


def test_analysis_first_throttle_steady_clock_and_shares() -> None:
    s = analyze_trace(_trace())
    assert s.samples == 100
    assert s.first_throttle_s == 12.0
    assert s.first_throttle_reasons == ("sw_power_cap",)
    assert s.steady_sm_clock_mhz == 2101.0  # median of the last 30 samples (t = 70..99)
    assert s.max_sm_clock_mhz == 3120 and s.max_clock_source == "nvml"
    assert s.steady_clock_fraction == pytest.approx(2101 / 3120)
    assert s.max_temperature_c == pytest.approx(60 + 99 * 0.3)
    assert s.throttle_share == {"sw_power_cap": 0.88, "sw_thermal_slowdown": 0.4}
    assert s.thermal


def test_idle_is_not_throttling_and_empty_trace_is_all_none() -> None:
    idle = [TracePoint(t_s=0.0, sm_clock_mhz=210, throttle_mask=0x1)]
    assert analyze_trace(idle).first_throttle_s is None
    empty = analyze_trace([])
    assert empty.samples == 0
    assert empty.first_throttle_s is None and empty.steady_sm_clock_mhz is None
    assert empty.steady_clock_fraction is None and empty.max_temperature_c is None


def test_max_clock_falls_back_to_catalog_then_observed() -> None:
    points = [TracePoint(t_s=float(t), sm_clock_mhz=1800 + t) for t in range(10)]
    by_catalog = analyze_trace(points, catalog_boost_mhz=2520)
    assert (by_catalog.max_sm_clock_mhz, by_catalog.max_clock_source) == (2520, "catalog")
    assert by_catalog.steady_sm_clock_mhz == 1808.0  # the last 3 of 10: 1807, 1808, 1809
    observed = analyze_trace(points)
    assert (observed.max_sm_clock_mhz, observed.max_clock_source) == (1809, "observed")


def _burn(port: ScriptedPort | None, backend: NumpyBackend | None = None, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "gpu": 0,
        "name": "NVIDIA GeForce RTX 4090",
        "port": port,
        "port_index": 0,
        "telemetry": "nvml" if port else "unavailable: no NVML",
        "seconds": 0.3,
        "interval_s": 0.01,
        "size": 256,
    }
    return run_burn(backend or NumpyBackend(), **(args | kw))


def test_burn_records_the_trace_and_finds_the_throttle() -> None:
    port = ScriptedPort(script=[(2520, 50.0, 300.0, 0x0)] * 3 + [(2200, 84.0, 449.0, 0x24)])
    result = _burn(port)
    assert len(result.trace) >= 5
    assert result.gemm_count > 0 and result.tflops > 0
    assert result.compute_checks >= 1 and result.compute_mismatches == 0
    s = result.summary
    assert s.first_throttle_reasons == ("sw_power_cap", "sw_thermal_slowdown")
    assert 0 < s.first_throttle_s < 0.3
    assert s.steady_sm_clock_mhz == 2200.0
    assert s.steady_clock_fraction == pytest.approx(2200 / 3120)
    assert result.verdict == "warn"  # thermal
    doc = burn_json(result)
    assert set(doc) >= BURN_KEYS
    assert doc["trace"][0]["sm_clock_mhz"] == 2520
    assert doc["trace"][-1]["clock_event_reasons"] == ["sw_power_cap", "sw_thermal_slowdown"]
    text = burn_report(result)
    assert "throttle  first at" in text and "(sw_power_cap, sw_thermal_slowdown)" in text


def test_burn_without_telemetry_still_runs() -> None:
    result = _burn(None, seconds=0.05)
    assert result.trace == () and result.summary.first_throttle_s is None
    assert any("no GPU telemetry" in n for n in result.notes)
    assert result.verdict == "warn"


class WrongGemm(NumpyGemm):
    def verify(self) -> bool:
        return False


class Flaky(NumpyBackend):
    def __init__(self, gemm: type[NumpyGemm] = WrongGemm, fail_after: int | None = None) -> None:
        super().__init__()
        self.gemm_type, self.fail_after = gemm, fail_after

    def make_gemm(self, size: int) -> NumpyGemm:
        gemm = self.gemm_type(min(size, 64))
        if self.fail_after is not None:
            runs = [0]
            limit = self.fail_after
            original = gemm.run

            def run(count: int) -> None:
                runs[0] += 1
                if runs[0] > limit:
                    raise RuntimeError("CUDA error: unspecified launch failure")
                original(count)

            gemm.run = run  # type: ignore[method-assign]
        return gemm


def test_wrong_results_fail_the_burn() -> None:
    result = _burn(ScriptedPort(script=[(2520, 50.0, 300.0, 0)]), Flaky(), seconds=0.05)
    assert result.compute_mismatches == result.compute_checks >= 1
    assert result.verdict == "fail"


def test_device_error_mid_burn_is_one_line() -> None:
    port = ScriptedPort(script=[(2520, 50.0, 300.0, 0)])
    with pytest.raises(DeviceFailure, match=r"GPU 0 failed [\d.]+ s into the burn: CUDA error"):
        _burn(port, Flaky(NumpyGemm, fail_after=2))
    assert port.calls >= 1


class Interrupted(NumpyBackend):
    def make_gemm(self, size: int) -> NumpyGemm:
        gemm = NumpyGemm(64)

        def run(count: int) -> None:
            raise KeyboardInterrupt

        gemm.run = run  # type: ignore[method-assign]
        return gemm


def test_ctrl_c_keeps_what_was_measured() -> None:
    result = _burn(ScriptedPort(script=[(2520, 50.0, 300.0, 0)]), Interrupted(), seconds=60)
    assert result.interrupted and result.seconds < 5
    assert "(interrupted)" in burn_report(result)


def test_acceptance_section_combines_both() -> None:
    assert acceptance_section(None, None) == {
        "verdict": "not run",
        "findings": [],
        "vram_check": None,
        "burn": None,
    }
    backend = NumpyBackend(4 * MIB)
    vram = run_vram_check(
        backend,
        gpu=0,
        devices=(DeviceInfo(0, "NVIDIA GeForce RTX 4090", 49140 * MIB),),
        fraction=0.5,
        patterns=("address",),
    )
    port = ScriptedPort(script=[(2520, 50.0, 300.0, 0x4)])
    burn = _burn(port, seconds=0.2, interval_s=0.001)
    section = acceptance_section(vram, burn, max_trace_points=10)
    assert section["verdict"] == "pass"
    assert len(section["burn"]["trace"]) <= 10
    assert section["vram_check"]["checked_bytes"] == 2 * MIB
    assert "1 device: one card holds all 48.0 GiB" in section["findings"]
    assert any(
        f.startswith("power throttling from 0 s (sw_power_cap)") for f in section["findings"]
    )
