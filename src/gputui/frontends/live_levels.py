"""How the operator's load keys change the load: pure functions of the mode, level and factor.

Contract: `scaled_level` is `+`/`-` (concurrency moves at least one either way and stays within
1..4096; a rate keeps three decimals and at least 0.05/s, so ×f then ÷f comes back to the level
it left: 10.53 stays 10.53), `next_factor` is `]`/`[` over `FACTORS`, and
`switched_load` is `r`: the other mode at about the load the latest frame shows.
"""

from __future__ import annotations

from gputui.engine.load import LoadMode
from gputui.session import StatsFrame

FACTORS = (1.25, 1.5, 2.0, 3.0, 4.0)
MAX_CONCURRENCY = 4096


def scaled_level(mode: LoadMode, level: float, factor: float) -> float:
    """The level times `factor` (module contract)."""
    if mode == "concurrency":
        scaled = round(level * factor)
        if factor > 1:
            scaled = max(scaled, int(level) + 1)
        elif factor < 1:  # 2 ÷ 1.25 rounds back to 2: down moves at least one too
            scaled = min(scaled, int(level) - 1)
        return float(max(1, min(scaled, MAX_CONCURRENCY)))
    return round(max(0.05, level * factor), 3)


def next_factor(factor: float, direction: int) -> float:
    """The factor one step up (`direction` 1) or down (-1) from the nearest of `FACTORS`."""
    i = min(range(len(FACTORS)), key=lambda k: abs(FACTORS[k] - factor))
    return FACTORS[max(0, min(len(FACTORS) - 1, i + direction))]


def switched_load(mode: LoadMode, frame: StatsFrame | None) -> tuple[LoadMode, float]:
    """The other mode, at the rate (or the in-flight count) the latest frame shows."""
    if mode == "concurrency":
        rate = frame.window.requests_per_s if frame and frame.window.requests_per_s else 0
        return "rate", round(max(rate, 0.1), 2)
    in_flight = frame.in_flight if frame else 1
    return "concurrency", float(max(1, in_flight))
