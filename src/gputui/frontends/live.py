"""The live controller: the typed API the TUI drives, and the one immutable view it reads.

Contract: `LiveController` owns a Session (engine process + statistics) and an optional telemetry
sampler. The UI calls its small command API (`step_up`, `step_down`, `go_to`, `cycle_factor`,
`toggle_mode`, `toggle_pause`, `burst`, `save`, `stop`) and reads `view()`, a frozen `LiveView`
rebuilt only when something changed. Nothing here imports Textual, so everything the TUI shows
can be driven and tested headless. An unreachable target is a state (`live_connect.Connector`),
retried every 2 s, not an error; so is a server that stops accepting connections mid-run (new
connect failures and no new successes in the rolling window), until requests succeed again.
Its collaborators are injectable: the engine (`engine`), the target check (`check`) and the
frame rate, so a test drives a real controller and Session on a fake engine and no server.

The Session keeps the journal (`Session.open_journal`, as for `gputui run`) and the event log
(`Session.events`, detected on its own loop thread, never as a side effect of a UI poll); this
controller adds its own events (connecting, pauses, saves) to that log. The view comes out of
the one pure builder (`view.build_view`) that the replay uses too. A snapshot is written by
`snapshot.assemble.save_session`, the function `gputui run` uses. The journal is deleted once
`stop()` has saved the snapshot, so one left behind means a crash.
`stop()` is idempotent: the UI's quit, a signal handler and the CLI's clean-up may all call it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

from gputui.engine.api import EngineFactory
from gputui.engine.load import LoadMode
from gputui.engine.preflight import PreflightResult
from gputui.frontends.live_connect import Check, Connector, check_target, identity
from gputui.frontends.live_history import LiveHistory
from gputui.frontends.live_jobs import LiveJobs
from gputui.frontends.live_levels import next_factor, scaled_level, switched_load
from gputui.frontends.live_saving import LiveSaver
from gputui.frontends.live_settings import LiveSettings as LiveSettings
from gputui.frontends.view import EventKind as EventKind
from gputui.frontends.view import LiveEvent as LiveEvent
from gputui.frontends.view import LiveView as LiveView
from gputui.frontends.view import ViewInputs, build_view
from gputui.metrics.sla_terms import SessionTerms, TermsHistory, change_text
from gputui.session import Session, StatsFrame
from gputui.telemetry.sampler import TelemetrySampler


class LiveController:
    """Drives one live session (module docstring; its jobs: `LiveJobs`, its saves: `LiveSaver`)."""

    def __init__(
        self,
        settings: LiveSettings,
        telemetry: TelemetrySampler | None = None,
        *,
        engine: EngineFactory | None = None,
        check: Check = check_target,
        frame_interval_s: float | None = 0.25,
    ) -> None:
        self.settings = settings
        self._telemetry = telemetry
        self._session = Session(
            settings.engine,
            settings.sla,
            warmup_s=settings.warmup_s,
            window_s=settings.window_s,
            on_frame=self._on_frame,
            telemetry=telemetry.latest if telemetry is not None else None,
            workers=settings.workers,
            ray_address=settings.ray_address,
            engine=engine,
        )
        self._lock = threading.Lock()
        self._jobs = LiveJobs(self._session, settings, self._lock, self, self._event)
        """The hold and the auto sweep, and who sets the load (`control`)."""
        self._mode: LoadMode = settings.start_mode
        self._level = settings.start_level
        self._left_at: dict[LoadMode, float] = {}
        """The level each mode was left at (`r` switching back resumes it)."""
        self._factor = settings.factor
        self._paused = False
        self._frame_interval_s = frame_interval_s
        self._started_ns = time.perf_counter_ns()
        self._view: LiveView | None = None
        self._view_key: tuple[object, ...] = ()
        self._seq = 0
        self._running = False
        self._stop_lock = threading.Lock()
        self._stopped = False
        self._final_path: Path | None = None
        self._history = LiveHistory(settings.source, self._session.all_records, telemetry)
        """Sparklines, the workload's progress and the UI's CPU."""
        self._connector = Connector(
            settings.engine.client, self._identify, self._on_connected, self._event, check=check
        )
        self._terms = TermsHistory(SessionTerms(settings.sla, settings.price_per_hour))
        """The SLA and price now, and their changes (the settings dialog; the snapshot)."""
        self._saver = LiveSaver(self._session, telemetry, self._terms, self, self._event)
        """Snapshots, the report and the journal."""

    @property
    def session(self) -> Session:
        """The Session this controller drives (for measurements, e.g. benchmarks/fidelity.py)."""
        return self._session

    # lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the engine process now, then connect in the background and apply the load.

        The engine is spawned here, in the caller's thread and before any UI takes over the
        terminal: spawning later from a thread under Textual fails (multiprocessing's resource
        tracker cannot pass on a stderr that Textual has replaced).
        """
        if self._telemetry is not None:
            self._telemetry.start()
        self._session.start(frame_interval_s=self._frame_interval_s)
        diagnoser = self._session.diagnosis.start(
            self._telemetry, self.settings.metrics_url, model=self.settings.engine.client.model
        )
        diagnoser.expect_cold = self.settings.workload_details.get("prompt_salt") is not None
        self._running = True
        self._connector.start()

    def _identify(self, checked: PreflightResult) -> None:
        self._saver.identify(*identity(checked), server=checked.identity, context=checked.context)

    def _on_connected(self) -> None:
        self._saver.open_journal()
        self._apply()

    def stop(
        self, *, save: bool = True, label: str | None = None, reason: str | None = None
    ) -> Path | None:
        """End the session and save a snapshot of what was measured (unless nothing was).

        Idempotent: a second call (a signal during the UI's quit, the CLI's clean-up) waits for
        the first and returns the same path. `reason` (e.g. "SIGHUP") is noted in the event log.
        """
        with self._stop_lock:
            if self._stopped:
                return self._final_path
            self._stopped = True
            if reason:
                self._event("info", f"{reason}: stopping and saving")
            self._connector.stop()
            path = None
            if self._running:
                self._session.stop(cancel=True, drain_timeout_s=5.0)
                self._running = False
                if save and self._session.finished_steps():
                    path = self._saver.write(
                        label or self._saver.last_label or self.settings.label,
                        complete=reason is None,
                        interrupted_by=reason,
                    )
            self._session.close_journal(
                saved=path is not None or not self._session.finished_steps()
            )
            self._saver.close_outputs()
            if self._telemetry is not None:
                self._telemetry.stop()
            self._final_path = path
            return path

    @property
    def mode(self) -> LoadMode:
        """The load's mode now (closed loop or open loop)."""
        return self._mode

    @property
    def running(self) -> bool:
        """Whether the session has started and not yet stopped."""
        return self._running

    @property
    def connected(self) -> bool:
        """Whether the target has answered (the load is applied from then on)."""
        return self._connector.connected

    @property
    def connect_state(self) -> str:
        """The preflight's state: "connecting", "unreachable: <why>" or "ok"."""
        return self._connector.state

    # commands (the UI's control API) ------------------------------------------------------------
    def save(self, label: str | None = None) -> Path | None:
        """Save a snapshot of everything finished so far (the session goes on)."""
        return self._saver.save(label)

    def export_report(self) -> Path | None:
        """Write the session so far as an HTML report beside the snapshots (blocking)."""
        return self._saver.export_report()

    @property
    def control(self) -> str:
        """Who sets the load: "operator", "holding" (until precise) or "auto" (the sweep)."""
        return self._jobs.control

    def hold_until_precise(self) -> None:
        """Keep the current level until its step is precise (`target_precision`)."""
        self._jobs.hold_until_precise()

    def start_auto(self) -> None:
        """Start the auto sweep from the current level; the chart fills as its steps finish."""
        self._jobs.start_auto()

    def cancel_auto(self) -> None:
        """End the auto sweep or the hold; the load stays at the level it had reached."""
        self._jobs.cancel_auto()

    def step_up(self) -> None:
        """Multiply the load by the factor (concurrency: at least +1)."""
        self._jobs.take_control()
        with self._lock:
            self._level = scaled_level(self._mode, self._level, self._factor)
        self._apply()

    def step_down(self) -> None:
        """Divide the load by the factor (never below the minimum)."""
        self._jobs.take_control()
        with self._lock:
            self._level = scaled_level(self._mode, self._level, 1 / self._factor)
        self._apply()

    def go_to(self, mode: LoadMode, level: float) -> None:
        """Set the load to this mode and level (a script, a replay driving the controller)."""
        self._jobs.take_control()
        with self._lock:
            self._mode, self._level = mode, float(level)
        self._apply()

    def cycle_factor(self, direction: int) -> float:
        """`]` raises the step factor, `[` lowers it: 1.25, 1.5, 2, 3, 4."""
        with self._lock:
            self._factor = next_factor(self._factor, direction)
            self._event("info", f"step factor x{self._factor:g}")
            return self._factor

    def toggle_mode(self) -> None:
        """Switch closed loop <-> open loop at about the same load as now."""
        self._jobs.take_control()
        frame = self._session.latest
        with self._lock:
            self._left_at[self._mode] = self._level
            self._mode, self._level = switched_load(self._mode, frame)
            self._level = self._left_at.get(self._mode, self._level)
        self._apply()

    def toggle_pause(self) -> bool:
        """Pause or resume sending; resuming starts a new step."""
        self._jobs.take_control()
        with self._lock:
            self._paused = not self._paused
            paused = self._paused
        if not self._running or not self.connected:
            return paused
        if paused:
            self._session.pause()
            self._event("info", "paused: no new requests")
        else:
            self._session.resume()
            self._apply()
        return paused

    def burst(self) -> int:
        """Fire the burst on top of the load."""
        self._jobs.take_control()
        if self._running and self.connected:
            self._session.burst(self.settings.burst_size, resettle=True)
            self._event("info", f"burst of {self.settings.burst_size} requests")
        return self.settings.burst_size

    def change_terms(self, terms: SessionTerms) -> None:
        """New SLA bounds and price from now on; the finished steps are re-judged at once."""
        record = self._terms.change(self._elapsed_s(), terms)
        if record is None:
            self._event("info", "settings unchanged")
            return
        self._session.change_sla(terms.sla)
        self.settings = replace(self.settings, sla=terms.sla, price_per_hour=terms.price_per_hour)
        self._event("info", f"settings: {change_text(record)}; finished steps re-judged")

    # the view ------------------------------------------------------------------------------------
    def view(self) -> LiveView:
        """The current view; the same object until something changed."""
        frame = self._session.latest if self._session.started_ns else None
        telemetry = self._telemetry.latest() if self._telemetry is not None else None
        steps = tuple(self._session.finished_steps()) if self._session.started_ns else ()
        diagnoses = self._session.diagnosis.diagnoses()
        self._history.track_cpu()
        key = (
            frame.seq if frame else -1,
            telemetry.seq if telemetry else -1,
            len(steps),
            len(diagnoses),
            self._session.events.count,
            self._shown_target_state(),
            self._mode,
            self._level,
            self._factor,
            self._paused,
            self._jobs.control,
            self._saver.last_saved,
            self._stopped,
            int(self._elapsed_s()),
            self._history.progress,
            self._terms.terms,
        )
        if self._view is not None and key == self._view_key:
            return self._view
        client = self.settings.engine.client
        self._seq += 1
        self._view = build_view(
            ViewInputs(
                seq=self._seq,
                target_url=client.target.base_url,
                model=client.model,
                target_state=self._shown_target_state(),
                backend=self._saver.backend,
                server_version=self._saver.server_version,
                mode=frame.mode if self._jobs.control == "auto" and frame else self._mode,
                level=frame.level if self._jobs.control == "auto" and frame else self._level,
                factor=self._factor,
                paused=self._paused,
                session_s=self._elapsed_s(),
                sla=self.settings.sla,
                frame=frame,
                steps=steps,
                diagnoses=diagnoses,
                events=self._session.events.items(),
                telemetry=telemetry,
                traces=self._telemetry.recent() if self._telemetry is not None else None,
                gpu_description=self.settings.gpu_description,
                throughput_history=self._history.throughput,
                error_rate_history=self._history.error_rate,
                ui_cpu_percent=self._history.ui_cpu,
                label=self.settings.label,
                last_saved=self._saver.last_saved,
                journal_path=self._session.journal_path,
                stopped=self._stopped,
                workload=self._history.progress,
                control=self._jobs.control,
                target_precision=self.settings.target_precision,
                notices=self.settings.notices,
                price_per_hour=self.settings.price_per_hour,
            )
        )
        self._view_key = key
        return self._view

    # internals -----------------------------------------------------------------------------------
    def _elapsed_s(self) -> float:
        return (time.perf_counter_ns() - self._started_ns) / 1e9

    def _apply(self) -> None:
        if not self._running or not self.connected or self._paused:
            return
        with self._lock:
            mode, level = self._mode, self._level
        self._session.set_load(mode, level)

    # the jobs' host (`frontends.live_jobs.LoadHost`) ----------------------------------------------
    def load_level(self) -> float:
        """The level the operator's load is at now."""
        return self._level

    def follow_step(self, mode: LoadMode, level: float) -> None:
        """Take a job's last mode and level as the operator's (called under the lock)."""
        self._mode, self._level = mode, level

    def measure_again(self) -> None:
        """Open a step at the load as it is (no step is open after a hold)."""
        self._apply()

    def ready_for(self, what: str) -> bool:
        """Whether a job may start now (connected, not paused); says why not in an event."""
        if self._running and self.connected and not self._paused:
            return True
        self._event("info", f"no {what}: not connected or paused")
        return False

    def _event(self, kind: EventKind, text: str) -> None:
        self._session.events.add(kind, text)

    def _on_frame(self, frame: StatsFrame) -> None:
        """Each new frame, on the Session's loop thread (after its events): history, floods."""
        self._history.on_frame(frame)
        self._pause_if_flooded(frame)

    def _pause_if_flooded(self, frame: StatsFrame) -> None:
        """Operator control: a step the server floods with rejections ends (the load pauses)."""
        if self._jobs.control != "operator" or self._paused:
            return
        if self._session.error_log.flooded(frame.step_index) is None:
            return
        self._event("warning", "paused: the server rejects what is sent (its words above); resume")
        with self._lock:  # after the event: a view that shows the pause shows why
            self._paused = True
        self._session.pause()

    def _shown_target_state(self) -> str:
        """Connecting or unreachable (the preflight's), else what the Session's frames say."""
        state = self._connector.state
        return self._session.target_state if state == "ok" else state
