"""What the streaming client sends: its configuration, and each request's head and JSON body.

Contract: `ClientConfig` is everything the client needs to build requests and is picklable (it
crosses into the engine process); the API key is never in its repr. `request_head` is built once
per client and `request_body` once per request (never per event): the run's extra body, then the
request's, override the defaults. `/v1/responses` takes `input` and `max_output_tokens` and no
`stream_options` (`responses_body`); Anthropic's `/v1/messages` takes `system` apart and no
`stream_options` (`messages_api.messages_body`), and its key also as `x-api-key` with
`anthropic-version`. Re-exported by `engine.client`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import orjson

from gputui import __version__
from gputui.engine.event_tokens import EventCounterSpec
from gputui.engine.messages_api import ANTHROPIC_VERSION, messages_body
from gputui.engine.target import Endpoint, Target


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Client timeouts; defaults suit LLM serving, where a long queue is a finding, not an error."""

    connect_s: float = 10.0
    """TCP (and TLS) connection setup; a server that takes longer is down or drowning."""
    request_s: float = 600.0
    """Whole request, from sending to the last byte: room for a long queue and a long output."""
    stall_s: float = 60.0
    """Longest silence between body bytes once the body has started (not before the first)."""


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Everything the client needs to build requests (picklable: it crosses into the engine)."""

    target: Target
    model: str
    endpoint: Endpoint = "completions"
    api_key: str | None = field(default=None, repr=False)
    """Never logged, never saved: `repr=False` keeps it out of tracebacks and reprs."""
    extra_body: dict[str, object] = field(default_factory=dict)
    timeouts: Timeouts = Timeouts()
    include_usage: bool = True
    continuous_usage: bool = False
    """Ask for `stream_options.continuous_usage_stats` (a running usage on every event)."""
    event_counter: EventCounterSpec | None = None
    """Counts event texts when a request's usage total disagrees with its number of events."""


def host_header(target: Target) -> str:
    """The `Host` header's value: the port only where it is not the scheme's default."""
    return target.host if target.port in (80, 443) else f"{target.host}:{target.port}"


def request_head(config: ClientConfig) -> bytes:
    """The request line and headers every request of this client shares (up to Content-Length)."""
    target = config.target
    head = (
        f"POST {target.endpoint_path(config.endpoint)} HTTP/1.1\r\n"
        f"Host: {host_header(target)}\r\n"
        f"User-Agent: gputui/{__version__}\r\n"
        "Accept: text/event-stream\r\n"
        "Content-Type: application/json\r\n"
    )
    if config.endpoint == "messages":
        head += f"anthropic-version: {ANTHROPIC_VERSION}\r\n"
        if config.api_key:
            head += f"x-api-key: {config.api_key}\r\n"
    if config.api_key:
        head += f"Authorization: Bearer {config.api_key}\r\n"
    return head.encode("latin-1")


def request_body(
    config: ClientConfig,
    prompt: str,
    max_tokens: int,
    messages: Sequence[Mapping[str, object]] | None,
    extra_body: Mapping[str, object] | None,
) -> bytes:
    """The JSON request body (the run's extra body, then the request's, override defaults)."""
    if config.endpoint == "responses":
        return responses_body(config, prompt, max_tokens, messages, extra_body)
    if config.endpoint == "messages":
        overrides = (config.extra_body, extra_body)
        return messages_body(config.model, prompt, max_tokens, messages, overrides)
    body: dict[str, object] = {"model": config.model, "max_tokens": max_tokens, "stream": True}
    if config.endpoint == "chat":
        body["messages"] = list(messages) if messages else [{"role": "user", "content": prompt}]
    elif messages:
        body["prompt"] = "\n\n".join(str(m.get("content", "")) for m in messages)
    else:
        body["prompt"] = prompt
    if config.include_usage:
        body["stream_options"] = (
            {"include_usage": True, "continuous_usage_stats": True}
            if config.continuous_usage
            else {"include_usage": True}
        )
    body.update(config.extra_body)
    if extra_body:
        body.update(extra_body)
    return orjson.dumps(body)


def responses_body(
    config: ClientConfig,
    prompt: str,
    max_tokens: int,
    messages: Sequence[Mapping[str, object]] | None,
    extra_body: Mapping[str, object] | None,
) -> bytes:
    """A /v1/responses request: `input` and `max_output_tokens`; usage always comes at the end.

    No `stream_options`: the Responses API has none (its final `response.completed` event carries
    the usage), so its tokens per event are counted from the event texts (`event_counter`).
    """
    body: dict[str, object] = {
        "model": config.model,
        "input": list(messages) if messages else prompt,
        "max_output_tokens": max_tokens,
        "stream": True,
    }
    body.update(config.extra_body)
    if extra_body:
        body.update(extra_body)
    return orjson.dumps(body)
