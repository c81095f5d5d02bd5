"""One frozen summary of what telemetry saw during a step's measured window (issue 29).

Contract: `summarize_window(gpu, host, lo_ns, hi_ns, max_clock_mhz=None)` is the one function that
turns samples into a step's telemetry figures; it is pure (samples in, `StepTelemetry` out) and
`StepTelemetry` is what the step carries, the snapshot saves (`steps[].telemetry`,
`steps[].energy`) and the UI, `run`, compare and the report read. Nothing else recomputes these
figures from the traces.

- The GPUs serving the model are those that, inside the window, held at least
  `SERVING_MEMORY_SHARE` of their memory or were busy at least `SERVING_UTIL_PCT` on average; when
  the samples say neither (no memory or utilisation reported), every GPU counts. Power, energy and
  clocks are over those GPUs; `gpus` says how many. Power figures are sums over them.
- Energy: the counter's change over the window (`telemetry.energy.counter_joules`) when every
  serving GPU reports the counter ("counter"); else the trapezoid integral of each one's power
  ("integrated"), with the polls per second inside the window (`sample_hz`) saved beside it.
- Throttled share: the share of polls in the window in which a serving GPU reported a reason that
  holds clocks down (`THROTTLING_MASK`) while running below `THROTTLE_CLOCK_RATIO` of its maximum
  clock (its own reported maximum, else `max_clock_mhz`, else the reason alone counts).
- Every figure is None when no sample says it; `window_s` is the window's length.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from gputui.jsontypes import JsonObject
from gputui.telemetry.energy import counter_joules, integrated_joules, sample_hz
from gputui.telemetry.samples import GpuSample, HostSample
from gputui.telemetry.throttle import THROTTLING_MASK, throttling

EnergyMethod = Literal["counter", "integrated"]

SERVING_MEMORY_SHARE: Final = 0.25
SERVING_UTIL_PCT: Final = 5.0
THROTTLE_CLOCK_RATIO: Final = 0.95
"""A reason set while the clock is within 5 % of its maximum does not slow the card (the
bottleneck rules' `metrics.bottleneck.THROTTLE_CLOCK_RATIO`)."""
BUSY_UTIL_PCT: Final = 5.0
"""Clock figures are over busy samples (an idle card reports its idle clock)."""


@dataclass(frozen=True, slots=True)
class WindowEnergy:
    """Energy of the serving GPUs over the window, and how it was measured."""

    joules: float
    mean_power_w: float
    gpus: int
    method: EnergyMethod
    sample_hz: float | None


@dataclass(frozen=True, slots=True)
class StepTelemetry:
    """What telemetry saw during one step's measured window (module contract)."""

    window_s: float
    gpus: int = 0
    """GPUs serving the model (0 without GPU samples)."""
    gpu_samples: int = 0
    """Polls of the GPUs inside the window."""
    sample_hz: float | None = None
    power_mean_w: float | None = None
    power_max_w: float | None = None
    energy: WindowEnergy | None = None
    temperature_max_c: float | None = None
    sm_clock_mean_mhz: float | None = None
    sm_clock_min_mhz: float | None = None
    mem_clock_mean_mhz: float | None = None
    utilization_mean_pct: float | None = None
    throttled_share: float | None = None
    throttle_reasons: tuple[str, ...] = ()
    vram_peak_bytes: int | None = None
    """The largest used memory of one serving GPU."""
    vram_total_bytes: int | None = None
    """That GPU's total memory."""
    host_cpu_mean_pct: float | None = None
    host_cpu_max_pct: float | None = None
    host_mem_peak_bytes: int | None = None

    def to_dict(self) -> JsonObject:
        """JSON-ready form (the energy as its own object, reasons as a list)."""
        out: JsonObject = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, WindowEnergy):
                out[f.name] = dataclasses.asdict(value)
            else:
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


