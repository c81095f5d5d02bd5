"""What a snapshot says about the GPU it ran on, read defensively from its optional sections.

Contract: `hardware` (GPU identity: `gpus[i].name`, `memory_total_bytes`) and `telemetry` (the
`gpu` trace: points with `t_s`, `index`, `temperature_c`, `sm_clock_mhz`, `power_w`,
`memory_used_bytes`, `throttle_reasons`) are written by newer runs only, and by other tools
perhaps not at all. Both are typed sections (`snapshot.sections`); a malformed one loads as None
(`Snapshot`'s validator), and the trace points stay plain objects. Every reader here returns None
(shown as "unknown" or "n/a") for an absent, null or wrongly typed field; nothing raises.
Files from issue 29 on carry each step's telemetry summary (`steps[].telemetry`): the peaks are
then over the steps' measured windows, read from there, and the trace is only for charts.
"Throttled" means a point under load reported a reason that holds clocks down (power cap, HW
slowdown, thermal, power brake: `telemetry.throttle.THROTTLING_MASK`); idle and
application-clock reasons do not count. With several GPUs, the peak VRAM is the largest card's
peak and the VRAM free the tightest card's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from gputui.snapshot.models import Snapshot
from gputui.snapshot.sections import GpuIdentitySection
from gputui.telemetry.throttle import THROTTLING_MASK, decode

THROTTLING_REASONS: Final = frozenset(decode(THROTTLING_MASK))
TRACE_FIELDS: Final = ("temperature_c", "sm_clock_mhz", "power_w", "memory_used_bytes")


@dataclass(frozen=True, slots=True)
class GpuSummary:
    """The GPU identity and the extremes of its trace over the whole run; None = unknown."""

    name: str | None = None
    count: int = 0
    """GPUs listed in `hardware` (0 when the snapshot has no identity)."""
    memory_total_bytes: int | None = None
    """Of the first GPU."""
    peak_vram_used_bytes: int | None = None
    vram_free_bytes: int | None = None
    """Total minus peak used, on the card with the least left."""
    max_temperature_c: float | None = None
    throttled: bool | None = None
    throttle_reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GpuTrace:
    """One GPU's series over the run (seconds from its start); None where a point lacks it."""

    index: int
    t_s: tuple[float, ...]
    values: Mapping[str, tuple[float | None, ...]]
    """By field name in `TRACE_FIELDS`."""


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value else None


def _gpus(snapshot: Snapshot) -> list[GpuIdentitySection]:
    hardware = snapshot.hardware
    return list(hardware.gpus or []) if hardware is not None else []


def _points(snapshot: Snapshot) -> list[Mapping[str, object]]:
    """The GPU trace's points (plain objects, since which fields a point has varies)."""
    telemetry = snapshot.telemetry
    return list(telemetry.gpu or []) if telemetry is not None else []


def _fallback_name(snapshot: Snapshot) -> str | None:
    """A free-text description some writers put in `target` (e.g. `gpu_description`)."""
    extra = snapshot.target.model_extra or {}
    for key in ("gpu_description", "gpu_name", "gpu"):
        value = extra.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def precision_of(snapshot: Snapshot) -> str | None:
    """The weights' precision when some section states it (e.g. "bf16"); None = unknown."""
    if snapshot.precision is not None:
        return snapshot.precision
    candidates: list[Mapping[str, object]] = [snapshot.model_extra or {}]
    candidates.append(snapshot.target.model_extra or {})
    candidates.append(snapshot.workload.model_extra or {})
    if snapshot.hardware is not None:
        candidates.append(snapshot.hardware.model_extra or {})
    for section in candidates:
        for key in ("precision", "dtype"):
            value = section.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return None


