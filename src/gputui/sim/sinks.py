"""The simulator's `TokenSink`s: vLLM's wire format, written one token per socket write.

Contract (see `profile.TokenSink`): a profile calls `emit_tokens` and `finish`; the sink writes,
stamps each write with `perf_counter_ns()` into the `TruthRecorder`, and tells the connection when
the response is complete. Streams look exactly like vLLM's: one `data: <json>` event per token, each
in its own HTTP chunk and its own `transport.write`; the chunk of the last token carries
`finish_reason`; then the usage chunk (when asked for), `data: [DONE]` and the terminating chunk in
one final write. A chat stream first sends vLLM's role-only chunk, in its own write just before the
first content token (it is not a token: TTFT is measured to the first content write).

Why it is cheap: every byte of a token event except the token text is fixed per request, so the
chunk-size line, JSON prefix and suffix are built once per request; all token texts have the same
length (" tok000" .. " tok999", one token each by the sim tokenizer), so per token the work is one
3-part `bytes.join`, one `write` and one stamp.

With `stream_options.continuous_usage_stats` each event also carries the running usage, as vLLM's
do. Styled streams (reasoning, tool calls, several tokens per event, speculative decoding) are
`styled_sink.StyledStreamSink`.

The non-streaming answer is `buffered_sink.BufferedSink`; what both share (token texts, finish
reasons, `SinkBase`) is in `sink_base`. This module re-exports those names.

Finish rules: the `max_tokens`-th token carries "length" and ends the response; `emit_tokens(...,
finish_reason=r)` puts `r` on its last token and ends the response; `finish(r)` after tokens that
carried no reason sends vLLM's empty-text chunk with `r` (what vLLM sends on EOS) and ends.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

import orjson

from gputui.jsontypes import JsonObject
from gputui.sim.buffered_sink import BufferedSink
from gputui.sim.sink_base import (
    FINISH_LENGTH,
    FINISH_STOP,
    TOKEN_TEXTS,
    SinkBase,
    SinkCommon,
    http_chunk,
    output_text,
    usage_counts,
)
from gputui.sim.truth import RequestTruth, TruthRecorder

__all__ = [
    "FINISH_LENGTH",
    "FINISH_STOP",
    "TOKEN_TEXTS",
    "BufferedSink",
    "SinkCommon",
    "StreamSink",
    "http_chunk",
    "output_text",
]

_STREAM_HEADERS: Final = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n"
)
_DONE_AND_END: Final = b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"


class StreamSink(SinkBase):
    """Server-sent events for `stream: true`."""

    __slots__ = (
        "_arrival_ns",
        "_continuous",
        "_event_head",
        "_first_answer_ns",
        "_first_ns",
        "_first_reasoning_ns",
        "_head",
        "_include_usage",
        "_last_ns",
        "_prefix",
        "_reasoning_budget",
        "_reasoning_sent",
        "_tail",
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
        arrival_ns: int,
        include_usage: bool,
        keep_alive: bool,
        continuous_usage: bool = False,
    ) -> None:
        super().__init__(
            transport,
            truth,
            on_done,
            request_id=request_id,
            chat=chat,
            model=model,
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
        )
        self._arrival_ns = arrival_ns
        self._last_ns = 0
        self._include_usage = include_usage
        self._continuous = continuous_usage and include_usage
        self._reasoning_budget = 0
        """Thinking tokens of the stream (a styled sink's; reported in the final usage)."""
        self._reasoning_sent = 0
        self._first_ns: int | None = None
        self._first_reasoning_ns: int | None = None
        self._first_answer_ns: int | None = None
        self._event_head = (
            b'data: {"id":"%s","object":"%s","created":%d,"model":%s,'
            % (
                self._id.encode(),
                b"chat.completion.chunk" if chat else b"text_completion",
                self._created,
                orjson.dumps(model),
            )
            + b'"choices":[{"index":0,'
        )
        """Every event's bytes up to its choice's fields (fixed per request)."""
        self._prefix = self._event_head + (b'"delta":{"content":"' if chat else b'"text":"')
        suffix = self._suffix(None)
        self._head = (
            b"%x\r\n" % (len(self._prefix) + len(TOKEN_TEXTS[0]) + len(suffix)) + self._prefix
        )
        self._tail = suffix + b"\r\n"
        connection = b"" if keep_alive else b"connection: close\r\n"
        transport.write(_STREAM_HEADERS + connection + b"\r\n")

    def _suffix(self, finish_reason: str | None) -> bytes:
        reason = b"null" if finish_reason is None else b'"%s"' % finish_reason.encode()
        if self.chat:
            if finish_reason is None:
                return b'"},"logprobs":null,"finish_reason":null}]}\n\n'
            return b'"},"logprobs":null,"finish_reason":%s,"stop_reason":null}]}\n\n' % reason
        return (
            b'","logprobs":null,"finish_reason":%s,"stop_reason":null}],"usage":null}\n\n' % reason
        )

    def _usage_suffix(self, finish_reason: str | None, emitted: int) -> bytes:
        """The end of a token event with the running usage (continuous_usage_stats)."""
        reason = b"null" if finish_reason is None else b'"%s"' % finish_reason.encode()
        return b'%s,"logprobs":null,"finish_reason":%s}]%s}\n\n' % (
            b'"}' if self.chat else b'"',
            reason,
            self._running_usage(emitted),
        )

    def _running_usage(self, emitted: int) -> bytes:
        """`,"usage":{...}` with the counts so far, as vLLM's continuous_usage_stats puts it."""
        prompt = self._prompt_tokens
        return b',"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}' % (
            prompt,
            prompt + emitted,
            emitted,
        )

    def emit_tokens(
        self,
        count: int = 1,
        finish_reason: str | None = None,
        *,
        one_write: bool = False,
        one_event: bool = False,  # noqa: ARG002 (needs a styled sink; here each token is an event)
    ) -> None:
        """Write `count` token events, one write each (or all in one write: `one_write`).

        `one_event` needs a styled sink (`styled_sink.StyledStreamSink`); here every token is
        its own event.
        """
        if self._closed:
            return
        pending: list[bytes] = []
        write = pending.append if one_write else self._transport.write
        ended = False
        truth = self._truth
        for i in range(count):
            k = self._emitted
            reason = finish_reason if i == count - 1 else None
            if reason is None and k + 1 >= self._max_tokens:
                reason = FINISH_LENGTH
            text = TOKEN_TEXTS[k % 1000]
            if self._continuous:
                data = http_chunk(
                    b"%s%s%s" % (self._prefix, text, self._usage_suffix(reason, k + 1))
                )
            elif reason is None:
                data = b"".join((self._head, text, self._tail))
            else:
                data = http_chunk(self._prefix + text + self._suffix(reason))
            if k == 0 and self.chat:
                write(self._role_chunk())
            now = time.perf_counter_ns()
            write(data)
            if k == 0:
                truth.ttft_ns.append(now - self._arrival_ns)
                self._first_ns = self._first_answer_ns = now
            else:
                truth.itl_ns.append(now - self._last_ns)
            self._last_ns = now
            self._emitted = k + 1
            truth.tokens += 1
            if reason is not None:
                ended = True
                break
        if pending:
            self._transport.write(b"".join(pending))
        if ended:
            self._end()

    def _emit_events(
        self,
        count: int,
        finish_reason: str | None,
        event: Callable[[int], bytes],
        *,
        one_write: bool,
    ) -> str | None:
        """The per-event sinks' token loop (Responses, Messages): `event(k)` is token k's bytes.

        The truth is stamped as `emit_tokens` above stamps it; returns the reason the stream ends
        with when its last token went out (the caller then closes it), else None.
        """
        pending: list[bytes] = []
        write = pending.append if one_write else self._transport.write
        truth = self._truth
        reason: str | None = None
        for i in range(count):
            k = self._emitted
            reason = finish_reason if i == count - 1 else None
            if reason is None and k + 1 >= self._max_tokens:
                reason = FINISH_LENGTH
            data = event(k)
            now = time.perf_counter_ns()
            write(data)
            if k == 0:
                truth.ttft_ns.append(now - self._arrival_ns)
                self._first_ns = self._first_answer_ns = now
            else:
                truth.itl_ns.append(now - self._last_ns)
            self._last_ns = now
            self._emitted = k + 1
            truth.tokens += 1
            if reason is not None:
                break
        if pending:
            self._transport.write(b"".join(pending))
        return reason

    def finish(self, finish_reason: str) -> None:
        """End the response; a reason not yet sent goes out on an empty-text chunk first."""
        if self._closed:
            return
        if self._emitted == 0 and self.chat:
            self._transport.write(self._role_chunk())
        self._transport.write(http_chunk(self._prefix + self._suffix(finish_reason)))
        self._end()

    def events_written(self) -> int:
        """Token events written so far (here one per token)."""
        return self._emitted

    def _role_chunk(self) -> bytes:
        delta = b'"},"logprobs":null,"finish_reason":null}]}\n\n'
        role = self._prefix.replace(
            b'"delta":{"content":"', b'"delta":{"role":"assistant","content":"'
        )
        return http_chunk(role + delta)

    def _end(self) -> None:
        end = _DONE_AND_END
        self._truth.requests.append(
            RequestTruth(
                request_id=self.request_id,
                arrival_ns=self._arrival_ns,
                first_token_ns=self._first_ns,
                first_reasoning_ns=self._first_reasoning_ns,
                first_answer_ns=self._first_answer_ns,
                last_token_ns=self._last_ns or None,
                tokens=self._emitted,
                reasoning_tokens=self._reasoning_sent,
                events=self.events_written(),
            )
        )
        if self._include_usage:
            counts = usage_counts(self._prompt_tokens, self._emitted, self.cached_tokens)
            if self._reasoning_budget:
                counts["completion_tokens_details"] = {"reasoning_tokens": self._reasoning_sent}
            usage: JsonObject = {
                "id": self._id,
                "object": "chat.completion.chunk" if self.chat else "text_completion",
                "created": self._created,
                "model": self._model,
                "choices": [],
                "usage": counts,
            }
            end = http_chunk(b"data: " + orjson.dumps(usage) + b"\n\n") + end
        self._transport.write(end)
        self._complete()
