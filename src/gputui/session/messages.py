"""The session loop's messages, and the frozen state it publishes.

Contract: the loop's inbox takes a `Batch` (an engine reader thread's finished requests), the
commands (`StepOpened`, `WatchStep`, `StopWatching`, `DrainWatched`, `PendingLevel`, `BurstFired`,
`RunStopping`, `PauseChanged`, `JobPhaseChanged`, `Finish`) and questions (`Ask`); all are
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
from gputui.session.frames import StatsFrame
from gputui.session.step_end import StepEnded, StepLimits


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
class WatchRequest:
    """Watch a step under `limits` (None: end it now) for `job`; the answer comes on `reply`."""

    limits: StepLimits | None
    finish: bool
    """Close it keeping its load, and wait for its figures (all its requests back)."""
    job: int
    reply: Future[StepEnded | None]
    index: int | None = None
    """The step to watch (None: the one it opens, or the open one)."""


@dataclass(frozen=True, slots=True)
class StepOpened:
    """A load change opened this step (built, and sent to the engine, by the caller)."""

    spec: StepSpec
    hidden: bool
    pending: bool = False
    """Its level waits for the steps before it to hand over (`session.loads`)."""
    watch: WatchRequest | None = None
    """A plan's step: its limits, and who waits for its end (`session.watch`)."""


@dataclass(frozen=True, slots=True)
class WatchStep:
    """Watch a step already open (a hold, the end of a repeat) as `request` says."""

    request: WatchRequest


@dataclass(frozen=True, slots=True)
class DrainWatched:
    """Answer `reply` once the engine reports no request in flight (`Session.drained`)."""

    reply: Future[None]


@dataclass(frozen=True, slots=True)
class StopWatching:
    """Job `job`'s watched step ends now, "interrupted" (a job cancelled, a run stopped)."""

    job: int


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
    resettle: bool = False
    """The TUI's `b`: the step opened for the burst measures from after it (`session.loads`)."""


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
    | WatchStep
    | StopWatching
    | DrainWatched
    | PendingLevel
    | BurstFired
    | RunStopping
    | PauseChanged
    | JobPhaseChanged
    | Finish
)
Message = Batch | Command | Ask
