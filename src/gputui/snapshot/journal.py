"""The session journal: an append-only record of a live session, from which a crash is recovered.

Contract: a journal is a file `<session>.journal` in the snapshot folder, one JSON object per line:
- a `header` line first (journal version, the writing process's pid, the wall-clock start, label,
  and the snapshot's `target`, `workload`, `sla` and `plan` sections),
- one `request` line per finished request (compact: step, id, sent time in ms since the session
  started, TTFT and E2E in ms, input and output tokens, ok, error reason),
- one `load` line per step started (index, mode, level, start and measurement start in ms), so a
  step the crash cut short can be rebuilt from its requests,
- one `measure` line whenever a step's measurement start or end becomes known or moves (a
  settled step starts measuring where it settled; a closed step has its end), so the step the
  crash cut short is rebuilt with the window it had,
- one `step` line per finished step (the snapshot's `Step`, exactly as a snapshot stores it),
- `hardware` and `telemetry` lines from the telemetry sampler (`snapshot.journal_telemetry`):
  the hardware section when it changes, and telemetry points as they arrive, downsampled.

Lines are buffered in memory and written by `flush()` (the caller flushes about once a second, off
the UI's event loop) with one `write` + `fsync`, so a `kill -9` loses at most the last second and
never a line that was flushed; a torn last line is skipped on reading. After a clean save the
journal is deleted (`close(delete=True)`); a journal left behind means its session died unsaved
(`snapshot.recovery` finds, rebuilds and deletes those).

`JournalWriter` keeps a live session's journal: a thread of its own polls the session's records
about once a second, queues the requests (per step) and steps finished since the last poll, and
flushes them, so the live controller and the UI's event loop never write a byte.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import orjson

from gputui.engine.records import RequestRecord
from gputui.metrics.step import StepResult, StepSpec
from gputui.metrics.step_diagnosis import StepDiagnosis
from gputui.snapshot.models import (
    SlaBounds,
    Target,
    Workload,
    step_from_result,
)

JOURNAL_VERSION: Final = 1
SUFFIX: Final = ".journal"


@dataclass(frozen=True, slots=True)
class JournalHeader:
    """What the journal's session was: enough to write a snapshot without the live session."""

    label: str | None
    target: Target
    workload: Workload
    sla: SlaBounds
    plan: dict[str, object]
    price_per_hour: float | None = None
    precision: str | None = None


def _ms(ns: int | None, origin_ns: int) -> float | None:
    return None if ns is None else round((ns - origin_ns) / 1e6, 3)


def request_line(record: RequestRecord, origin_ns: int) -> dict[str, object]:
    """The compact journal form of one finished request (times in ms)."""
    return {
        "kind": "request",
        "step": record.step_index,
        "id": record.request_id,
        "sent_ms": _ms(record.sent_ns, origin_ns),
        "ttft_ms": _ms(record.first_token_ns, record.sent_ns),
        "e2e_ms": _ms(record.end_ns, record.sent_ns),
        "in": record.input_tokens,
        "out": record.output_tokens,
        "cached": record.cached_input_tokens,
        "ok": record.ok,
        "err": record.error,
    }


