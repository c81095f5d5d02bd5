"""Per-request records (`--records FILE`, `gputui records`): one JSON object per request.

Contract (schema version `RECORDS_SCHEMA_VERSION`, documented in the README): every row has the
keys of `ROW_KEYS`. Times `*_ns` are int ns since the run's start (`Session.started_ns`), `*_s`
float seconds, computed exactly as the snapshot's statistics compute them
(`metrics.request_metrics`): `ttft_s`, `ttfat_s`, `tpot_s` and `e2e_s` are null where the
snapshot counts no such sample (a failed request, no first token, a 1-token TPOT). `good` is what
the snapshot's goodput counts (`metrics.goodput.good_mask`: ok, as long as asked, within every
per-request bound of the SLA: TTFT, TPOT, E2E and TTFAT). `step` is the index of the snapshot's
step that measured the request (sent in its measurement window; the snapshot numbers its steps
0, 1, 2 ..., hidden carry-on steps taking none), or null: warm-up (sent before its step's
measurement started), the hand-over (sent after its step closed, while its last measured requests
finished), a burst (`burst` true: measured as the burst, in no step's figures), in flight under a
burst's load (`metrics.burst_window`: the step's `requests_under_burst`), a hidden step (the load
held after a hold or between a plan's steps) or a step the snapshot does not have.

When is a row's step known? Only once its step is finished (closed, and every request sent
during it back): that is when the snapshot's step is decided. `RecordRows` therefore follows the
journal's lines (`snapshot.journal`: `load`, `measure`, `request`, `step`) and holds each
request until its step's `step` line (or a hidden `load`) decides it; `close` decides the rest.
One decider serves the live file (a journal tap, `snapshot.records_file`), the snapshot's own
table (`records` key, written by `snapshot.assemble` and by `snapshot.recovery`), so all three
give the same rows; the live file is judged again when the SLA changes mid-session
(`snapshot.records_file`), as the snapshot's steps are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from gputui.engine.records import RequestRecord
from gputui.metrics.burst_window import step_windows, under_windows
from gputui.metrics.goodput import good_mask
from gputui.metrics.request_metrics import record_columns
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepSpec
from gputui.snapshot.journal import load_line, measure_line, request_line

RECORDS_SCHEMA_VERSION: Final = 1

ROW_KEYS: Final = (
    "schema_version",
    "id",
    "step",
    "burst",
    "level",
    "mode",
    "ok",
    "reason",
    "status",
    "good",
    "conversation",
    "turn",
    "scheduled_ns",
    "sent_ns",
    "first_token_ns",
    "first_answer_ns",
    "last_ns",
    "ttft_s",
    "ttfat_s",
    "tpot_s",
    "e2e_s",
    "input_tokens",
    "output_tokens",
    "requested_output_tokens",
    "cached_tokens",
    "events",
    "reasoning_tokens",
)
"""Every row's keys, in order."""

OPTIONAL_TABLE_KEYS: Final = {"reasoning_tokens": 0}
"""Keys added to the table since schema 1 was saved, and what an older table's rows hold."""

DERIVED_KEYS: Final = ("ttft_s", "ttfat_s", "tpot_s", "e2e_s")
"""Keys a table need not store: `with_seconds` computes them from the `*_ns` keys."""

_NS_TO_S = 1e-9


@dataclass(slots=True)
class _Window:
    """What deciding a request of one step needs: its load and where its measurement starts."""

    level: float | None
    mode: str | None
    measure_ns: int | None
    end_ns: int | None = None
    hidden: bool = False


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def journal_ns(line: Mapping[str, object], exact: str, ms: str) -> int | None:
    """An exact ns field, else the older ms one (journals written before it)."""
    value = _int(line.get(exact))
    if value is not None:
        return value
    rounded = line.get(ms)
    if isinstance(rounded, int | float) and not isinstance(rounded, bool):
        return round(rounded * 1e6)
    return None


def _burst_cut(held: Sequence[Mapping[str, object]]) -> list[tuple[int, int]]:
    """The burst windows of one step's journalled requests, as `metrics.step` has them."""
    spans = ((journal_ns(r, "sent_ns", "sent_ms"), r) for r in held)
    return step_windows(
        (sent, _last_ns(r, sent), bool(r.get("burst")), bool(r.get("ok")))
        for sent, r in spans
        if sent is not None
    )


