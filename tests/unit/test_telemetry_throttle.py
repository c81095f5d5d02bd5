"""Clock-event reason decoding against reference.md §1.3 and the installed nvidia-ml-py."""

from __future__ import annotations

import pytest

from gputui.telemetry.throttle import (
    BIT_BY_CONSTANT,
    BIT_BY_NAME,
    THROTTLING_MASK,
    decode,
    parse_mask,
    throttling,
)


@pytest.mark.parametrize(
    ("mask", "names"),
    [
        (0x0, ()),
        (0x1, ("gpu_idle",)),
        (0x4, ("sw_power_cap",)),
        (0x24, ("sw_power_cap", "sw_thermal_slowdown")),
        (0x48, ("hw_slowdown", "hw_thermal_slowdown")),
        (0x80, ("hw_power_brake_slowdown",)),
        (0x110, ("sync_boost", "display_clock_setting")),
        (0x1002, ("applications_clocks_setting", "unknown_0x1000")),
    ],
)
def test_decode(mask: int, names: tuple[str, ...]) -> None:
    assert decode(mask) == names


def test_all_documented_bits() -> None:
    assert len(decode(0x1FF)) == 9
    assert BIT_BY_NAME["sw_thermal_slowdown"] == 0x20


def test_throttling_ignores_idle_and_settings() -> None:
    assert THROTTLING_MASK == 0x4 | 0x8 | 0x20 | 0x40 | 0x80
    assert throttling(0x1) == ()
    assert throttling(0x3) == ()
    assert throttling(0x25) == ("sw_power_cap", "sw_thermal_slowdown")
    assert throttling(None) == ()


def test_both_constant_spellings_match_the_installed_pynvml() -> None:
    pynvml = pytest.importorskip("pynvml")
    checked = 0
    for constant, bit in BIT_BY_CONSTANT.items():
        if hasattr(pynvml, constant):
            assert getattr(pynvml, constant) == bit, constant
            checked += 1
    assert checked >= 18  # both families are present in nvidia-ml-py >= 12.560


@pytest.mark.parametrize(
    ("text", "mask"),
    [
        ("0x0000000000000004", 0x4),
        ("0x24", 0x24),
        ("36", 36),
        ("36.0", 36),
        ("[N/A]", None),
        ("nan", None),
        ("-1", None),
        ("9223372036854775794", None),  # DCGM blank sentinel
    ],
)
def test_parse_mask(text: str, mask: int | None) -> None:
    assert parse_mask(text) == mask
