"""A far-away client, played on loopback: every response byte leaves the server late.

Contract: `NetworkDelay(delay_ms, jitter_ms, seed)` is the picklable setting (`gputui sim
--network-delay-ms/--network-jitter-ms`); `DelayedTransport(transport, delay, loop)` wraps one
connection's transport so that each `write` reaches the socket `delay_ms` (plus a uniform draw in
[-jitter_ms, +jitter_ms], never below zero) after it was made. Writes of one connection keep their
order (a write never overtakes the one before it), and `close` waits for the writes before it.
Every response is delayed alike (completions, `/health`, `/metrics`), so the client's RTT probe
reads the same delay that its TTFT carries: a round trip of `delay_ms` to a distant server, where
the request's way out and the answer's way back are folded into the answer's. The server's own
stamps (and `/sim/stats`) are unchanged; only the client sees the distance.

The hold is above the kernel, so a TCP handshake (answered by the kernel) does not see it, as it
would see a real distance. The client's RTT probe times the network by a handshake; so that it
reads the played distance, the server draws the hold of each `/health` answer first
(`draw_ms`) and says it in the answer's `x-sim-network-delay-ms` header (engine/probe.py).
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

DELAY_HEADER: Final = "x-sim-network-delay-ms"
"""On a `/health` answer: how long the server holds it back (ms), so the probe can add it."""


@dataclass(frozen=True, slots=True)
class NetworkDelay:
    """Added round-trip time and its jitter, in milliseconds."""

    delay_ms: float
    jitter_ms: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.delay_ms < 0 or self.jitter_ms < 0:
            raise ValueError("network delay and jitter must be >= 0 ms")

    @property
    def active(self) -> bool:
        """False when nothing is delayed."""
        return self.delay_ms > 0 or self.jitter_ms > 0


class DelayedTransport(asyncio.Transport):
    """A transport whose writes reach the socket late, in order (see the module docstring)."""

    def __init__(
        self,
        inner: asyncio.Transport,
        delay: NetworkDelay,
        loop: asyncio.AbstractEventLoop,
        rng: random.Random,
    ) -> None:
        super().__init__()
        self._inner = inner
        self._delay = delay
        self._loop = loop
        self._rng = rng
        self._last_at = 0.0
        self._closing = False
        self._queue: deque[tuple[float, bytes | None]] = deque()
        """(due, data) in write order; None = close. One timer drains it (ties keep order)."""
        self._timer: asyncio.TimerHandle | None = None
        self._drawn_ms: float | None = None
        """The next write's hold, when `draw_ms` fixed it beforehand."""

    def draw_ms(self) -> float:
        """Fix the next write's hold now and return it (ms), so the server can say it."""
        jitter = self._delay.jitter_ms
        ms = self._delay.delay_ms + (self._rng.uniform(-jitter, jitter) if jitter else 0.0)
        self._drawn_ms = max(ms, 0.0)
        return self._drawn_ms

    def _due(self) -> float:
        ms = self._drawn_ms if self._drawn_ms is not None else self.draw_ms()
        self._drawn_ms = None
        due = self._loop.time() + ms / 1e3
        self._last_at = max(due, self._last_at)
        return self._last_at

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Write `data` after the delay."""
        self._push(self._due(), bytes(data))

    def _push(self, due: float, data: bytes | None) -> None:
        self._queue.append((due, data))
        if self._timer is None:
            self._timer = self._loop.call_at(self._queue[0][0], self._drain)

    def _drain(self) -> None:
        self._timer = None
        now = self._loop.time()
        queue = self._queue
        while queue and queue[0][0] <= now:
            _, data = queue.popleft()
            if data is None:
                self._inner.close()
            elif not self._inner.is_closing():
                self._inner.write(data)
        if queue:
            self._timer = self._loop.call_at(queue[0][0], self._drain)

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        """Write each item after the delay."""
        self.write(b"".join(list_of_data))

    def close(self) -> None:
        """Close once every earlier write has gone out."""
        self._closing = True
        self._push(max(self._last_at, self._loop.time()), None)

    def is_closing(self) -> bool:
        """True once `close` was called or the socket went away."""
        return self._closing or self._inner.is_closing()

    def abort(self) -> None:
        """Drop the connection now (a crash does not wait for the network)."""
        self._closing = True
        self._queue.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._inner.abort()

    def get_extra_info(self, name: str, default: object = None) -> object:
        """The wrapped transport's socket, peer name, ..."""
        return self._inner.get_extra_info(name, default)

    def pause_reading(self) -> None:
        """Forwarded."""
        self._inner.pause_reading()

    def resume_reading(self) -> None:
        """Forwarded."""
        self._inner.resume_reading()

    def is_reading(self) -> bool:
        """Forwarded."""
        return self._inner.is_reading()

    def get_write_buffer_size(self) -> int:
        """Forwarded (bytes still waiting for the delay are not counted)."""
        return self._inner.get_write_buffer_size()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        """Forwarded."""
        self._inner.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        """Forwarded."""
        return self._inner.get_protocol()

    def can_write_eof(self) -> bool:
        """No half-close through the delay."""
        return False
