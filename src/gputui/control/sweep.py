"""What a run watches beside its plan: requests in flight over time, the queue, bursts on top.

Contract: `InFlightTrace` records the published frames, which the validation hold's queue verdict
(`metrics.validation`) and `burst_recoveries` (`metrics.bursts`, for `--burst`) judge from;
`BurstFirer` fires bursts in its own thread.
Nothing here measures: the engine does, and `gputui.metrics` computes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gputui.engine.records import RequestRecord
from gputui.metrics.bursts import BurstRecovery
from gputui.metrics.bursts import burst_recoveries as recoveries
from gputui.metrics.client_state import ClientSaturation, client_saturation
from gputui.session import Session, StatsFrame


@dataclass
class InFlightTrace:
    """Requests in flight over time, from the published frames (4 Hz)."""

    t_ns: list[int] = field(default_factory=list)
    in_flight: list[int] = field(default_factory=list)
    saturated: list[bool] = field(default_factory=list)
    busiest_cpu_percent: list[float] = field(default_factory=list)
    contended: list[bool] = field(default_factory=list)

    def on_frame(self, frame: StatsFrame) -> None:
        """Session frame callback."""
        self.t_ns.append(time.perf_counter_ns())
        self.in_flight.append(frame.in_flight)
        self.saturated.append(frame.client_saturated)
        self.busiest_cpu_percent.append(frame.busiest_worker_cpu_percent)
        self.contended.append(frame.host_contended)

    def saturation(self) -> ClientSaturation:
        """How often the client itself was the bottleneck (for the snapshot and a warning)."""
        return client_saturation(self.saturated, self.contended, self.busiest_cpu_percent)

    def between(self, lo_ns: int, hi_ns: int) -> tuple[np.ndarray, np.ndarray]:
        """(t_s relative to lo, in_flight) for frames inside [lo, hi)."""
        t = np.array(self.t_ns, dtype=np.int64)
        v = np.array(self.in_flight, dtype=np.float64)
        mask = (t >= lo_ns) & (t < hi_ns)
        return (t[mask] - lo_ns) / 1e9, v[mask]


class BurstFirer:
    """Fires K requests every S seconds on top of the load, in its own thread."""

    def __init__(self, session: Session, count: int, every_s: float) -> None:
        self._session = session
        self._count = count
        self._every_s = every_s
        self._stop = threading.Event()
        self.fired_ns: list[int] = []
        self._thread = threading.Thread(target=self._run, name="gputui-bursts", daemon=True)

    def start(self) -> None:
        """Begin firing (the first burst after one period)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop firing."""
        self._stop.set()
        self._thread.join(timeout=2.0)

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            self.fired_ns.append(time.perf_counter_ns())
            self._session.burst(self._count)


def burst_recoveries(
    fired_ns: Sequence[int],
    count: int,
    records: Sequence[RequestRecord],
    trace: InFlightTrace,
    ttft_bound_s: float | None,
    origin_ns: int,
) -> list[BurstRecovery]:
    """Per burst, its recovery from the trace's frames (`metrics.bursts.burst_recoveries`)."""
    frames = (trace.t_ns, trace.in_flight)
    return recoveries(fired_ns, count, records, frames, ttft_bound_s, origin_ns)
