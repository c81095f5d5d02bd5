"""What the live controller keeps of past frames: sparklines, the workload's progress, UI CPU.

Contract: `LiveHistory.on_frame` runs for each new frame on the Session's loop thread: it keeps
the last `HISTORY` frames' output throughput and error rate (the sparklines) and, at most once a
second, the conversations' or replay's live account (`workloads.live_progress`, the workload
panel). `track_cpu` (on the UI's poll) measures the UI process's CPU over the last second. The
UI reads the fields; each is swapped whole, never changed in place.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from gputui.engine.records import RequestRecord
from gputui.session import StatsFrame
from gputui.telemetry.sampler import TelemetrySampler
from gputui.workloads.live_progress import WorkloadProgress, workload_progress

if TYPE_CHECKING:
    from gputui.workloads.sources import SourcePlan

HISTORY = 240
"""Frames of throughput / error-rate history kept for the sparklines (a minute at 4 Hz)."""
_PROGRESS_NS = 1_000_000_000


class LiveHistory:
    """The controller's memory of past frames (module contract)."""

    def __init__(
        self,
        source: SourcePlan | None,
        records: Callable[[], list[RequestRecord]],
        telemetry: TelemetrySampler | None,
    ) -> None:
        self._source = source
        self._records = records
        self._telemetry = telemetry
        self._throughput: deque[float] = deque(maxlen=HISTORY)
        self._error_rate: deque[float] = deque(maxlen=HISTORY)
        self.progress: WorkloadProgress | None = (
            workload_progress(source, (), 0) if source is not None else None
        )  # from the first view on, so the workload panel is laid out from the start
        self._progress_ns = 0
        self._cpu_mark = (time.process_time(), time.perf_counter())
        self.ui_cpu: float | None = None

    @property
    def throughput(self) -> tuple[float, ...]:
        """Output tokens per second, frame by frame."""
        return tuple(self._throughput)

    @property
    def error_rate(self) -> tuple[float, ...]:
        """The rolling window's error rate, frame by frame."""
        return tuple(self._error_rate)

    def on_frame(self, frame: StatsFrame) -> None:
        """Keep this frame's figures (on the Session's loop thread)."""
        self._throughput.append(frame.window.output_tokens_per_s)
        self._error_rate.append(frame.window.error_rate or 0.0)
        self._update_progress()

    def _update_progress(self) -> None:
        """Once a second, the conversations' or replay's live account (the workload panel)."""
        plan = self._source
        now = time.perf_counter_ns()
        if plan is None or now - self._progress_ns < _PROGRESS_NS:
            return
        self._progress_ns = now
        telemetry = self._telemetry
        server = telemetry.traces(downsample_to=None).server if telemetry is not None else ()
        self.progress = workload_progress(plan, self._records(), now, server)

    def track_cpu(self) -> None:
        """The UI process's CPU over the last second."""
        cpu_s, wall_s = time.process_time(), time.perf_counter()
        if wall_s - self._cpu_mark[1] >= 1.0:
            self.ui_cpu = 100.0 * (cpu_s - self._cpu_mark[0]) / (wall_s - self._cpu_mark[1])
            self._cpu_mark = (cpu_s, wall_s)
