"""Power, temperature and clock model: throttling under sustained load, recovery when idle."""

from __future__ import annotations

import pytest

from gputui.catalog.specs import GPUS
from gputui.sim.thermal import (
    GPU_IDLE,
    HW_THERMAL_SLOWDOWN,
    SW_POWER_CAP,
    SW_THERMAL_SLOWDOWN,
    ThermalModel,
)

THERMAL_BITS = SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN


def seconds_until_thermal_throttle(gpu: str, limit_s: int = 900, share: float = 1.0) -> int | None:
    t = ThermalModel(GPUS[gpu])
    for second in range(1, limit_s + 1):
        t.advance(1.0, busy_frac=1.0, compute_share=share)
        if t.throttle_reasons & THERMAL_BITS:
            return second
    return None


@pytest.mark.parametrize("gpu", ["rtx4090-24gb", "rtx4090-48gb"])
def test_4090_throttles_within_five_minutes_of_full_load(gpu: str) -> None:
    when = seconds_until_thermal_throttle(gpu)
    assert when is not None
    assert when <= 300


def test_a100_stays_cooler_and_does_not_thermally_throttle() -> None:
    assert seconds_until_thermal_throttle("a100-80gb-pcie") is None
    a100, rtx = ThermalModel(GPUS["a100-80gb-pcie"]), ThermalModel(GPUS["rtx4090-48gb"])
    for _ in range(300):
        a100.advance(1.0, 1.0, 1.0)
        rtx.advance(1.0, 1.0, 1.0)
    assert a100.temp_c < rtx.temp_c - 10
    assert a100.throttle_reasons == SW_POWER_CAP  # compute-bound work runs power-capped


def test_blower_48gb_card_throttles_even_on_decode_heavy_load() -> None:
    assert seconds_until_thermal_throttle("rtx4090-48gb", share=0.3) is not None


def test_throttled_clock_slows_compute_and_holds_the_limit() -> None:
    gpu = GPUS["rtx4090-48gb"]
    t = ThermalModel(gpu)
    for _ in range(900):
        t.advance(1.0, 1.0, 1.0)
    assert t.clock_ratio < 0.95
    assert t.sm_clock_mhz == t.active_clock_mhz < gpu.boost_clock_mhz
    assert t.sm_clock_mhz % 15 == 0  # clock bins
    assert t.temp_c == pytest.approx(gpu.sw_thermal_limit_c, abs=2.0)
    assert t.temp_c < gpu.hw_slowdown_c
    assert t.power_w <= gpu.tdp_w


def test_recovers_when_idle() -> None:
    gpu = GPUS["rtx4090-48gb"]
    t = ThermalModel(gpu)
    for _ in range(600):
        t.advance(1.0, 1.0, 1.0)
    assert t.throttled
    t.advance(900.0, busy_frac=0.0)
    assert t.throttle_reasons == GPU_IDLE
    assert t.sm_clock_mhz == gpu.idle_clock_mhz
    assert t.clock_ratio > 0.95  # thermal bins all regained (a compute burst may be power-capped)
    assert t.power_w == pytest.approx(gpu.idle_power_w)
    assert t.util_frac < 0.01


def test_power_and_utilisation_follow_load() -> None:
    gpu = GPUS["a100-80gb-pcie"]
    t = ThermalModel(gpu)
    assert t.power_w == gpu.idle_power_w
    t.advance(5.0, busy_frac=0.5, compute_share=0.0)
    half_power = t.power_w
    assert gpu.idle_power_w < half_power < gpu.tdp_w
    assert t.util_frac == pytest.approx(0.5, abs=0.01)
    t.advance(5.0, busy_frac=1.0, compute_share=0.0)
    assert t.power_w > half_power
    assert t.util_frac > 0.99


def test_step_size_does_not_change_the_temperature() -> None:
    coarse, fine = ThermalModel(GPUS["h100-sxm"]), ThermalModel(GPUS["h100-sxm"])
    coarse.advance(60.0, 1.0, 0.5)
    for _ in range(6000):
        fine.advance(0.01, 1.0, 0.5)
    assert coarse.temp_c == pytest.approx(fine.temp_c, abs=0.2)
