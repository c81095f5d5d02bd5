"""The event log's rules: what a change in the frames, a finished step or a new load says.

Contract: `EventWatcher.observe` turns successive frames and telemetry into events (new errors, a
saturated client, a target that stops answering and answers again, throttling, preemptions) and
the target state they imply; `step_events` gives a finished step's warnings and a missed SLA;
`load_event` a load change, `verdict_event` a bottleneck verdict that differs from the previous
step's (issue 18). The Session runs them on its loop thread and keeps the
`EventLog`; the replay (`ui.replay`) runs the same rules on its frames. Nothing here reads a clock.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from gputui.metrics.client_state import ADVICE, HOST_CONTENDED
from gputui.metrics.step_quality import LONGER_IN_TUI, step_warnings

if TYPE_CHECKING:
    from gputui.engine.load import LoadMode
    from gputui.engine.records import RequestRecord
    from gputui.metrics.step import StepResult, StepSpec
    from gputui.session.frames import StatsFrame
    from gputui.telemetry.sampler import TelemetryFrame

EventKind = Literal["info", "error", "throttle", "preemption", "sla", "warning"]
TARGET_DOWN = "unreachable: requests cannot connect"
"""The target state while a server that answered stops accepting connections."""


@dataclass(frozen=True, slots=True)
class LiveEvent:
    """One line of the event log."""

    t_s: float
    """Seconds since the session started."""
    kind: EventKind
    text: str


class EventLog:
    """The last `limit` events of a session: appended from any thread, read without a lock.

    Each `add` swaps in a new tuple (writers take turns), so a reader takes `items()` as it is.
    """

    def __init__(self, origin_ns: int, limit: int = 200) -> None:
        self._origin_ns = origin_ns
        self._limit = limit
        self._events: tuple[LiveEvent, ...] = ()
        self._lock = threading.Lock()
        self.count = 0
        """Events ever added (changes whenever the log does, unlike its bounded length)."""

    def add(self, kind: EventKind, text: str) -> None:
        """Append an event stamped now."""
        t_s = round((time.perf_counter_ns() - self._origin_ns) / 1e9, 1)
        with self._lock:
            added = (*self._events, LiveEvent(t_s, kind, text))
            self._events = added[-self._limit :] if self._limit > 0 else ()
            self.count += 1

    def items(self) -> tuple[LiveEvent, ...]:
        """The events kept, oldest first."""
        return self._events


Event = tuple[EventKind, str]


def load_event(mode: LoadMode, level: float) -> Event:
    """The event of a load change."""
    unit = "concurrent" if mode == "concurrency" else "req/s"
    return "info", f"load {level:g} {unit}"


def burst_event(
    spec: StepSpec, count: int, fired_ns: int, records: Sequence[RequestRecord]
) -> Event:
    """A burst measured as the burst: "burst of 32 at 4: back in 6.1 s, P95 TTFT 2.3 s ..."."""
    ok = [r for r in records if r.ok]
    back_s = (max(r.end_ns for r in records) - fired_ns) / 1e9 if records else 0.0
    text = f"burst of {count} at {spec.level:g}: all back in {back_s:.1f} s"
    ttft = [(r.first_token_ns - r.sent_ns) / 1e9 for r in ok if r.first_token_ns is not None]
    if ttft:
        text += f", P95 TTFT {float(np.percentile(ttft, 95)):.2f} s"
    if ok:
        e2e = [(r.end_ns - r.sent_ns) / 1e9 for r in ok]
        text += f", P95 E2E {float(np.percentile(e2e, 95)):.2f} s"
    failed = len(records) - len(ok)
    return "info", text + (f", {failed} failed" if failed else "")


NOTHING_MEASURED = "nothing measured"
"""How an unmeasured level's event ends: `gputui run`, which has no event log, prints these."""


def unmeasured_event(spec: StepSpec) -> Event:
    """A level left before it measured anything: "16: left after 6 s, nothing measured"."""
    unit = "" if spec.mode == "concurrency" else " req/s"
    seconds = max(spec.end_ns - spec.start_ns, 0) / 1e9
    return "info", f"{spec.level:g}{unit}: left after {seconds:.0f} s, {NOTHING_MEASURED}"


def step_events(step: StepResult, number: int | None = None) -> list[Event]:
    """A finished step's warnings, and whether it missed the SLA.

    `number` is the step's number as the Steps table shows it (`StepLedger.number`: hidden
    carry-on steps take none); without it, the index + 1.
    """
    shown = step.index + 1 if number is None else number
    events: list[Event] = [
        ("warning", f"step {shown}: {line}") for line in step_warnings(step, LONGER_IN_TUI)
    ]
    if not step.sla_ok and step.requests_ok + step.requests_failed > 0:
        events.append(("sla", f"step {shown} ({step.level:g}) missed the SLA"))
    return events


