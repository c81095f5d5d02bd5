"""Server-sent events from an OpenAI-compatible stream, classified as they arrive.

Contract: `StreamReader.feed(data, now_ns)` takes de-chunked body bytes and the arrival stamp of
the socket read they came in, and records, per output-token event, that stamp. The hot path (one
`data: {...}` line per event, or Messages' `event: <type>` line and one `data:` line) costs one
`bytes.split` (and for Messages one `bytes.partition`) and one `orjson.loads` per event and nothing
else; comments, `event: error`, other fields, multi-line data and CRLF framing take a slower path.
Every dialect rule lives here (see ../shared/docs/reference.md §5):

- a chunk is a token event only when it carries non-empty text (`choices[0].text`, `delta.content`,
  thinking in `delta.reasoning` (vLLM's name today) or `delta.reasoning_content` (the older one),
  or a tool call's name and `delta.tool_calls[].function.arguments`); a role-only first chat
  chunk is not the first token. The first token of any kind is `first_token_ns` (TTFT); the first
  answer token (content or tool call) is `first_answer_ns` (TTFAT); thinking events are listed
  in `reasoning_events` (their indices among the token events);
- a running `usage.completion_tokens` on a token event (vLLM's `continuous_usage_stats`) is kept
  per event in `running`, to count the tokens of multi-token events afterwards (`event_tokens`);
  with `keep_texts` each event's text is kept too, for a tokenizer to count after the request;
  `completion_tokens_details.reasoning_tokens` is kept when the usage carries it;
- usage may come in its own chunk, on the finish chunk, on the last chunk, or not at all; its
  `prompt_tokens_details.cached_tokens` and llama.cpp's `timings` object are kept when present;
- the `model` each chunk names is kept (a server may answer with another name than was asked);
- `[DONE]` may be missing (the stream just ends) or come without any `finish_reason` (truncated);
- the Responses API (/v1/responses) names each event by `type`: `response.output_text.delta`
  (and refusal, tool-call argument deltas) are answer tokens, `response.reasoning_text.delta`
  thinking; `response.completed` (also when cut by `max_output_tokens`: status "incomplete"),
  `response.incomplete` or `response.failed` ends it with the usage (`input_tokens`,
  `output_tokens`, their details) and a status, read as `stop`, `length` or a failure; no `[DONE]`;
- Anthropic's Messages API (/v1/messages, engine.messages_api): every `content_block_delta` with
  text is a token event (`thinking_delta` is thinking; `signature_delta` is none), the input
  comes on `message_start`, the output count and `stop_reason` on `message_delta`;
- an `{"error": ...}` object (or a flat `{"object": "error"}` or `{"type": "error"}`) inside a 200
  stream is a failure;
- bytes that are not JSON are a failure (`malformed_event`), never a crash; an empty `data:`
  line is a keep-alive, like an SSE comment.
"""

from __future__ import annotations

from typing import Final

import orjson

from gputui.engine.messages_api import MESSAGE_EVENTS, delta_text
from gputui.engine.messages_api import chat_usage as messages_usage
from gputui.engine.messages_api import finish_reason as messages_finish
from gputui.engine.records import REASON_ERROR_EVENT, REASON_MALFORMED_EVENT, ServerTimings
from gputui.engine.responses_api import (
    ANSWER_DELTAS,
    REASONING_DELTAS,
    RESPONSE_ENDS,
    chat_usage,
    finish_reason,
)
from gputui.engine.sse_fields import (
    error_message,
    excerpt,
    float_or_none,
    int_or_none,
    tool_call_text,
)
from gputui.jsontypes import JsonObject, JsonValue

__all__ = ["StreamReader", "error_message"]

_DATA: Final = b"data: "
_EVENT: Final = b"event: "
_LF_DATA: Final = b"\ndata: "
_EVENT_ERROR: Final = b"event: error"
_DONE: Final = b"[DONE]"
_MAX_BUFFER_BYTES: Final = 4 * 1024 * 1024
"""An unterminated event longer than this is garbage, not a slow server."""
_TOO_LONG: Final = "an SSE event exceeds 4 MiB without a separator"


