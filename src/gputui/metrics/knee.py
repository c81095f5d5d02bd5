"""Knee detection on a sweep curve: where more load stops buying throughput (docs/domain.md §1).

Contract: `find_knee(levels, throughputs)` takes load levels (concurrency or arrival rate; any
order, unevenly spaced, duplicates allowed) and the throughput measured at each, and returns a
`KneeResult`: the `Knee` (a measured level, never an interpolated one) or None, and always a
sentence saying why.

Method, in order:

1. *Clean the curve.* Points with a non-finite value or a level <= 0 are dropped; duplicate levels
   are averaged; the rest is sorted by level. Fewer than 3 distinct levels: no knee.
2. *Gain per doubling* (primary). For each pair of neighbouring levels, the throughput growth per
   doubling of load, g = (y_i / y_{i-1}) ** (1 / log2(x_i / x_{i-1})) - 1, which makes a sweep of
   1, 2, 4, ... and one with bisection levels such as 24 or 28 comparable. The knee is the lower
   level x_{i-1} of the first pair whose gain is below `threshold` (10 %): "throughput grew 4 %
   per doubling from 32 to 64, below the 10 % threshold: the knee is 32". Noise guard: the
   slowdown must persist, so the gain from x_{i-1} to the level after x_i must also be below the
   threshold. A single low point inside a growing trend is then not a knee, because the next
   point rebounds and the two-segment gain is large. The last pair has no further level to
   confirm it; it still counts, and the reason says so. Throughput that falls after a peak gives
   a negative gain, so the knee is at or before the peak.
3. *Kneedle* (fallback, Satopää et al. 2011, "Finding a 'Kneedle' in a Haystack"), only when
   step 2 finds no knee: the curve is cut at its peak, load becomes log2(level) (a geometric
   sweep is then evenly spaced), both axes are normalised to [0, 1] and the difference curve
   d = y_n - x_n is searched for a local maximum that is followed, before the next local
   maximum, by a drop below d_max - sensitivity x mean(x_n spacing). No smoothing is applied (a
   sweep has ~5-10 points). In log2 load a linear or power-law curve is convex or straight, so
   Kneedle finds no knee there; it catches a curve that bends sharply but keeps growing slowly.

Pure functions: no I/O, no numpy needed for ~10 points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from gputui.metrics.step import StepMode

KneeMethod = Literal["gain_per_doubling", "kneedle"]

#: Default minimum growth per doubling of load below which the curve has saturated.
DEFAULT_GAIN_THRESHOLD: Final = 0.10
#: Kneedle's S; 1.0 is what Satopää et al. recommend for offline data.
DEFAULT_SENSITIVITY: Final = 1.0
#: Fewest distinct levels a knee can be judged on (two segments).
MIN_LEVELS: Final = 3


@dataclass(frozen=True, slots=True)
class Knee:
    """A measured load level past which throughput stopped growing usefully."""

    level: float
    mode: StepMode
    method: KneeMethod
    reason: str
    index: int
    """Index, in the caller's sequences, of the first point at `level` (to find its step)."""


@dataclass(frozen=True, slots=True)
class KneeResult:
    """The knee (None when there is none) and a sentence saying how it was found or why not."""

    knee: Knee | None
    reason: str


@dataclass(frozen=True, slots=True)
class _Curve:
    levels: tuple[float, ...]
    throughputs: tuple[float, ...]
    first_index: tuple[int, ...]


def gain_per_doubling(
    level_lo: float, level_hi: float, throughput_lo: float, throughput_hi: float
) -> float:
    """Throughput growth per doubling of load between two levels (0.04 = 4 % per doubling)."""
    if not 0 < level_lo < level_hi:
        raise ValueError(f"need 0 < level_lo < level_hi, got {level_lo} and {level_hi}")
    if throughput_lo <= 0:
        # Growth from nothing is unbounded; nothing to nothing is flat.
        return math.inf if throughput_hi > 0 else 0.0
    doublings = math.log2(level_hi / level_lo)
    return float((max(throughput_hi, 0.0) / throughput_lo) ** (1.0 / doublings) - 1.0)


