"""Fault injection for the simulator: the server misbehaving on purpose, reproducibly.

Contract: `FaultSpec.parse("reset=0.01,stall=0.005,http503=0.02")` gives each fault a probability.
Every valid completion request draws once, in the order the server handles them, from
`random.Random(seed)`: one uniform number, which the faults partition in the order of `FAULTS`, so
each fault has exactly its own probability, at most one fault hits a request, and the same seed and
the same request order give the same faults. The sum of the probabilities must be at most 1.
Requests the API rejects (400), and every other endpoint, draw nothing. `GET /sim/stats` reports
`{"faults": {"drawn": n, "injected": {fault: count}, ...}}`, so a test can compare the server's own
tally with what a client counted.

What each fault does to a streamed request, and the reason gputui's client records for it
(`EXPECTED_REASON`); the *fault point* is output token `max_tokens // 2`, so a mid-stream fault
comes after the headers and at least one token (when there are two or more):

- `http503`, `http429`: an OpenAI-style JSON error with that status instead of the stream, on a
  kept-alive connection (429 carries `retry-after: 1`): `http_503`, `http_429`.
- `reset`: at the fault point the connection is reset (RST: `SO_LINGER` 0): `stream_broken`. The
  client has seen bytes by then, so it never mistakes it for a stale kept-alive connection to retry.
- `stall`: at the fault point the server goes silent and stays so until the client leaves: `stall`
  (the client's stall timeout fires; before the first body byte only its request timeout would).
- `error_event`: at the fault point `data: {"error": {...}}` and `[DONE]` end the stream, as vLLM
  ends a stream whose generation failed: `error_event`.
- `garbage`: at the fault point one event of bytes that are not JSON (a cut object with invalid
  UTF-8), then the stream goes on to its normal end: `malformed_event`.
- `slow_start`: the headers go out at once but the request reaches the profile `slow_start_ms`
  late, so its first token is that much later: none, the request is ok with a long TTFT.

A non-streamed request gets the same faults in one response: `reset` and `stall` as above,
`error_event` a 500 JSON error, `garbage` a 200 whose body is not JSON (both with `connection:
close`). A fault that cuts a response short (`reset`, `stall`, `error_event`, and `garbage` when not
streamed) releases the profile's work for the request at the fault point, and the request counts
in neither `requests_completed` nor `requests_cancelled` of `/sim/stats`; streamed `garbage` and
`slow_start` responses run to their normal end and count as completed.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import orjson

from gputui.jsontypes import JsonOutObject
from gputui.sim.http_responses import error_response, http_response
from gputui.sim.sinks import BufferedSink, StreamSink, http_chunk

RESET: Final = "reset"
STALL: Final = "stall"
HTTP503: Final = "http503"
HTTP429: Final = "http429"
ERROR_EVENT: Final = "error_event"
GARBAGE: Final = "garbage"
SLOW_START: Final = "slow_start"

FAULTS: Final = (RESET, STALL, HTTP503, HTTP429, ERROR_EVENT, GARBAGE, SLOW_START)
"""Every fault, in the order they partition a request's draw."""

HTTP_FAULTS: Final = {HTTP503: 503, HTTP429: 429}
"""Faults answered with an HTTP error status before any stream."""

STREAM_FAULTS: Final = frozenset({RESET, STALL, ERROR_EVENT, GARBAGE})
"""Faults that strike mid-response, through `FaultySink`."""

EXPECTED_REASON: Final[dict[str, str | None]] = {
    RESET: "stream_broken",
    STALL: "stall",
    HTTP503: "http_503",
    HTTP429: "http_429",
    ERROR_EVENT: "error_event",
    GARBAGE: "malformed_event",
    SLOW_START: None,
}
"""The failure reason gputui's client records for each fault (None: the request is ok)."""

DEFAULT_SLOW_START_MS: Final = 2000.0

GARBAGE_EVENT: Final = b'data: {"choices":[{"index":0,"text":"\xff\xfe\xc3\x28 tok\n\n'
"""A cut JSON object with invalid UTF-8: what a corrupted proxy or a broken server might send."""

_ERROR_EVENT_MESSAGE: Final = "gputui sim: injected fault: generation failed mid-stream"

