"""The session loop's messages, and the frozen state it publishes.

Contract: the loop's inbox takes a `Batch` (an engine reader thread's finished requests), the
commands (`StepOpened`, `PendingLevel`, `BurstFired`, `RunStopping`, `PauseChanged`,
`JobPhaseChanged`, `StepTargetSet`, `StepVerdictSet`, `Finish`) and questions (`Ask`); all are
frozen. After each, the loop swaps in a new `Published`, which any thread reads without a lock.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from gputui.engine.process import EngineStatus
from gputui.engine.records import RequestRecord
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult, StepSpec
from gputui.metrics.verdict import Verdict
from gputui.session.frames import StatsFrame


@dataclass(frozen=True, slots=True)
class Published:
    """What the loop last published: read by any thread without a lock."""

    sla: Sla
    specs: tuple[StepSpec, ...] = ()
    finished: tuple[StepResult, ...] = ()
    """Finished steps in order, hidden ones left out."""
    finished_count: int = 0
    """Finished steps, hidden ones included (the frame's `steps_finished`)."""
    frame: StatsFrame | None = None
    status: EngineStatus | None = None
    cancelled: int = 0
    unmeasured: frozenset[int] = frozenset()
    """Steps that will never be among `finished`: hidden ones, and those left unmeasured."""
    probes_failed: int = 0
    client_cpu_percent: float = 0.0
    client_run_wait_percent: float | None = None
    target_state: str = "ok"
    journal_path: Path | None = None
    applied: int = 0
    """Messages handled so far (`SessionLoop.post` numbers them as they are posted)."""


@dataclass(frozen=True, slots=True)
class Batch:
    """Finished requests and the engine's state, stamped when they reached the Session."""

    records: list[RequestRecord]
    sent_by_step: dict[int, int]
    status: EngineStatus
    rtt: list[int | None]
    arrived_ns: int


@dataclass(frozen=True, slots=True)
class StepOpened:
    """A load change opened this step (built, and sent to the engine, by the caller)."""

    spec: StepSpec
    hidden: bool
    pending: bool = False
    """Its level waits for the steps before it to hand over (`session.loads`)."""


@dataclass(frozen=True, slots=True)
class PendingLevel:
    """The pending step is to run at this level instead (a quick second press)."""

    spec: StepSpec


@dataclass(frozen=True, slots=True)
class BurstFired:
    """`count` requests went out at `fired_ns` on top of step `index`'s load (`session.loads`)."""

    index: int
    count: int
    fired_ns: int


@dataclass(frozen=True, slots=True)
class RunStopping:
    """The run ends at `now_ns`: close the open step (incomplete if `interrupted`)."""

    now_ns: int
    interrupted: bool


@dataclass(frozen=True, slots=True)
class PauseChanged:
    """Sending stopped or started again (the frame's `paused`)."""

    paused: bool


@dataclass(frozen=True, slots=True)
class JobPhaseChanged:
    """What frames report while a job drives the load ("holding", "auto") or "measuring"."""

    phase: str


@dataclass(frozen=True, slots=True)
class StepTargetSet:
    """Judge step `index` against this precision target when it finishes."""

    index: int
    target_precision: float


@dataclass(frozen=True, slots=True)
class StepVerdictSet:
    """Step `index`'s verdict is this one (a hold's latest look), whatever its intervals say."""

    index: int
    verdict: Verdict
    basis: str
    """Why: 'pass at look 2 of 4 (n=240, 0.625 % each side)' (`metrics.hold_looks`)."""


@dataclass(frozen=True, slots=True)
class Finish:
    """The engine has stopped (its last status, if any): finish every step; the loop ends."""

    status: EngineStatus | None


@dataclass(frozen=True, slots=True)
class Ask:
    """A question for the loop's state, answered on the loop through `reply`."""

    question: Callable[..., object]
    """Called with the `SessionLoop`."""
    reply: Future[object]


Command = (
    StepOpened
    | PendingLevel
    | BurstFired
    | RunStopping
    | PauseChanged
    | JobPhaseChanged
    | StepTargetSet
    | StepVerdictSet
    | Finish
)
Message = Batch | Command | Ask
