"""`gputui burn`: sustained GEMMs while NVML is sampled; does the card hold its clock?

Contract: `run_burn(backend, port=..., seconds=...)` runs square GEMMs (BF16/FP16 on a GPU) in
batches of about 0.1 s for `seconds` while a daemon thread samples the GPU port (`NvmlSource`, or
nvidia-smi, from `telemetry.setup.open_gpu_port`) every `interval_s`, and returns a `BurnResult`:
the trace, its analysis, the GEMM rate, and the compute check. Every few seconds the latest product
is compared bit for bit with the first one (same inputs on one stream: cuBLAS is deterministic), so
a card that computes wrongly under heat shows as `compute_mismatches`, as gpu-burn does. Ctrl-C
ends the burn early and still returns what was measured (`interrupted`).

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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from gputui.errors import GputuiError
from gputui.node.backends import DeviceBackend, DeviceFailure
from gputui.node.json_docs import BurnJson, TracePointJson
from gputui.telemetry.samples import GpuSample
from gputui.telemetry.throttle import decode, throttling

STEADY_TAIL: Final = 0.3
CHECK_EVERY_S: Final = 5.0
BATCH_TARGET_S: Final = 0.1
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


@dataclass(frozen=True, slots=True)
class BurnResult:
    """Everything `gputui burn` measured."""

    gpu: int
    name: str
    backend: str
    dtype: str
    size: int
    requested_seconds: float
    seconds: float
    gemm_count: int
    tflops: float | None
    catalog_name: str | None
    catalog_bf16_tflops: float | None
    compute_checks: int
    compute_mismatches: int
    trace: tuple[TracePoint, ...]
    summary: TraceSummary
    telemetry: str
    """"nvml", "nvidia-smi" or "unavailable: <reason>"."""
    interrupted: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def verdict(self) -> str:
        """Fail on wrong results; warn on thermal throttling or a missing trace; else pass."""
        if self.compute_mismatches:
            return "fail"
        if self.summary.thermal or not self.trace:
            return "warn"
        return "pass"


def run_burn(
    backend: DeviceBackend,
    *,
    gpu: int,
    name: str,
    port: SamplePort | None,
    port_index: int,
    telemetry: str,
    seconds: float = 600.0,
    interval_s: float = 0.5,
    size: int = 8192,
    catalog_boost_mhz: int | None = None,
    catalog_name: str | None = None,
    catalog_bf16_tflops: float | None = None,
    on_point: Callable[[TracePoint], None] | None = None,
) -> BurnResult:
    """GEMMs for `seconds` while sampling (see the module docstring)."""
    try:
        gemm = backend.make_gemm(size)
    except (RuntimeError, MemoryError) as exc:  # CUDA errors; CuPy's OOM is a MemoryError
        backend.release()
        raise DeviceFailure(f"GPU {gpu}: cannot set up the GEMMs: {_line(exc)}") from None
    dtype, size = gemm.dtype, gemm.size  # the NumPy stand-in caps the size
    start = time.perf_counter_ns()
    recorder = (
        None if port is None else TraceRecorder(port, port_index, interval_s, start, on_point)
    )
    if recorder is not None:
        recorder.start()
    deadline = start + int(seconds * 1e9)
    count, checks, bad, batch, interrupted = 0, 0, 0, 1, False
    next_check = start + int(CHECK_EVERY_S * 1e9)
    try:
        while (now := time.perf_counter_ns()) < deadline:
            gemm.run(batch)
            count += batch
            took = (time.perf_counter_ns() - now) / 1e9
            batch = max(1, min(4 * batch, int(batch * BATCH_TARGET_S / max(took, 1e-6))))
            if time.perf_counter_ns() >= next_check:
                checks += 1
                bad += not gemm.verify()
                next_check += int(CHECK_EVERY_S * 1e9)
        checks += 1
        bad += not gemm.verify()
    except KeyboardInterrupt:
        interrupted = True
    except (RuntimeError, MemoryError) as exc:
        at = (time.perf_counter_ns() - start) / 1e9
        raise DeviceFailure(f"GPU {gpu} failed {at:.1f} s into the burn: {_line(exc)}") from None
    finally:
        if recorder is not None:
            recorder.stop()
        del gemm
        backend.release()
    elapsed = (time.perf_counter_ns() - start) / 1e9
    trace = tuple(recorder.points) if recorder is not None else ()
    notes = [] if recorder is None or not recorder.errors else [f"telemetry: {recorder.errors[-1]}"]
    if port is None:
        notes.append(f"no GPU telemetry ({telemetry}): no clock or temperature trace")
    return BurnResult(
        gpu=gpu,
        name=name,
        backend=backend.name,
        dtype=dtype,
        size=size,
        requested_seconds=seconds,
        seconds=elapsed,
        gemm_count=count,
        tflops=2 * size**3 * count / elapsed / 1e12 if elapsed > 0 else None,
        catalog_name=catalog_name,
        catalog_bf16_tflops=catalog_bf16_tflops,
        compute_checks=checks,
        compute_mismatches=bad,
        trace=trace,
        summary=analyze_trace(trace, catalog_boost_mhz=catalog_boost_mhz),
        telemetry=telemetry,
        interrupted=interrupted,
        notes=tuple(notes),
    )


def _line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def burn_json(r: BurnResult, max_points: int | None = None) -> BurnJson:
    """The `--json` document (keys fixed by the issue; extras after them)."""
    s = r.summary
    trace = list(r.trace)
    if max_points is not None and len(trace) > max_points:
        step = math.ceil(len(trace) / max_points)
        trace = trace[::step]
    return {
        "gpu": r.gpu,
        "name": r.name,
        "seconds": round(r.seconds, 3),
        "trace": [p.to_dict() for p in trace],
        "first_throttle_s": None if s.first_throttle_s is None else round(s.first_throttle_s, 3),
        "first_throttle_reasons": list(s.first_throttle_reasons),
        "steady_sm_clock_mhz": s.steady_sm_clock_mhz,
        "max_sm_clock_mhz": s.max_sm_clock_mhz,
        "steady_clock_fraction": _round(s.steady_clock_fraction, 3),
        "max_temperature_c": s.max_temperature_c,
        "verdict": r.verdict,
        "backend": r.backend,
        "dtype": r.dtype,
        "matrix_size": r.size,
        "requested_seconds": r.requested_seconds,
        "interrupted": r.interrupted,
        "gemm_count": r.gemm_count,
        "tflops": _round(r.tflops, 2),
        "catalog_name": r.catalog_name,
        "catalog_bf16_tflops": r.catalog_bf16_tflops,
        "compute_checks": r.compute_checks,
        "compute_mismatches": r.compute_mismatches,
        "max_clock_source": s.max_clock_source,
        "throttle_share": {k: round(v, 3) for k, v in s.throttle_share.items()},
        "samples": s.samples,
        "telemetry": r.telemetry,
        "notes": list(r.notes),
    }


def burn_report(r: BurnResult) -> str:
    """The plain-text report: a coarse trace table and the summary."""
    s = r.summary
    lines = [
        f"GPU {r.gpu}  {r.name}  (via {r.backend}, {r.dtype} {r.size}x{r.size} GEMMs)",
        f"ran       {r.seconds:.1f} s of {r.requested_seconds:g} s"
        + ("  (interrupted)" if r.interrupted else "")
        + f"; {r.gemm_count} GEMMs = {_fmt(r.tflops, '.3g')} TFLOPS"
        + (
            f" (catalog {r.catalog_bf16_tflops:g} dense BF16, {r.catalog_name})"
            if r.catalog_bf16_tflops
            else ""
        ),
    ]
    if r.trace:
        lines.append(f"  {'t s':>7} {'SM MHz':>7} {'temp C':>7} {'power W':>8}  throttle")
        step = max(1, math.ceil(len(r.trace) / 12))
        shown = list(r.trace[::step])
        if shown[-1] is not r.trace[-1]:
            shown.append(r.trace[-1])
        lines += [
            f"  {p.t_s:>7.1f} {_fmt(p.sm_clock_mhz, 'd'):>7} {_fmt(p.temperature_c, '.0f'):>7} "
            f"{_fmt(p.power_w, '.0f'):>8}  {', '.join(p.throttle_reasons) or '-'}"
            for p in shown
        ]
    first = (
        "none"
        if s.first_throttle_s is None
        else f"{s.first_throttle_s:.1f} s ({', '.join(s.first_throttle_reasons)})"
    )
    lines += [
        f"throttle  first at {first}"
        + (
            "; share of samples: " + ", ".join(f"{k} {v:.0%}" for k, v in s.throttle_share.items())
            if s.throttle_share
            else ""
        ),
        f"clock     steady {_fmt(s.steady_sm_clock_mhz, '.0f')} MHz (median of the last 30 %) = "
        f"{_fmt(s.steady_clock_fraction, '.2f')} of max {_fmt(s.max_sm_clock_mhz, 'd')} MHz "
        f"({s.max_clock_source or 'n/a'})",
        f"temp      max {_fmt(s.max_temperature_c, '.0f')} C",
        f"compute   {r.compute_mismatches} wrong results in {r.compute_checks} bit-exact checks",
    ]
    lines += [f"note      {n}" for n in r.notes]
    lines.append(f"verdict   {r.verdict}")
    return "\n".join(lines)


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
