"""A light round-trip probe, so a user can tell network delay from server delay.

Every few seconds, on its own kept-alive connection (never one that carries load), the probe sends
`GET /health` (or `/v1/models` where the server has no health route) and times it from the write to
the last byte. Over a real network that is the round trip plus a trivial handler; on loopback it is
the floor of what any request can cost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from gputui import __version__
from gputui.engine.http import ConnectionPool


class RttProbe:
    """Sends one probe every `interval_s` and reports (rtt_ns or None for a failure)."""

    def __init__(
        self,
        pool: ConnectionPool,
        path: str,
        interval_s: float,
        on_sample: Callable[[int | None], None],
        *,
        timeout_s: float = 10.0,
    ) -> None:
        self._pool = pool
        self._request = (
            f"GET {path} HTTP/1.1\r\nHost: {pool.host}:{pool.port}\r\n"
            f"User-Agent: gputui/{__version__}\r\nAccept: */*\r\n\r\n"
        ).encode("latin-1")
        self._interval_s = interval_s
        self._on_sample = on_sample
        self._timeout_s = timeout_s

    async def run(self) -> None:
        """Probe until cancelled."""
        while True:
            self._on_sample(await self.probe_once())
            await asyncio.sleep(self._interval_s)

    async def probe_once(self) -> int | None:
        """One probe: the round trip in ns, or None when it failed."""
        try:
            connection, _, _ = await self._pool.acquire()
        except (OSError, TimeoutError):
            return None
        sent_ns = time.perf_counter_ns()
        exchange = connection.start(self._request, None)
        try:
            await asyncio.wait_for(asyncio.shield(exchange.done), self._timeout_s)
        except TimeoutError:
            exchange.abort("timeout", "probe timed out")
        ok = exchange.error is None and exchange.status_code == 200
        self._pool.release(connection, reusable=ok and exchange.keep_alive)
        return exchange.now_ns - sent_ns if ok else None