def _percent(fraction: float) -> str:
    # Three significant digits, so 9.97 % never prints as "10 %" next to a 10 % threshold.
    value = fraction * 100
    return f"{value:.0f} %" if abs(value) >= 1000 else f"{value:.3g} %"


def _change(gain: float) -> str:
    if math.isinf(gain):
        return "grew from zero"
    return f"grew {_percent(gain)}" if gain >= 0 else f"fell {_percent(-gain)}"


MIN_LEVEL_RATIO = 1.25
"""Levels closer than this to the previous one kept are left out of the knee: between two levels
4 % apart (an automatic sweep's bisection), a 1 % wobble in throughput reads as a 20 % change per
doubling. The capacity still uses every step."""


def _clean(levels: Sequence[float], throughputs: Sequence[float]) -> _Curve:
    """Drop unusable points, average duplicate levels, sort, and thin out near-equal levels."""
    sums: dict[float, tuple[float, int, int]] = {}
    for i, (x, y) in enumerate(zip(levels, throughputs, strict=True)):
        if not (math.isfinite(x) and math.isfinite(y)) or x <= 0:
            continue
        total, count, first = sums.get(x, (0.0, 0, i))
        sums[x] = (total + y, count + 1, first)
    ordered: list[tuple[float, tuple[float, int, int]]] = []
    for x, point in sorted(sums.items()):
        if not ordered or x >= MIN_LEVEL_RATIO * ordered[-1][0]:
            ordered.append((x, point))
    return _Curve(
        levels=tuple(x for x, _ in ordered),
        throughputs=tuple(total / count for _, (total, count, _) in ordered),
        first_index=tuple(first for _, (_, _, first) in ordered),
    )


def _by_gain(curve: _Curve, threshold: float) -> tuple[int, str] | None:
    """First confirmed pair whose gain per doubling is below the threshold (module docstring)."""
    xs, ys = curve.levels, curve.throughputs
    below = f"below the {_percent(threshold)} threshold"
    for i in range(1, len(xs)):
        gain = gain_per_doubling(xs[i - 1], xs[i], ys[i - 1], ys[i])
        if gain >= threshold:
            continue
        first = f"throughput {_change(gain)} per doubling from {xs[i - 1]:g} to {xs[i]:g}"
        if i + 1 < len(xs):
            span = gain_per_doubling(xs[i - 1], xs[i + 1], ys[i - 1], ys[i + 1])
            if span >= threshold:
                continue  # one low point, not a trend: the next level rebounds
            confirm = f"{_change(span)} per doubling from {xs[i - 1]:g} to {xs[i + 1]:g}"
            evidence = f"{first} ({confirm}), {below}"
        else:
            evidence = f"{first}, {below} (the last step: no higher level confirms it)"
        reason = f"{evidence}: the knee is {xs[i - 1]:g}"
        if i == 1:
            reason += " (already saturated at the lowest level tested)"
        return i - 1, reason
    return None


def kneedle_index(
    levels: Sequence[float], throughputs: Sequence[float], sensitivity: float
) -> int | None:
    """Kneedle's knee index on an increasing, concave-ish curve (load taken as log2(level))."""
    n = len(levels)
    if n < MIN_LEVELS:
        return None
    u = [math.log2(x) for x in levels]
    y_lo, y_hi = min(throughputs), max(throughputs)
    if u[-1] <= u[0] or y_hi <= y_lo:
        return None
    un = [(v - u[0]) / (u[-1] - u[0]) for v in u]
    diff = [(y - y_lo) / (y_hi - y_lo) - x for x, y in zip(un, throughputs, strict=True)]
    # Normalised x spans [0, 1], so its mean spacing is 1 / (n - 1).
    drop = sensitivity / (n - 1)
    maxima = [i for i in range(1, n - 1) if diff[i - 1] < diff[i] >= diff[i + 1]]
    for k, peak in enumerate(maxima):
        if diff[peak] <= 0:
            continue
        threshold = diff[peak] - drop
        end = maxima[k + 1] if k + 1 < len(maxima) else n
        if any(diff[j] < threshold for j in range(peak + 1, end)):
            return peak
    return None