def verdict_event(
    step: StepResult,
    bottleneck: Mapping[str, object],
    previous: str | None,
    number: int | None = None,
) -> Event | None:
    """'step 4 (32): bound by queue (was decode-bandwidth)' when the verdict changed; else None.

    The first verdict is an event too unless it is "none"; a suspect (client-bound) or throttled
    step says so, since its figures then do not describe the server alone.
    """
    verdict = str(bottleneck.get("verdict"))
    if verdict == previous or (previous is None and verdict == "none"):
        return None
    flags = []
    if bottleneck.get("suspect") and verdict not in ("client", "host-contended"):
        flags.append(f"suspect: {bottleneck.get('client_state') or 'client-bound'}")
    if bottleneck.get("throttled") and verdict != "throttled":
        flags.append("measured while throttled")
    was = f" (was {previous})" if previous is not None else ""
    tail = f" [{', '.join(flags)}]" if flags else ""
    warn = ("client", "host-contended", "throttled", "errors")
    kind: EventKind = "warning" if verdict in warn else "info"
    shown = step.index + 1 if number is None else number
    return kind, f"step {shown} ({step.level:g}): bound by {verdict}{was}{tail}"


def contended_text(frame: StatsFrame) -> str:
    """The event for a client that is late because the host is busy (no advice to add workers)."""
    wait = frame.client_run_wait_percent or 0.0
    return (
        f"the host is contended: the client waited {wait:.0f} % of the time for a CPU "
        f"({wait * 10:.0f} ms/s) and used {frame.busiest_worker_cpu_percent:.0f} %, its loop "
        f"{frame.loop_lag_max_ms:.0f} ms late: its timings include that wait; "
        f"{ADVICE[HOST_CONTENDED]}"
    )


class EventWatcher:
    """Turns changes between successive frames and telemetry into events (one thread calls it)."""

    def __init__(self) -> None:
        self._errors_seen: Counter[str] = Counter()
        self._watched_seq = -1
        self._connect_seen = 0
        self._ok_seen = 0
        self._saturated = False
        self._contended = False
        self._throttled: dict[int, tuple[str, ...]] = {}
        self._preemptions: int | None = None

    def observe(
        self, frame: StatsFrame | None, telemetry: TelemetryFrame | None, target_state: str
    ) -> tuple[list[Event], str]:
        """The events since the last call, and the target state they imply."""
        events: list[Event] = []
        if frame is not None and frame.seq != self._watched_seq:
            self._watched_seq = frame.seq
            window = frame.window
            for reason in sorted(set(window.errors) | set(self._errors_seen)):
                count, seen = window.errors.get(reason, 0), self._errors_seen[reason]
                if count > seen:  # the window slides: compare with the last frame, not the max
                    events.append(("error", f"{count - seen} x {reason}"))
                self._errors_seen[reason] = count
            target_state = self._track_target(
                window.errors.get("connect", 0), window.requests_ok, target_state, events
            )
            if frame.client_saturated and not self._saturated:
                events.append(
                    (
                        "error",
                        f"the client is saturated ({frame.busiest_worker_cpu_percent:.0f} % CPU, "
                        f"{frame.workers} worker(s)): its timings include its own queueing; "
                        "restart with more --workers",
                    )
                )
            self._saturated = frame.client_saturated
            contended = frame.host_contended
            if contended and not self._contended:
                events.append(("error", contended_text(frame)))
            self._contended = contended
        if telemetry is not None:
            events += self._telemetry(telemetry)
        return events, target_state

    def _telemetry(self, telemetry: TelemetryFrame) -> list[Event]:
        events: list[Event] = []
        for gpu in telemetry.gpus:
            reasons = tuple(r for r in (gpu.throttle_reasons or ()) if r != "gpu_idle")
            if reasons and reasons != self._throttled.get(gpu.index):
                events.append(("throttle", f"GPU {gpu.index} throttling: {', '.join(reasons)}"))
            self._throttled[gpu.index] = reasons
        server = telemetry.server
        if server is not None and server.preemptions_total is not None:
            if self._preemptions is not None and server.preemptions_total > self._preemptions:
                delta = server.preemptions_total - self._preemptions
                events.append(("preemption", f"{delta} preemptions (KV cache full)"))
            self._preemptions = server.preemptions_total
        return events

    def _track_target(self, connect_failures: int, ok: int, state: str, events: list[Event]) -> str:
        """A server that dies mid-run: unreachable once requests stop connecting, ok once back."""
        connect_rose, ok_rose = connect_failures > self._connect_seen, ok > self._ok_seen
        self._connect_seen, self._ok_seen = connect_failures, ok
        if state == "ok" and connect_rose and not ok_rose:
            events.append(("error", "target unreachable: connections refused; the load retries"))
            return TARGET_DOWN
        if state == TARGET_DOWN and ok_rose:
            events.append(("info", "target answers again"))
            return "ok"
        return state
