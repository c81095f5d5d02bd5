"""The run-to-run spread of `--repeats N` (docs/domain.md §8: apart from within-step precision).

Contract: `repeat_spread(runs, capacities, knees)` is, per level, min/median/max over the repeats
of output tok/s and P95 TTFT (each repeat's last complete step at that level), and the same of
the capacity and knee levels: `RepeatSpread`, the snapshot's optional `repeats` key (`to_json`).
`spread_lines(spread)` is how `gputui run` prints it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gputui.metrics.step import StepMode, StepResult


@dataclass(frozen=True, slots=True)
class Spread:
    """Min, median and max of the known values, and how many there were."""

    min: float
    median: float
    max: float
    n: int

    def to_json(self) -> dict[str, float | int]:
        """`{"min", "median", "max", "n"}`."""
        return {"min": self.min, "median": self.median, "max": self.max, "n": self.n}


@dataclass(frozen=True, slots=True)
class LevelSpread:
    """One load level's spread across the repeats that finished it."""

    mode: StepMode
    level: float
    runs: int
    output_tokens_per_s: Spread | None
    ttft_p95_s: Spread | None

    def to_json(self) -> dict[str, object]:
        """The snapshot's `repeats.levels[]` object."""
        return {
            "mode": self.mode,
            "level": self.level,
            "runs": self.runs,
            "output_tokens_per_s": _json(self.output_tokens_per_s),
            "ttft_p95_s": _json(self.ttft_p95_s),
        }


@dataclass(frozen=True, slots=True)
class RepeatSpread:
    """The spread across repeats of the whole plan (module contract)."""

    count: int
    capacity_levels: tuple[float | None, ...]
    capacity: Spread | None
    knee_levels: tuple[float | None, ...]
    knee: Spread | None
    levels: tuple[LevelSpread, ...]

    def to_json(self) -> dict[str, object]:
        """The snapshot's `repeats` object, keys in their saved order."""
        return {
            "count": self.count,
            "capacity_levels": list(self.capacity_levels),
            "capacity": _json(self.capacity),
            "knee_levels": list(self.knee_levels),
            "knee": _json(self.knee),
            "levels": [level.to_json() for level in self.levels],
        }


def _json(spread: Spread | None) -> dict[str, float | int] | None:
    return None if spread is None else spread.to_json()


def _spread(values: Sequence[float | None]) -> Spread | None:
    known = [v for v in values if v is not None]
    if not known:
        return None
    return Spread(min(known), statistics.median(known), max(known), len(known))


def repeat_spread(
    runs: Sequence[Sequence[StepResult]],
    capacities: Sequence[float | None],
    knees: Sequence[float | None],
) -> RepeatSpread:
    """The spread across repeats (module contract)."""
    by_level: dict[tuple[StepMode, float], list[StepResult]] = {}
    for steps in runs:
        last: dict[tuple[StepMode, float], StepResult] = {}
        for step in steps:
            if not step.incomplete:
                last[(step.mode, step.level)] = step
        for key, step in last.items():
            by_level.setdefault(key, []).append(step)
    levels = tuple(
        LevelSpread(
            mode=mode,
            level=level,
            runs=len(steps),
            output_tokens_per_s=_spread([s.output_tokens_per_s for s in steps]),
            ttft_p95_s=_spread([s.ttft_s.p95 for s in steps]),
        )
        for (mode, level), steps in sorted(by_level.items())
    )
    return RepeatSpread(
        count=len(runs),
        capacity_levels=tuple(capacities),
        capacity=_spread(capacities),
        knee_levels=tuple(knees),
        knee=_spread(knees),
        levels=levels,
    )


def spread_lines(spread: RepeatSpread) -> list[str]:
    """The spread as `gputui run` prints it, beside the within-step intervals."""
    lines = [f"repeats: {spread.count} runs of the whole plan"]
    for name, s, found in (
        ("capacity", spread.capacity, spread.capacity_levels),
        ("knee", spread.knee, spread.knee_levels),
    ):
        if s is None:
            lines.append(f"  {name}: none found ({list(found)})")
        else:
            lines.append(
                f"  {name}: min {s.min:g} / median {s.median:g} / max {s.max:g} "
                f"(each run: {', '.join('-' if v is None else f'{v:g}' for v in found)})"
            )
    for row in spread.levels:
        if row.runs < 2:
            continue
        tok, ttft = row.output_tokens_per_s, row.ttft_p95_s
        text = f"  {row.mode} {row.level:g} ({row.runs} runs): out tok/s "
        text += f"{tok.min:,.0f}/{tok.median:,.0f}/{tok.max:,.0f}" if tok else "n/a"
        if ttft:
            text += (
                f", P95 TTFT {ttft.min * 1e3:.0f}/{ttft.median * 1e3:.0f}/{ttft.max * 1e3:.0f} ms"
            )
        lines.append(text + " (min/median/max)")
    return lines
