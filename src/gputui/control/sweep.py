"""What a run fires beside its plan: bursts on top of the load (`--burst`).

Contract: `BurstFirer` fires bursts in its own thread; `burst_recoveries` (`metrics.bursts`)
judges each from the session's in-flight frames (`Session.in_flight_frames`, kept and read on
the session loop: `session.in_flight`). Nothing here measures: the engine does, and
`gputui.metrics` computes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from gputui.engine.records import RequestRecord
from gputui.metrics.bursts import BurstRecovery
from gputui.metrics.bursts import burst_recoveries as recoveries
from gputui.session import Session


class BurstFirer:
    """Fires K requests every S seconds on top of the load, in its own thread."""

    def __init__(self, session: Session, count: int, every_s: float) -> None:
        self._session = session
        self._count = count
        self._every_s = every_s
        self._stop = threading.Event()
        self.fired_ns: list[int] = []
        self._thread = threading.Thread(target=self._run, name="gputui-bursts", daemon=True)

    def start(self) -> None:
        """Begin firing (the first burst after one period)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop firing."""
        self._stop.set()
        self._thread.join(timeout=2.0)

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            self.fired_ns.append(time.perf_counter_ns())
            self._session.burst(self._count)


def burst_recoveries(
    fired_ns: Sequence[int],
    count: int,
    records: Sequence[RequestRecord],
    frames: tuple[Sequence[int], Sequence[int]],
    ttft_bound_s: float | None,
    origin_ns: int,
) -> list[BurstRecovery]:
    """Per burst, its recovery from the frames (`metrics.bursts.burst_recoveries`)."""
    return recoveries(fired_ns, count, records, frames, ttft_bound_s, origin_ns)
