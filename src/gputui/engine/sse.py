"""Server-sent events from an OpenAI-compatible stream, classified as they arrive.

Contract: `StreamReader.feed(data, now_ns)` takes de-chunked body bytes and the arrival stamp of
the socket read they came in, and records, per output-token event, that stamp. The hot path (one
`data: {...}` line per event) costs one `bytes.split` and one `orjson.loads` per event and nothing
else; comments, `event:` lines, multi-line data and CRLF framing take a slower path. Every dialect
rule lives here (see ../shared/docs/reference.md §5):

- a chunk is a token event only when it carries non-empty text (`choices[0].text`, `delta.content`
  or `delta.reasoning_content`); a role-only first chat chunk is not the first token;
- usage may come in its own chunk, on the finish chunk, on the last chunk, or not at all; its
  `prompt_tokens_details.cached_tokens` and llama.cpp's `timings` object are kept when present;
- the `model` each chunk names is kept (a server may answer with another name than was asked);
- `[DONE]` may be missing (the stream just ends) or come without any `finish_reason` (truncated);
- an `{"error": ...}` object (or a flat `{"object": "error"}`) inside a 200 stream is a failure;
- bytes that are not JSON are a failure (`malformed_event`), never a crash; an empty `data:`
  line is a keep-alive, like an SSE comment.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from gputui.engine.records import REASON_ERROR_EVENT, REASON_MALFORMED_EVENT, ServerTimings

_DATA: Final = b"data: "
_DONE: Final = b"[DONE]"
_MAX_BUFFER_BYTES: Final = 4 * 1024 * 1024
"""An unterminated event longer than this is garbage, not a slow server."""
_TOO_LONG: Final = "an SSE event exceeds 4 MiB without a separator"


class StreamReader:
    """Accumulates one response's SSE events into token stamps, usage and a verdict."""

    __slots__ = (
        "_buffer",
        "_cr",
        "cached_input_tokens",
        "done",
        "error",
        "error_detail",
        "events",
        "finish_reason",
        "first_token_ns",
        "input_tokens",
        "model",
        "output_tokens",
        "texts",
        "timings",
        "token_ns",
    )

    def __init__(self) -> None:
        self._buffer = bytearray()
        """The start of an event whose end has not arrived yet."""
        self._cr = False
        """The last read ended with CR: a LF starting the next one belongs to it (CRLF)."""
        self.token_ns: list[int] = []
        self.first_token_ns: int | None = None
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
        self.texts: list[str] | None = None
        """The output text pieces, kept only when set to a list (multi-turn needs the answer)."""

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
                self._fail(REASON_MALFORMED_EVENT, f"not an SSE line: {_excerpt(line)}")
                return
        if event_type == b"error":
            self._fail(REASON_ERROR_EVENT, _excerpt(b"\n".join(data_lines)))
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
            self._fail(REASON_MALFORMED_EVENT, f"not JSON: {_excerpt(payload)}")
            return
        if type(obj) is not dict:
            self._fail(REASON_MALFORMED_EVENT, f"not a JSON object: {_excerpt(payload)}")
            return
        choices = obj.get("choices")
        if choices:
            # Any field of the wrong type is a malformed event (a verdict, never an exception).
            choice = choices[0] if type(choices) is list else None
            if type(choice) is not dict:
                self._fail(REASON_MALFORMED_EVENT, f"bad choices: {_excerpt(payload)}")
                return
            delta = choice.get("delta")
            if delta and type(delta) is not dict:
                self._fail(REASON_MALFORMED_EVENT, f"bad delta: {_excerpt(payload)}")
                return
            text = (
                (delta.get("content") or delta.get("reasoning_content"))
                if delta
                else choice.get("text")
            )
            finish = choice.get("finish_reason")
            if (text and type(text) is not str) or (finish and type(finish) is not str):
                self._fail(REASON_MALFORMED_EVENT, f"bad text or finish: {_excerpt(payload)}")
                return
            if text:
                self.token_ns.append(now_ns)
                if self.first_token_ns is None:
                    self.first_token_ns = now_ns
                if self.texts is not None:
                    self.texts.append(text)
            if finish:
                self.finish_reason = finish
        if self.model is None:
            model = obj.get("model")
            if type(model) is str:
                self.model = model
        usage = obj.get("usage")
        if usage:
            self._usage(usage)
        timings = obj.get("timings")
        if timings:
            self._timings(timings)
        if "error" in obj or obj.get("object") == "error":
            self._fail(REASON_ERROR_EVENT, error_message(obj))

    def _usage(self, usage: Any) -> None:
        if type(usage) is not dict:
            return
        completion = usage.get("completion_tokens")
        prompt = usage.get("prompt_tokens")
        if type(completion) is int:
            self.output_tokens = completion
        if type(prompt) is int:
            self.input_tokens = prompt
        details = usage.get("prompt_tokens_details")
        if type(details) is dict and type(details.get("cached_tokens")) is int:
            self.cached_input_tokens = details["cached_tokens"]

    def _timings(self, timings: Any) -> None:
        if type(timings) is not dict:
            return
        self.timings = ServerTimings(
            prompt_n=_int(timings.get("prompt_n")),
            cache_n=_int(timings.get("cache_n")),
            prompt_ms=_float(timings.get("prompt_ms")),
            predicted_n=_int(timings.get("predicted_n")),
            predicted_ms=_float(timings.get("predicted_ms")),
        )

    def _fail(self, reason: str, detail: str) -> None:
        self.error = reason
        self.error_detail = detail


def error_message(obj: dict[str, Any]) -> str:
    """One line from an OpenAI-style error object (nested `error` or flat `object: error`)."""
    inner = obj.get("error", obj)
    if isinstance(inner, dict):
        message = inner.get("message") or inner.get("msg") or inner.get("detail")
        if message:
            return _one_line(str(message))
    elif inner:
        return _one_line(str(inner))
    return _one_line(orjson.dumps(obj).decode(errors="replace"))


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _float(value: Any) -> float | None:
    return float(value) if type(value) in (int, float) else None


def _excerpt(data: bytes, limit: int = 120) -> str:
    return _one_line(data[:limit].decode("utf-8", errors="replace"))


def _one_line(text: str, limit: int = 200) -> str:
    return " ".join(text.split())[:limit]
