"""`gputui burn`: sustained GEMMs while NVML is sampled; does the card hold its clock?

Contract: `run_burn(backend, port=..., seconds=...)` runs square GEMMs (BF16/FP16 on a GPU) in
batches of about 0.1 s for `seconds` while a daemon thread samples the GPU port (`NvmlSource`, or
nvidia-smi, from `telemetry.setup.open_gpu_port`) every `interval_s`, and returns a `BurnResult`:
the trace, its analysis, the GEMM rate, and the compute check. Every few seconds the latest product
is compared bit for bit with the first one (same inputs on one stream: cuBLAS is deterministic), so
a card that computes wrongly under heat shows as `compute_mismatches`, as gpu-burn does. Ctrl-C
ends the burn early and still returns what was measured (`interrupted`).

The trace, its sampling thread and `analyze_trace` are in `burn_trace` (re-exported here).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from gputui.node.backends import DeviceBackend, DeviceFailure
from gputui.node.burn_trace import (
    SamplePort,
    TracePoint,
    TraceRecorder,
    TraceSummary,
    analyze_trace,
)
from gputui.node.json_docs import BurnJson

__all__ = [
    "BATCH_TARGET_S",
    "CHECK_EVERY_S",
    "BurnResult",
    "SamplePort",
    "TracePoint",
    "TraceRecorder",
    "TraceSummary",
    "analyze_trace",
    "burn_json",
    "burn_report",
    "run_burn",
]

CHECK_EVERY_S: Final = 5.0
BATCH_TARGET_S: Final = 0.1


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
