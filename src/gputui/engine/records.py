"""The per-request record: what the engine measured for one request, and nothing derived.

Contract: every timestamp is an int from `time.perf_counter_ns()` (CLOCK_MONOTONIC on Linux, so
stamps from different processes on one machine line up). Derived metrics (TTFT, TPOT, ITL, E2E) are
computed in `gputui.metrics`, never here, so the hot loop does no arithmetic beyond stamping.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt

#: Failure reasons, one per distinct cause a user must be able to tell apart.
REASON_CONNECT: Final = "connect"
REASON_TIMEOUT: Final = "timeout"
REASON_STALL: Final = "stall"
REASON_STREAM_BROKEN: Final = "stream_broken"
REASON_MALFORMED_EVENT: Final = "malformed_event"
REASON_ERROR_EVENT: Final = "error_event"
REASON_TRUNCATED: Final = "truncated"
REASON_EMPTY_BODY: Final = "empty_body"
REASON_CANCELLED: Final = "cancelled"
REASON_CLIENT_ERROR: Final = "client_error"
"""A bug in gputui itself: counted, never silently dropped."""


def http_reason(status_code: int) -> str:
    """Reason label for an HTTP error status, e.g. `http_503`."""
    return f"http_{status_code}"


EMPTY_STAMPS: Final[npt.NDArray[np.int64]] = np.empty(0, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class ServerTimings:
    """The server's own account of one request (llama.cpp's `timings` object in its last chunk)."""

    prompt_n: int | None = None
    """Prompt tokens it evaluated (the cached prefix excluded)."""
    cache_n: int | None = None
    """Prompt tokens it reused from its prefix cache."""
    prompt_ms: float | None = None
    predicted_n: int | None = None
    predicted_ms: float | None = None
    """From the first generated token to the last, in the server's own clock."""


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One finished request (ok or failed), as measured by the client."""

    request_id: int
    """Unique within one engine run."""
    step_index: int
    """The step (load level) that was current when the request was sent."""
    sent_ns: int
    """Just before the request's first byte was written (after a connection was obtained)."""
    end_ns: int
    """Last byte of the response received, or the moment the failure was detected."""
    ok: bool
    first_token_ns: int | None = None
    """Arrival of the first chunk carrying output of any kind (thinking, content, tool call)."""
    token_ns: npt.NDArray[np.int64] = field(default_factory=lambda: EMPTY_STAMPS)
    """Arrival stamp of every output-token event (the first included); their gaps are the ITLs."""
    output_tokens: int = 0
    """From the server's usage report when `tokens_from_usage`, else the count of token events."""
    input_tokens: int | None = None
    """From the server's usage report; None when the server sent none."""
    tokens_from_usage: bool = False
    requested_output_tokens: int = 0
    requested_input_tokens: int | None = None
    """The input length the workload asked for; `input_tokens` is what the server counted."""
    queued_ns: int | None = None
    """When the load controller decided to send (open loop: the scheduled arrival time)."""
    connect_ns: int | None = None
    """Time spent opening a new TCP (and TLS) connection; None when a kept-alive one was reused."""
    status_code: int | None = None
    error: str | None = None
    """Failure reason (one of the REASON_* constants or `http_<status>`); None when ok."""
    error_detail: str | None = None
    """One line from the server or the client explaining the failure (no secrets)."""
    finish_reason: str | None = None
    response_model: str | None = None
    """The `model` field the server answered with (may differ from the one asked for)."""
    cached_input_tokens: int | None = None
    """Usage's `prompt_tokens_details.cached_tokens`: prompt tokens served from a prefix cache."""
    server_timings: ServerTimings | None = None
    """Only from servers that report them (llama.cpp)."""
    first_answer_ns: int | None = None
    """Arrival of the first answer token (content or tool call), after any thinking (TTFAT)."""
    reasoning_tokens: int = 0
    """Thinking tokens: usage `completion_tokens_details.reasoning_tokens`, else counted."""
    reasoning_from_usage: bool = False
    event_tokens: npt.NDArray[np.int32] | None = None
    """Tokens carried by each token event, aligned with `token_ns`; None: one each."""
    event_tokens_method: str = "events"
    """How `event_tokens` was decided (see engine.event_tokens): continuous_usage, tokenizer,
    usage_spread (the usage total spread evenly over the events) or events (one token per event)."""
    conversation_id: int | None = None
    """Multi-turn runs: the conversation this request is a turn of."""
    turn: int | None = None
    """Multi-turn runs: the turn, 1 for the first."""
    output_text: str | None = None
    """The answer, only while a conversation needs it; dropped before the record leaves the
    engine process."""
    burst: bool = False
    """Sent by a burst (`Burst`) on top of the load: measured as the burst, in no step's figures."""


def cached_tokens(record: RequestRecord) -> int | None:
    """Prompt tokens the server served from its cache (usage, else llama.cpp's `cache_n`)."""
    if record.cached_input_tokens is not None:
        return record.cached_input_tokens
    timings = record.server_timings
    return timings.cache_n if timings is not None else None
