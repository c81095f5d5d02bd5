"""What each request asks for: the seam between workloads (scenarios, datasets) and the load loop.

Contract: a `WorkloadSpec` is picklable and crosses into the engine process, where `build()` makes a
`RequestSource`; the load controller calls `source.next(request_id)` once per request, before
sending. A source is deterministic in (seed, request_id), so two runs with one seed send the same
requests. Anything slow (tokenizing, reading a dataset) belongs in the spec's construction or in
`build()`, never in `next()`, which runs on the engine's loop between requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, TypedDict

from gputui.engine.prompts import PromptFactory


class ChatMessage(TypedDict):
    """One chat message as the workloads write it (and as a multi-turn history re-sends it)."""

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request's content and length."""

    prompt: str
    max_tokens: int
    input_tokens: int | None = None
    """The input length asked for (None when unknown); the server's usage report is the truth."""
    messages: tuple[ChatMessage, ...] | None = None
    """Chat messages (e.g. with a shared system prompt); None means one user message, `prompt`."""
    extra_body: Mapping[str, object] | None = None
    """Per-request fields (e.g. `min_tokens`) on top of the run's extra body."""


class SourceExhausted(Exception):
    """Raised by `next()` when a source has sent everything it has (a dataset sent once each)."""


class RequestSource(Protocol):
    """Produces the next request's content."""

    def next(self, request_id: int) -> RequestSpec:
        """The request with this id (cheap: called on the engine loop).

        Raises `SourceExhausted` when there is no more: the controller then sends nothing new.
        """
        ...


class WorkloadSpec(Protocol):
    """A picklable recipe for a RequestSource."""

    def build(self) -> RequestSource:
        """Make the source, in the process that sends."""
        ...


@dataclass(frozen=True, slots=True)
class FixedShape:
    """Every request asks for the same input and output length (approximate prompts)."""

    input_tokens: int
    output_tokens: int
    seed: int = 0

    def build(self) -> RequestSource:
        """A source of unique prompts of about `input_tokens` tokens."""
        return _FixedShapeSource(self)


class _FixedShapeSource:
    def __init__(self, spec: FixedShape) -> None:
        self._spec = spec
        self._prompts = PromptFactory(spec.seed)

    def next(self, request_id: int) -> RequestSpec:
        return RequestSpec(
            prompt=self._prompts.make(self._spec.input_tokens, request_id),
            max_tokens=self._spec.output_tokens,
            input_tokens=self._spec.input_tokens,
        )
