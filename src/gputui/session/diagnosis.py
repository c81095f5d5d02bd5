"""The Session's per-step diagnosis (issue 18): what bound each finished step, as a subscriber.

Contract: the Session owns one `StepDiagnosis` (`Session.diagnosis`) and hands it each finished,
non-hidden step (`on_step`, on the session loop's thread: an error never escapes, it becomes a
warning event). `start` (after the Session's `start`; its `stop` ends it) attaches a
`StepDiagnoser` that scrapes the server's latency histograms and reads the sampler's traces and
the Session's frames, and has each step finished from then on carry its telemetry summary
(`watch_telemetry`: the ledger's `window_telemetry`, set on the loop's thread). A verdict unlike
the previous step's is an event; `diagnoser` and `diagnoses` are what
`snapshot.assemble.save_session` and the journal attach.
"""

from __future__ import annotations

from collections.abc import Callable

from gputui.diagnosis.step import DiagnosedSession, StepDiagnoser
from gputui.metrics.step import StepResult
from gputui.metrics.step_diagnosis import StepDiagnosis as Diagnosis
from gputui.session.events import EventLog, verdict_event
from gputui.session.ledger import StepLedger
from gputui.session.window_telemetry import window_telemetry
from gputui.telemetry.sampler import TelemetrySampler

OnLedger = Callable[[Callable[[StepLedger], None]], None]
"""Runs a change of the ledger on the session loop's thread (`Session`: through `loop.ask`)."""


class StepDiagnosis:
    """Per-step diagnosis of a Session (module contract)."""

    def __init__(self, events: EventLog, session: DiagnosedSession, on_ledger: OnLedger) -> None:
        self.diagnoser: StepDiagnoser | None = None
        """Set by `start`: each finished step's diagnosis."""
        self._events = events
        self._session = session
        self._on_ledger = on_ledger
        self._last_verdict: str | None = None

    def start(
        self,
        sampler: TelemetrySampler | None,
        metrics_url: str | None,
        *,
        model: str | None,
        measured_bandwidth_gbps: float | None = None,
    ) -> StepDiagnoser:
        """Diagnose every step finished from now on (module contract; after the Session's start)."""
        if sampler is not None:
            self.watch_telemetry(sampler)
        diagnoser = StepDiagnoser(model=model, measured_bandwidth_gbps=measured_bandwidth_gbps)
        diagnoser.start(self._session, sampler, metrics_url)
        self.diagnoser = diagnoser
        return diagnoser

    def watch_telemetry(self, sampler: TelemetrySampler) -> None:
        """Summarize each step's measured window from `sampler` where the step is finished."""
        summarize = window_telemetry(sampler)

        def attach(ledger: StepLedger) -> None:
            ledger.window_telemetry = summarize

        self._on_ledger(attach)

    def stop(self) -> None:
        """Stop the diagnoser's scrapes, if one was started."""
        if self.diagnoser is not None:
            self.diagnoser.stop()

    def diagnoses(self) -> dict[int, Diagnosis]:
        """Each diagnosed step's diagnosis, by step index (empty before `start`)."""
        diagnoser = self.diagnoser
        return dict(diagnoser.diagnoses) if diagnoser is not None else {}

    def on_step(self, result: StepResult, number: int | None = None) -> Diagnosis | None:
        """The step's diagnosis, and its verdict's event (the step `number`) when it changed."""
        diagnosis = self._diagnose(result, number)
        if diagnosis is None:
            return None
        if diagnosis.prefix_cache_warning:  # a step meant to be cold was served from the cache
            self._events.add("warning", diagnosis.prefix_cache_warning)
        verdict = diagnosis.bottleneck
        if verdict is not None:
            event = verdict_event(result, verdict, self._last_verdict, number)
            if event is not None:
                self._events.add(*event)
            self._last_verdict = verdict["verdict"]
        return diagnosis

    def _diagnose(self, result: StepResult, number: int | None) -> Diagnosis | None:
        diagnoser = self.diagnoser
        if diagnoser is None:
            return None
        try:
            return diagnoser.diagnose(result)
        except Exception as exc:  # noqa: BLE001 - the reader thread must live on
            shown = result.index + 1 if number is None else number
            self._events.add("warning", f"step {shown}: not diagnosed ({exc})")
            return None
