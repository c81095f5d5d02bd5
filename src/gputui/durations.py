"""Durations as people write them: `35ms`, `1s`, `500us`, `2m`, or a bare number.

A bare number is in the unit of the place that reads it (seconds for `--sla-ttft-p95` and a
scenario's `ttft_p95_s`, milliseconds for the simulator's `--itl-ms`), so old command lines and
files keep their meaning. Scaling is done in decimal, so `35ms` is exactly the float 0.035.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Final

UNITS: Final[dict[str, Decimal]] = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "µs": Decimal("1e-6"),
    "ms": Decimal("1e-3"),
    "s": Decimal(1),
    "m": Decimal(60),
    "min": Decimal(60),
    "h": Decimal(3600),
}
"""Unit suffixes and their length in seconds."""

_DURATION = re.compile(
    r"\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)\s*([a-zµ]*)\s*", re.IGNORECASE
)


def split_duration(text: str) -> tuple[Decimal, str | None]:
    """The number and the unit (None when bare) of `text`; ValueError when it is neither."""
    match = _DURATION.fullmatch(text)
    unit = match.group(2).lower() if match else ""
    if match is None or (unit and unit not in UNITS):
        if _non_finite(text):
            raise ValueError(f"must be a finite number, got {text!r}")
        raise ValueError(f"not a duration: {text!r} (e.g. 35ms, 1.5s, 2m)")
    return Decimal(match.group(1)), unit or None


def _non_finite(text: str) -> bool:
    try:
        return not Decimal(text.strip()).is_finite()
    except InvalidOperation:
        return False


def parse_duration(text: str, unit: str = "s") -> float:
    """`text` in `unit` (the unit a bare number is read in)."""
    number, given = split_duration(text)
    if given is None or given == unit:
        return float(number)
    value = float(number * UNITS[given] / UNITS[unit])
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number, got {text!r}")
    return value


TTFT_IMPLAUSIBLE_S: Final = 600.0
"""A bare --sla-ttft-p95 above this many seconds is refused: 1000 was meant as 1000ms."""
TPOT_IMPLAUSIBLE_S: Final = 5.0
"""A bare --sla-tpot-p95 above this many seconds is refused: 35 was meant as 35ms."""
