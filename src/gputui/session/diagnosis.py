"""The Session's diagnosis methods (issue 18): what bound each finished step, kept apart.

Contract: `gputui.session.Session` inherits `DiagnosisMixin`. `start_diagnosis` attaches a
`StepDiagnoser` (call after `start`; `stop` ends it); `_diagnose` runs on the engine's reader
thread for each finished, non-hidden step and never lets an error escape (it becomes a warning
event); `_verdict_changed` turns a verdict unlike the previous step's into an event; `diagnoses`
is what `snapshot.assemble.save_session` and the journal attach.
"""

from __future__ import annotations

from gputui.diagnosis.step import StepDiagnoser
from gputui.metrics.step import StepResult
from gputui.session.events import EventLog, verdict_event
from gputui.telemetry.sampler import TelemetrySampler


class DiagnosisMixin:
    """Per-step diagnosis of a Session (module contract)."""

    diagnoser: StepDiagnoser | None
    events: EventLog
    _hidden: set[int]
    _last_verdict: str | None

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
        diagnoser = StepDiagnoser(model=model, measured_bandwidth_gbps=measured_bandwidth_gbps)
        diagnoser.start(self, sampler, metrics_url)  # type: ignore[arg-type]
        self.diagnoser = diagnoser
        return diagnoser

    def diagnoses(self) -> dict[int, dict[str, object]]:
        """Each diagnosed step's diagnosis, by step index (empty without `start_diagnosis`)."""
        diagnoser = self.diagnoser
        return dict(diagnoser.diagnoses) if diagnoser is not None else {}

    def _diagnose(self, result: StepResult) -> dict[str, object] | None:
        """The step's diagnosis (on the engine's reader thread: an error never escapes)."""
        diagnoser = self.diagnoser
        if diagnoser is None or result.index in self._hidden:
            return None
        try:
            diagnosis = diagnoser.diagnose(result)
        except Exception as exc:  # noqa: BLE001 - the reader thread must live on
            self.events.add("warning", f"step {result.index + 1}: not diagnosed ({exc})")
            return None
        return diagnosis

    def _verdict_changed(self, result: StepResult, diagnosis: dict[str, object] | None) -> None:
        """A verdict unlike the previous step's is an event (after the step's own events)."""
        cache_warning = (diagnosis or {}).get("prefix_cache_warning")
        if cache_warning:  # a step meant to be cold was served from the prefix cache
            self.events.add("warning", str(cache_warning))
        verdict = (diagnosis or {}).get("bottleneck")
        if isinstance(verdict, dict):
            event = verdict_event(result, verdict, self._last_verdict)
            if event is not None:
                self.events.add(*event)
            self._last_verdict = str(verdict.get("verdict"))