def _last_ns(line: Mapping[str, object], sent: int) -> int:
    last = _int(line.get("last_ns"))
    if last is not None:
        return last
    e2e_ms = line.get("e2e_ms")
    return sent + round(e2e_ms * 1e6) if isinstance(e2e_ms, int | float) else sent


def with_seconds(row: dict[str, object]) -> dict[str, object]:
    """The row with its `*_s` keys from its `*_ns` ones (the snapshot's own definitions)."""
    sent, first, answer = row["sent_ns"], row["first_token_ns"], row["first_answer_ns"]
    last, out = row["last_ns"], row["output_tokens"]
    assert isinstance(sent, int)
    assert isinstance(last, int)
    ok = bool(row["ok"])
    has_first = ok and isinstance(first, int)
    row["ttft_s"] = (first - sent) * _NS_TO_S if has_first and isinstance(first, int) else None
    row["ttfat_s"] = (answer - sent) * _NS_TO_S if ok and isinstance(answer, int) else None
    tpot = None
    if has_first and isinstance(first, int) and isinstance(out, int) and out >= 2:
        tpot = (last - first) * _NS_TO_S / (out - 1)
    row["tpot_s"] = tpot
    row["e2e_s"] = (last - sent) * _NS_TO_S if ok else None
    return row


def _row(line: Mapping[str, object], step: int | None, window: _Window | None) -> dict[str, object]:
    """A journalled request as a row (its `good` is filled in by `_judge`)."""
    error = line.get("err")
    sent = journal_ns(line, "sent_ns", "sent_ms") or 0
    ttft_ms = line.get("ttft_ms")
    first = _int(line.get("first_ns"))
    if first is None and isinstance(ttft_ms, int | float) and "first_ns" not in line:
        first = sent + round(ttft_ms * 1e6)
    last = _last_ns(line, sent)
    cached = _int(line.get("cached"))
    row: dict[str, object] = {
        "schema_version": RECORDS_SCHEMA_VERSION,
        "id": _int(line.get("id")),
        "step": step,
        "burst": bool(line.get("burst")),
        "level": window.level if window else None,
        "mode": window.mode if window else None,
        "ok": bool(line.get("ok")),
        "reason": None if error is None else str(error),
        "status": _int(line.get("status")),
        "good": False,
        "conversation": _int(line.get("conv")),
        "turn": _int(line.get("turn")),
        "scheduled_ns": _int(line.get("sched_ns")),
        "sent_ns": sent,
        "first_token_ns": first,
        "first_answer_ns": _int(line.get("answer_ns")),
        "last_ns": last,
        "input_tokens": _int(line.get("in")),
        "output_tokens": _int(line.get("out")) or 0,
        "requested_output_tokens": _int(line.get("req_out")),
        "cached_tokens": cached if cached is not None else _int(line.get("cache_n")),
        "events": _int(line.get("events")),
        "reasoning_tokens": _int(line.get("think")) or 0,
    }
    with_seconds(row)
    return {key: row[key] for key in ROW_KEYS}


def judge_rows(rows: list[dict[str, object]], sla: Sla) -> list[dict[str, object]]:
    """Fill each row's `good` as the snapshot's goodput judges its request (`good_mask`)."""
    if not rows:
        return rows
    verdicts = good_mask(record_columns([_judged(r) for r in rows]), sla).tolist()
    for row, good in zip(rows, verdicts, strict=True):
        row["good"] = bool(good)
    return rows


def _judged(row: Mapping[str, object]) -> RequestRecord:
    """What `good_mask` reads of a row's request, as a record (no stamps: it reads none)."""
    sent, last = row["sent_ns"], row["last_ns"]
    assert isinstance(sent, int)
    assert isinstance(last, int)
    first, answer = row["first_token_ns"], row["first_answer_ns"]
    return RequestRecord(
        request_id=0,
        step_index=0,
        sent_ns=sent,
        end_ns=last,
        ok=bool(row["ok"]),
        first_token_ns=first if isinstance(first, int) else None,
        first_answer_ns=answer if isinstance(answer, int) else None,
        output_tokens=_int(row["output_tokens"]) or 0,
        requested_output_tokens=_int(row["requested_output_tokens"]) or 0,
        reasoning_tokens=_int(row["reasoning_tokens"]) or 0,
    )


