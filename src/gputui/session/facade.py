"""The Session: the one facade that both the TUI and the headless `gputui run` drive.

Contract: the Session owns the engine (`engine.api.Engine`: a process or a pool) and composes its
parts: a `StepLedger` (steps and their records; it decides when a step is finished), a
`StepProgress` (settling and precision), the frame builder and the event rules, all written by
one `SessionLoop` thread alone. Callers change the load (`set_load`, `hold`, `pause`, `resume`,
`burst`, `stop`); each change of level opens a new step whose first `warmup_s` are excluded from
its statistics. The change is stamped and sent to the engine in the caller's thread, at once
(`session.loads.LoadChanges`); the step reaches the loop as a message. A step is finished once
it is closed *and* every request sent during it has come back, so its figures never silently
lose the slow requests.
Live figures are published as an immutable `StatsFrame` (`latest`); the steps, the finished
steps and the counters as a frozen `Published`: readers never see half-built state and never
lock. A thread reads everything it posted itself (`current_step` after `set_load`), waiting
for the loop only then.
The Session also keeps what both front ends share: the event log (`events`), the steps'
diagnosis (`diagnosis`: `session.diagnosis`), the crash journal (`open_journal`:
`session.journalling`) and the steps a snapshot is assembled from
(`snapshot.assemble.save_session`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path

import numpy as np

from gputui.engine.api import Engine, EngineFactory, engine_factory
from gputui.engine.load import LoadMode
from gputui.engine.process import EngineConfig, EngineStatus
from gputui.engine.records import RequestRecord
from gputui.errors import EngineFailed
from gputui.metrics.client_state import ClientSaturation, ClientStateTracker
from gputui.metrics.error_log import ErrorLog
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult, StepSpec
from gputui.metrics.summary import Summary, summarize
from gputui.metrics.window import RollingWindow
from gputui.session.cpu import worker_figures
from gputui.session.diagnosis import StepDiagnosis
from gputui.session.events import EventLog
from gputui.session.frames import StatsFrame as StatsFrame  # re-exported: callers import it here
from gputui.session.journalling import SessionJournal
from gputui.session.ledger import StepLedger
from gputui.session.loads import LoadChanges
from gputui.session.loop import SessionLoop
from gputui.session.messages import (
    Batch,
    DrainWatched,
    Finish,
    JobPhaseChanged,
    StopWatching,
    WatchRequest,
)
from gputui.session.settling import DEFAULT_MAX_WARMUP_S
from gputui.session.steady import StepProgress
from gputui.session.step_end import StepEnded, StepLimits
from gputui.snapshot.journal import JournalHeader, JournalTap
from gputui.telemetry.sampler import TelemetryFrame

_ENGINE_START_TIMEOUT_S = 60.0
_LOOP_END_TIMEOUT_S = 600.0


class Session:
    """A live load experiment against one target (module contract)."""

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
        self.warmup_s = warmup_s
        """A fixed warm-up (`--warmup-seconds`), or None: each step settles (`session.settling`)."""
        self.max_warmup_s = max_warmup_s
        self.workers = workers
        self.started_ns = 0
        self.events = EventLog(time.perf_counter_ns())
        """What happened, by the rules of `gputui.session.events` (both front ends read it)."""
        self.error_log = ErrorLog()
        """The server's messages for failures, and steps flooded with rejections."""
        self.client_states = ClientStateTracker()
        """Client-bound or host-contended, frame by frame (metrics.client_state)."""
        self.diagnosis = StepDiagnosis(
            self.events, self, lambda change: self._loop.ask(lambda loop: change(loop.ledger))
        )
        """Each step's diagnosis and telemetry window once `start`ed (`session.diagnosis`)."""
        build = engine if engine is not None else engine_factory(config, workers, ray_address)
        self._engine: Engine = build(self._on_batch)
        ledger = StepLedger()
        self._loop = SessionLoop(
            ledger=ledger,
            progress=StepProgress(ledger, warmup_s=warmup_s, max_warmup_s=max_warmup_s),
            window=RollingWindow(window_s, ci=True),
            sla=sla,
            events=self.events,
            diagnosis=self.diagnosis,
            error_log=self.error_log,
            client_states=self.client_states,
            worker_figures=worker_figures(self._engine),
            workers=workers,
            telemetry=telemetry,
            on_step_finished=on_step_finished,
            on_frame=on_frame,
        )
        self._stop_listeners: list[Callable[[], None]] = []
        warmup = max_warmup_s if warmup_s is None else warmup_s
        self._loads = LoadChanges(self._engine, self._loop, warmup)
        """Load changes: stamped and sent to the engine at the call (`session.loads`)."""
        self._loop.switch_load = self._loads.switch
        self._loop.watch.close_step = self._loads.close
        self._journal = SessionJournal(self._loop, self.all_records, self.step_specs)
        """The crash journal (`session.journalling`)."""

    # control -----------------------------------------------------------------------------------
    def start(self, *, frame_interval_s: float | None = 0.25) -> None:
        """Start the engine process (no load until `set_load`) and the session loop.

        The loop builds frames at a fixed rate (4 Hz by default, never above 10 Hz), so a reader
        only ever sees a finished frame and the engine never waits on it.
        """
        self._engine.start()
        # A step must not start while its engine is still importing: wait for the loop to run.
        if not self._engine.wait_ready(_ENGINE_START_TIMEOUT_S):
            raise EngineFailed("the load engine process did not start")
        self.started_ns = time.perf_counter_ns()
        self._loop.start(frame_interval_s)

    def set_load(self, mode: LoadMode, level: float) -> StepSpec:
        """Close the current step and start a new one at this load (stamped and sent now)."""
        return self._loads.set_load(mode, level)

    def hold(self) -> StepSpec | None:
        """Close the current step but keep its load, in a hidden step reported nowhere.

        An automatic sweep needs a step's figures (all its requests back) before it can choose the
        next level; meanwhile the load carries on, as warm-up of whatever comes next.
        """
        return self._loads.hold()

    @property
    def sent_load(self) -> StepSpec | None:
        """The step of the load last sent to the engine, at once (the loop may not have it yet).

        For a caller that must never wait (the UI cancelling a job); its window is as opened.
        """
        return self._loads.sent

    def pause(self) -> None:
        """Stop sending new requests; the step stays open (the TUI opens a new one on resume)."""
        self._loads.pause()

    def resume(self) -> None:
        """Send again."""
        self._loads.resume()

    def burst(self, count: int, *, resettle: bool = False) -> None:
        """Fire `count` requests at once on top of the current load.

        `resettle` (the TUI's `b`): measured apart from the steps around it, which hand over
        before it and settle after it (`session.loads.LoadChanges.burst`).
        """
        self._loads.burst(count, resettle=resettle)

    def drained(self) -> Future[None]:
        """Answered by the loop once the engine reports no request in flight (after `pause`)."""
        reply: Future[None] = Future()
        self._loop.post(DrainWatched(reply))
        return reply

    def reconnect(self) -> None:
        """Close the engine's idle connections: the next requests connect afresh (`--repeats`)."""
        self._loads.reconnect()

    def stop(self, *, cancel: bool, drain_timeout_s: float = 600.0) -> None:
        """End the run: close the last step, wait for (or abort) in-flight requests, finish steps.

        `cancel` means the run was interrupted: in-flight requests are aborted (and excluded), and
        the step that was running is marked incomplete.
        """
        for listener in self._stop_listeners:
            listener()  # no background job may change the load past this point
        self._loads.end(interrupted=cancel)
        final = self._engine.stop(cancel=cancel, timeout_s=drain_timeout_s + 5.0)
        self._loop.post(Finish(final))
        self._loop.join(_LOOP_END_TIMEOUT_S)
        self.diagnosis.stop()

    # plans and jobs (`control.runner`, `control.auto`) ----------------------------------------
    def open_step(
        self, mode: LoadMode, level: float, limits: StepLimits, *, finish: bool, job: int = 0
    ) -> Future[StepEnded | None]:
        """Open a step at this load that the loop ends by `limits` (`session.watch`).

        The answer is its `StepEnded` (with `finish`: closed keeping its load, and its figures);
        `JobCancelled` once job `job` is cancelled.
        """
        reply: Future[StepEnded | None] = Future()
        self._loads.set_load(mode, level, WatchRequest(limits, finish, job, reply))
        return reply

    def keep_step(
        self, index: int | None, limits: StepLimits | None, *, finish: bool, job: int = 0
    ) -> Future[StepEnded | None]:
        """Keep step `index` (None: the open one) until `limits` end it (None: now); None: none."""
        reply: Future[StepEnded | None] = Future()
        self._loads.keep(WatchRequest(limits, finish, job, reply, index))
        return reply

    def end_watch(self, job: int = 0) -> None:
        """Job `job`'s watched step ends now, "interrupted": its plan is being stopped."""
        self._loop.post(StopWatching(job))

    def begin_job(self) -> int:
        """A job's number, for its steps (`open_step`, `keep_step`) and `cancel_job`."""
        return self._loads.begin_job()

    def cancel_job(self, job: int) -> None:
        """Job `job` changes the load no more, and its watched step ends (never waits)."""
        self._loads.cancel_job(job)

    def set_job_phase(self, phase: str) -> None:
        """What frames report while a job drives the load ("holding", "auto"), or "measuring"."""
        self._loop.post(JobPhaseChanged(phase))

    def add_stop_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener` first thing in `stop`: a job must not change the load past it."""
        self._stop_listeners.append(listener)

    def change_sla(self, sla: Sla) -> None:
        """Judge the open and later steps by `sla`, and re-judge the finished ones at once."""
        self._loop.ask(lambda loop: loop.change_sla(sla))

    # the journal (`session.journalling`) --------------------------------------------------------
    def open_journal(
        self,
        folder: Path,
        header: JournalHeader,
        on_error: Callable[[str], None] | None = None,
        extra_lines: Callable[[], Iterable[Mapping[str, object]]] | None = None,
        taps: Sequence[JournalTap] = (),
    ) -> Path:
        """Journal every finished request and step from now on (`SessionJournal.open`)."""
        return self._journal.open(folder, header, self.started_ns, on_error, extra_lines, taps)

    def close_journal(self, *, saved: bool) -> None:
        """Journal what is left and close; `saved` deletes it (a snapshot now holds it all)."""
        self._journal.close(saved=saved)

    @property
    def journal_path(self) -> Path | None:
        """The open journal's file, if any."""
        return self._journal.path

    # replays -----------------------------------------------------------------------------------
    def feed_step(self, result: StepResult) -> None:
        """Take an aggregated step as finished, through the live rules (a replay, a test)."""
        self._loop.ask(lambda loop: loop.feed_step(result))

    def show_frame(self, frame: StatsFrame) -> None:
        """Publish a frame built elsewhere as the latest, turning it into events (a replay)."""
        self._loop.ask(lambda loop: loop.show_frame(frame))

    def observe(self, frame: StatsFrame) -> None:
        """Turn what changed since the last frame into events, as the loop does with its own."""
        self._loop.ask(lambda loop: loop.live.observe(frame))

    # views ---------------------------------------------------------------------------------------
    @property
    def sla(self) -> Sla:
        """The SLA steps are judged by (`change_sla` changes it)."""
        return self._loop.current().sla

    @property
    def latest(self) -> StatsFrame | None:
        """The latest frame (None before the first)."""
        return self._loop.published.frame

    @property
    def status(self) -> EngineStatus | None:
        """The engine's latest status report."""
        return self._loop.published.status

    @property
    def target_state(self) -> str:
        """The target's state: "ok", or `events.TARGET_DOWN` while requests cannot connect."""
        return self._loop.published.target_state

    @property
    def cancelled(self) -> int:
        """Requests aborted because the run was interrupted: excluded from every statistic."""
        return self._loop.current().cancelled

    @property
    def probes_failed(self) -> int:
        """Round-trip probes that got no answer."""
        return self._loop.published.probes_failed

    @property
    def client_cpu_percent(self) -> float:
        """The engine process's CPU over its last interval (100 = one core)."""
        return self._loop.published.client_cpu_percent

    @property
    def client_run_wait_percent(self) -> float | None:
        """The engine's run-queue wait over its last batch interval (engine.schedstat)."""
        return self._loop.published.client_run_wait_percent

    def worker_cpu_percent(self) -> list[float]:
        """CPU use of each engine process over its last interval (100 = one core)."""
        return self._worker_figures()[0]

    def worker_run_wait_percent(self) -> list[float | None]:
        """Run-queue wait of each engine process over its last interval (% of wall time)."""
        return self._worker_figures()[1]

    def _worker_figures(self) -> tuple[list[float], list[float | None]]:
        published = self._loop.published
        figures = worker_figures(self._engine)
        return figures(published.client_cpu_percent, published.client_run_wait_percent)

    @property
    def current_step(self) -> StepSpec | None:
        """The open step, if any."""
        specs = self._loop.current().specs
        return specs[-1] if specs and specs[-1].end_ns < 0 else None

    def step_specs(self) -> list[StepSpec]:
        """Every step so far (the open one has `end_ns == -1`)."""
        return list(self._loop.current().specs)

    def unreported_steps(self) -> frozenset[int]:
        """Steps never among `finished_steps`: hidden carry-on steps, and those left unmeasured."""
        return self._loop.current().unmeasured

    def finished_steps(self) -> list[StepResult]:
        """Finished steps in order."""
        return list(self._loop.current().finished)

    def all_records(self) -> list[RequestRecord]:
        """Every record received so far (cancelled ones excluded)."""
        return self._loop.ask(lambda loop: loop.ledger.all_records())

    def sent_by_step(self) -> dict[int, int]:
        """Requests the engine has sent, by step index."""
        return self._loop.ask(lambda loop: dict(loop.ledger.sent))

    def rtt_summary(self) -> Summary:
        """Round-trip probe statistics in seconds."""
        samples = self._loop.ask(lambda loop: list(loop.live.rtt_ns))
        return summarize(np.array(samples, dtype=np.float64) / 1e9)

    def rtt_between(self, lo_ns: int, hi_ns: int) -> list[int]:
        """RTT samples (ns) that reached the session within [lo_ns, hi_ns)."""
        return self._loop.ask(lambda loop: loop.live.rtt_between(lo_ns, hi_ns))

    def in_flight_between(self, lo_ns: int, hi_ns: int) -> tuple[np.ndarray, np.ndarray]:
        """(t_s from lo, requests in flight) of the frames in [lo, hi) (`session.in_flight`)."""
        return self._loop.ask(lambda loop: loop.live.trace.between(lo_ns, hi_ns))

    def in_flight_frames(self) -> tuple[list[int], list[int]]:
        """(when, requests in flight) of every frame so far (a burst's recovery)."""
        return self._loop.ask(lambda loop: loop.live.trace.frames())

    def client_saturation(self) -> ClientSaturation:
        """How often the client itself was the bottleneck, over the frames so far."""
        return self._loop.ask(lambda loop: loop.live.trace.saturation())

    # engine callbacks (reader threads) ---------------------------------------------------------
    def _on_batch(
        self,
        records: list[RequestRecord],
        sent_by_step: dict[int, int],
        status: EngineStatus,
        rtt: list[int | None],
    ) -> None:
        self._loop.post(Batch(records, sent_by_step, status, rtt, time.perf_counter_ns()))
