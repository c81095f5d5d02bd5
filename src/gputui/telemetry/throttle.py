"""Decode NVML's clock-event ("throttle") reason bitmask into names.

Contract: `decode(mask)` returns the reasons set in `mask`, lowest bit first, named like the
`nvidia-smi --query-gpu=clocks_event_reasons.*` fields (reference.md §1.3 and §2), so a name reads
the same whichever source reported it; unknown bits become "unknown_0x...". NVML renamed the
constants from `nvmlClocksThrottleReason*` to `nvmlClocksEventReason*` (driver 535+); both spellings
map to the same bits in `BIT_BY_CONSTANT`. `throttling(mask)` keeps only the reasons that mean the
card is being held back under load: idle (0x1) is ignored, as §1.3 advises.
"""

from __future__ import annotations

from typing import Final

REASONS: Final[tuple[tuple[int, str, str], ...]] = (
    (0x001, "gpu_idle", "GpuIdle"),
    (0x002, "applications_clocks_setting", "ApplicationsClocksSetting"),
    (0x004, "sw_power_cap", "SwPowerCap"),
    (0x008, "hw_slowdown", "HwSlowdown"),
    (0x010, "sync_boost", "SyncBoost"),
    (0x020, "sw_thermal_slowdown", "SwThermalSlowdown"),
    (0x040, "hw_thermal_slowdown", "HwThermalSlowdown"),
    (0x080, "hw_power_brake_slowdown", "HwPowerBrakeSlowdown"),
    (0x100, "display_clock_setting", "DisplayClockSetting"),
    # Only in the old `nvmlClocksThrottleReason*` family of nvidia-ml-py (not in reference §1.3).
    (0x200, "board_limit", "BoardLimit"),
    (0x400, "reliability", "Reliability"),
)
"""(bit, name, pynvml constant suffix)."""

NAME_BY_BIT: Final[dict[int, str]] = {bit: name for bit, name, _ in REASONS}
BIT_BY_NAME: Final[dict[str, int]] = {name: bit for bit, name, _ in REASONS}

BIT_BY_CONSTANT: Final[dict[str, int]] = {
    **{f"nvmlClocksEventReason{suffix}": bit for bit, _, suffix in REASONS if bit <= 0x100},
    **{f"nvmlClocksThrottleReason{suffix}": bit for bit, _, suffix in REASONS},
    "nvmlClocksEventReasonUserDefinedClocks": 0x002,
    "nvmlClocksThrottleReasonUserDefinedClocks": 0x002,
}
"""Both constant spellings (new "event", deprecated "throttle") to their bit."""

BLANK_MIN: Final = 0x7FFFFFFFFFFFFFF0
"""DCGM writes values at or above this as "blank" (no data): reference.md §3."""

THROTTLING_MASK: Final = 0x004 | 0x008 | 0x020 | 0x040 | 0x080
"""Reasons that cap clocks under load: power cap, HW slowdown, SW/HW thermal, power brake."""


def decode(mask: int) -> tuple[str, ...]:
    """Names of the reasons set in `mask`, lowest bit first."""
    names: list[str] = []
    bit = 1
    remaining = mask
    while remaining:
        if remaining & bit:
            names.append(NAME_BY_BIT.get(bit, f"unknown_{bit:#x}"))
            remaining &= ~bit
        bit <<= 1
    return tuple(names)


def throttling(mask: int | None) -> tuple[str, ...]:
    """The reasons in `mask` that hold clocks down under load (empty when none or unknown)."""
    if mask is None:
        return ()
    return decode(mask & THROTTLING_MASK)


def parse_mask(text: str) -> int | None:
    """An nvidia-smi / exporter mask ("0x0000000000000004", "4", "4.0"); None when not a number."""
    value = text.strip()
    try:
        number = int(value, 16) if value.lower().startswith("0x") else float(value)
    except ValueError:
        return None
    if number != number or not 0 <= number < float(BLANK_MIN):  # NaN, negative, DCGM blank
        return None
    return int(number)
