"""The Session's source of each finished step's telemetry summary (issue 29).

Contract: `window_telemetry(sampler)` returns the ledger's `WindowTelemetry`: for a step's measured
window [lo, hi] it reads the sampler's whole-run traces and hands them to the one summarizing
function, `telemetry.step_telemetry.summarize_window`, with the catalog card's boost clock as the
maximum clock where the samples report none (a throttled share needs it).
"""

from __future__ import annotations

from gputui.metrics.roofline_use import catalog_gpu
from gputui.session.ledger import WindowTelemetry
from gputui.telemetry.sampler import TelemetrySampler
from gputui.telemetry.step_telemetry import StepTelemetry, summarize_window


def window_telemetry(sampler: TelemetrySampler) -> WindowTelemetry:
    """Summarize a window from `sampler`'s traces (module contract)."""

    def summarize(lo_ns: int, hi_ns: int) -> StepTelemetry | None:
        traces = sampler.traces(downsample_to=None)
        if not traces.gpu and not traces.host:
            return None
        first = traces.gpu[0] if traces.gpu else None
        spec = catalog_gpu(first.name, first.memory_total_bytes) if first is not None else None
        top = float(spec.boost_clock_mhz) if spec is not None else None
        return summarize_window(traces.gpu, traces.host, lo_ns, hi_ns, max_clock_mhz=top)

    return summarize
