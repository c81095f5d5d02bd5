"""The live view's part of the session loop: the rolling window, the client's figures, the frames.

Contract: the `session.loop.SessionLoop` owns one `LiveFrames` and calls it on its own thread
alone: `on_batch` with each engine batch (the requests kept, the engine's CPU and token count, the
round-trip probes), `build` for each frame (`session.frames.build_frame` from the window's figures
and the step fields the loop passes), `observe` to turn what changed since the last frame into
events (`session.events.EventWatcher`), and `hand_on` to record it in the in-flight trace
(`session.in_flight`) and pass it to the diagnoser and `on_frame`. Nothing else writes or reads
what it keeps, so nothing locks; readers on other threads go through `SessionLoop.ask`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gputui.engine.process import EngineStatus
from gputui.engine.records import RequestRecord
from gputui.metrics.client_state import ClientStateTracker
from gputui.metrics.error_log import ErrorLog
from gputui.metrics.step import StepSpec
from gputui.metrics.streamed_rate import StreamedRate
from gputui.metrics.verdict import Verdict
from gputui.metrics.window import RollingWindow, WindowStats
from gputui.session.cpu import EngineCpu, WorkerFigures
from gputui.session.diagnosis import StepDiagnosis
from gputui.session.events import EventLog, EventWatcher
from gputui.session.frames import Handover, StatsFrame, build_frame, client_lagging
from gputui.session.in_flight import InFlightTrace
from gputui.session.messages import Batch
from gputui.session.steady import StepPhase
from gputui.telemetry.sampler import TelemetryFrame


class LiveFrames:
    """The loop's live figures and frames (module contract)."""

    def __init__(
        self,
        *,
        window: RollingWindow,
        events: EventLog,
        error_log: ErrorLog,
        client_states: ClientStateTracker,
        worker_figures: WorkerFigures,
        workers: int,
        telemetry: Callable[[], TelemetryFrame | None] | None,
        on_frame: Callable[[StatsFrame], None] | None,
    ) -> None:
        self.window = window
        self.streamed = StreamedRate(window.window_s)
        """The live tok/s from the engine's running token count (requests in flight included)."""
        self._events = events
        self._error_log = error_log
        self._client_states = client_states
        self._worker_figures = worker_figures
        self._workers = workers
        self._telemetry = telemetry
        self._on_frame = on_frame
        self.cpu = EngineCpu()
        self.rtt_ns: list[int] = []
        self.rtt_at_ns: list[int] = []
        """When each RTT sample reached the session (per-step network share; diagnosis)."""
        self.probes_failed = 0
        self.target_state = "ok"
        self.trace = InFlightTrace()
        """Requests in flight frame by frame: the validation hold's queue, bursts, saturation."""
        self._watcher = EventWatcher()
        self._seq = 0

    def on_batch(self, batch: Batch, kept: list[RequestRecord]) -> None:
        """An engine batch: its kept requests, the engine's CPU and tokens, the probes."""
        self.window.add(kept)
        self.cpu.update(batch.status)
        if batch.status.tokens_streamed is not None:
            self.streamed.add(batch.arrived_ns, batch.status.tokens_streamed)
        for sample in batch.rtt:
            if sample is None:
                self.probes_failed += 1
            else:
                self.rtt_ns.append(sample)
                self.rtt_at_ns.append(batch.arrived_ns)

    def rtt_between(self, lo_ns: int, hi_ns: int) -> list[int]:
        """RTT samples (ns) that reached the session within [lo_ns, hi_ns)."""
        pairs = zip(self.rtt_ns, self.rtt_at_ns, strict=True)
        return [r for r, t in pairs if lo_ns <= t < hi_ns]

    def build(
        self,
        *,
        step: StepSpec,
        now_ns: int,
        phase: StepPhase,
        status: EngineStatus | None,
        steps_finished: int,
        paused_at_ns: int | None,
        handover: Handover | None,
        hold_look: tuple[Verdict, str] | None,
    ) -> StatsFrame:
        """The frame of `now_ns` for the latest step (`session.frames.build_frame`)."""
        self._seq += 1
        cpus, waits = self._worker_figures(self.cpu.percent, self.cpu.run_wait_percent)
        busiest = max(cpus)
        known = [w for w in waits if w is not None]
        wait = max(known) if known else None
        lagging = client_lagging(busiest, status)
        return build_frame(
            seq=self._seq,
            step=step,
            now_ns=now_ns,
            window=self._window_stats(now_ns),
            phase=phase,
            status=status,
            client_cpu_percent=self.cpu.percent,
            busiest_cpu_percent=busiest,
            run_wait_percent=wait,
            client_state=self._client_states.update(busiest, wait, lagging=lagging),
            rtt_last_s=self.rtt_ns[-1] / 1e9 if self.rtt_ns else None,
            steps_finished=steps_finished,
            workers=self._workers,
            paused=paused_at_ns is not None,
            paused_at_ns=paused_at_ns,
            handover=handover,
            hold_look=hold_look,
        )

    def _window_stats(self, now: int) -> WindowStats:
        """The window's figures, its tok/s from the tokens streamed (issue 31) where known.

        The finished requests alone miss the tokens of those still in flight.
        """
        stats = self.window.stats(now)
        live = self.streamed.rate(now)
        return stats if live is None else replace(stats, output_tokens_per_s=live)

    def observe(self, frame: StatsFrame) -> None:
        """Turn what changed since the last frame into events, and the target state they imply."""
        telemetry = self._telemetry() if self._telemetry is not None else None
        seen, self.target_state = self._watcher.observe(frame, telemetry, self.target_state)
        for kind, text in seen:
            self._events.add(kind, text)
        for text in self._error_log.new_messages():
            self._events.add("error", text)

    def hand_on(self, frame: StatsFrame, now_ns: int, diagnosis: StepDiagnosis) -> None:
        """Record a published frame in the trace, and give it to the diagnoser and `on_frame`."""
        self.trace.add(frame, now_ns)
        diagnoser = diagnosis.diagnoser
        if diagnoser is not None:
            diagnoser.on_frame(frame)
        if self._on_frame is not None:
            self._on_frame(frame)
