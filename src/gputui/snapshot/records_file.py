"""The `--records FILE` writer: JSON Lines of per-request records, as the journal is written.

Contract: a `RecordsFile` is a journal tap (`snapshot.journal.JournalTap`): it sees the
journal's lines after each flush, on the journal writer's thread (about once a second, never on
the engine's loop or the UI's), decides each request's step with `snapshot.records.RecordRows`
and appends the rows it decided, then flushes and fsyncs the file, as the journal is. A request
therefore reaches the file about a second after its step finished (closed, and all its requests
back), with its step final; `close` writes the rest. `open_records` opens (truncates) the file
at once, so a path that cannot be written is refused before any load (OSError).
A write that fails is reported once through `on_error`; the run goes on.
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
from gputui.snapshot.records import RecordRows


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
        self._rows = RecordRows(sla)
        self._on_error = on_error
        self._failed = False
        self._lock = threading.Lock()
        self._file: BinaryIO | None = path.open("wb")

    def take(self, lines: Sequence[Mapping[str, object]], records: Sequence[RequestRecord]) -> None:
        """Decide what these journal lines decide, and append those rows."""
        del records  # the lines carry all a row needs
        with self._lock:
            self._write(self._rows.feed(lines))

    def close(self) -> None:
        """Write every request still held (warm-up: its step never finished) and close."""
        with self._lock:
            if self._file is None:
                return
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
            if not self._failed and self._on_error is not None:
                self._on_error(f"--records {self.path}: write failed: {exc}")
            self._failed = True
            return
        self.rows_written += len(rows)


def open_records(
    path: Path, sla: Sla | Callable[[], Sla], on_error: Callable[[str], None] | None = None
) -> RecordsFile:
    """Open (truncate) the records file now; OSError with the reason when it cannot be."""
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder")
    return RecordsFile(path, sla, on_error)