def _nan(value: object) -> float:
    return float(value) if isinstance(value, int | float) else math.nan


class RecordRows:
    """Turns journal lines into rows as each request's step is decided (module contract)."""

    def __init__(self, sla: Sla | Callable[[], Sla]) -> None:
        self._sla = sla
        self._windows: dict[int, _Window] = {}
        self._finished: set[int] = set()
        self._pending: dict[int, list[Mapping[str, object]]] = {}
        self._cuts: dict[int, list[tuple[int, int]]] = {}
        """Per released step: its bursts' windows (`metrics.burst_window`)."""

    def _current_sla(self) -> Sla:
        return self._sla() if callable(self._sla) else self._sla

    def feed(self, lines: Iterable[Mapping[str, object]]) -> list[dict[str, object]]:
        """Take lines in journal order; returns the rows decided by them."""
        decided: list[tuple[Mapping[str, object], int | None]] = []
        for line in lines:
            kind = line.get("kind")
            if kind == "request":
                index = _int(line.get("step"))
                if index is not None and index in self._finished:
                    decided.append((line, self._measured(index, line)))
                elif index is not None and self._hidden(index):
                    decided.append((line, None))
                else:
                    self._pending.setdefault(index if index is not None else -1, []).append(line)
            elif kind == "load":
                self._on_load(line, decided)
            elif kind == "measure":
                self._on_measure(line)
            elif kind == "step":
                step = line.get("step")
                index = _int(step.get("index")) if isinstance(step, Mapping) else None
                if index is not None:
                    self._finished.add(index)
                    decided.extend((r, self._measured(index, r)) for r in self._release(index))
        return self._rows(decided)

    def close(self, *, cut_short: bool = False) -> list[dict[str, object]]:
        """Decide every request still held: warm-up (null), or measured by its step's window.

        The latter with `cut_short` (a recovered journal: the steps the crash cut short are in
        its snapshot, with every journalled request).
        """
        decided: list[tuple[Mapping[str, object], int | None]] = []
        for index in sorted(self._pending):
            held = self._release(index)
            window = self._windows.get(index)
            counted = cut_short and window is not None and not window.hidden
            if counted and window is not None and window.end_ns is None:
                ends = (_last_ns(r, journal_ns(r, "sent_ns", "sent_ms") or 0) for r in held)
                window.end_ns = max(ends, default=0)
            decided.extend((r, self._measured(index, r) if counted else None) for r in held)
        return self._rows(decided)

    def _on_load(
        self, line: Mapping[str, object], decided: list[tuple[Mapping[str, object], int | None]]
    ) -> None:
        index = _int(line.get("index"))
        if index is None:
            return
        level = line.get("level")
        mode = line.get("mode")
        self._windows[index] = _Window(
            level=float(level) if isinstance(level, int | float) else None,
            mode=str(mode) if mode is not None else None,
            measure_ns=journal_ns(line, "measure_ns", "measure_ms"),
            hidden=bool(line.get("hidden")),
        )
        if self._hidden(index):
            decided.extend((r, None) for r in self._release(index))

    def _on_measure(self, line: Mapping[str, object]) -> None:
        index = _int(line.get("index"))
        window = self._windows.get(index) if index is not None else None
        if window is None:
            return
        window.measure_ns = journal_ns(line, "measure_ns", "measure_ms")
        window.end_ns = journal_ns(line, "end_ns", "end_ms")

    def _hidden(self, index: int) -> bool:
        window = self._windows.get(index)
        return window is not None and window.hidden

    def _release(self, index: int) -> list[Mapping[str, object]]:
        held = self._pending.pop(index, [])
        self._cuts[index] = _burst_cut(held)
        return held

    def _measured(self, index: int, line: Mapping[str, object]) -> int | None:
        """The snapshot's index of step `index` when the request is in its measured sample.

        That is, as `metrics.step.aggregate_step` has it: sent in [measurement start, close).
        Else None: sent before (its warm-up) or after (the hand-over's load, run unmeasured until
        the step's last measured request is back), by a burst, or in flight under a burst's load
        (`metrics.burst_window`: the step's requests are all held until it finishes). A snapshot
        numbers its steps 0, 1, 2 ... leaving out the hidden carry-on steps
        (`snapshot.step_models.renumbered`), so the index is the count of visible steps before.
        """
        window = self._windows.get(index)
        if window is None or window.hidden or window.measure_ns is None or line.get("burst"):
            return None  # a burst's requests are the burst's, in no step's figures
        sent = journal_ns(line, "sent_ns", "sent_ms")
        if sent is None or sent < window.measure_ns:
            return None
        if window.end_ns is not None and sent >= window.end_ns:
            return None  # sent after the close: the hand-over's unmeasured load
        if under_windows(sent, _last_ns(line, sent), self._cuts.get(index, [])):
            return None  # in flight under a burst's load: out of the step's figures
        return sum(1 for i, w in self._windows.items() if i < index and not w.hidden)

    def _rows(
        self, decided: Sequence[tuple[Mapping[str, object], int | None]]
    ) -> list[dict[str, object]]:
        rows = []
        for line, step in decided:
            index = _int(line.get("step"))
            rows.append(_row(line, step, None if index is None else self._windows.get(index)))
        return judge_rows(rows, self._current_sla())


