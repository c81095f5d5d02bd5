"""The seam between the simulator's HTTP server and its timing models ("profiles").

Contract: the server parses requests and owns the sockets; a profile decides *when* each output
token is emitted. Everything runs on the server's single event loop: a profile schedules its own
work with `loop.call_at` / `loop.call_later` (never threads, never blocking calls) and calls the
request's `TokenSink` to write. The server stamps what it really did (request arrival, every write)
with `time.perf_counter_ns()`; a profile never reports timings itself, so `/sim/stats` is the truth.

For precise timing a profile may use `gputui.sim.deadlines.DeadlineScheduler` (timerfd-driven,
tens of microseconds late at most) instead of `loop.call_at`, whose uvloop timers are only accurate
to about a millisecond either way. Optionally a profile may have an int `max_model_len` attribute;
the server reports it in `/v1/models` and `/tokenize` and rejects longer requests (default 32768).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class SimRequest:
    """A parsed completion request, as a profile sees it."""

    request_id: int
    arrival_ns: int
    """perf_counter_ns() when the request's first byte arrived."""
    prompt_tokens: int
    """Input length in tokens, by the simulator's deterministic tokenizer."""
    max_tokens: int
    min_tokens: int
    ignore_eos: bool
    """When False a profile may stop early (finish_reason "stop"); when True it emits max_tokens."""
    chat: bool
    model: str
    block_hashes: tuple[int, ...] = ()
    """Chained hashes of the prompt's full 16-token blocks (sim.prefix_cache)."""


class TokenSink(Protocol):
    """Where a profile sends a request's output. One token = one SSE event = one socket write."""

    @property
    def closed(self) -> bool:
        """True once the client went away or the stream finished; stop emitting then."""
        ...

    def emit_tokens(
        self,
        count: int = 1,
        finish_reason: str | None = None,
        *,
        one_write: bool = False,
        one_event: bool = False,
    ) -> None:
        """Write `count` token events now (one event and one write per token).

        `one_write` puts the events in a single socket write instead: only for client-capacity
        benchmarks, where the server must cost less per token than the client it measures.
        `one_event` sends the `count` tokens as one SSE event (a speculative-decoding step); a
        stream styled with several tokens per event groups them itself (see `stream_style`).

        Extension (compatible: callers may omit it): with `finish_reason`, the last of these tokens
        carries it, as vLLM's final chunk does, and the response ends there (`finish` is then not
        needed). The token that reaches `max_tokens` always carries "length" and ends the response.
        """
        ...

    def finish(self, finish_reason: str) -> None:
        """Write the finish chunk, the usage chunk and `[DONE]`, then end the response.

        If no token carried a finish reason yet, the finish chunk has empty text (what vLLM sends
        when the model emits EOS). After the response ended this does nothing.
        """
        ...


@runtime_checkable
class CachedTokensSink(Protocol):
    """A sink that reports `usage.prompt_tokens_details.cached_tokens`.

    A prefix-caching profile sets it before the first token; other sinks report no cache.
    """

    cached_tokens: int | None


class Profile(Protocol):
    """A timing model behind the server."""

    name: str

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called once by the server with the loop the profile must schedule on."""
        ...

    def start(self, request: SimRequest, sink: TokenSink) -> None:
        """Begin serving a request; return at once (schedule the work on the loop)."""
        ...

    def cancel(self, request_id: int) -> None:
        """The client disconnected: release the request's resources."""
        ...

    def prometheus_text(self) -> str:
        """Server and simulated-GPU metrics in Prometheus text format ("" for none)."""
        ...
