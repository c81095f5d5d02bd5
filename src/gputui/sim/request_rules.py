"""The simulator's request rules: what a completions, chat or tokenize body may hold (vLLM's).

Contract: every function either returns the value the server schedules or raises `RequestError`,
whose message the server answers with HTTP 400 (OpenAI-style JSON). Every model name is accepted;
`prompt` may be a string, a list of strings (billed as one prompt: their tokens are summed) or
token ids; chat `messages` are billed as the tokens of their concatenated text contents (no chat
template); `max_tokens` (chat: also `max_completion_tokens`, which wins) defaults to 16, and a
prompt plus output over `max_model_len` is vLLM's context-length error.
"""

from __future__ import annotations

from typing import Final, cast

import orjson

from gputui.jsontypes import JsonObject, JsonValue
from gputui.sim.tokenizer import encode

DEFAULT_MAX_TOKENS: Final = 16


class RequestError(ValueError):
    """A request the API rejects with HTTP 400; the message goes to the client."""


def _text_of(content: JsonValue) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: [{"type": "text", "text": ...}, ...]
        return " ".join(
            cast(str, p["text"]) for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


def prompt_token_count(body: JsonObject, *, chat: bool) -> tuple[int, list[int]]:
    """Prompt tokens and their ids for a completions/chat/tokenize body (RequestError if absent)."""
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError("'messages' must be a non-empty list")
        text = " ".join(_text_of(m.get("content")) for m in messages if isinstance(m, dict))
        ids = encode(text)
        return len(ids), ids
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        ids = encode(prompt)
    elif isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        ids = [i for p in prompt if isinstance(p, str) for i in encode(p)]
    elif isinstance(prompt, list) and prompt and all(isinstance(p, int) for p in prompt):
        ids = [p for p in prompt if isinstance(p, int)]
    elif isinstance(prompt, list) and prompt and all(isinstance(p, list) for p in prompt):
        ids = [i for p in prompt if isinstance(p, list) for i in p if isinstance(i, int)]
    else:
        raise RequestError("'prompt' must be a string, a list of strings or a list of token ids")
    return len(ids), ids


def int_field(body: JsonObject, name: str, default: int, minimum: int) -> int:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise RequestError(f"'{name}' must be an integer >= {minimum}, got {value!r}")
    return value


def output_lengths(
    body: JsonObject, prompt_tokens: int, *, chat: bool, max_model_len: int
) -> tuple[int, int]:
    """The request's max_tokens and min_tokens; a context overflow is vLLM's 400."""
    max_tokens = int_field(body, "max_tokens", DEFAULT_MAX_TOKENS, 1)
    if chat:  # vLLM: max_completion_tokens wins over the deprecated max_tokens
        max_tokens = int_field(body, "max_completion_tokens", max_tokens, 1)
    min_tokens = int_field(body, "min_tokens", 0, 0)
    if prompt_tokens + max_tokens > max_model_len:
        raise RequestError(
            f"This model's maximum context length is {max_model_len} tokens. However, you "
            f"requested {prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, "
            f"{max_tokens} in the completion). Please reduce the length of the messages or "
            "completion."
        )
    return max_tokens, min_tokens


def json_object(body: bytes) -> JsonObject:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise RequestError(f"Invalid JSON body: {exc}") from None
    if not isinstance(parsed, dict):
        raise RequestError("The request body must be a JSON object")
    return parsed
