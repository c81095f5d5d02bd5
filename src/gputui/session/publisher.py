"""The methods that build and publish a Session's live frame, kept apart.

Contract: `gputui.session.Session` inherits `FramePublisherMixin`; its methods read the Session's
own state under its lock. `publish_frame` builds an immutable `StatsFrame` from the rolling window
and swaps it into `latest` (readers never lock); `_publish_forever` does so on the frame thread at a
fixed rate, turning each frame into events (`observe`) and handing it to the diagnoser and to
`on_frame`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from gputui.engine.pool import WorkerPool
from gputui.engine.process import EngineStatus
from gputui.engine.ray_pool import RayPool
from gputui.metrics.client_state import CLIENT_BOUND, HOST_CONTENDED, ClientStateTracker
from gputui.metrics.error_log import ErrorLog
from gputui.metrics.step import StepSpec
from gputui.metrics.window import RollingWindow
from gputui.session.events import EventLog, EventWatcher
from gputui.session.frames import SATURATION_CPU_PERCENT, SATURATION_LAG_MS, StatsFrame
from gputui.session.steady import SteadyStateMixin
from gputui.telemetry.sampler import TelemetryFrame

if TYPE_CHECKING:
    from gputui.diagnosis.step import StepDiagnoser
    from gputui.engine.api import Engine


class FramePublisherMixin(SteadyStateMixin):
    """Builds and publishes a Session's live frames (module contract)."""

    _closing: threading.Event
    _on_frame: Callable[[StatsFrame], None] | None
    _telemetry: Callable[[], TelemetryFrame | None] | None
    _watcher: EventWatcher
    _window: RollingWindow
    _rtt_ns: list[int]
    _seq: int
    _paused: bool
    _engine: Engine
    events: EventLog
    target_state: str
    diagnoser: StepDiagnoser | None
    status: EngineStatus | None
    client_cpu_percent: float
    client_run_wait_percent: float | None
    workers: int
    latest: StatsFrame | None
    error_log: ErrorLog
    client_states: ClientStateTracker

    def _publish_forever(self, interval_s: float) -> None:
        while not self._closing.wait(interval_s):
            frame = self.publish_frame()
            if frame is None:
                continue
            self.observe(frame)
            diagnoser = self.diagnoser
            if diagnoser is not None:
                diagnoser.on_frame(frame)
            if self._on_frame is not None:
                self._on_frame(frame)

    def observe(self, frame: StatsFrame) -> None:
        """Turn what changed since the last frame into events (on the frame thread)."""
        telemetry = self._telemetry() if self._telemetry is not None else None
        seen, self.target_state = self._watcher.observe(frame, telemetry, self.target_state)
        for kind, text in seen:
            self.events.add(kind, text)
        for text in self.error_log.new_messages():
            self.events.add("error", text)

    def worker_cpu_percent(self) -> list[float]:
        """CPU use of each engine process over its last interval (100 = one core)."""
        if isinstance(self._engine, WorkerPool | RayPool):
            return self._engine.worker_cpu_percent
        return [self.client_cpu_percent]

    def worker_run_wait_percent(self) -> list[float | None]:
        """Run-queue wait of each engine process over its last interval (% of wall time)."""
        if isinstance(self._engine, WorkerPool | RayPool):
            return self._engine.worker_run_wait_percent
        return [self.client_run_wait_percent]

    def publish_frame(self) -> StatsFrame | None:
        """Build a frame from the rolling window and swap it into `latest`."""
        self.settle()
        phase = self._phase_fields()
        now = time.perf_counter_ns()
        with self._lock:
            step: StepSpec | None = self._steps[-1] if self._steps else None
            status = self.status
            window = self._window.stats(now)
            rtt = self._rtt_ns[-1] / 1e9 if self._rtt_ns else None
            finished = len(self._finished)
        if step is None:
            return None
        if phase.pop("for_step", step.index) != step.index:
            phase = {}  # the load changed meanwhile: no figures of the step before
        self._seq += 1
        busiest = max(self.worker_cpu_percent())
        lag_ms = status.loop_lag_max_ms if status else 0.0
        waits = [w for w in self.worker_run_wait_percent() if w is not None]
        wait = max(waits) if waits else None
        lagging = busiest >= SATURATION_CPU_PERCENT or lag_ms >= SATURATION_LAG_MS
        state = self.client_states.update(busiest, wait, lagging=lagging)
        frame = StatsFrame(
            seq=self._seq,
            mode=step.mode,
            level=step.level,
            step_index=step.index,
            step_elapsed_s=(now - step.start_ns) / 1e9,
            in_warmup=now < step.measure_start_ns,
            in_flight=status.in_flight if status else 0,
            paused=self._paused,
            window=window,
            client_cpu_percent=self.client_cpu_percent,
            loop_lag_max_ms=status.loop_lag_max_ms if status else 0.0,
            rtt_last_s=rtt,
            steps_finished=finished,
            workers=self.workers,
            busiest_worker_cpu_percent=busiest,
            client_saturated=state == CLIENT_BOUND,
            client_run_wait_percent=wait,
            host_contended=state == HOST_CONTENDED,
            **phase,
        )
        self.latest = frame
        return frame
