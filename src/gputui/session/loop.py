"""The session loop: the one thread that writes a Session's state, fed through its inbox.

Contract: engine batches (from the engine's reader threads), load changes, pauses, step targets,
job phases and the run's end arrive as messages (`post`, a `queue.Queue`); questions that need
the state (`ask`) run on the loop and answer through a future. Only this thread touches the
`StepLedger`, the `StepProgress`, the rolling window and the counters, so none of them locks.
After every message it swaps a frozen `Published` into `published` (readers never lock); every
`frame_interval_s` it builds a `StatsFrame` (`session.frames.build_frame`), turns it into events
(`session.events.EventWatcher`) and hands it to the diagnoser and `on_frame`. Finished steps go
to their subscribers here: their events, the diagnosis, the journal and `on_step_finished`.

Before `start` and after `Finish` no thread runs: messages are then handled at once in the
caller's thread (one at a time). The load's timestamps and the engine's commands never pass
through the inbox: the Session takes and sends them where the load changes (`session.facade`).
One exception: a step opened at a new level waits (pending) until every measured request of the
steps before it is back, and the loop then starts its level (`switch_load`, i.e.
`session.loads.LoadChanges.switch`): at the first batch that shows it, or at the cap
(`session.handover.HANDOVER_MAX_S`). The loop also owns the step a plan waits on
(`session.watch.StepWatch`): it asks that step's rules every `WATCH_EVERY_S`, closes it and
answers the plan with its `StepEnded` once it has published what the plan will read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import TypeVar

from gputui.engine.process import EngineStatus
from gputui.metrics.client_state import ClientStateTracker
from gputui.metrics.error_log import ErrorLog
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult, StepSpec
from gputui.metrics.window import RollingWindow
from gputui.session.cpu import WorkerFigures
from gputui.session.diagnosis import StepDiagnosis
from gputui.session.events import (
    EventLog,
    load_event,
    step_events,
    unmeasured_event,
)
from gputui.session.frames import StatsFrame
from gputui.session.handover import (
    bursts_back,
    handover_cut_event,
    handover_state,
    handover_waits,
)
from gputui.session.inbox import Inbox
from gputui.session.ledger import StepLedger
from gputui.session.live_frames import LiveFrames
from gputui.session.messages import (
    Ask,
    Batch,
    BurstFired,
    Command,
    DrainWatched,
    Finish,
    JobPhaseChanged,
    Message,
    PauseChanged,
    PendingLevel,
    Published,
    RunStopping,
    StepOpened,
    StopWatching,
    WatchStep,
)
from gputui.session.steady import UNMEASURED, StepPhase, StepProgress
from gputui.session.watch import WATCH_EVERY_S, StepWatch
from gputui.snapshot.journal import JournalWriter
from gputui.telemetry.sampler import TelemetryFrame

T = TypeVar("T")
_ASK_TIMEOUT_S = 60.0


class SessionLoop:
    """The one writer of a Session's state (module contract)."""

    def __init__(
        self,
        *,
        ledger: StepLedger,
        progress: StepProgress,
        window: RollingWindow,
        sla: Sla,
        events: EventLog,
        diagnosis: StepDiagnosis,
        error_log: ErrorLog,
        client_states: ClientStateTracker,
        worker_figures: WorkerFigures,
        workers: int,
        telemetry: Callable[[], TelemetryFrame | None] | None,
        on_step_finished: Callable[[StepResult], None] | None,
        on_frame: Callable[[StatsFrame], None] | None,
    ) -> None:
        self.ledger = ledger
        self.progress = progress
        self.events = events
        self.diagnosis = diagnosis
        self.error_log = error_log
        self.live = LiveFrames(
            window=window,
            events=events,
            error_log=error_log,
            client_states=client_states,
            worker_figures=worker_figures,
            workers=workers,
            telemetry=telemetry,
            on_frame=on_frame,
        )
        """The rolling window, the client's figures, the probes and the frames (on this thread)."""
        self._on_step_finished = on_step_finished
        self.sla = sla
        self.status: EngineStatus | None = None
        self.paused_at_ns: int | None = None
        """When the pause began, while paused (the open step's clock stands there)."""
        self.job_phase = "measuring"
        self.journal: JournalWriter | None = None
        self.journal_origin_ns = 0
        self._version_seen = 0
        self._drains: list[Future[None]] = []
        self.published = Published(sla=sla)
        self._bursts_told: set[int] = set()
        self.switch_load: Callable[[int], StepSpec | None] | None = None
        """Starts a pending step's level once the hand-over is over (module contract)."""
        self.watch = StepWatch(ledger, progress, error_log)
        """The step a plan waits on: its rules, its close, its `StepEnded` (`session.watch`)."""
        self._inbox: Inbox[Message] = Inbox(self._dispatch, self._due, "gputui-session")
        self._frame_interval_s: float | None = None
        self._next_frame: float | None = None
        self._next_watch: float | None = None

    # the inbox (`session.inbox`) --------------------------------------------------------------
    def start(self, frame_interval_s: float | None) -> None:
        """Run the loop on its own thread from now on (frames every `frame_interval_s`, if set)."""
        self._frame_interval_s = None if frame_interval_s is None else max(frame_interval_s, 0.1)
        if self._frame_interval_s is not None:
            self._next_frame = time.monotonic() + self._frame_interval_s
        self._inbox.start()

    def join(self, timeout_s: float) -> None:
        """Wait for the loop to end (after `Finish`)."""
        self._inbox.join(timeout_s)

    def post(self, message: Message) -> None:
        """Hand the loop a message (handled at once, in this thread, when no loop runs)."""
        self._inbox.post(message)

    def ask(self, question: Callable[[SessionLoop], T]) -> T:
        """Run `question` on the loop, after everything posted before it, and return its answer."""
        if self._inbox.on_thread:
            return question(self)
        reply: Future[object] = Future()
        self.post(Ask(question, reply))
        return reply.result(timeout=_ASK_TIMEOUT_S)  # type: ignore[return-value]

    def current(self) -> Published:
        """The published state, with everything this thread posted in it (it may wait for that)."""
        if self._inbox.behind():
            self.ask(lambda _loop: None)
        return self.published

    def _due(self, now: float) -> float | None:
        """Build the frame and ask the watched step's rules when due; returns when next due."""
        interval = self._frame_interval_s
        if interval is not None and self._next_frame is not None and now >= self._next_frame:
            self._guarded(self.publish_frame)
            self._next_frame = time.monotonic() + interval
        if not self.watch.ticking:
            self._next_watch = None
        elif self._next_watch is None:
            self._next_watch = now + WATCH_EVERY_S
        elif now >= self._next_watch:
            self._tick_watch()
            self._next_watch = time.monotonic() + WATCH_EVERY_S
        due = [t for t in (self._next_frame, self._next_watch) if t is not None]
        return min(due) if due else None

    def _tick_watch(self) -> None:
        """Ask the watched step's rules; if they fail, the step ends saying so (never hangs)."""
        now_ns = time.perf_counter_ns()
        try:
            self.watch.tick(now_ns, self.sla)
        except Exception as exc:  # noqa: BLE001 - its plan is told, the loop lives on
            self.events.add("error", f"session: a step's rules failed: {exc!r}")
            self.watch.cancel(None, now_ns, reason=f"its rules failed: {exc!r}")
        self._publish()

    def _dispatch(self, message: Message) -> bool:
        if isinstance(message, Ask):
            try:
                answer = message.question(self)
            except Exception as exc:  # noqa: BLE001 - the asker gets it, the loop lives on
                message.reply.set_exception(exc)
                return False
            self._publish()  # before the answer: the asker may read what it changed
            message.reply.set_result(answer)
            return False
        if isinstance(message, Batch):
            self._guarded(lambda: self._on_batch(message))
        else:
            self._guarded(lambda: self._on_command(message))
        self._publish()
        return isinstance(message, Finish)

    def _guarded(self, handle: Callable[[], None]) -> None:
        try:
            handle()
        except Exception as exc:  # noqa: BLE001 - one bad message must not stop the session
            self.events.add("error", f"session: {exc!r}")

    # handlers ---------------------------------------------------------------------------------
    def _on_batch(self, batch: Batch) -> None:
        kept = self.ledger.add_records(batch.records)
        self.error_log.add(kept)
        self.live.on_batch(batch, kept)
        self.ledger.set_sent(batch.sent_by_step)
        self.status = batch.status
        self.progress.on_batch(batch.arrived_ns, batch.sent_by_step, batch.status.in_flight)
        self._tell_drained()
        self.deliver(self.ledger.finish_ready(self.status, self.sla, force=False))
        self._hand_over(batch.arrived_ns)
        for event in bursts_back(self.ledger, self._bursts_told):
            self.events.add(*event)

    def _tell_drained(self) -> None:
        """Answer those waiting for no request in flight, once the engine reports none."""
        if self._drains and self.status is not None and self.status.in_flight == 0:
            drains, self._drains = self._drains, []
            for reply in drains:
                reply.set_result(None)

    def _hand_over(self, now_ns: int) -> None:
        """Start the pending step's level once the steps before it are finished (or at the cap)."""
        index = self.ledger.pending
        if index is None or self.switch_load is None or handover_waits(self.ledger, now_ns):
            return
        cut = handover_cut_event(self.ledger)  # before the level starts: what is still out
        started = self.switch_load(index)
        if started is None:
            return
        self.ledger.start_pending(started)
        self.progress.open(started)
        if self.journal is not None:  # its level may have changed, its start has
            self.journal.journal.add_load(started, self.journal_origin_ns)
        if cut is not None:
            self.events.add(*cut)

    def _on_command(self, command: Command) -> None:
        if isinstance(command, StepOpened):
            spec = command.spec
            self.ledger.open(spec, hidden=command.hidden, pending=command.pending)
            if not command.pending:
                self.progress.open(spec)
            if self.journal is not None:
                self.journal.journal.add_load(spec, self.journal_origin_ns, hidden=command.hidden)
            if not command.hidden:
                self.events.add(*load_event(spec.mode, spec.level))
            self._hand_over(time.perf_counter_ns())
            if command.watch is not None:
                request = replace(command.watch, index=spec.index)
                self.watch.begin(request, time.perf_counter_ns(), self.sla)
        elif isinstance(command, WatchStep):
            self.watch.begin(command.request, time.perf_counter_ns(), self.sla)
        elif isinstance(command, StopWatching):
            self.watch.cancel(command.job, time.perf_counter_ns())
        elif isinstance(command, DrainWatched):
            self._drains.append(command.reply)
            self._tell_drained()
        elif isinstance(command, BurstFired):
            count, fired_ns = self.ledger.bursts.get(command.index, (0, command.fired_ns))
            self.ledger.bursts[command.index] = (count + command.count, fired_ns)
            if command.resettle:
                self.ledger.resettled.add(command.index)
        elif isinstance(command, PendingLevel):
            if self.ledger.replace_pending(command.spec):
                self.events.add(*load_event(command.spec.mode, command.spec.level))
        elif isinstance(command, RunStopping):
            if command.interrupted:
                self.ledger.interrupt(command.now_ns)
            else:
                self.ledger.close_current(command.now_ns)
        elif isinstance(command, PauseChanged):
            self.paused_at_ns = time.perf_counter_ns() if command.paused else None
        elif isinstance(command, JobPhaseChanged):
            self.job_phase = command.phase
        else:
            if command.status is not None:
                self.status = command.status
            self.deliver(self.ledger.finish_ready(self.status, self.sla, force=True))
            self.watch.finish_all(time.perf_counter_ns())

    def deliver(self, finished: list[StepResult]) -> None:
        """Hand finished steps to their subscribers: events, diagnosis, journal, the callback."""
        while self.ledger.unmeasured:  # no step: a line in the event log, nothing else
            self.events.add(*unmeasured_event(self.ledger.unmeasured.pop(0)))
        for result in finished:
            number = self.ledger.number(result.index)
            for kind, text in step_events(result, number):
                self.events.add(kind, text)
            hidden = result.index in self.ledger.hidden
            diagnosis = None if hidden else self.diagnosis.on_step(result, number)
            if self.journal is not None:
                self.journal.add_step(result, diagnosis)
            if self._on_step_finished is not None:
                self._on_step_finished(result)
        self.watch.after_delivery()

    def change_sla(self, sla: Sla) -> None:
        """Judge the open and later steps by `sla`, and the finished ones again now."""
        self.sla = sla
        self.ledger.rejudge(sla)
        self.progress.forget()  # the open step's verdict: next frame
        self._publish()

    def feed_step(self, result: StepResult) -> None:
        """Take an already aggregated step as finished (a replay) and deliver it."""
        self.ledger.adopt(result)
        self.deliver([result])
        self._publish()

    # frames (`session.live_frames`) ---------------------------------------------------------
    def publish_frame(self) -> None:
        """Build the frame of now, publish it, turn it into events and hand it on."""
        self.progress.settle(time.perf_counter_ns())
        now = time.perf_counter_ns()
        step = self.ledger.last
        if step is None:
            return
        phase = self.progress.phase(now, self.job_phase, self.sla)
        if step.index in self.ledger.hidden and self.job_phase == "measuring":
            phase = StepPhase(step_phase=UNMEASURED)  # after a hold: the load runs, no step
        frame = self.live.build(
            step=step,
            now_ns=now,
            phase=phase,
            status=self.status,
            steps_finished=len(self.ledger.finished),
            paused_at_ns=self.paused_at_ns,
            handover=handover_state(self.ledger, now),
            hold_look=self.ledger.verdicts.get(step.index),
        )
        self.show_frame(frame)
        self.live.hand_on(frame, time.perf_counter_ns(), self.diagnosis)

    def show_frame(self, frame: StatsFrame) -> None:
        """Publish `frame` as the latest and turn what changed since the last into events."""
        self.live.observe(frame)
        self._publish(frame)

    def _publish(self, frame: StatsFrame | None = None) -> None:
        before = self.published
        finished = before.finished
        if self.ledger.version != self._version_seen:  # rebuilt only when a step finished
            finished, self._version_seen = self.ledger.visible_finished(), self.ledger.version
        self.published = Published(
            sla=self.sla,
            specs=tuple(self.ledger.specs),
            finished=finished,
            finished_count=len(self.ledger.finished),
            frame=frame if frame is not None else before.frame,
            status=self.status,
            cancelled=self.ledger.cancelled,
            unmeasured=frozenset(self.ledger.hidden),
            probes_failed=self.live.probes_failed,
            client_cpu_percent=self.live.cpu.percent,
            client_run_wait_percent=self.live.cpu.run_wait_percent,
            target_state=self.live.target_state,
            journal_path=self.journal.path if self.journal is not None else None,
            applied=self._inbox.applied,
        )
        self.watch.answer()  # a plan waiting on its step reads this state, never an older one

    # the journal ------------------------------------------------------------------------------
    def attach_journal(self, writer: JournalWriter, origin_ns: int) -> None:
        """Journal every step from now on, and the steps so far at once."""
        for spec in self.ledger.specs:
            writer.journal.add_load(spec, origin_ns, hidden=spec.index in self.ledger.hidden)
        diagnoses = self.diagnosis.diagnoses()
        for result in self.ledger.visible_finished():
            writer.add_step(result, diagnoses.get(result.index))
        self.journal, self.journal_origin_ns = writer, origin_ns
        self._publish()

    def detach_journal(self) -> JournalWriter | None:
        """Stop journalling here; the writer is returned for its owner to close."""
        writer, self.journal = self.journal, None
        self._publish()
        return writer
