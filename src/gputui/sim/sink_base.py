"""What every simulator sink shares: the token texts, the wire's small pieces, and bookkeeping.

Contract: output token k's text is `TOKEN_TEXTS[k % 1000]` (one token each by the sim
tokenizer), so every sink and `output_text` agree on what was generated. `SinkBase` holds what
`sinks.StreamSink` and `buffered_sink.BufferedSink` both do: the response id and `created`
(the wire format's one wall-clock value), counting tokens, the closed flag, raw writes for fault
injection, and counting a completed request in the `TruthRecorder`. `SinkCommon` is the keyword
set the server builds once per request. Re-exported by `sim.sinks`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final, TypedDict

from gputui.jsontypes import JsonObject
from gputui.sim.truth import TruthRecorder

TOKEN_TEXTS: Final = tuple(b" tok%03d" % i for i in range(1000))
"""The text of output token k is TOKEN_TEXTS[k % 1000]."""

FINISH_LENGTH: Final = "length"
FINISH_STOP: Final = "stop"


def http_chunk(payload: bytes) -> bytes:
    """One HTTP/1.1 chunk (size line, payload, CRLF)."""
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def output_text(n_tokens: int) -> str:
    """The full output of `n_tokens` tokens, for non-streaming responses."""
    return b"".join(TOKEN_TEXTS[k % len(TOKEN_TEXTS)] for k in range(n_tokens)).decode()


def usage_counts(
    prompt_tokens: int, completion_tokens: int, cached: int | None = None
) -> JsonObject:
    usage: JsonObject = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return usage


class SinkCommon(TypedDict):
    """The fields every sink takes, built once per request by the server."""

    request_id: int
    chat: bool
    model: str
    prompt_tokens: int
    max_tokens: int
    keep_alive: bool


class SinkBase:
    """Counting, finish bookkeeping and truth totals shared by both sinks."""

    __slots__ = (
        "_closed",
        "_created",
        "_emitted",
        "_id",
        "_max_tokens",
        "_model",
        "_on_done",
        "_prompt_tokens",
        "_transport",
        "_truth",
        "cached_tokens",
        "chat",
        "request_id",
    )

    def __init__(
        self,
        transport: asyncio.Transport,
        truth: TruthRecorder,
        on_done: Callable[[], None],
        *,
        request_id: int,
        chat: bool,
        model: str,
        prompt_tokens: int,
        max_tokens: int,
    ) -> None:
        self._transport = transport
        self._truth = truth
        self._on_done = on_done
        self.request_id = request_id
        self.chat = chat
        self._model = model
        self._prompt_tokens = prompt_tokens
        self._max_tokens = max_tokens
        self._emitted = 0
        self._closed = False
        self.cached_tokens: int | None = None
        """Prompt tokens served from a prefix cache (set by a profile that has one)."""
        self._id = f"{'chatcmpl' if chat else 'cmpl'}-{request_id:08x}{time.perf_counter_ns():016x}"
        self._created = int(time.time())  # noqa: TID251 - the wire format's `created` is wall clock

    @property
    def closed(self) -> bool:
        """True once the client went away or the response is complete."""
        return self._closed

    def abort(self) -> None:
        """The connection was lost: stop writing (the server counts the cancel)."""
        self._closed = True

    @property
    def transport(self) -> asyncio.Transport:
        """The connection's transport (fault injection resets it)."""
        return self._transport

    def write(self, data: bytes) -> None:
        """Write raw bytes into the response (fault injection); nothing once closed."""
        if not self._closed:
            self._transport.write(data)

    def end_with(self, data: bytes) -> None:
        """End the response with raw bytes; a faulted end, so not counted as completed."""
        if self._closed:
            return
        self._closed = True
        self._transport.write(data)
        self._on_done()

    def _complete(self) -> None:
        self._closed = True
        self._truth.requests_completed += 1
        self._on_done()
