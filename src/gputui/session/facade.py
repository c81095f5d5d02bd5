"""The Session: the one facade that both the TUI and the headless `gputui run` drive.

Contract: the Session owns the engine (`engine.api.Engine`: a process or a pool), the step
bookkeeping and the statistics. Callers change the load (`set_load`, `pause`, `resume`, `burst`,
`stop`); each change of level opens a new step whose first `warmup_s` are excluded from its
statistics. A step is finished once it is closed *and* every request sent during it has come back,
so its figures never silently lose the slow requests. Live figures are published as an immutable
`StatsFrame` swapped into `latest`; readers never see a half-built frame and never lock. The Session
also keeps what both front ends share: the event log (`events`, detected on the frame thread), the
crash journal (`open_journal`) and the steps a snapshot is assembled from
(`snapshot.assemble.save_session`).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np

from gputui.diagnosis.step import StepDiagnoser
from gputui.engine.api import Engine, EngineFactory, engine_factory
from gputui.engine.commands import Burst, Load, Pause, Resume
from gputui.engine.load import LoadMode
from gputui.engine.process import EngineConfig, EngineStatus
from gputui.engine.records import REASON_CANCELLED, RequestRecord
from gputui.engine.schedstat import wait_percent
from gputui.errors import EngineFailed
from gputui.metrics.client_state import ClientStateTracker
from gputui.metrics.error_log import ErrorLog
from gputui.metrics.precision import mark_precision
from gputui.metrics.rejudge import rejudge_step
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult, StepSpec, aggregate_step
from gputui.metrics.step_diagnosis import StepDiagnosis as Diagnosis
from gputui.metrics.summary import Summary, summarize
from gputui.metrics.verdict_progress import VerdictProgress
from gputui.metrics.window import RollingWindow
from gputui.session.diagnosis import StepDiagnosis
from gputui.session.events import EventLog, EventWatcher, load_event, step_events
from gputui.session.frames import StatsFrame as StatsFrame  # re-exported: callers import it here
from gputui.session.publisher import FramePublisherMixin
from gputui.session.settling import DEFAULT_MAX_WARMUP_S, SettleTracker
from gputui.snapshot.journal import Journal, JournalHeader, JournalWriter
from gputui.telemetry.sampler import TelemetryFrame, TelemetrySampler

_ENGINE_START_TIMEOUT_S = 60.0
JOURNAL_INTERVAL_S = 1.0
"""How often the journal is written and fsync'd: a `kill -9` loses at most this much."""