def find_knee(
    levels: Sequence[float],
    throughputs: Sequence[float],
    *,
    mode: StepMode = "concurrency",
    threshold: float = DEFAULT_GAIN_THRESHOLD,
    sensitivity: float = DEFAULT_SENSITIVITY,
) -> KneeResult:
    """The sweep's knee by gain per doubling, else Kneedle, with the reason (module docstring)."""
    if len(levels) != len(throughputs):
        raise ValueError(f"{len(levels)} levels but {len(throughputs)} throughputs")
    if threshold <= 0:
        raise ValueError(f"threshold must be > 0, got {threshold}")
    curve = _clean(levels, throughputs)
    n = len(curve.levels)
    if n < MIN_LEVELS:
        return KneeResult(None, f"need at least {MIN_LEVELS} load levels to find a knee, got {n}")
    if max(curve.throughputs) <= 0:
        return KneeResult(None, "no throughput was measured at any level")

    found = _by_gain(curve, threshold)
    if found is not None:
        i, reason = found
        knee = Knee(curve.levels[i], mode, "gain_per_doubling", reason, curve.first_index[i])
        return KneeResult(knee, reason)

    peak = curve.throughputs.index(max(curve.throughputs))
    xs, ys = curve.levels[: peak + 1], curve.throughputs[: peak + 1]
    none_below = (
        f"throughput grew at least {_percent(threshold)} per doubling at every level up to"
        f" {curve.levels[-1]:g}"
    )
    i_kneedle = kneedle_index(xs, ys, sensitivity)
    if i_kneedle is None:
        return KneeResult(None, f"{none_below}, and Kneedle found no bend: no knee in this sweep")
    after = gain_per_doubling(xs[i_kneedle], xs[-1], ys[i_kneedle], ys[-1])
    reason = (
        f"{none_below}, but the curve bends most at {xs[i_kneedle]:g} (Kneedle on log2 load,"
        f" sensitivity {sensitivity:g}; from there to {xs[-1]:g} it {_change(after)} per"
        f" doubling): the knee is {xs[i_kneedle]:g}"
    )
    knee = Knee(xs[i_kneedle], mode, "kneedle", reason, curve.first_index[i_kneedle])
    return KneeResult(knee, reason)


class _SweepPoint(Protocol):
    @property
    def mode(self) -> StepMode: ...

    @property
    def level(self) -> float: ...

    @property
    def incomplete(self) -> bool: ...

    @property
    def output_tokens_per_s(self) -> float: ...


def knee_from_steps(
    steps: Sequence[_SweepPoint],
    *,
    mode: StepMode,
    threshold: float = DEFAULT_GAIN_THRESHOLD,
    sensitivity: float = DEFAULT_SENSITIVITY,
) -> KneeResult:
    """The knee of the output tok/s curve of a run's complete steps of one mode.

    `Knee.index` then indexes `steps` itself, so the knee's step is `steps[knee.index]`.
    """
    picked = [i for i, s in enumerate(steps) if s.mode == mode and not s.incomplete]
    result = find_knee(
        [steps[i].level for i in picked],
        [steps[i].output_tokens_per_s for i in picked],
        mode=mode,
        threshold=threshold,
        sensitivity=sensitivity,
    )
    if result.knee is None:
        return result
    knee = result.knee
    fixed = Knee(knee.level, knee.mode, knee.method, knee.reason, picked[knee.index])
    return KneeResult(fixed, result.reason)