ERROR_EVENT_END: Final = (
    http_chunk(
        b"data: "
        + orjson.dumps({"error": {"message": _ERROR_EVENT_MESSAGE, "type": "InternalServerError"}})
        + b"\n\n"
    )
    + http_chunk(b"data: [DONE]\n\n")
    + b"0\r\n\r\n"
)
"""The end of a stream whose generation failed: an error event, `[DONE]`, the last chunk."""


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """Fault probabilities and the seed of their draws (picklable: it crosses into the server)."""

    probabilities: dict[str, float] = field(default_factory=dict)
    """Fault name -> probability that a request gets it; absent faults never happen."""
    seed: int = 0
    slow_start_ms: float = DEFAULT_SLOW_START_MS
    """How late a `slow_start` request reaches the profile."""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.probabilities) - set(FAULTS))
        if unknown:
            raise ValueError(
                f"unknown fault {unknown[0]!r} (known: {', '.join(FAULTS)})",
            )
        for name, p in self.probabilities.items():
            if not 0 <= p <= 1:
                raise ValueError(f"fault {name}: probability must be in [0, 1], got {p:g}")
        total = sum(self.probabilities.values())
        if total > 1 + 1e-9:
            raise ValueError(f"the fault probabilities add up to {total:g}, more than 1")
        if not 0 <= self.slow_start_ms < float("inf"):
            raise ValueError(
                f"slow_start_ms must be a finite number >= 0, got {self.slow_start_ms}"
            )

    @classmethod
    def parse(
        cls, text: str, *, seed: int = 0, slow_start_ms: float = DEFAULT_SLOW_START_MS
    ) -> FaultSpec:
        """`"reset=0.01,http503=0.02"` -> a spec; ValueError with a one-line message if invalid."""
        probabilities: dict[str, float] = {}
        for item in text.split(","):
            if not item.strip():
                continue
            name, sep, value = item.partition("=")
            name = name.strip()
            if not sep:
                raise ValueError(f"expected NAME=PROBABILITY, got {item.strip()!r}")
            try:
                p = float(value)
            except ValueError:
                raise ValueError(f"fault {name}: not a number: {value.strip()!r}") from None
            if name in probabilities:
                raise ValueError(f"fault {name} is given twice")
            probabilities[name] = p
        return cls(probabilities, seed=seed, slow_start_ms=slow_start_ms)

    def describe(self) -> str:
        """The spec in `parse`'s syntax, faults in draw order ("" when none)."""
        return ",".join(f"{f}={self.probabilities[f]:g}" for f in FAULTS if f in self.probabilities)


class FaultInjector:
    """Draws one fault (or none) per request and keeps the tally; see the module docstring."""

    __slots__ = ("_bounds", "_rng", "drawn", "injected", "spec")

    def __init__(self, spec: FaultSpec) -> None:
        self.spec = spec
        self._rng = random.Random(spec.seed)
        bounds: list[tuple[float, str]] = []
        upper = 0.0
        for name in FAULTS:
            p = spec.probabilities.get(name, 0.0)
            if p > 0:
                upper += p
                bounds.append((upper, name))
        self._bounds = tuple(bounds)
        self.drawn = 0
        """Requests that drew (faulted or not)."""
        self.injected = dict.fromkeys(FAULTS, 0)

    def draw(self) -> str | None:
        """The fault for the next request, or None; without faults configured, no RNG is used."""
        self.drawn += 1
        if not self._bounds:
            return None
        u = self._rng.random()
        for upper, name in self._bounds:
            if u < upper:
                self.injected[name] += 1
                return name
        return None

    def reset(self) -> None:
        """Zero the tally (`POST /sim/reset`); the draws carry on where they were."""
        self.drawn = 0
        self.injected = dict.fromkeys(FAULTS, 0)

    def snapshot(self) -> JsonOutObject:
        """The `faults` object of `/sim/stats`."""
        return {
            "spec": self.spec.describe(),
            "seed": self.spec.seed,
            "slow_start_ms": self.spec.slow_start_ms,
            "drawn": self.drawn,
            "injected": dict(self.injected),
        }


def http_fault_response(fault: str, *, keep_alive: bool) -> bytes:
    """The error response of an `HTTP_FAULTS` fault."""
    status = HTTP_FAULTS[fault]
    if status == 429:
        return error_response(
            429,
            "gputui sim: injected fault: too many requests",
            keep_alive=keep_alive,
            extra_headers=b"retry-after: 1\r\n",
        )
    return error_response(
        503, "gputui sim: injected fault: the server is overloaded", keep_alive=keep_alive
    )


