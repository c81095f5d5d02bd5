"""Judging a finished exchange: one `RequestRecord`, ok or failed with exactly one reason.

Contract: `judge_exchange` runs once per request, when its exchange has ended, never per event:
an HTTP status of 300 or more, a stream error, an empty body or a stream without a finish reason
each fail the record with its reason, and an HTTP error's detail is the server's own words, on one
line. Tokens per event (see engine.event_tokens): a running usage (`continuous_usage`) is applied
here; `needs_counting` says when a usage total still disagrees with the events, and
`with_event_counts` stores the counts that settle it.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TypedDict

import numpy as np
import numpy.typing as npt
import orjson

from gputui.engine.event_tokens import METHOD_CONTINUOUS, METHOD_EVENTS, counts_from_running
from gputui.engine.http import Exchange
from gputui.engine.records import (
    REASON_EMPTY_BODY,
    REASON_TRUNCATED,
    RequestRecord,
    http_reason,
)
from gputui.engine.sse import StreamReader, error_message


class RecordCommon(TypedDict):
    """The fields every `RequestRecord` of one `send` shares, whatever its outcome."""

    request_id: int
    step_index: int
    requested_output_tokens: int
    queued_ns: int | None
    requested_input_tokens: int | None


def judge_exchange(
    exchange: Exchange,
    reader: StreamReader,
    sent_ns: int,
    connect_ns: int | None,
    common: RecordCommon,
    *,
    keep_text: bool = False,
) -> RequestRecord:
    """Judge a finished exchange: ok, or failed with exactly one reason.

    The answer goes in `output_text` only with `keep_text`: texts kept for counting stay here.
    """
    end_ns = exchange.now_ns if exchange.error is None else time.perf_counter_ns()
    status = exchange.status_code
    error, detail = exchange.error, exchange.error_detail
    if error is None and status is not None and status >= 300:
        error, detail = http_reason(status), _http_error_detail(status, bytes(exchange.body))
    if error is None:
        reader.end_of_body(end_ns)
        if reader.error is not None:
            error, detail = reader.error, reader.error_detail
        elif reader.events == 0:
            error, detail = REASON_EMPTY_BODY, "200 with an empty body"
        elif reader.finish_reason is None:
            error = REASON_TRUNCATED
            detail = "[DONE] without a finish_reason" if reader.done else "stream ended unfinished"
    stamps = np.array(reader.token_ns, dtype=np.int64)
    from_usage = reader.output_tokens is not None
    record = RequestRecord(
        sent_ns=sent_ns,
        end_ns=end_ns,
        ok=error is None,
        first_token_ns=reader.first_token_ns,
        token_ns=stamps,
        output_tokens=reader.output_tokens if reader.output_tokens is not None else len(stamps),
        input_tokens=reader.input_tokens,
        tokens_from_usage=from_usage,
        connect_ns=connect_ns,
        status_code=status,
        error=error,
        error_detail=detail,
        finish_reason=reader.finish_reason,
        response_model=reader.model,
        cached_input_tokens=reader.cached_input_tokens,
        server_timings=reader.timings,
        first_answer_ns=reader.first_answer_ns,
        reasoning_tokens=len(reader.reasoning_events)
        if reader.reasoning_tokens is None
        else reader.reasoning_tokens,
        reasoning_from_usage=reader.reasoning_tokens is not None,
        output_text="".join(reader.texts) if keep_text and reader.texts is not None else None,
        **common,
    )
    counts = counts_from_running(reader.running, len(reader.token_ns))
    if counts is not None:
        return with_event_counts(record, counts, METHOD_CONTINUOUS, reader)
    return record


def needs_counting(record: RequestRecord) -> bool:
    """An ok request whose usage total says some event carried several tokens, not yet counted.

    One token more than events after a natural stop is the EOS token the server counted.
    """
    if not (
        record.ok
        and record.event_tokens_method == METHOD_EVENTS
        and record.tokens_from_usage
        and record.token_ns.size > 0
    ):
        return False
    extra = record.output_tokens - int(record.token_ns.size)
    return extra > 1 or (extra == 1 and record.finish_reason != "stop")


def with_event_counts(
    record: RequestRecord, counts: npt.NDArray[np.int32], method: str, reader: StreamReader
) -> RequestRecord:
    """The record with per-event token counts; events that carried no token are merged away.

    Thinking tokens are counted from the events (unless the usage gave them); all counts of 1 are
    kept as None, the same meaning at no cost.
    """
    stamps = record.token_ns
    reasoning = record.reasoning_tokens
    if not record.reasoning_from_usage and reader.reasoning_events:
        reasoning = int(counts[reader.reasoning_events].sum())
    empty = counts == 0
    if empty.any():
        stamps, counts = stamps[~empty], counts[~empty]
    event_tokens = None if (counts == 1).all() else counts
    return replace(
        record,
        token_ns=stamps,
        event_tokens=event_tokens,
        event_tokens_method=method,
        reasoning_tokens=reasoning,
    )


def _http_error_detail(status: int, body: bytes) -> str:
    """The server's own words for an HTTP error, on one line."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = " ".join(body.decode("utf-8", errors="replace").split())[:200]
        return f"HTTP {status}: {text}" if text else f"HTTP {status}"
    if isinstance(obj, dict):
        return f"HTTP {status}: {error_message(obj, limit=400)}"  # vLLM's run to ~340 chars
    return f"HTTP {status}"