def _from_steps(snapshot: Snapshot, base: GpuSummary) -> GpuSummary | None:
    """Peaks from the steps' own telemetry summaries (issue 29), when the run saved them."""
    seen = [s.telemetry for s in snapshot.steps if s.telemetry is not None]
    if not seen:
        return None
    vram = max(
        (t for t in seen if t.vram_peak_bytes is not None),
        key=lambda t: t.vram_peak_bytes or 0,
        default=None,
    )
    temps = [t.temperature_max_c for t in seen if t.temperature_max_c is not None]
    shares = [t for t in seen if t.throttled_share is not None]
    reasons = sorted({r for t in seen for r in t.throttle_reasons} & THROTTLING_REASONS)
    free = None
    if vram is not None and vram.vram_total_bytes is not None and vram.vram_peak_bytes is not None:
        free = vram.vram_total_bytes - vram.vram_peak_bytes
    return replace(
        base,
        peak_vram_used_bytes=vram.vram_peak_bytes if vram is not None else None,
        vram_free_bytes=free,
        max_temperature_c=max(temps) if temps else None,
        throttled=any((t.throttled_share or 0.0) > 0 for t in shares) if shares else None,
        throttle_reasons=tuple(reasons),
    )


def gpu_summary(snapshot: Snapshot) -> GpuSummary:
    """Identity from `hardware`; peaks from the steps' telemetry, else the `telemetry` trace."""
    traced = _from_trace(snapshot)
    return _from_steps(snapshot, traced) or traced


def _from_trace(snapshot: Snapshot) -> GpuSummary:
    """Identity from `hardware`, peaks from the `telemetry` GPU trace (files before issue 29)."""
    gpus = _gpus(snapshot)
    name = next((g.name for g in gpus if g.name), None) or _fallback_name(snapshot)
    totals: dict[int, float] = {}
    for position, gpu in enumerate(gpus):
        if gpu.memory_total_bytes is not None:
            totals[gpu.index if gpu.index is not None else position] = float(gpu.memory_total_bytes)
    first_total = gpus[0].memory_total_bytes if gpus else None

    peak_used: dict[int, float] = {}
    temps: list[float] = []
    reasons: set[str] = set()
    saw_reasons = False
    for point in _points(snapshot):
        index = point.get("index")
        key = index if isinstance(index, int) else 0
        used = _number(point.get("memory_used_bytes"))
        if used is not None:
            peak_used[key] = max(used, peak_used.get(key, used))
        temp = _number(point.get("temperature_c"))
        if temp is not None:
            temps.append(temp)
        point_reasons = point.get("throttle_reasons")
        if isinstance(point_reasons, Sequence) and not isinstance(point_reasons, str):
            saw_reasons = True
            reasons |= {r for r in point_reasons if isinstance(r, str)} & THROTTLING_REASONS
    free = [totals[i] - used for i, used in peak_used.items() if i in totals]
    return GpuSummary(
        name=name,
        count=len(gpus),
        memory_total_bytes=int(first_total) if first_total is not None else None,
        peak_vram_used_bytes=int(max(peak_used.values())) if peak_used else None,
        vram_free_bytes=int(min(free)) if free else None,
        max_temperature_c=max(temps) if temps else None,
        throttled=bool(reasons) if saw_reasons else None,
        throttle_reasons=tuple(sorted(reasons)),
    )


def gpu_traces(snapshot: Snapshot) -> list[GpuTrace]:
    """Each GPU's trace, for charts; empty when the snapshot has none."""
    by_index: dict[int, list[Mapping[str, object]]] = {}
    for point in _points(snapshot):
        t = _number(point.get("t_s"))
        if t is None:
            continue
        index = point.get("index")
        by_index.setdefault(index if isinstance(index, int) else 0, []).append(point)
    traces = []
    for index in sorted(by_index):
        points = sorted(by_index[index], key=lambda p: _number(p.get("t_s")) or 0.0)
        values = {f: tuple(_number(p.get(f)) for p in points) for f in TRACE_FIELDS}
        times = tuple(_number(p.get("t_s")) or 0.0 for p in points)  # each has one (above)
        traces.append(GpuTrace(index, times, values))
    return traces
