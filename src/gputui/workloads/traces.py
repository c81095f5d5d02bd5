"""Arrival traces: read Mooncake JSONL, Azure LLM inference CSV and BurstGPT CSV into one form.

Contract: `load_trace(path, fmt, window, time_scale)` returns a `Trace` (entries sorted by arrival,
offsets in ns from the first kept arrival, already scaled) or raises `TraceError` with one line
naming the file and line. Formats, detected from the first line unless given:
- `mooncake`: JSON lines `{"timestamp": ms, "input_length": n, "output_length": n, "hash_ids":
  [...]}`; each hash id is one 512-token block, and equal ids are equal prefixes;
- `azure`: CSV `TIMESTAMP,ContextTokens,GeneratedTokens` (2023 and 2024 traces), TIMESTAMP a date
  and time (fractions of any length) or seconds;
- `burstgpt`: CSV `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`,
  Timestamp in seconds from the trace's start.
`window` (START, END) in seconds of the trace's own clock keeps START <= t < END and starts the
replay at the first kept arrival; `time_scale` multiplies every offset (0.5 replays twice as fast).
Lengths of 0 (BurstGPT logs failed requests so) become 1: a request needs a token each way.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

import orjson

from gputui.durations import parse_duration
from gputui.errors import GputuiError, UsageError

TraceFormat = Literal["mooncake", "azure", "burstgpt"]
TRACE_FORMATS: Final = ("mooncake", "azure", "burstgpt")
MOONCAKE_BLOCK_TOKENS: Final = 512

_AZURE: Final = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_BURST: Final = ("Timestamp", "Request tokens", "Response tokens")


class TraceError(GputuiError):
    """A trace file that cannot be read (one line for the CLI, exit 2 like a bad flag)."""

    exit_code = 2


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One request of a trace."""

    offset_ns: int
    """Scheduled send time, from the start of the replay."""
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()
    """Mooncake: the request's 512-token prefix blocks."""


@dataclass(frozen=True, slots=True)
class Trace:
    """A parsed trace, ready to replay."""

    path: str
    format: TraceFormat
    entries: tuple[TraceEntry, ...]
    time_scale: float = 1.0
    window: tuple[float, float] | None = None

    @property
    def duration_s(self) -> float:
        """From the first arrival to the last, on the replay's clock."""
        return self.entries[-1].offset_ns / 1e9 if self.entries else 0.0

    def describe(self) -> str:
        """One line for `gputui run`."""
        window = f", window {self.window[0]:g}:{self.window[1]:g} s" if self.window else ""
        return (
            f"trace {self.path} ({self.format}): {len(self.entries)} requests over "
            f"{self.duration_s:.1f} s at time scale {self.time_scale:g}{window}"
        )


def detect_format(first_line: str) -> TraceFormat | None:
    """The format a trace's first line announces; None when it is none of ours."""
    line = first_line.strip().lstrip("\ufeff")
    if line.startswith("{"):
        return "mooncake"
    header = [h.strip() for h in line.split(",")]
    if all(h in header for h in _AZURE):
        return "azure"
    if all(h in header for h in _BURST):
        return "burstgpt"
    return None


def parse_window(text: str) -> tuple[float, float]:
    """`START:END` in seconds, or with units (`1m:90s`); either side may be empty."""
    start, sep, end = text.partition(":")
    try:
        lo = parse_duration(start) if start.strip() else 0.0
        hi = parse_duration(end) if end.strip() else float("inf")
    except ValueError:
        lo, hi = -1.0, -1.0
    if not sep or lo < 0 or hi <= lo:
        raise UsageError(
            f"--trace-window: expected START:END seconds with START < END, got {text!r}"
        )
    return lo, hi


def load_trace(
    path: Path,
    fmt: TraceFormat | None = None,
    *,
    window: tuple[float, float] | None = None,
    time_scale: float = 1.0,
) -> Trace:
    """Read and cut a trace (see the module docstring)."""
    if time_scale <= 0:
        raise UsageError(f"--time-scale must be > 0, got {time_scale:g}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read trace {path}: {exc}") from None
    first = next((line for line in text.splitlines() if line.strip()), "")
    detected = detect_format(first)
    fmt = fmt or detected
    if fmt is None:
        raise TraceError(
            f"{path}: unknown trace format (first line {first[:60]!r}); expected Mooncake JSONL, "
            "an Azure CSV (TIMESTAMP,ContextTokens,GeneratedTokens) or a BurstGPT CSV; "
            "or give --trace-format"
        )
    rows = _mooncake(path, text) if fmt == "mooncake" else _csv(path, text, fmt)
    if not rows:
        raise TraceError(f"{path}: no requests in the trace")
    rows.sort(key=lambda r: r[0])
    origin = rows[0][0]
    lo, hi = window or (0.0, float("inf"))
    kept = [r for r in rows if lo <= r[0] - origin < hi]
    if not kept:
        raise TraceError(f"{path}: no request in the window {lo:g}:{hi:g} s")
    start = kept[0][0]
    entries = tuple(
        TraceEntry(round((t - start) * time_scale * 1e9), max(n_in, 1), max(n_out, 1), ids)
        for t, n_in, n_out, ids in kept
    )
    return Trace(str(path), fmt, entries, time_scale, window)


_Row = tuple[float, int, int, tuple[int, ...]]


def _mooncake(path: Path, text: str) -> list[_Row]:
    rows: list[_Row] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
            ids = obj.get("hash_ids") or []
            if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
                raise TypeError("hash_ids must be a list of integers")
            row = (
                float(obj["timestamp"]) / 1e3,
                _count(obj["input_length"]),
                _count(obj["output_length"]),
                tuple(ids),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise TraceError(f"{path}:{number}: not a Mooncake trace line ({_why(exc)})") from None
        rows.append(row)
    return rows


def _csv(path: Path, text: str, fmt: TraceFormat) -> list[_Row]:
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    header = [h.strip() for h in next(reader, [])]
    names = _AZURE if fmt == "azure" else _BURST
    missing = [n for n in names if n not in header]
    if missing:
        raise TraceError(f"{path}: a {fmt} trace needs the columns {', '.join(missing)}")
    at = [header.index(n) for n in names]
    rows: list[_Row] = []
    for number, cells in enumerate(reader, 2):
        if not cells or not any(c.strip() for c in cells):
            continue
        try:
            stamp, n_in, n_out = (cells[i].strip() for i in at)
            t = _timestamp(stamp) if fmt == "azure" else float(stamp)
            rows.append((t, _count(n_in), _count(n_out), ()))
        except (IndexError, ValueError) as exc:
            raise TraceError(f"{path}:{number}: bad {fmt} trace row ({_why(exc)})") from None
    return rows


def _timestamp(text: str) -> float:
    """Seconds, from a number or a date and time whose fraction may have more than 6 digits."""
    try:
        return float(text)
    except ValueError:
        pass
    head, dot, frac = text.partition(".")
    digits = "".join(c for c in frac if c.isdigit())
    zone = frac[len(digits) :]
    fixed = f"{head}.{digits[:6].ljust(6, '0')}{zone}" if dot else text
    moment = datetime.fromisoformat(fixed)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # only differences matter: any fixed zone will do
    return moment.timestamp()


def _count(value: object) -> int:
    number = float(value) if isinstance(value, str) else value
    if not isinstance(number, int | float) or isinstance(number, bool) or number < 0:
        raise ValueError(f"bad token count {value!r}")
    if number != int(number):
        raise ValueError(f"token count {value!r} is not whole")
    return int(number)


def _why(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"missing {text}" if isinstance(exc, KeyError) else " ".join(text.split())[:80]