class Session(FramePublisherMixin):
    """A live load experiment against one target.

    Steady state and precision: `session.steady`; frames: `session.publisher` (mixins, each with
    its own contract); diagnosis: a `session.diagnosis.StepDiagnosis` it hands finished steps.
    """

    def __init__(
        self,
        config: EngineConfig,
        sla: Sla,
        *,
        warmup_s: float | None,
        window_s: float = 30.0,
        on_step_finished: Callable[[StepResult], None] | None = None,
        on_frame: Callable[[StatsFrame], None] | None = None,
        workers: int = 1,
        ray_address: str | None = None,
        telemetry: Callable[[], TelemetryFrame | None] | None = None,
        max_warmup_s: float = DEFAULT_MAX_WARMUP_S,
        engine: EngineFactory | None = None,
    ) -> None:
        self.config = config
        self.sla = sla
        self.warmup_s = warmup_s
        """A fixed warm-up (`--warmup-seconds`), or None: each step settles (`session.settling`)."""
        self.max_warmup_s = max_warmup_s
        self._settle: SettleTracker | None = None
        self._targets: dict[int, float] = {}
        self._precision_at: tuple[int, int, float | None, int, VerdictProgress | None]
        self._precision_at = (-1, -1, None, 0, None)
        self._job_phase = "measuring"
        self._stop_listeners: list[Callable[[], None]] = []
        self._on_step_finished = on_step_finished
        self._on_frame = on_frame
        self._closing = threading.Event()
        self._frames: threading.Thread | None = None
        self.workers = workers
        build = engine if engine is not None else engine_factory(config, workers, ray_address)
        self._engine: Engine = build(self._on_batch)
        self._lock = threading.Lock()
        self._steps: list[StepSpec] = []
        self._records: dict[int, list[RequestRecord]] = {}
        self._received: Counter[int] = Counter()
        self._sent: dict[int, int] = {}
        self._finished: dict[int, StepResult] = {}
        self._window = RollingWindow(window_s, ci=True)
        self._rtt_ns: list[int] = []
        self._rtt_at_ns: list[int] = []
        """When each RTT sample reached the session (per-step network share; diagnosis)."""
        self.probes_failed = 0
        self.cancelled = 0
        """Requests aborted because the run was interrupted: excluded from every statistic."""
        self._cancelled_by_step: Counter[int] = Counter()
        self.status: EngineStatus | None = None
        self._status_prev: tuple[float, float] | None = None
        self.client_cpu_percent = 0.0
        self.client_run_wait_percent: float | None = None
        """The engine's run-queue wait over its last batch interval (engine.schedstat)."""
        self._wait_prev: EngineStatus | None = None
        self.latest: StatsFrame | None = None
        self._seq = 0
        self._paused = False
        self._engine_stopped = False
        self._interrupted_step: int | None = None
        self._hidden: set[int] = set()
        self.started_ns = 0
        self._journal: JournalWriter | None = None
        self._telemetry = telemetry
        self.events = EventLog(time.perf_counter_ns())
        """What happened, by the rules of `gputui.session.events` (both front ends read it)."""
        self.target_state = "ok"
        """"ok", or `events.TARGET_DOWN` while requests stop connecting."""
        self._watcher = EventWatcher()
        self._diagnosis = StepDiagnosis(self.events)
        self.error_log = ErrorLog()
        """The server's messages for failures, and steps flooded with rejections."""
        self.client_states = ClientStateTracker()
        """Client-bound or host-contended, frame by frame (metrics.client_state)."""

    # control -----------------------------------------------------------------------------------
    def start(self, *, frame_interval_s: float | None = 0.25) -> None:
        """Start the engine process (no load until `set_load`) and the frame publisher.

        Frames are built in their own thread at a fixed rate (4 Hz by default, never above 10 Hz),
        so a reader only ever swaps in a finished frame and the engine never waits on it.
        """
        self._engine.start()
        # A step must not start while its engine is still importing: wait for the loop to run.
        if not self._engine.wait_ready(_ENGINE_START_TIMEOUT_S):
            raise EngineFailed("the load engine process did not start")
        self.started_ns = time.perf_counter_ns()
        if frame_interval_s is not None:
            interval_s = max(frame_interval_s, 0.1)
            self._frames = threading.Thread(
                target=self._publish_forever, args=(interval_s,), name="gputui-frames", daemon=True
            )
            self._frames.start()

    def set_load(self, mode: LoadMode, level: float) -> StepSpec:
        """Close the current step and start a new one at this load."""
        now = time.perf_counter_ns()
        with self._lock:
            self._close_current(now)
            warmup_s = self.max_warmup_s if self.warmup_s is None else self.warmup_s
            step = StepSpec(
                index=len(self._steps),
                mode=mode,
                level=float(level),
                start_ns=now,
                measure_start_ns=now + int(warmup_s * 1e9),
                end_ns=-1,
            )
            self._steps.append(step)
            self._settle = self._new_tracker(step)
            writer, hidden = self._journal, step.index in self._hidden
        if writer is not None:
            writer.journal.add_load(step, self.started_ns, hidden=hidden)
        if not hidden:
            self.events.add(*load_event(mode, float(level)))
        self._engine.send(Load(mode, float(level), step.index))
        return step

    def hold(self) -> StepSpec | None:
        """Close the current step but keep its load, in a hidden step reported nowhere.

        An automatic sweep needs a step's figures (all its requests back) before it can choose the
        next level; meanwhile the load carries on, as warm-up of whatever comes next.
        """
        current = self.current_step
        if current is None:
            return None
        with self._lock:
            self._hidden.add(len(self._steps))  # before set_load journals it
        return self.set_load(current.mode, current.level)

    def pause(self) -> None:
        """Stop sending new requests; the step stays open (the TUI opens a new one on resume)."""
        self._paused = True
        self._engine.send(Pause())

    def resume(self) -> None:
        """Send again."""
        self._paused = False
        self._engine.send(Resume())

    def burst(self, count: int) -> None:
        """Fire `count` requests at once on top of the current load."""
        self._engine.send(Burst(count))

    def stop(self, *, cancel: bool, drain_timeout_s: float = 600.0) -> None:
        """End the run: close the last step, wait for (or abort) in-flight requests, finish steps.

        `cancel` means the run was interrupted: in-flight requests are aborted (and excluded), and
        the step that was running is marked incomplete.
        """
        for listener in self._stop_listeners:
            listener()  # no background job may change the load past this point
        with self._lock:
            if cancel and self._steps and self._steps[-1].end_ns < 0:
                self._interrupted_step = self._steps[-1].index
            self._close_current(time.perf_counter_ns())
        final = self._engine.stop(cancel=cancel, timeout_s=drain_timeout_s + 5.0)
        self._closing.set()
        if self._frames is not None:
            self._frames.join(timeout=2.0)
        with self._lock:
            if final is not None:
                self.status = final
            self._engine_stopped = True
            finished = self._finish_ready_steps(force=True)
        self._deliver(finished)
        self._diagnosis.stop()

    # diagnosis ---------------------------------------------------------------------------------
    def start_diagnosis(
        self,
        sampler: TelemetrySampler | None,
        metrics_url: str | None,
        *,
        model: str | None,
        measured_bandwidth_gbps: float | None = None,
    ) -> StepDiagnoser:
        """Diagnose every step finished from now on (call after `start`; `stop` ends it).

        The diagnoser scrapes the server's latency histograms at `metrics_url`, reads the
        sampler's traces and this session's frames; `snapshot.assemble.save_session` attaches
        its diagnoses to the snapshot, and a verdict that changes between steps is an event.
        """
        return self._diagnosis.start(
            self, sampler, metrics_url, model=model, measured_bandwidth_gbps=measured_bandwidth_gbps
        )

    @property
    def diagnoser(self) -> StepDiagnoser | None:
        """Set by `start_diagnosis`: each finished step's diagnosis (issue 18)."""
        return self._diagnosis.diagnoser

    @diagnoser.setter
    def diagnoser(self, diagnoser: StepDiagnoser | None) -> None:
        self._diagnosis.diagnoser = diagnoser

    def diagnoses(self) -> dict[int, Diagnosis]:
        """Each diagnosed step's diagnosis, by step index (empty without `start_diagnosis`)."""
        return self._diagnosis.diagnoses()

    def change_sla(self, sla: Sla) -> None:
        """Judge the open and later steps by `sla`, and re-judge the finished ones at once."""
        with self._lock:
            self.sla = sla
            specs = {s.index: s for s in self._steps}
            done = {i: (r, list(self._records.get(i, []))) for i, r in self._finished.items()}
        judged = {i: rejudge_step(r, specs[i], records, sla) for i, (r, records) in done.items()}
        with self._lock:
            self._finished.update(judged)
            self._precision_at = (-1, -1, None, 0, None)  # the open step's verdict: next frame

    # the journal -------------------------------------------------------------------------------
    def open_journal(
        self,
        folder: Path,
        header: JournalHeader,
        on_error: Callable[[str], None] | None = None,
        extra_lines: Callable[[], Iterable[Mapping[str, object]]] | None = None,
    ) -> Path:
        """Journal every finished request and step from now on (both front ends; OSError if not).

        Steps already started are journalled at once, so a crash loses at most the last second;
        so are their measurement windows as settling moves them, and `extra_lines` (the
        sampler's hardware and telemetry: `snapshot.journal_telemetry`) at every write.
        """
        journal = Journal.create(folder, header)
        writer = JournalWriter(
            journal,
            self.all_records,
            self.started_ns,
            interval_s=JOURNAL_INTERVAL_S,
            on_error=on_error,
            specs=self.step_specs,
            extra_lines=extra_lines,
        )
        with self._lock:
            for spec in self._steps:
                journal.add_load(spec, self.started_ns, hidden=spec.index in self._hidden)
            for index in sorted(self._finished):
                if index not in self._hidden:
                    writer.add_step(self._finished[index], self.diagnoses().get(index))
            self._journal = writer
        writer.start()
        return journal.path

    def close_journal(self, *, saved: bool) -> None:
        """Journal what is left and close; `saved` deletes it (a snapshot now holds it all)."""
        writer, self._journal = self._journal, None
        if writer is not None:
            writer.stop(delete=saved)

    @property
    def journal_path(self) -> Path | None:
        """The open journal's file, if any."""
        writer = self._journal
        return writer.path if writer is not None else None

    def _deliver(self, finished: list[StepResult]) -> None:
        writer = self._journal
        for result in finished:
            for kind, text in step_events(result):
                self.events.add(kind, text)
            diagnosis = None if result.index in self._hidden else self._diagnosis.on_step(result)
            if writer is not None:
                writer.add_step(result, diagnosis)
            if self._on_step_finished is not None:
                self._on_step_finished(result)

    # views ---------------------------------------------------------------------------------------
    @property
    def current_step(self) -> StepSpec | None:
        """The open step, if any."""
        with self._lock:
            return self._steps[-1] if self._steps and self._steps[-1].end_ns < 0 else None

    def step_specs(self) -> list[StepSpec]:
        """Every step so far (the open one has `end_ns == -1`)."""
        with self._lock:
            return list(self._steps)

    def finished_steps(self) -> list[StepResult]:
        """Finished steps in order."""
        with self._lock:
            return [self._finished[i] for i in sorted(self._finished) if i not in self._hidden]

    def all_records(self) -> list[RequestRecord]:
        """Every record received so far (cancelled ones excluded)."""
        with self._lock:
            return [r for i in sorted(self._records) for r in self._records[i]]

    def rtt_summary(self) -> Summary:
        """Round-trip probe statistics in seconds."""
        with self._lock:
            values = np.array(self._rtt_ns, dtype=np.float64) / 1e9
        return summarize(values)

    def rtt_between(self, lo_ns: int, hi_ns: int) -> list[int]:
        """RTT samples (ns) that reached the session within [lo_ns, hi_ns)."""
        with self._lock:
            return [
                r for r, t in zip(self._rtt_ns, self._rtt_at_ns, strict=True) if lo_ns <= t < hi_ns
            ]

    # engine callbacks (reader thread) ---------------------------------------------------------
    def _on_batch(
        self,
        records: list[RequestRecord],
        sent_by_step: dict[int, int],
        status: EngineStatus,
        rtt: list[int | None],
    ) -> None:
        finished: list[StepResult] = []
        self.error_log.add(r for r in records if r.error != REASON_CANCELLED)
        with self._lock:
            for record in records:
                if record.error == REASON_CANCELLED:
                    self.cancelled += 1
                    self._cancelled_by_step[record.step_index] += 1
                    continue
                self._records.setdefault(record.step_index, []).append(record)
                self._received[record.step_index] += 1
            self._window.add([r for r in records if r.error != REASON_CANCELLED])
            self._sent = sent_by_step
            self._update_cpu(status)
            self.status = status
            arrived_ns = time.perf_counter_ns()
            tracker = self._settle
            if tracker is not None:
                tracker.on_batch(arrived_ns, sent_by_step.get(tracker.index, 0), status.in_flight)
            for sample in rtt:
                if sample is None:
                    self.probes_failed += 1
                else:
                    self._rtt_ns.append(sample)
                    self._rtt_at_ns.append(arrived_ns)
            finished = self._finish_ready_steps(force=False)
        self._deliver(finished)

    def _update_cpu(self, status: EngineStatus) -> None:
        if self._wait_prev is not None and status.wall_s > self._wait_prev.wall_s:
            self.client_run_wait_percent = wait_percent(status, self._wait_prev)
        self._wait_prev = status
        if self._status_prev is not None:
            cpu_prev, wall_prev = self._status_prev
            if status.wall_s > wall_prev:
                self.client_cpu_percent = (
                    100.0 * (status.cpu_s - cpu_prev) / (status.wall_s - wall_prev)
                )
        self._status_prev = (status.cpu_s, status.wall_s)

    # bookkeeping (lock held) ---------------------------------------------------------------------
    def _close_current(self, now_ns: int) -> None:
        if self._steps and self._steps[-1].end_ns < 0:
            step = self._steps[-1]
            # A step closed before it settled: its whole length was warm-up (none measured).
            start = min(step.measure_start_ns, now_ns)
            self._steps[-1] = replace(step, end_ns=now_ns, measure_start_ns=start)

    def _finish_ready_steps(self, *, force: bool) -> list[StepResult]:
        done: list[StepResult] = []
        for step in self._steps:
            if step.end_ns < 0 or step.index in self._finished:
                continue
            outstanding = self._sent.get(step.index, 0) - self._received[step.index]
            acknowledged = self.status is not None and self.status.step_index > step.index
            if not force and (outstanding > 0 or not acknowledged):
                continue
            incomplete = (
                outstanding > 0
                or self._cancelled_by_step[step.index] > 0
                or step.index == self._interrupted_step
            )
            result = aggregate_step(
                step, self._records.get(step.index, []), self.sla, incomplete=incomplete
            )
            if step.index in self._targets:
                result = mark_precision(result, self._targets[step.index])
            self._finished[step.index] = result
            if step.index not in self._hidden:
                done.append(result)
        return done
