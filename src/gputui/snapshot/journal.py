"""The session journal: an append-only record of a live session, from which a crash is recovered.

Contract: a journal is a file `<session>.journal` in the snapshot folder, one JSON object per line:
- a `header` line first (journal version, the writing process's pid, the wall-clock start, label,
  and the snapshot's `target`, `workload`, `sla` and `plan` sections),
- one `request` line per finished request (compact: step, id, sent time in ms since the session
  started, TTFT and E2E in ms, input and output tokens, ok, error reason; and, exact, in int ns
  since the session started: `sent_ns`, `first_ns`, `answer_ns`, `last_ns`, `sched_ns`, with the
  token events, conversation and turn, requested length, HTTP status and whether a burst sent
  it: what a per-request record of `snapshot.records` needs),
- one `load` line per step started (index, mode, level, start and measurement start in ms, the
  measurement start also exact in `measure_ns`), so a step the crash cut short can be rebuilt
  from its requests,
- one `measure` line whenever a step's measurement start or end becomes known or moves (a
  settled step starts measuring where it settled; a closed step has its end; both also exact in
  `measure_ns`, `end_ns`), so the step the crash cut short is rebuilt with the window it had,
- one `step` line per finished step (the snapshot's `Step`, exactly as a snapshot stores it),
- `hardware` and `telemetry` lines from the telemetry sampler (`snapshot.journal_telemetry`):
  the hardware section when it changes, and telemetry points as they arrive, downsampled.

Taps (`JournalTap`: the `--records` file, the `--serve-metrics` exporter) see the header,
request, load, measure and step lines, and the finished requests themselves, after each flush,
on the writer's thread: they follow the
session through this seam alone, never through its internals.

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
from typing import Final, Protocol

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
    energy_price_per_kwh: float | None = None
    pue: float = 1.0


def _ms(ns: int | None, origin_ns: int) -> float | None:
    return None if ns is None else round((ns - origin_ns) / 1e6, 3)


def _since(ns: int | None, origin_ns: int) -> int | None:
    return None if ns is None else ns - origin_ns


def request_line(record: RequestRecord, origin_ns: int) -> dict[str, object]:
    """The compact journal form of one finished request (ms for recovery, exact ns for records)."""
    line: dict[str, object] = {
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
        "sent_ns": record.sent_ns - origin_ns,
        "first_ns": _since(record.first_token_ns, origin_ns),
        "answer_ns": _since(record.first_answer_ns, origin_ns),
        "last_ns": record.end_ns - origin_ns,
        "sched_ns": _since(record.queued_ns, origin_ns),
        "events": int(record.token_ns.size),
        "conv": record.conversation_id,
        "turn": record.turn,
        "req_out": record.requested_output_tokens,
        "status": record.status_code,
        "burst": record.burst,
    }
    if record.cached_input_tokens is None and record.server_timings is not None:
        line["cache_n"] = record.server_timings.cache_n  # llama.cpp's own prefix-cache count
    if record.reasoning_tokens:
        line["think"] = record.reasoning_tokens  # a thinking answer's TTFAT (records' `good`)
    return line


def load_line(spec: StepSpec, origin_ns: int, *, hidden: bool) -> dict[str, object]:
    """A step's start (`add_load`): its load, and where its measurement starts."""
    return {
        "kind": "load",
        "index": spec.index,
        "mode": spec.mode,
        "level": spec.level,
        "start_ms": _ms(spec.start_ns, origin_ns),
        "measure_ms": _ms(spec.measure_start_ns, origin_ns),
        "measure_ns": spec.measure_start_ns - origin_ns,
        "hidden": hidden,
    }


def measure_line(spec: StepSpec, origin_ns: int) -> dict[str, object]:
    """A step's measurement window as it stands (`add_measure`)."""
    closed = spec.end_ns >= 0
    return {
        "kind": "measure",
        "index": spec.index,
        "measure_ms": _ms(spec.measure_start_ns, origin_ns),
        "measure_ns": spec.measure_start_ns - origin_ns,
        "end_ms": _ms(spec.end_ns, origin_ns) if closed else None,
        "end_ns": spec.end_ns - origin_ns if closed else None,
    }


class JournalTap(Protocol):
    """Follows a journal: every line and finished request, after each flush (writer's thread)."""

    def take(self, lines: Sequence[Mapping[str, object]], records: Sequence[RequestRecord]) -> None:
        """The lines queued since the last flush (in order), and the requests among them."""
        ...

    def close(self) -> None:
        """The journal closed: nothing follows."""
        ...


