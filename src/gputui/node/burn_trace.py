"""The burn's GPU trace: a sampling thread, its points, and what they say about the clock.

Contract: `TraceRecorder` samples one GPU of a telemetry port on a daemon thread (NVML blocks,
so never on a loop) every `interval_s` until stopped, keeping each sample as a `TracePoint` with
its time from the burn's start; a port error is kept and the next tick tries again.

`analyze_trace` is a pure function of the points: the first sample whose clock-event mask holds a
load-throttling reason (power cap, HW slowdown, SW/HW thermal, power brake; idle ignored, reference
§1.3) gives the time to the first throttle and its reasons; the steady SM clock is the median over
the last 30 % of samples, as a fraction of the maximum SM clock (NVML's max clock, which on GeForce
sits above the rated boost; else the catalog boost clock; else the highest clock seen).
"""

from __future__ import annotations

import math
import statistics
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from gputui.errors import GputuiError
from gputui.node.json_docs import TracePointJson
from gputui.telemetry.samples import GpuSample
from gputui.telemetry.throttle import decode, throttling

STEADY_TAIL: Final = 0.3
THERMAL_REASONS: Final = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown"})


class SamplePort(Protocol):
    """The part of a telemetry GPU port the burn needs."""

    name: str

    def sample(self) -> tuple[GpuSample, ...]:
        """One sample per GPU."""
        ...


@dataclass(frozen=True, slots=True)
class TracePoint:
    """One GPU sample during the burn, time relative to its start."""

    t_s: float
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    throttle_mask: int | None = None
    throttle_reasons: tuple[str, ...] = ()
    """Load-throttling reasons only (`telemetry.throttle.throttling`)."""
    utilization_gpu_pct: float | None = None

    @classmethod
    def from_sample(cls, s: GpuSample, origin_ns: int) -> TracePoint:
        """From a telemetry sample."""
        return cls(
            t_s=(s.t_ns - origin_ns) / 1e9,
            sm_clock_mhz=s.sm_clock_mhz,
            sm_clock_max_mhz=s.sm_clock_max_mhz,
            temperature_c=s.temperature_c,
            power_w=s.power_w,
            throttle_mask=s.throttle_mask,
            throttle_reasons=throttling(s.throttle_mask),
            utilization_gpu_pct=s.utilization_gpu_pct,
        )

    def to_dict(self) -> TracePointJson:
        """JSON form (the mask also decoded in full, idle included)."""
        return {
            "t_s": round(self.t_s, 3),
            "sm_clock_mhz": self.sm_clock_mhz,
            "temperature_c": self.temperature_c,
            "power_w": None if self.power_w is None else round(self.power_w, 1),
            "utilization_gpu_pct": self.utilization_gpu_pct,
            "throttle_mask": self.throttle_mask,
            "throttle_reasons": list(self.throttle_reasons),
            "clock_event_reasons": None
            if self.throttle_mask is None
            else list(decode(self.throttle_mask)),
        }


@dataclass(frozen=True, slots=True)
class TraceSummary:
    """What the trace says (see `analyze_trace`)."""

    samples: int
    first_throttle_s: float | None
    first_throttle_reasons: tuple[str, ...]
    steady_sm_clock_mhz: float | None
    max_sm_clock_mhz: int | None
    max_clock_source: str | None
    """"nvml" (reported max clock), "catalog" (rated boost) or "observed"."""
    steady_clock_fraction: float | None
    max_temperature_c: float | None
    throttle_share: dict[str, float]
    """Fraction of samples showing each throttling reason."""

    @property
    def thermal(self) -> bool:
        """Whether any thermal slowdown was seen."""
        return any(r in THERMAL_REASONS for r in self.throttle_share)


def analyze_trace(
    points: Sequence[TracePoint],
    *,
    catalog_boost_mhz: int | None = None,
    steady_tail: float = STEADY_TAIL,
) -> TraceSummary:
    """First throttle, steady clock (median of the last `steady_tail` of samples), maxima."""
    first = next((p for p in points if p.throttle_reasons), None)
    tail = points[len(points) - math.ceil(len(points) * steady_tail) :] if points else []
    tail_clocks = [p.sm_clock_mhz for p in tail if p.sm_clock_mhz is not None]
    steady = statistics.median(tail_clocks) if tail_clocks else None
    reported = [p.sm_clock_max_mhz for p in points if p.sm_clock_max_mhz]
    observed = [p.sm_clock_mhz for p in points if p.sm_clock_mhz]
    max_clock: int | None
    if reported:
        max_clock, source = max(reported), "nvml"
    elif catalog_boost_mhz:
        max_clock, source = catalog_boost_mhz, "catalog"
    elif observed:
        max_clock, source = max(observed), "observed"
    else:
        max_clock, source = None, None
    temps = [p.temperature_c for p in points if p.temperature_c is not None]
    counts: dict[str, int] = {}
    for p in points:
        for reason in p.throttle_reasons:
            counts[reason] = counts.get(reason, 0) + 1
    return TraceSummary(
        samples=len(points),
        first_throttle_s=None if first is None else first.t_s,
        first_throttle_reasons=() if first is None else first.throttle_reasons,
        steady_sm_clock_mhz=None if steady is None else float(steady),
        max_sm_clock_mhz=max_clock,
        max_clock_source=source,
        steady_clock_fraction=None if steady is None or not max_clock else steady / max_clock,
        max_temperature_c=max(temps) if temps else None,
        throttle_share={r: n / len(points) for r, n in sorted(counts.items())},
    )


class TraceRecorder:
    """A daemon thread sampling one GPU of a port until stopped (NVML blocks: never a loop)."""

    def __init__(
        self,
        port: SamplePort,
        gpu_index: int,
        interval_s: float,
        origin_ns: int,
        on_point: Callable[[TracePoint], None] | None = None,
    ) -> None:
        self.points: list[TracePoint] = []
        self.errors: list[str] = []
        self._port, self._index, self._interval = port, gpu_index, interval_s
        self._origin, self._on_point = origin_ns, on_point
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gputui-burn-nvml", daemon=True)

    def start(self) -> None:
        """Begin sampling."""
        self._thread.start()

    def stop(self) -> None:
        """Stop and wait for the thread (at most one sample's time)."""
        self._stop.set()
        self._thread.join(timeout=max(5.0, 2 * self._interval))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                samples = self._port.sample()
            except GputuiError as exc:  # nvidia-smi failing: keep the error, try next tick
                self.errors.append(str(exc))
            else:
                for s in samples:
                    if s.index == self._index:
                        point = TracePoint.from_sample(s, self._origin)
                        self.points.append(point)
                        if self._on_point is not None:
                            self._on_point(point)
            self._stop.wait(self._interval)
