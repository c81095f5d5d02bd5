"""Cost per token, capacity planning and equal-throughput comparison (docs/domain.md §4).

Contract:
- `cost_per_million_output_tokens` = hourly price / (qualified output tok/s x 3600) x 1e6, in the
  price's currency unit (4/h at 80 tok/s -> 13.9; 7/h at 160 tok/s -> 12.2). The throughput is
  meant to be the SLA-qualified one: peak throughput past the SLA is not capacity.
- `servers_needed`: demand tok/s = requests/min x mean output tokens / 60; the target adds the
  headroom (demand x (1 + headroom)); servers = ceil(target / qualified tok/s per server)
  (90 rpm x 240 / 60 = 360 tok/s, +30 % = 468 tok/s).
- `interpolate_at_throughput`: compares two servers at the *same* throughput instead of the same
  load level (a concurrency of 16 means different things on different servers). It interpolates
  linearly in throughput between the two steps that bracket the target, on the rising part of
  the curve only (lowest level up to the throughput peak): past the peak the same throughput
  recurs at a higher load and worse latency, which is not where anyone would run the server.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Final

_SECONDS_PER_HOUR: Final = 3600.0
_PER_MILLION: Final = 1_000_000.0
#: Digits kept before `ceil`, so 468.00000000000006 / 468 is 1 server, not 2.
_CEIL_DIGITS: Final = 9


def cost_per_million_output_tokens(price_per_hour: float, output_tokens_per_s: float) -> float:
    """What a million output tokens cost when the server runs at this (qualified) throughput."""
    if not math.isfinite(price_per_hour) or price_per_hour < 0:
        raise ValueError(f"price_per_hour must be a finite number >= 0, got {price_per_hour}")
    if not math.isfinite(output_tokens_per_s) or output_tokens_per_s <= 0:
        raise ValueError(f"output_tokens_per_s must be > 0, got {output_tokens_per_s}")
    return price_per_hour / (output_tokens_per_s * _SECONDS_PER_HOUR) * _PER_MILLION


def demand_output_tokens_per_s(demand_rpm: float, mean_output_tokens: float) -> float:
    """Output tok/s a demand of requests per minute asks for."""
    if demand_rpm < 0 or mean_output_tokens < 0:
        raise ValueError("demand_rpm and mean_output_tokens must be >= 0")
    return demand_rpm * mean_output_tokens / 60.0


def servers_needed(
    demand_rpm: float,
    mean_output_tokens: float,
    qualified_tokens_per_s: float,
    headroom: float = 0.3,
) -> int:
    """Servers of one qualified capacity that carry the demand plus headroom."""
    if qualified_tokens_per_s <= 0:
        raise ValueError(f"qualified_tokens_per_s must be > 0, got {qualified_tokens_per_s}")
    if headroom < 0:
        raise ValueError(f"headroom must be >= 0, got {headroom}")
    target = demand_output_tokens_per_s(demand_rpm, mean_output_tokens) * (1.0 + headroom)
    return math.ceil(round(target / qualified_tokens_per_s, _CEIL_DIGITS))


@dataclass(frozen=True, slots=True)
class AtThroughput:
    """A sweep read at one throughput: the load level and the value (e.g. P95 TTFT) there."""

    output_tokens_per_s: float
    level: float
    value: float | None
    """None when a bracketing step has no value (e.g. no P95 TPOT measured)."""


def _rising_curve(
    levels: Sequence[float], throughputs: Sequence[float], values: Sequence[float | None]
) -> list[tuple[float, float, float | None]]:
    """Points sorted by level, duplicate levels averaged, cut at the throughput peak."""
    grouped: dict[float, tuple[list[float], list[float | None]]] = {}
    for x, y, v in zip(levels, throughputs, values, strict=True):
        if math.isfinite(x) and math.isfinite(y):
            ys, vs = grouped.setdefault(x, ([], []))
            ys.append(y)
            vs.append(None if v is None or not math.isfinite(v) else v)
    points: list[tuple[float, float, float | None]] = []
    for x in sorted(grouped):
        ys, vs = grouped[x]
        known = [v for v in vs if v is not None]
        mean_v = sum(known) / len(known) if len(known) == len(vs) else None
        points.append((x, sum(ys) / len(ys), mean_v))
    if not points:
        return points
    peak = max(range(len(points)), key=lambda i: (points[i][1], -i))
    return points[: peak + 1]


def interpolate_at_throughput(
    levels: Sequence[float],
    throughputs: Sequence[float],
    values: Sequence[float | None],
    target: float,
) -> AtThroughput | None:
    """The level and value where the sweep first reaches `target` tok/s.

    Returns None when the target is beyond the curve's peak ("cannot reach") or below its lowest
    step (not measured: the value there is unknown, and extrapolating would flatter it).
    """
    if not len(levels) == len(throughputs) == len(values):
        raise ValueError("levels, throughputs and values must have the same length")
    points = _rising_curve(levels, throughputs, values)
    if not points or not math.isfinite(target) or target < points[0][1]:
        return None
    for (x0, y0, v0), (x1, y1, v1) in pairwise(points):
        if y0 == target:
            return AtThroughput(target, x0, v0)
        if y0 < target <= y1:
            t = (target - y0) / (y1 - y0)
            value = None if v0 is None or v1 is None else v0 + t * (v1 - v0)
            return AtThroughput(target, x0 + t * (x1 - x0), value)
    x_last, y_last, v_last = points[-1]
    return AtThroughput(target, x_last, v_last) if y_last == target else None


def cost_per_million_output_tokens_ci(
    price_per_hour: float, output_tokens_per_s_ci: tuple[float | None, float | None] | None
) -> tuple[float | None, float | None] | None:
    """The cost range that the throughput's 95 % interval implies (cost falls as tok/s rises).

    [cost at the interval's high end, cost at its low end]; the upper end is open (None) when
    the throughput's lower end is 0 or unknown. None without an interval.
    """
    if output_tokens_per_s_ci is None:
        return None
    lo, hi = output_tokens_per_s_ci
    cheapest = cost_per_million_output_tokens(price_per_hour, hi) if hi and hi > 0 else None
    dearest = cost_per_million_output_tokens(price_per_hour, lo) if lo and lo > 0 else None
    return cheapest, dearest
