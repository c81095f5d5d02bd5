"""`gputui records SNAPSHOT [-o FILE]`: a saved session's per-request records as JSON Lines.

Contract: the rows are those `--records FILE` wrote live (`snapshot.records`), from the
snapshot's `records` table (every snapshot saved or recovered since schema version 1 of the
records has one); written to FILE (atomically: a temporary file, then a rename) or to stdout.
A snapshot without the table, or one that does not load, is one line and exit code 1.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import orjson

from gputui.errors import SnapshotError
from gputui.snapshot.records import table_rows
from gputui.snapshot.store import load_snapshot


@dataclass(frozen=True, slots=True)
class RecordsOptions:
    """`gputui records`'s arguments."""

    snapshot: str
    output: Path | None = None


def snapshot_rows(path: str) -> list[dict[str, object]]:
    """The per-request rows of a saved snapshot (SnapshotError with the reason when none)."""
    snapshot = load_snapshot(path)
    table = (snapshot.model_extra or {}).get("records")
    if not isinstance(table, dict):
        raise SnapshotError(
            f"{path}: no per-request records (saved by a gputui without them; rerun the session)"
        )
    try:
        return list(table_rows(table))
    except ValueError as exc:
        raise SnapshotError(f"{path}: {exc}") from None


def run_records(options: RecordsOptions) -> int:
    """Write the rows; returns the exit code."""
    data = b"".join(orjson.dumps(row) + b"\n" for row in snapshot_rows(options.snapshot))
    if options.output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return 0
    tmp = options.output.with_name(options.output.name + ".tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(options.output)
    except OSError as exc:
        raise SnapshotError(f"{options.output}: cannot write: {exc.strerror or exc}") from None
    return 0
