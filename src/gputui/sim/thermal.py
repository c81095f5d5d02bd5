"""Power, temperature and SM-clock model of the simulated GPU, and its throttle-reason bitmask.

Contract: `ThermalModel.advance(dt_s, busy_frac, compute_share)` moves the card forward by `dt_s`
seconds (virtual or real) during which it was busy `busy_frac` of the time. Afterwards `temp_c`,
`power_w`, `sm_clock_mhz`, `util_frac`, `throttle_reasons` and `energy_j` (the total-energy
counter: the integral of the true, unaveraged power) describe the card as NVML/DCGM would,
and `clock_ratio` (current clock / boost clock) is what the roofline's compute term is scaled by.

Model (all constants below; per-card figures in `catalog.GpuSpec`):
- Busy power = idle + (TDP - idle) x PEAK_DEMAND_OVER_TDP x activity x (clock / boost)^k, where
  activity is MEM_BOUND_POWER_FRACTION for a bandwidth-bound pass and 1 for a compute-bound one.
  Average power over a step weights busy and idle power by the busy fraction. The power limit is
  enforced within the step (board firmware acts in milliseconds), so power <= TDP; the reported
  `power_w` is averaged over UTIL_TIME_CONSTANT_S like NVML's reading, so a metrics scrape just
  after a burst does not show the idle draw of the last few milliseconds.
- Temperature is first order: T approaches ambient + R x power with time constant tau (exact
  exponential update, so step size does not matter).
- Every CONTROL_PERIOD_S a GPU-Boost-like controller picks the clock: above the SW thermal limit it
  bins the clock down (reason 0x20), below limit - hysteresis it bins back up; the power-cap clock
  (0x04) is the highest bin whose busy power fits the TDP; at the HW slowdown temperature the clock
  is halved (0x40 | 0x08). NVML bit values: reference.md §1.3. Idle cards report their idle clock
  and reason 0x01 (GpuIdle), which a "throttled" display ignores.
"""

from __future__ import annotations

import math
from typing import Final

from gputui.catalog.specs import GpuSpec

GPU_IDLE: Final = 0x001
SW_POWER_CAP: Final = 0x004
HW_SLOWDOWN: Final = 0x008
SW_THERMAL_SLOWDOWN: Final = 0x020
HW_THERMAL_SLOWDOWN: Final = 0x040
THROTTLED_MASK: Final = (
    SW_POWER_CAP | HW_SLOWDOWN | SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN | 0x080
)
"""Reasons that mean "slowed under load" (reference §1.3: 0x4|0x8|0x20|0x40|0x80)."""

CONTROL_PERIOD_S: Final = 0.5
"""How often the clock controller re-decides (GPU Boost reacts on a sub-second scale)."""
CLOCK_BIN_MHZ: Final = 15
"""NVIDIA clock bins on Ampere, Ada and Hopper are 15 MHz apart."""
THERMAL_BINS_DOWN: Final = 2
"""Bins dropped per control period while over the SW thermal limit."""
THERMAL_BINS_UP: Final = 1
"""Bins regained per control period once cooler than limit - hysteresis."""
THERMAL_HYSTERESIS_C: Final = 2.0
MIN_CLOCK_FRACTION: Final = 0.5
"""Floor of SW thermal slowdown as a fraction of boost; below that only HW slowdown acts."""
POWER_CLOCK_EXPONENT: Final = 2.5
"""Dynamic power ~ f x V^2 with voltage rising along the DVFS curve: between f^2 and f^3."""
PEAK_DEMAND_OVER_TDP: Final = 1.10
"""Dense GEMMs at full boost would draw ~10 % above the board limit, which is why compute-bound
work on 4090s and A100s runs power-capped a few bins below boost."""
MEM_BOUND_POWER_FRACTION: Final = 0.8
"""Share of that dynamic power a bandwidth-bound decode pass draws: stalled SMs burn less, while
the memory subsystem runs flat out (4090 decode is typically reported at 300-400 W of 450)."""
UTIL_TIME_CONSTANT_S: Final = 1.0
"""Averaging window of GPU utilisation (NVML samples utilisation over about a second)."""
IDLE_UTIL: Final = 0.02
"""Below this averaged utilisation the card reports its idle clock and the GpuIdle reason."""
MAX_ADVANCE_S: Final = 3600.0
"""Longer gaps are clamped: after an hour every state variable has long reached steady state."""