def rows_table(rows: Sequence[Mapping[str, object]]) -> dict[str, object]:
    """The snapshot's `records` key: the rows as columns (derived seconds left out)."""
    keys = [k for k in ROW_KEYS if k not in DERIVED_KEYS and k != "schema_version"]
    return {
        "schema_version": RECORDS_SCHEMA_VERSION,
        "columns": {key: [row[key] for row in rows] for key in keys},
    }


def table_rows(table: Mapping[str, object]) -> Iterator[dict[str, object]]:
    """The rows of a snapshot's `records` table (ValueError when it is not one)."""
    columns = table.get("columns")
    if table.get("schema_version") != RECORDS_SCHEMA_VERSION or not isinstance(columns, Mapping):
        raise ValueError(f"records table of an unknown schema: {table.get('schema_version')!r}")
    stored = [k for k in ROW_KEYS if k not in DERIVED_KEYS and k != "schema_version"]
    missing = [
        k for k in stored if not isinstance(columns.get(k), list) and k not in OPTIONAL_TABLE_KEYS
    ]
    if missing:
        raise ValueError(f"records table without {', '.join(missing)}")
    size = len(columns["id"]) if isinstance(columns.get("id"), list) else 0
    lists: list[list[object]] = [
        list(columns[k]) if isinstance(columns.get(k), list) else [OPTIONAL_TABLE_KEYS[k]] * size
        for k in stored
    ]
    for values in zip(*lists, strict=True):
        row: dict[str, object] = {"schema_version": RECORDS_SCHEMA_VERSION}
        row.update(zip(stored, values, strict=True))
        with_seconds(row)
        yield {key: row[key] for key in ROW_KEYS}


def session_table(
    records: Iterable[RequestRecord],
    specs: Iterable[StepSpec],
    finished: Iterable[int],
    origin_ns: int,
    sla: Sla,
) -> dict[str, object]:
    """A live session's `records` table, decided as its journal's lines would be.

    `finished` are the snapshot's steps (by the session's step index); the rest is warm-up, or
    of a step the snapshot does not hold. Rows in the order they finished.
    """
    decider = RecordRows(sla)
    saved = set(finished)
    lines: list[Mapping[str, object]] = []
    for spec in specs:
        lines += [load_line(spec, origin_ns, hidden=spec.index not in saved)]
        lines += [measure_line(spec, origin_ns)]
    # Requests first, as in a journal: a step decides its requests together once it finishes
    # (its bursts' windows need all of them).
    lines.extend(request_line(r, origin_ns) for r in records)
    lines.extend({"kind": "step", "step": {"index": index}} for index in saved)
    rows = decider.feed(lines) + decider.close()
    rows.sort(key=finish_order)
    return rows_table(rows)


def finish_order(row: Mapping[str, object]) -> tuple[int, int]:
    last, ident = row["last_ns"], row["id"]
    return (last if isinstance(last, int) else 0, ident if isinstance(ident, int) else 0)