class StreamReader:
    """Accumulates one response's SSE events into token stamps, usage and a verdict."""

    __slots__ = (
        "_buffer",
        "_cr",
        "_last_usage",
        "cached_input_tokens",
        "done",
        "error",
        "error_detail",
        "events",
        "finish_reason",
        "first_answer_ns",
        "first_token_ns",
        "input_tokens",
        "model",
        "output_tokens",
        "reasoning_events",
        "reasoning_tokens",
        "running",
        "texts",
        "timings",
        "token_ns",
    )

    def __init__(self, *, keep_texts: bool = False) -> None:
        self._buffer = bytearray()
        """The start of an event whose end has not arrived yet."""
        self._cr = False
        """The last read ended with CR: a LF starting the next one belongs to it (CRLF)."""
        self.token_ns: list[int] = []
        self.first_token_ns: int | None = None
        self.first_answer_ns: int | None = None
        self.reasoning_events: list[int] = []
        self.running: list[JsonValue] = []
        """The usage's `completion_tokens` of each token event that carried a usage object."""
        self.texts: list[str] | None = [] if keep_texts else None
        """Each token event's text, kept only with `keep_texts` (event counting, multi-turn)."""
        self.reasoning_tokens: int | None = None
        """From usage `completion_tokens_details.reasoning_tokens`, when the server gave it."""
        self._last_usage: JsonValue = None
        self.done = False
        """`[DONE]` was received."""
        self.events = 0
        self.finish_reason: str | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        """From the usage report, when one came."""
        self.cached_input_tokens: int | None = None
        self.timings: ServerTimings | None = None
        self.model: str | None = None
        """The `model` field of the first chunk that named one."""
        self.error: str | None = None
        self.error_detail: str | None = None

    def feed(self, data: bytes, now_ns: int) -> None:
        """Consume body bytes that arrived at `now_ns`."""
        if self.error is not None:
            return
        if self._cr or b"\r" in data:
            data = self._lf_only(data)
        pending = self._buffer
        if pending:
            # Only the new bytes (and the one before them) can complete a separator: an event read
            # in many small pieces is appended, never rescanned, so a huge line costs linear time.
            if b"\n\n" not in data and not (data[:1] == b"\n" and pending[-1] == 10):
                pending += data
                if len(pending) > _MAX_BUFFER_BYTES:
                    self._fail(REASON_MALFORMED_EVENT, _TOO_LONG)
                return
            buffer = b"".join((pending, data))
            pending.clear()
        else:
            buffer = data
        parts = buffer.split(b"\n\n")
        rest = parts.pop()
        for event in parts:
            if event.startswith(_DATA) and b"\n" not in event:
                self._payload(event[6:], now_ns)
            elif event.startswith(_EVENT):
                # Messages' events: an `event:` line and one `data:` line (the payload's `type`
                # repeats the name, so only `event: error` needs the slow path's reading).
                head, sep, payload = event.partition(_LF_DATA)
                if sep and b"\n" not in head and b"\n" not in payload and head != _EVENT_ERROR:
                    self._payload(payload, now_ns)
                else:
                    self._slow_event(event, now_ns)
            elif event:
                self._slow_event(event, now_ns)
            if self.failed:
                return
        if len(rest) > _MAX_BUFFER_BYTES:
            self._fail(REASON_MALFORMED_EVENT, _TOO_LONG)
        elif rest:
            pending += rest

    def _lf_only(self, data: bytes) -> bytes:
        """CRLF and lone CR become LF, also when a CRLF is split between two reads."""
        if not data:
            return data
        if self._cr and data.startswith(b"\n"):
            data = data[1:]
        self._cr = data.endswith(b"\r")
        return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    @property
    def failed(self) -> bool:
        """A failure was detected; later bytes are ignored."""
        return self.error is not None

    def end_of_body(self, now_ns: int) -> None:
        """The body ended: flush a last event that had no blank line after it."""
        rest = bytes(self._buffer).strip()
        self._buffer.clear()
        if rest and self.error is None:
            self._slow_event(rest, now_ns)
        if self.output_tokens is None and self._last_usage is not None:
            self._usage(self._last_usage)  # continuous usage without a final usage chunk

    def _slow_event(self, event: bytes, now_ns: int) -> None:
        data_lines: list[bytes] = []
        event_type = b""
        for line in event.split(b"\n"):
            if not line or line.startswith(b":"):
                continue  # blank line or SSE comment (keep-alive ping)
            field, _, value = line.partition(b":")
            value = value.removeprefix(b" ")
            if field == b"data":
                data_lines.append(value)
            elif field == b"event":
                event_type = value
            elif field not in (b"id", b"retry"):
                self._fail(REASON_MALFORMED_EVENT, f"not an SSE line: {excerpt(line)}")
                return
        if event_type == b"error":
            self._fail(REASON_ERROR_EVENT, excerpt(b"\n".join(data_lines)))
            return
        if data_lines:
            self._payload(b"\n".join(data_lines), now_ns)

    def _payload(self, payload: bytes, now_ns: int) -> None:
        if not payload or payload.isspace():
            return  # an empty `data:` line: a keep-alive (no copy of every payload to check it)
        self.events += 1
        if payload == _DONE:
            self.done = True
            return
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            self._fail(REASON_MALFORMED_EVENT, f"not JSON: {excerpt(payload)}")
            return
        if type(obj) is not dict:
            self._fail(REASON_MALFORMED_EVENT, f"not a JSON object: {excerpt(payload)}")
            return
        choices = obj.get("choices")
        if choices:
            # A field of the wrong type is a malformed event (a verdict, never an exception).
            choice = choices[0] if type(choices) is list else None
            if type(choice) is not dict:
                self._fail(REASON_MALFORMED_EVENT, f"bad choices: {excerpt(payload)}")
                return
            delta = choice.get("delta")
            answer = True
            if delta:
                if type(delta) is not dict:
                    self._fail(REASON_MALFORMED_EVENT, f"bad delta: {excerpt(payload)}")
                    return
                text = delta.get("content")
                if not text:
                    text = delta.get("reasoning") or delta.get("reasoning_content")
                    if text:
                        answer = False
                    else:
                        calls = delta.get("tool_calls")
                        if calls:
                            text = tool_call_text(calls)
            else:
                text = choice.get("text")
            finish = choice.get("finish_reason")
            if (text and type(text) is not str) or (finish and type(finish) is not str):
                self._fail(REASON_MALFORMED_EVENT, f"bad text or finish: {excerpt(payload)}")
                return
            if text:
                stamps = self.token_ns
                stamps.append(now_ns)
                if self.first_token_ns is None:
                    self.first_token_ns = now_ns
                if not answer:
                    self.reasoning_events.append(len(stamps) - 1)
                elif self.first_answer_ns is None:
                    self.first_answer_ns = now_ns
                if self.texts is not None:
                    self.texts.append(text)
                usage = obj.get("usage")
                if usage:
                    # Continuous usage: keep the running count; the full usage is read at the end.
                    self.running.append(
                        usage.get("completion_tokens") if type(usage) is dict else None
                    )
                    self._last_usage = usage
                    if not finish:
                        usage = None
            else:
                usage = obj.get("usage")
            if finish:
                self.finish_reason = finish
        else:
            kind = obj.get("type")
            if type(kind) is str:
                if kind.startswith("response."):
                    self._response_event(kind, obj, now_ns)
                    return
                if kind in MESSAGE_EVENTS:
                    self._message_event(kind, obj, now_ns)
                    return
            usage = obj.get("usage")
        if self.model is None:
            model = obj.get("model")
            if type(model) is str:
                self.model = model
        if usage:
            self._usage(usage)
        timings = obj.get("timings")
        if timings:
            self._timings(timings)
        if "error" in obj or obj.get("object") == "error" or obj.get("type") == "error":
            self._fail(REASON_ERROR_EVENT, error_message(obj))

    def _response_event(self, kind: str, obj: JsonObject, now_ns: int) -> None:
        """One event of the Responses API (/v1/responses): a text delta, or the response's state."""
        answer = kind in ANSWER_DELTAS
        if answer or kind in REASONING_DELTAS:
            text = obj.get("delta")
            if text:
                if type(text) is str:
                    self._token(text, now_ns, answer=answer)
                else:
                    self._fail(REASON_MALFORMED_EVENT, f"bad delta: {excerpt(orjson.dumps(obj))}")
            return
        response = obj.get("response")
        if type(response) is not dict:
            return
        model = response.get("model")
        if self.model is None and type(model) is str:
            self.model = model
        if kind not in RESPONSE_ENDS:
            return
        self.done = True
        usage = response.get("usage")
        if type(usage) is dict:
            self._usage(chat_usage(usage))
        if kind == "response.failed" or response.get("status") == "failed":
            self._fail(REASON_ERROR_EVENT, error_message(response))
        else:
            self.finish_reason = finish_reason(response)

    def _message_event(self, kind: str, obj: JsonObject, now_ns: int) -> None:
        """One event of Anthropic's Messages API: a content delta, the message's state or end."""
        if kind == "content_block_delta":
            delta = obj.get("delta")
            text, answer = delta_text(delta) if type(delta) is dict else (None, True)
            if text:
                if type(text) is str:
                    self._token(text, now_ns, answer=answer)
                else:
                    self._fail(REASON_MALFORMED_EVENT, f"bad delta: {excerpt(orjson.dumps(obj))}")
            return
        if kind == "message_start":
            message = obj.get("message")
            if type(message) is not dict:
                return
            model = message.get("model")
            if self.model is None and type(model) is str:
                self.model = model
            usage = message.get("usage")
            if type(usage) is dict:  # the input only: the output count here is a placeholder
                self._usage({**messages_usage(usage), "completion_tokens": None})
        elif kind == "message_delta":
            delta = obj.get("delta")
            stop = delta.get("stop_reason") if type(delta) is dict else None
            if type(stop) is str:
                self.finish_reason = messages_finish(stop)
            usage = obj.get("usage")
            if type(usage) is dict:
                self._usage(messages_usage(usage))
        elif kind == "message_stop":
            self.done = True

    def _token(self, text: str, now_ns: int, *, answer: bool) -> None:
        """A token event outside the chat and completions hot path."""
        stamps = self.token_ns
        stamps.append(now_ns)
        if self.first_token_ns is None:
            self.first_token_ns = now_ns
        if not answer:
            self.reasoning_events.append(len(stamps) - 1)
        elif self.first_answer_ns is None:
            self.first_answer_ns = now_ns
        if self.texts is not None:
            self.texts.append(text)

    def _usage(self, usage: JsonValue) -> None:
        if type(usage) is not dict:
            return
        completion = usage.get("completion_tokens")
        prompt = usage.get("prompt_tokens")
        if type(completion) is int:
            self.output_tokens = completion
        if type(prompt) is int:
            self.input_tokens = prompt
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if type(details) is dict else None
        if type(cached) is int:
            self.cached_input_tokens = cached
        completion_details = usage.get("completion_tokens_details")
        if type(completion_details) is dict:
            reasoning = completion_details.get("reasoning_tokens")
            if type(reasoning) is int:
                self.reasoning_tokens = reasoning

    def _timings(self, timings: JsonValue) -> None:
        if type(timings) is not dict:
            return
        self.timings = ServerTimings(
            prompt_n=int_or_none(timings.get("prompt_n")),
            cache_n=int_or_none(timings.get("cache_n")),
            prompt_ms=float_or_none(timings.get("prompt_ms")),
            predicted_n=int_or_none(timings.get("predicted_n")),
            predicted_ms=float_or_none(timings.get("predicted_ms")),
        )

    def _fail(self, reason: str, detail: str) -> None:
        self.error = reason
        self.error_detail = detail
