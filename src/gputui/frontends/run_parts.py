"""The parts `gputui run` wires together: its signal stopper, its journal, its backend name.

Kept apart from `frontends.run` so that the run's wiring reads as one sequence of named steps.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from gputui.control.runner import Stop
from gputui.engine.backend import OPENAI_COMPATIBLE, Backend
from gputui.frontends.run_printer import StepPrinter
from gputui.session import Session
from gputui.snapshot.journal import JournalHeader, JournalTap
from gputui.telemetry.samples import ServerSample


def open_journal(
    session: Session,
    folder: Path,
    header: JournalHeader,
    printer: StepPrinter,
    extra_lines: Callable[[], list[dict[str, object]]],
    taps: Sequence[JournalTap] = (),
) -> Path | None:
    """The run's crash journal beside its snapshot (a run without one still runs).

    `taps` (`--records`, `--serve-metrics`) follow the journal, so without one they are off.
    """
    try:
        path = session.open_journal(
            folder, header, on_error=printer.note, extra_lines=extra_lines, taps=taps
        )
    except OSError as exc:
        off = " and per-request records and /metrics counts" if taps else ""
        printer.note(f"no journal (crash recovery{off} off): {exc}")
        return None
    printer.note(f"journal {path} (a crash is recovered by gputui sessions --recover)")
    return path


def backend_name(detected: Backend, server_sample: ServerSample | None) -> str:
    """Preflight's detection, else what telemetry's /metrics scrape recognised."""
    if detected.name == OPENAI_COMPATIBLE and server_sample is not None and server_sample.backend:
        return server_sample.backend
    return detected.name


class SignalStopper:
    """SIGINT, SIGTERM and SIGHUP end the sweep (the snapshot is still written)."""

    def __init__(self) -> None:
        self.fired = Stop()
        self.signal_name: str | None = None
        self.signal_number = 0
        self._previous: dict[int, Callable[[int, FrameType | None], object] | int | None] = {}

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
