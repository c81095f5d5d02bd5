"""Energy over a time window, from a GPU's total-energy counter or by integrating its power.

Contract (domain.md §10): pure functions of one GPU's samples, each a `(t_ns, value)` series
sorted by time.
- `counter_joules(points, lo, hi)`: the counter's (mJ since the driver loaded: NVML's
  `nvmlDeviceGetTotalEnergyConsumption`, dcgm-exporter's `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`)
  value at `hi` minus its value at `lo`, each read by linear interpolation between the samples on
  either side (extrapolated along the nearest two when the window reaches past the samples: the
  counter's slope is the mean power). None with fewer than two readings, or when the counter
  went backwards (the driver reloaded).
- `integrated_joules(points, lo, hi)`: the trapezoid integral of power (W) over [lo, hi], the
  power curve linear between samples and held at the first and last reading beyond them. At
  4 Hz a few % is the expected error against the counter; the sample rate is saved beside it.
- `sample_hz(times, lo, hi)`: samples per second inside the window.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Sequence

Point = tuple[int, float]
"""(t_ns, value)."""

_MJ_PER_J = 1e3
_NS_PER_S = 1e9


def counter_joules(points: Sequence[Point], lo_ns: int, hi_ns: int) -> float | None:
    """Joules the counter (mJ) advanced over [lo, hi]; None when it cannot say."""
    if len(points) < 2 or hi_ns <= lo_ns:
        return None
    if any(b[1] < a[1] for a, b in itertools.pairwise(points)):
        return None
    times = [t for t, _ in points]
    start = _linear_at(points, times, lo_ns)
    end = _linear_at(points, times, hi_ns)
    if start is None or end is None:
        return None
    return max(end - start, 0.0) / _MJ_PER_J


def integrated_joules(points: Sequence[Point], lo_ns: int, hi_ns: int) -> float | None:
    """Trapezoid integral of power (W) over [lo, hi] in joules; None without a reading."""
    if not points or hi_ns <= lo_ns:
        return None
    times = [t for t, _ in points]
    inner = [(t, v) for t, v in points if lo_ns < t < hi_ns]
    curve = [
        (lo_ns, _held_at(points, times, lo_ns)),
        *inner,
        (hi_ns, _held_at(points, times, hi_ns)),
    ]
    area = 0.0
    for (t0, v0), (t1, v1) in itertools.pairwise(curve):
        area += (t1 - t0) * (v0 + v1) / 2.0
    return area / _NS_PER_S


def sample_hz(times: Sequence[int], lo_ns: int, hi_ns: int) -> float | None:
    """Samples per second inside [lo, hi] (None for an empty window)."""
    if hi_ns <= lo_ns:
        return None
    inside = sum(1 for t in times if lo_ns <= t <= hi_ns)
    return inside / ((hi_ns - lo_ns) / _NS_PER_S)


def _linear_at(points: Sequence[Point], times: Sequence[int], t_ns: int) -> float | None:
    """The series at `t_ns`: interpolated inside, extrapolated along the nearest two outside."""
    i = bisect_left(times, t_ns)
    if i < len(times) and times[i] == t_ns:
        return points[i][1]
    if i == 0:
        a, b = points[0], points[1]
    elif i == len(points):
        a, b = points[-2], points[-1]
    else:
        a, b = points[i - 1], points[i]
    if b[0] == a[0]:
        return None
    slope = (b[1] - a[1]) / (b[0] - a[0])
    return a[1] + slope * (t_ns - a[0])


def _held_at(points: Sequence[Point], times: Sequence[int], t_ns: int) -> float:
    """The series at `t_ns`: interpolated inside, the nearest reading outside."""
    i = bisect_left(times, t_ns)
    if i == 0:
        return points[0][1]
    if i == len(points):
        return points[-1][1]
    (t0, v0), (t1, v1) = points[i - 1], points[i]
    if t1 == t0:
        return v1
    return v0 + (v1 - v0) * (t_ns - t0) / (t1 - t0)
