"""Build RequestRecords from millisecond offsets, for the metrics and snapshot tests."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import count

import numpy as np

from gputui.engine.records import RequestRecord

MS = 1_000_000
"""Nanoseconds per millisecond."""
T0 = 7_000_000_000_000
"""A realistic perf_counter_ns origin (large, so float rounding would show)."""

_ids = count()


def ns(ms: float) -> int:
    """Stamp `ms` milliseconds after T0."""
    return T0 + round(ms * MS)


def rec(
    *,
    sent_ms: float,
    end_ms: float,
    tokens_ms: Sequence[float] = (),
    ok: bool = True,
    step: int = 0,
    output_tokens: int | None = None,
    usage: bool = True,
    input_tokens: int | None = None,
    requested: int = 0,
    connect_ms: float | None = None,
    error: str | None = None,
) -> RequestRecord:
    """A record; the first token is the first stamp, output_tokens defaults to the stamp count."""
    stamps = np.array([ns(t) for t in tokens_ms], dtype=np.int64)
    return RequestRecord(
        request_id=next(_ids),
        step_index=step,
        sent_ns=ns(sent_ms),
        end_ns=ns(end_ms),
        ok=ok,
        first_token_ns=int(stamps[0]) if stamps.size else None,
        token_ns=stamps,
        output_tokens=len(tokens_ms) if output_tokens is None else output_tokens,
        input_tokens=input_tokens,
        tokens_from_usage=usage,
        requested_output_tokens=requested,
        connect_ns=None if connect_ms is None else round(connect_ms * MS),
        error=error if not ok else None,
    )