def fault_point(max_tokens: int) -> int:
    """Index of the output token at which a mid-stream fault strikes."""
    return max_tokens // 2


def reset_connection(transport: asyncio.Transport) -> None:
    """Close with an RST rather than a FIN, as a crashed peer or a middlebox does."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class FaultySink:
    """Wraps a request's sink and strikes its fault at the fault point; only faulted requests pay.

    Until the fault point it passes tokens through. At the fault point (or earlier, if the profile
    ends the response before it) it acts, then tells the profile to stop (`closed` is True) and
    releases the profile's work through `release(request_id)`, which must not call back into the
    profile synchronously (the server defers it to the next turn of the loop: the strike happens
    inside the profile's own callback). Streamed `garbage` is the exception: it writes its event
    and passes the rest of the stream through.
    """

    __slots__ = ("_at", "_emitted", "_fault", "_inner", "_release", "_struck")

    def __init__(
        self,
        inner: StreamSink | BufferedSink,
        fault: str,
        max_tokens: int,
        release: Callable[[int], None],
    ) -> None:
        if fault not in STREAM_FAULTS:
            raise ValueError(f"{fault} is not a mid-stream fault")
        self._inner = inner
        self._fault = fault
        self._at = fault_point(max_tokens)
        self._emitted = 0
        self._release = release
        self._struck = False

    @property
    def request_id(self) -> int:
        """The wrapped request's id."""
        return self._inner.request_id

    @property
    def closed(self) -> bool:
        """True once the response ended, the client left, or a terminal fault struck."""
        return self._inner.closed

    def abort(self) -> None:
        """The connection was lost."""
        self._inner.abort()

    @property
    def cached_tokens(self) -> int | None:
        """The wrapped response's cached prompt tokens (usage)."""
        return self._inner.cached_tokens

    @cached_tokens.setter
    def cached_tokens(self, value: int | None) -> None:
        self._inner.cached_tokens = value

    def emit_tokens(
        self,
        count: int = 1,
        finish_reason: str | None = None,
        *,
        one_write: bool = False,  # noqa: ARG002 (a faulted stream is written token by token)
        one_event: bool = False,
    ) -> None:
        """Pass tokens through up to the fault point, then strike."""
        inner = self._inner
        if inner.closed:
            return
        if self._struck:  # only garbage gets here: after its event the stream goes on
            inner.emit_tokens(count, finish_reason, one_event=one_event)
            return
        before = self._at - self._emitted
        if count <= before and finish_reason is None:
            inner.emit_tokens(count, one_event=one_event)
            self._emitted += count
            return
        passed = min(count, before)
        if passed > 0:
            inner.emit_tokens(passed)
            self._emitted += passed
        self._strike()
        if self._fault == GARBAGE and not inner.closed:
            if count > passed:
                inner.emit_tokens(count - passed, finish_reason)
            elif finish_reason is not None:
                inner.finish(finish_reason)

    def finish(self, finish_reason: str) -> None:
        """The profile ended the response: a fault not yet struck strikes now."""
        if self._inner.closed:
            return
        if not self._struck:
            self._strike()
        if self._fault == GARBAGE and not self._inner.closed:
            self._inner.finish(finish_reason)

    def _strike(self) -> None:
        self._struck = True
        inner = self._inner
        fault = self._fault
        if fault == GARBAGE:
            if isinstance(inner, StreamSink):
                inner.write(http_chunk(GARBAGE_EVENT))
                return
            body = b'{"id":"cmpl-garbage","choices":[{"text":"\xff\xfe'
            inner.end_with(http_response(200, body, b"application/json", keep_alive=False))
        elif fault == RESET:
            inner.abort()
            reset_connection(inner.transport)
        elif fault == STALL:
            inner.abort()  # stop writing; the connection stays open until the client leaves
        elif isinstance(inner, StreamSink):  # ERROR_EVENT
            inner.end_with(ERROR_EVENT_END)
        else:
            inner.end_with(error_response(500, _ERROR_EVENT_MESSAGE, keep_alive=False))
        self._release(inner.request_id)