def summarize_window(
    gpu: Sequence[GpuSample],
    host: Sequence[HostSample],
    lo_ns: int,
    hi_ns: int,
    *,
    max_clock_mhz: float | None = None,
) -> StepTelemetry:
    """The window's telemetry figures (module contract)."""
    window_s = max(hi_ns - lo_ns, 0) / 1e9
    by_gpu: dict[int, list[GpuSample]] = {}
    for sample in sorted(gpu, key=lambda s: s.t_ns):
        by_gpu.setdefault(sample.index, []).append(sample)
    serving = _serving(by_gpu, lo_ns, hi_ns)
    inside = [s for i in serving for s in by_gpu[i] if lo_ns <= s.t_ns <= hi_ns]
    polls = sorted({s.t_ns for s in inside})
    hz = sample_hz(polls, lo_ns, hi_ns)
    busy = [s for s in inside if (s.utilization_gpu_pct or 0.0) > BUSY_UTIL_PCT]
    sm = [float(s.sm_clock_mhz) for s in busy if s.sm_clock_mhz is not None]
    mem = [float(s.mem_clock_mhz) for s in busy if s.mem_clock_mhz is not None]
    temps = [s.temperature_c for s in inside if s.temperature_c is not None]
    util = [s.utilization_gpu_pct for s in inside if s.utilization_gpu_pct is not None]
    power_by_poll = _power_by_poll(inside)
    share, reasons = _throttling(inside, len(polls), max_clock_mhz)
    vram = max(
        (s for s in inside if s.memory_used_bytes is not None),
        key=lambda s: s.memory_used_bytes or 0,
        default=None,
    )
    cpu = [h.cpu_pct for h in host if lo_ns <= h.t_ns <= hi_ns and h.cpu_pct is not None]
    mem_used = [h.mem_used_bytes for h in host if lo_ns <= h.t_ns <= hi_ns and h.mem_used_bytes]
    return StepTelemetry(
        window_s=window_s,
        gpus=len(serving),
        gpu_samples=len(polls),
        sample_hz=hz,
        power_mean_w=_mean(power_by_poll),
        power_max_w=max(power_by_poll) if power_by_poll else None,
        energy=_energy(by_gpu, serving, lo_ns, hi_ns, hz) if polls else None,
        temperature_max_c=max(temps) if temps else None,
        sm_clock_mean_mhz=_mean(sm),
        sm_clock_min_mhz=min(sm) if sm else None,
        mem_clock_mean_mhz=_mean(mem),
        utilization_mean_pct=_mean(util),
        throttled_share=share,
        throttle_reasons=reasons,
        vram_peak_bytes=vram.memory_used_bytes if vram is not None else None,
        vram_total_bytes=vram.memory_total_bytes if vram is not None else None,
        host_cpu_mean_pct=_mean(cpu),
        host_cpu_max_pct=max(cpu) if cpu else None,
        host_mem_peak_bytes=max(mem_used) if mem_used else None,
    )


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _serving(by_gpu: dict[int, list[GpuSample]], lo_ns: int, hi_ns: int) -> list[int]:
    """The GPUs serving the model (module contract), in index order."""
    found, told = [], False
    for index in sorted(by_gpu):
        inside = [s for s in by_gpu[index] if lo_ns <= s.t_ns <= hi_ns] or by_gpu[index]
        shares = [
            s.memory_used_bytes / s.memory_total_bytes
            for s in inside
            if s.memory_used_bytes is not None and s.memory_total_bytes
        ]
        util = [s.utilization_gpu_pct for s in inside if s.utilization_gpu_pct is not None]
        told = told or bool(shares) or bool(util)
        busy = bool(util) and sum(util) / len(util) >= SERVING_UTIL_PCT
        if (shares and max(shares) >= SERVING_MEMORY_SHARE) or busy:
            found.append(index)
    return found if found or told else sorted(by_gpu)


def _power_by_poll(inside: Sequence[GpuSample]) -> list[float]:
    """Summed power of the serving GPUs at each poll that reported it."""
    totals: dict[int, float] = {}
    for s in inside:
        if s.power_w is not None:
            totals[s.t_ns] = totals.get(s.t_ns, 0.0) + s.power_w
    return [totals[t] for t in sorted(totals)]


def _throttling(
    inside: Sequence[GpuSample], polls: int, max_clock_mhz: float | None
) -> tuple[float | None, tuple[str, ...]]:
    """Share of polls with a serving GPU held back, and the reasons seen (module contract)."""
    if not polls or all(s.throttle_mask is None for s in inside):
        return None, ()
    held: set[int] = set()
    reasons: set[str] = set()
    for s in inside:
        if not (s.throttle_mask or 0) & THROTTLING_MASK:
            continue
        top = s.sm_clock_max_mhz or max_clock_mhz
        ratio = s.sm_clock_mhz / top if s.sm_clock_mhz and top else None
        if ratio is None or ratio < THROTTLE_CLOCK_RATIO:
            held.add(s.t_ns)
            reasons.update(throttling(s.throttle_mask))
    return len(held) / polls, tuple(sorted(reasons))


def _energy(
    by_gpu: dict[int, list[GpuSample]],
    serving: Sequence[int],
    lo_ns: int,
    hi_ns: int,
    hz: float | None,
) -> WindowEnergy | None:
    """Counter energy when every serving GPU has the counter, else integrated power."""
    if not serving or hi_ns <= lo_ns:
        return None
    counted = [
        counter_joules(
            [(s.t_ns, s.energy_mj) for s in by_gpu[i] if s.energy_mj is not None], lo_ns, hi_ns
        )
        for i in serving
    ]
    method: EnergyMethod = "counter"
    joules: list[float | None] = list(counted)
    if any(j is None for j in joules):
        method = "integrated"
        joules = [
            integrated_joules(
                [(s.t_ns, s.power_w) for s in by_gpu[i] if s.power_w is not None], lo_ns, hi_ns
            )
            for i in serving
        ]
    if any(j is None for j in joules):
        return None
    total = sum(j for j in joules if j is not None)
    return WindowEnergy(
        joules=total,
        mean_power_w=total / ((hi_ns - lo_ns) / 1e9),
        gpus=len(serving),
        method=method,
        sample_hz=hz,
    )
