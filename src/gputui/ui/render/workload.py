"""The workload panel: conversations' TTFT and prefix-cache hit rate by turn, or a replay's clock.

Conversations: one column per turn (the first turns and the last when they do not all fit), with
TTFT p50 and the hit rate of the latest step; the hit rate should rise turn by turn when the
server caches the history. A replay: progress through the trace's requests and clock, and the
dispatch lateness p99 and max, warned past `LATE_P99_MS` because then the client, not the
server, set part of the timings.
"""

from __future__ import annotations

from typing import Final

from gputui.frontends.view import LiveView
from gputui.ui.render.bars import bar
from gputui.ui.render.spans import Line, fit, plain
from gputui.workloads.live_progress import TurnRow, WorkloadProgress

LATE_P99_MS: Final = 2.0
"""A replay's dispatch lateness p99 past this (issue 17's bound) makes its timings suspect."""
_LABEL, _COL = 6, 8


def workload_lines(view: LiveView, width: int, height: int, *, ascii: bool = False) -> list[Line]:
    """The panel's lines (none without conversations or a trace)."""
    progress = view.workload
    if progress is None or height <= 0:
        return []
    if progress.kind == "trace":
        lines = _trace(progress, width, ascii=ascii)
    else:
        lines = _conversations(progress, width)
    return [fit(line, width) for line in lines[:height]]


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.0f} ms"


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.0%}"


def _shown(turns: tuple[TurnRow, ...], columns: int) -> tuple[TurnRow, ...]:
    """Every turn, or the first ones and the last when they do not all fit."""
    if len(turns) <= columns or columns < 2:
        return turns[: max(columns, 1)]
    return (*turns[: columns - 1], turns[-1])


def _conversations(p: WorkloadProgress, width: int) -> list[Line]:
    if not p.turns:
        return [plain("conversations: waiting for a first turn to finish", "dim")]
    head: Line = [
        (f"step {(p.step_index or 0) + 1}: ", "label"),
        (f"{p.complete} of {p.started} conversations complete", ""),
        (f" · hit rate {_pct(p.hit_rate)}", "accent"),
    ]
    if p.hit_rate is not None and p.hit_source:  # usage is exact; counters are an estimate
        head.append((f" ({p.hit_source})", "dim"))
    turns = _shown(p.turns, max((width - _LABEL) // _COL, 1))
    row_turn: Line = [("turn".ljust(_LABEL), "label")]
    row_ttft: Line = [("TTFT".ljust(_LABEL), "label")]
    row_hit: Line = [("cache".ljust(_LABEL), "label")]
    for t in turns:
        row_turn.append((f"{t.turn:>{_COL - 1}} ", "dim"))
        row_ttft.append((f"{_ms(t.ttft_p50_s):>{_COL - 1}} ", ""))
        row_hit.append((f"{_pct(t.hit_rate):>{_COL - 1}} ", "accent"))
    return [head, row_turn, row_ttft, row_hit]


def _trace(p: WorkloadProgress, width: int, *, ascii: bool) -> list[Line]:
    share = p.sent / p.requests if p.requests else None
    text = f" {p.sent:,} of {p.requests:,} sent · {p.elapsed_s:.0f} of {p.duration_s:.0f} s"
    filled, empty = bar(share, max(width - len(text) - _LABEL, 0), ascii=ascii)
    progress: Line = [("trace".ljust(_LABEL), "label"), (filled, "accent"), (empty, "dim")]
    progress.append((text, ""))
    if p.lateness_p99_ms is None:
        return [progress, plain("dispatch lateness: waiting for a first send", "dim")]
    role = "warn" if p.lateness_p99_ms > LATE_P99_MS else "ok"
    late: Line = [
        ("late".ljust(_LABEL), "label"),
        (f"dispatch p99 {p.lateness_p99_ms:.2f} ms", role),
        (f" · max {p.lateness_max_ms or 0:.2f} ms", "dim"),
    ]
    if role == "warn":
        late.append((" · the client ran late: timings suspect", "warn"))
    return [progress, late]