class Journal:
    """Writes one session's journal (thread-safe: appends from any thread, flushes from one)."""

    def __init__(self, path: Path, header: JournalHeader) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._pending: list[bytes] = []
        self._closed = False
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("ab")
        self._append(
            {
                "kind": "header",
                "journal_version": JOURNAL_VERSION,
                "pid": os.getpid(),
                "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "label": header.label,
                "target": header.target.model_dump(mode="json"),
                "workload": header.workload.model_dump(mode="json"),
                "sla": header.sla.model_dump(mode="json"),
                "plan": header.plan,
                "price_per_hour": header.price_per_hour,
                "precision": header.precision,
            }
        )
        self.flush()

    @classmethod
    def create(cls, folder: Path, header: JournalHeader) -> Journal:
        """A new journal in `folder`, named after the wall-clock start and the label."""
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", header.label or "session").strip("-")[:40]
        path = folder / f"{stamp}-{slug or 'session'}-{os.getpid()}{SUFFIX}"
        return cls(path, header)

    def _append(self, line: dict[str, object]) -> None:
        with self._lock:
            if not self._closed:
                self._pending.append(orjson.dumps(line) + b"\n")

    def add_requests(self, records: Iterable[RequestRecord], origin_ns: int) -> int:
        """Queue finished requests; returns how many."""
        lines = [orjson.dumps(request_line(r, origin_ns)) + b"\n" for r in records]
        with self._lock:
            if not self._closed:
                self._pending.extend(lines)
        return len(lines)

    def add_load(self, spec: StepSpec, origin_ns: int, *, hidden: bool = False) -> None:
        """Queue a step's start, so a step the crash cut short can be rebuilt from its requests."""
        self._append(
            {
                "kind": "load",
                "index": spec.index,
                "mode": spec.mode,
                "level": spec.level,
                "start_ms": _ms(spec.start_ns, origin_ns),
                "measure_ms": _ms(spec.measure_start_ns, origin_ns),
                "hidden": hidden,
            }
        )

    def add_measure(self, spec: StepSpec, origin_ns: int) -> None:
        """Queue a step's current measurement window (start, and end once it is closed)."""
        self._append(
            {
                "kind": "measure",
                "index": spec.index,
                "measure_ms": _ms(spec.measure_start_ns, origin_ns),
                "end_ms": _ms(spec.end_ns, origin_ns) if spec.end_ns >= 0 else None,
            }
        )

    def add_lines(self, lines: Iterable[Mapping[str, object]]) -> None:
        """Queue other lines (each with its `kind`), e.g. `snapshot.journal_telemetry`'s."""
        encoded = [orjson.dumps(dict(line)) + b"\n" for line in lines]
        with self._lock:
            if not self._closed:
                self._pending.extend(encoded)

    def add_step(self, result: StepResult, diagnosis: StepDiagnosis | None = None) -> None:
        """Queue a finished step, with its diagnosis (issue 18) when it has one."""
        step = step_from_result(result).model_dump(mode="json")
        if diagnosis is not None:
            fields = orjson.dumps(diagnosis.fields(), option=orjson.OPT_SERIALIZE_NUMPY)
            step.update(orjson.loads(fields))
        self._append({"kind": "step", "step": step})

    def flush(self) -> None:
        """Write what is queued and fsync it (blocking: call it off the event loop)."""
        with self._lock:
            if self._closed or not self._pending:
                return
            data, self._pending = b"".join(self._pending), []
            self._file.write(data)
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self, *, delete: bool) -> None:
        """Flush and close; `delete` after a clean save (the snapshot now holds everything)."""
        self.flush()
        with self._lock:
            self._closed = True
            self._file.close()
        if delete:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()


class JournalWriter:
    """Polls a live session's finished requests and steps into its journal (see the docstring)."""

    def __init__(
        self,
        journal: Journal,
        records: Callable[[], Iterable[RequestRecord]],
        origin_ns: int,
        *,
        interval_s: float = 1.0,
        on_error: Callable[[str], None] | None = None,
        specs: Callable[[], Sequence[StepSpec]] | None = None,
        extra_lines: Callable[[], Iterable[Mapping[str, object]]] | None = None,
    ) -> None:
        self.journal = journal
        self._records = records
        self._specs = specs
        """The session's steps: their measurement windows are journalled as they change."""
        self._extra_lines = extra_lines
        """More lines each poll (hardware and telemetry: `snapshot.journal_telemetry`)."""
        self._windows: dict[int, tuple[int, int]] = {}
        self._origin_ns = origin_ns
        self._interval_s = interval_s
        self._on_error = on_error
        self._written: dict[int, int] = {}
        """Requests already journalled, by step (the session's records only ever grow)."""
        self._steps: deque[tuple[StepResult, StepDiagnosis | None]] = deque()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._forever, name="gputui-journal", daemon=True)

    @property
    def path(self) -> Path:
        """The journal's file."""
        return self.journal.path

    def start(self) -> None:
        """Start polling."""
        self._thread.start()

    def add_step(self, result: StepResult, diagnosis: StepDiagnosis | None = None) -> None:
        """A step finished (from any thread): journalled at the next poll."""
        self._steps.append((result, diagnosis))

    def _forever(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.poll()

    def poll(self) -> None:
        """Queue the requests and steps finished since the last poll, then write them."""
        by_step: dict[int, list[RequestRecord]] = {}
        for record in self._records():
            by_step.setdefault(record.step_index, []).append(record)
        for index, records in by_step.items():
            done = self._written.get(index, 0)
            if len(records) > done:
                self.journal.add_requests(records[done:], self._origin_ns)
                self._written[index] = len(records)
        for spec in self._specs() if self._specs is not None else ():
            window = (spec.measure_start_ns, spec.end_ns)
            if self._windows.get(spec.index) != window:
                self._windows[spec.index] = window
                self.journal.add_measure(spec, self._origin_ns)
        while self._steps:
            self.journal.add_step(*self._steps.popleft())
        if self._extra_lines is not None:
            self._add_extra_lines(self._extra_lines)
        try:
            self.journal.flush()
        except OSError as exc:
            if self._on_error is not None:
                self._on_error(f"journal write failed: {exc}")

    def _add_extra_lines(self, source: Callable[[], Iterable[Mapping[str, object]]]) -> None:
        try:
            self.journal.add_lines(source())
        except Exception as exc:  # noqa: BLE001 - telemetry must never stop the journal
            if self._on_error is not None:
                self._on_error(f"journal telemetry skipped: {exc}")

    def stop(self, *, delete: bool) -> None:
        """Stop polling, journal what is left, close; `delete` once a snapshot holds it all."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        self.poll()
        self.journal.close(delete=delete)
