"""The Session's crash journal: one writer thread, attached to the session loop.

Contract: the Session owns one `SessionJournal`. `open` creates the journal file in a folder and
starts its writer (`snapshot.journal.JournalWriter`), which journals every finished request and
step from then on, and every step already started; the loop is told (`attach_journal`), so the
steps' load and measurement lines follow as they change. `close` detaches it, journals what is
left and stops the writer (deleting the file when a snapshot now holds it all). `path` is the
open journal's file. Both front ends use it through `Session.open_journal`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from gputui.engine.records import RequestRecord
from gputui.metrics.step import StepSpec
from gputui.session.loop import SessionLoop
from gputui.snapshot.journal import Journal, JournalHeader, JournalTap, JournalWriter

JOURNAL_INTERVAL_S = 1.0
"""How often the journal is written and fsync'd: a `kill -9` loses at most this much."""


class SessionJournal:
    """A Session's crash journal (module contract)."""

    def __init__(
        self,
        loop: SessionLoop,
        records: Callable[[], list[RequestRecord]],
        specs: Callable[[], list[StepSpec]],
    ) -> None:
        self._loop = loop
        self._records = records
        self._specs = specs

    def open(
        self,
        folder: Path,
        header: JournalHeader,
        origin_ns: int,
        on_error: Callable[[str], None] | None = None,
        extra_lines: Callable[[], Iterable[Mapping[str, object]]] | None = None,
        taps: Sequence[JournalTap] = (),
    ) -> Path:
        """Journal from now on, times from `origin_ns` (OSError if the file cannot be made).

        Steps already started are journalled at once, so a crash loses at most the last second;
        so are their measurement windows as settling moves them, and `extra_lines` (the
        sampler's hardware and telemetry: `snapshot.journal_telemetry`) at every write. `taps`
        follow the journal's lines on its writer's thread (`--records`, `--serve-metrics`).
        """
        journal = Journal.create(folder, header, taps)
        writer = JournalWriter(
            journal,
            self._records,
            origin_ns,
            interval_s=JOURNAL_INTERVAL_S,
            on_error=on_error,
            specs=self._specs,
            extra_lines=extra_lines,
        )
        self._loop.ask(lambda loop: loop.attach_journal(writer, origin_ns))
        writer.start()
        return journal.path

    def close(self, *, saved: bool) -> None:
        """Journal what is left and close; `saved` deletes it (a snapshot now holds it all)."""
        writer = self._loop.ask(lambda loop: loop.detach_journal())
        if writer is not None:
            writer.stop(delete=saved)

    @property
    def path(self) -> Path | None:
        """The open journal's file, if any."""
        return self._loop.published.journal_path
