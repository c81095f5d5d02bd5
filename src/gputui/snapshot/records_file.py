"""The `--records FILE` writer: JSON Lines of per-request records, as the journal is written.

Contract: a `RecordsFile` is a journal tap (`snapshot.journal.JournalTap`): it sees the
journal's lines after each flush, on the journal writer's thread (about once a second, never on
the engine's loop or the UI's), decides each request's step with `snapshot.records.RecordRows`
and appends the rows it decided, then flushes and fsyncs the file, as the journal is. A request
therefore reaches the file about a second after its step finished (closed, and all its requests
back), with its step final; `close` writes the rest. `open_records` opens (truncates) the file
at once, so a path that cannot be written is refused before any load (OSError).
A write that fails is reported once through `on_error`; the run goes on.

`good` follows the SLA as the snapshot's steps do: a change mid-session (the TUI's settings)
judges the finished steps again, so at the journal's next flush after one (or at `close`) the
rows already written are judged again under the new SLA and the file is replaced whole (a new
file, fsynced, renamed over the old): it stays what `gputui records` writes from the snapshot.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

import orjson

from gputui.engine.records import RequestRecord
from gputui.metrics.sla import Sla
from gputui.snapshot.records import RecordRows, judge_rows


class RecordsFile:
    """Appends a session's per-request rows to one file (module contract)."""

    def __init__(
        self,
        path: Path,
        sla: Sla | Callable[[], Sla],
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.path = path
        self.rows_written = 0
        self._sla = sla
        self._judged_by = self._current_sla()
        """The SLA the rows written so far were judged by."""
        self._rows = RecordRows(sla)
        self._on_error = on_error
        self._failed = False
        self._lock = threading.Lock()
        self._file: BinaryIO | None = path.open("wb")

    def take(self, lines: Sequence[Mapping[str, object]], records: Sequence[RequestRecord]) -> None:
        """Decide what these journal lines decide, and append those rows."""
        del records  # the lines carry all a row needs
        with self._lock:
            sla = self._current_sla()
            if sla != self._judged_by:
                self._judge_again(sla)
            self._write(self._rows.feed(lines))

    def _current_sla(self) -> Sla:
        return self._sla() if callable(self._sla) else self._sla

    def _judge_again(self, sla: Sla) -> None:
        """The rows written so far judged under `sla`, the file replaced by them whole."""
        self._judged_by = sla
        if self._file is None or self._failed or not self.rows_written:
            return
        fresh = self.path.with_name(self.path.name + ".rejudged")
        self._file.close()
        try:
            rows = [orjson.loads(line) for line in self.path.read_bytes().splitlines() if line]
            with fresh.open("wb") as out:
                out.write(b"".join(orjson.dumps(row) + b"\n" for row in judge_rows(rows, sla)))
                out.flush()
                os.fsync(out.fileno())
            fresh.replace(self.path)
        except (OSError, orjson.JSONDecodeError) as exc:
            self._report(f"--records {self.path}: judging again under the new SLA failed: {exc}")
        try:
            self._file = self.path.open("ab")
        except OSError as exc:
            self._file = None
            self._report(f"--records {self.path}: cannot reopen: {exc}")

    def close(self) -> None:
        """Write every request still held (warm-up: its step never finished) and close."""
        with self._lock:
            if self._file is None:
                return
            if self._current_sla() != self._judged_by:
                self._judge_again(self._current_sla())
            self._write(self._rows.close())
            self._file.close()
            self._file = None

    def _write(self, rows: list[dict[str, object]]) -> None:
        if not rows or self._file is None:
            return
        data = b"".join(orjson.dumps(row) + b"\n" for row in rows)
        try:
            self._file.write(data)
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            self._report(f"--records {self.path}: write failed: {exc}")
            return
        self.rows_written += len(rows)

    def _report(self, message: str) -> None:
        """Say the first failure (once); the file is then left as it is."""
        if not self._failed and self._on_error is not None:
            self._on_error(message)
        self._failed = True


def open_records(
    path: Path, sla: Sla | Callable[[], Sla], on_error: Callable[[str], None] | None = None
) -> RecordsFile:
    """Open (truncate) the records file now; OSError with the reason when it cannot be."""
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder")
    return RecordsFile(path, sla, on_error)
