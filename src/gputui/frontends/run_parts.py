"""The parts `gputui run` wires together: its signal stopper, its repeat tally, its journal.

Kept apart from `frontends.run` so that the run's wiring reads as one sequence of named steps.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from gputui.control.repeats import repeat_spread
from gputui.engine.backend import OPENAI_COMPATIBLE, Backend
from gputui.frontends.run_printer import StepPrinter
from gputui.metrics.capacity import qualified_capacity
from gputui.metrics.knee import knee_from_steps
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult
from gputui.session import Session
from gputui.snapshot.journal import JournalHeader
from gputui.telemetry.samples import ServerSample


def open_journal(
    session: Session,
    folder: Path,
    header: JournalHeader,
    printer: StepPrinter,
    extra_lines: Callable[[], list[dict[str, Any]]],
) -> Path | None:
    """The run's crash journal beside its snapshot (a run without one still runs)."""
    try:
        path = session.open_journal(folder, header, on_error=printer.note, extra_lines=extra_lines)
    except OSError as exc:
        printer.note(f"no journal (crash recovery off): {exc}")
        return None
    printer.note(f"journal {path} (a crash is recovered by gputui sessions --recover)")
    return path


def backend_name(detected: Backend, server_sample: ServerSample | None) -> str:
    """Preflight's detection, else what telemetry's /metrics scrape recognised."""
    if detected.name == OPENAI_COMPATIBLE and server_sample is not None and server_sample.backend:
        return server_sample.backend
    return detected.name


class RepeatTally:
    """Each repeat's steps, capacity and knee, for the spread (`gputui.control.repeats`)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.runs: list[list[StepResult]] = []
        self.capacities: list[float | None] = []
        self.knees: list[float | None] = []

    def add(self, session: Session, first: int, sla: Sla, knee: float | None) -> None:
        """The repeat whose steps start at index `first` has ended."""
        steps = [
            s for s in session.finished_steps() if s.index >= first and s.mode == "concurrency"
        ]
        capacity = qualified_capacity(steps, sla).capacity if steps else None
        if knee is None and steps:
            found = knee_from_steps(steps, mode="concurrency").knee
            knee = found.level if found is not None else None
        self.runs.append(steps)
        self.capacities.append(capacity.level if capacity is not None else None)
        self.knees.append(knee)

    def spread(self) -> dict[str, Any]:
        """The snapshot's `repeats` key."""
        return repeat_spread(self.runs, self.capacities, self.knees)


class SignalStopper:
    """SIGINT, SIGTERM and SIGHUP end the sweep (the snapshot is still written)."""

    def __init__(self) -> None:
        self.fired = threading.Event()
        self.signal_name: str | None = None
        self.signal_number = 0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> SignalStopper:
        for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if sig is not None:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if not self.fired.is_set():
            self.signal_number = signum
            self.signal_name = signal.Signals(signum).name
            sys.stderr.write(
                f"\ngputui run: {self.signal_name}: stopping, saving what was measured\n"
            )
        self.fired.set()