class Journal:
    """Writes one session's journal (thread-safe: appends from any thread, flushes from one)."""

    def __init__(self, path: Path, header: JournalHeader, taps: Sequence[JournalTap] = ()) -> None:
        self.path = path
        self._lock = threading.Lock()
        """Guards the queued lines only: an append never waits for the disk."""
        self._write_lock = threading.Lock()
        """Serializes the file's writes, fsyncs and close (held without `_lock`)."""
        self._pending: list[bytes] = []
        self._taps = tuple(taps)
        self._tapped: list[Mapping[str, object]] = []
        self._tapped_records: list[RequestRecord] = []
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
                "energy_price_per_kwh": header.energy_price_per_kwh,
                "pue": header.pue,
            }
        )
        self.flush()

    @classmethod
    def create(
        cls, folder: Path, header: JournalHeader, taps: Sequence[JournalTap] = ()
    ) -> Journal:
        """A new journal in `folder`, named after the wall-clock start and the label."""
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", header.label or "session").strip("-")[:40]
        path = folder / f"{stamp}-{slug or 'session'}-{os.getpid()}{SUFFIX}"
        return cls(path, header, taps)

    def _append(self, line: dict[str, object]) -> None:
        encoded = orjson.dumps(line) + b"\n"
        with self._lock:
            if not self._closed:
                self._pending.append(encoded)
                if self._taps:
                    self._tapped.append(line)

    def add_requests(self, records: Iterable[RequestRecord], origin_ns: int) -> int:
        """Queue finished requests; returns how many."""
        kept = list(records)
        lines = [request_line(r, origin_ns) for r in kept]
        encoded = [orjson.dumps(line) + b"\n" for line in lines]
        with self._lock:
            if not self._closed:
                self._pending.extend(encoded)
                if self._taps:
                    self._tapped.extend(lines)
                    self._tapped_records.extend(kept)
        return len(lines)

    def add_load(self, spec: StepSpec, origin_ns: int, *, hidden: bool = False) -> None:
        """Queue a step's start, so a step the crash cut short can be rebuilt from its requests."""
        self._append(load_line(spec, origin_ns, hidden=hidden))

    def add_measure(self, spec: StepSpec, origin_ns: int) -> None:
        """Queue a step's current measurement window (start, and end once it is closed)."""
        self._append(measure_line(spec, origin_ns))

    def add_lines(self, lines: Iterable[Mapping[str, object]]) -> None:
        """Queue other lines (each with its `kind`), e.g. `snapshot.journal_telemetry`'s.

        Taps do not see them (telemetry: no tap reads it).
        """
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
        """Write what is queued and fsync it (blocking: call it off the event loop).

        The queue is taken under the append lock and written outside it: an fsync can take
        seconds on a busy disk, and appends come from the session's loop (a step's `load` line),
        which must never wait for the disk. Then the taps get the same lines, outside both locks
        (appends never wait for a tap), even when the write failed (a full disk must not starve
        `--records` or /metrics).
        """
        with self._write_lock:
            with self._lock:
                if self._closed or not self._pending:
                    return
                data, self._pending = b"".join(self._pending), []
                lines, self._tapped = self._tapped, []
                records, self._tapped_records = self._tapped_records, []
            try:
                self._file.write(data)
                self._file.flush()
                os.fsync(self._file.fileno())
            except OSError as exc:
                failed: OSError | None = exc
            else:
                failed = None
        for tap in self._taps:
            tap.take(lines, records)
        if failed is not None:
            raise failed

    def close(self, *, delete: bool) -> None:
        """Flush and close; `delete` after a clean save (the snapshot now holds everything)."""
        try:
            self.flush()
        finally:
            with self._write_lock, self._lock:
                was_closed, self._closed = self._closed, True
                self._file.close()
            if not was_closed:
                for tap in self._taps:
                    tap.close()
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
        """Queue the requests and steps finished since the last poll, then write them.

        The steps are taken first: every request and the final window of each is then read
        after it finished, so they precede its `step` line (what `snapshot.records` relies on).
        """
        finished = []
        while self._steps:
            finished.append(self._steps.popleft())
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
        for result, diagnosis in finished:
            self.journal.add_step(result, diagnosis)
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