class ThermalModel:
    """State of one simulated card (see the module docstring for the equations)."""

    __slots__ = (
        "_activity",
        "_since_control_s",
        "_thermal_clock_mhz",
        "active_clock_mhz",
        "energy_j",
        "gpu",
        "power_w",
        "sm_clock_mhz",
        "temp_c",
        "throttle_reasons",
        "util_frac",
    )

    def __init__(self, gpu: GpuSpec) -> None:
        self.gpu = gpu
        self.temp_c = gpu.ambient_c + gpu.thermal_resistance_c_per_w * gpu.idle_power_w
        self.power_w = gpu.idle_power_w
        """Board power averaged over about a second, as NVML's power reading is."""
        self.util_frac = 0.0
        self.energy_j = 0.0
        """Energy drawn since the card was created (the counter NVML and DCGM report, in J)."""
        self.active_clock_mhz = float(gpu.boost_clock_mhz)
        """Clock the card runs work at (reported clock when busy)."""
        self.sm_clock_mhz = float(gpu.idle_clock_mhz)
        self.throttle_reasons = GPU_IDLE
        self._thermal_clock_mhz = float(gpu.boost_clock_mhz)
        self._activity = MEM_BOUND_POWER_FRACTION
        self._since_control_s = 0.0

    @property
    def clock_ratio(self) -> float:
        """Current working clock / boost clock: the factor on the roofline's compute peak."""
        return self.active_clock_mhz / self.gpu.boost_clock_mhz

    @property
    def throttled(self) -> bool:
        """True when a load-related slowdown reason is active (idle excluded)."""
        return bool(self.throttle_reasons & THROTTLED_MASK)

    def busy_power_w(self, activity: float, clock_mhz: float) -> float:
        """Power while a kernel runs, before the power limit is applied."""
        g = self.gpu
        dynamic = (g.tdp_w - g.idle_power_w) * PEAK_DEMAND_OVER_TDP * activity
        scale: float = (clock_mhz / g.boost_clock_mhz) ** POWER_CLOCK_EXPONENT
        return g.idle_power_w + dynamic * scale

    def advance(self, dt_s: float, busy_frac: float, compute_share: float = 0.0) -> None:
        """Move the card forward by `dt_s` seconds at a busy fraction and compute share (0..1)."""
        dt_s = min(dt_s, MAX_ADVANCE_S)
        while dt_s > 0.0:
            step = min(dt_s, CONTROL_PERIOD_S - self._since_control_s)
            self._integrate(step, busy_frac, compute_share)
            dt_s -= step
            self._since_control_s += step
            if self._since_control_s >= CONTROL_PERIOD_S - 1e-9:
                self._since_control_s = 0.0
                self._control()

    def _integrate(self, step_s: float, busy: float, share: float) -> None:
        g = self.gpu
        activity = MEM_BOUND_POWER_FRACTION + (1.0 - MEM_BOUND_POWER_FRACTION) * share
        busy_power = min(self.busy_power_w(activity, self.active_clock_mhz), g.tdp_w)
        power = g.idle_power_w + (busy_power - g.idle_power_w) * busy
        self.energy_j += power * step_s
        steady_c = g.ambient_c + g.thermal_resistance_c_per_w * power
        self.temp_c += (steady_c - self.temp_c) * -math.expm1(-step_s / g.thermal_time_constant_s)
        blend = -math.expm1(-step_s / UTIL_TIME_CONSTANT_S)
        self.util_frac += (busy - self.util_frac) * blend
        if busy > 0.0:
            self._activity += (activity - self._activity) * blend
        self.power_w += (power - self.power_w) * blend

    def _control(self) -> None:
        g = self.gpu
        boost = float(g.boost_clock_mhz)
        floor = MIN_CLOCK_FRACTION * boost
        if self.temp_c > g.sw_thermal_limit_c:
            self._thermal_clock_mhz -= THERMAL_BINS_DOWN * CLOCK_BIN_MHZ
        elif self.temp_c < g.sw_thermal_limit_c - THERMAL_HYSTERESIS_C:
            self._thermal_clock_mhz += THERMAL_BINS_UP * CLOCK_BIN_MHZ
        self._thermal_clock_mhz = min(boost, max(floor, self._thermal_clock_mhz))

        # Highest clock bin at which busy power fits the limit, from P(f) ~ f^k.
        dynamic = (g.tdp_w - g.idle_power_w) * PEAK_DEMAND_OVER_TDP * self._activity
        headroom = (g.tdp_w - g.idle_power_w) / dynamic
        power_clock = boost * min(1.0, headroom ** (1.0 / POWER_CLOCK_EXPONENT))
        if power_clock < boost:
            power_clock = boost - math.ceil((boost - power_clock) / CLOCK_BIN_MHZ) * CLOCK_BIN_MHZ

        clock = min(boost, self._thermal_clock_mhz, power_clock)
        reasons = 0
        if self._thermal_clock_mhz < boost and self._thermal_clock_mhz <= power_clock:
            reasons |= SW_THERMAL_SLOWDOWN
        if power_clock < boost and power_clock <= self._thermal_clock_mhz:
            reasons |= SW_POWER_CAP
        if self.temp_c >= g.hw_slowdown_c:
            clock = min(clock, boost / 2)
            reasons |= HW_THERMAL_SLOWDOWN | HW_SLOWDOWN
        self.active_clock_mhz = clock
        if self.util_frac < IDLE_UTIL:
            self.sm_clock_mhz = float(g.idle_clock_mhz)
            self.throttle_reasons = GPU_IDLE | (reasons & ~SW_POWER_CAP)
        else:
            self.sm_clock_mhz = clock
            self.throttle_reasons = reasons
