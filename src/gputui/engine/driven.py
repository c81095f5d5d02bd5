"""Sources that decide when their requests go out: conversations and trace replay.

Contract: a `DrivenSource` is a `RequestSource` with `drive(load, mode, level)`. The load
controller calls it (as a task of its own) at every `set_load` instead of running its closed or
open loop, and cancels that task at the next one; the driver sends through `LoadControl`, whose
`send` is the controller's own path (in-flight count, step attribution, failure records), and hands
long-lived work (a conversation) to `spawn`, so a level change never cancels a request in flight
and `stop` waits for it. A driver keeps its schedule on `time.perf_counter_ns()`.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Literal, Protocol, runtime_checkable

from gputui.engine.records import RequestRecord
from gputui.engine.workload import RequestSpec

LoadMode = Literal["concurrency", "rate"]


class LoadControl(Protocol):
    """What a driver may do with the load controller."""

    mode: LoadMode
    level: float
    stopping: bool

    async def send(
        self,
        spec: RequestSpec,
        queued_ns: int | None = None,
        *,
        conversation_id: int | None = None,
        turn: int | None = None,
        keep_text: bool = False,
    ) -> RequestRecord:
        """Send one request now; its record (with `output_text` when kept) comes back."""
        ...

    def spawn(self, work: Coroutine[object, None, None]) -> None:
        """Run `work` as a task that `stop` waits for and a level change leaves alone."""
        ...

    async def wait(self, delay_ns: int) -> bool:
        """Sleep `delay_ns` (or until resumed from a pause); False once the run is stopping."""
        ...

    def gap_ns(self, rate_per_s: float) -> int:
        """The run's arrival process: nanoseconds to the next arrival at this rate."""
        ...

    def reserve_id(self) -> int:
        """An id from the request-id sequence that no request will use (a conversation's id)."""
        ...


@runtime_checkable
class DrivenSource(Protocol):
    """A source that paces its own requests (see the module docstring)."""

    def next(self, request_id: int) -> RequestSpec:
        """A request outside the driver's schedule (a burst)."""
        ...

    async def drive(self, load: LoadControl, mode: LoadMode, level: float) -> None:
        """Keep this load until cancelled (the next `set_load`) or until the run stops."""
        ...
