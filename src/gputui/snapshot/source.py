"""What a snapshot is assembled from: the reads `snapshot.assemble` makes of a measured session.

Contract: `MeasuredSession` lists exactly what `assemble` reads, so the snapshot package depends
on these few figures and not on the `session` package (the Session satisfies it structurally, as
can a test's fake). Every member is read, never written: the finished steps, every received
record and the steps' windows, the SLA they were judged by, the cancelled and failed-probe
counts, the round-trip summary, the run's start stamp, the engine's own cost, and the step
diagnoses with the diagnoser that attaches them to the snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from gputui.engine.records import RequestRecord
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult, StepSpec
from gputui.metrics.step_diagnosis import StepDiagnosis
from gputui.metrics.summary import Summary
from gputui.snapshot.models import Snapshot


class EngineCost(Protocol):
    """The engine's own cost so far, for the `client` section (`engine.process.EngineStatus`)."""

    @property
    def cpu_s(self) -> float: ...
    @property
    def wall_s(self) -> float: ...
    @property
    def uvloop(self) -> bool: ...
    @property
    def connections_opened(self) -> int: ...
    @property
    def arrivals_dropped(self) -> int: ...
    @property
    def arrivals_dropped_by_step(self) -> dict[int, int]: ...


class SnapshotDiagnoser(Protocol):
    """Adds each step's diagnosis and the knee's explanation (`diagnosis.step.StepDiagnoser`)."""

    def attach(self, snapshot: Snapshot) -> Snapshot:
        """The snapshot with the diagnoses attached."""
        ...


class SessionDiagnosis(Protocol):
    """The steps' diagnosis a session keeps (`session.diagnosis.StepDiagnosis`)."""

    @property
    def diagnoser(self) -> SnapshotDiagnoser | None:
        """The step diagnoser, when diagnosis was started."""
        ...

    def diagnoses(self) -> Mapping[int, StepDiagnosis]:
        """Each diagnosed step's diagnosis, by step index."""
        ...


class MeasuredSession(Protocol):
    """The reads a snapshot makes of a session (`session.Session` satisfies it)."""

    @property
    def sla(self) -> Sla:
        """The SLA the steps were judged by."""
        ...

    @property
    def status(self) -> EngineCost | None:
        """The engine's latest status (None before the first)."""
        ...

    @property
    def cancelled(self) -> int:
        """Requests aborted by an interrupted run (in no step's counts)."""
        ...

    @property
    def probes_failed(self) -> int:
        """Round-trip probes that got no answer."""
        ...

    @property
    def started_ns(self) -> int:
        """When the session started (`perf_counter_ns`): the origin of telemetry times."""
        ...

    @property
    def diagnosis(self) -> SessionDiagnosis:
        """The steps' diagnosis."""
        ...

    def finished_steps(self) -> Sequence[StepResult]:
        """Finished steps in order."""
        ...

    def all_records(self) -> Sequence[RequestRecord]:
        """Every record received (cancelled ones excluded)."""
        ...

    def step_specs(self) -> Sequence[StepSpec]:
        """Every step so far, with its measurement window (the per-request `records` table)."""
        ...

    def rtt_summary(self) -> Summary:
        """Round-trip probe statistics in seconds."""
        ...
