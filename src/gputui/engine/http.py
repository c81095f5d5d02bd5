"""A lean HTTP/1.1 client connection for the streaming hot loop.

Why not httpx here: httpx (through httpcore and anyio) spends tens of microseconds of Python
per received chunk and stamps a chunk only when the consuming coroutine is next scheduled. At 256
streams x 100 tokens/s that is the whole core, and TTFT comes out tens of milliseconds to seconds
high (benchmarks/fidelity.py measures both clients side by side). Here the stamp is taken in
`data_received`, the first Python code that sees the bytes, and llhttp (C, through httptools) does
the HTTP framing and de-chunking. httpx stays the client for everything off the hot path (preflight,
probes of other endpoints, scraping).

Contract: one `HttpConnection` carries one request at a time (keep-alive between them); an
`Exchange` is one request/response on it. Callers own timeouts: they watch `last_activity_ns` and
call `Exchange.abort`.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from typing import Final, cast

import httptools

_ERROR_BODY_LIMIT: Final = 8192


class Exchange:
    """One request and its response on an `HttpConnection`."""

    __slots__ = (
        "_on_body",
        "body",
        "body_started",
        "connection",
        "content_type",
        "done",
        "error",
        "error_detail",
        "framed",
        "got_bytes",
        "headers_ns",
        "keep_alive",
        "last_activity_ns",
        "now_ns",
        "parser",
        "server_header",
        "status_code",
    )

    def __init__(
        self,
        connection: HttpConnection,
        on_body: Callable[[bytes, int], None] | None,
        done: asyncio.Future[None],
    ) -> None:
        self.connection = connection
        self._on_body = on_body
        """Receives 2xx body bytes with their arrival stamp; None buffers the body instead."""
        self.done = done
        self.parser = httptools.HttpResponseParser(self)
        self.now_ns = 0
        self.last_activity_ns = 0
        self.headers_ns: int | None = None
        self.got_bytes = False
        self.body_started = False
        """A body byte arrived: from here on silence is a stall (before it, queueing: TTFT)."""
        self.status_code: int | None = None
        self.keep_alive = True
        self.content_type = ""
        self.server_header = ""
        self.framed = False
        """The response declared a Content-Length or chunked encoding."""
        self.body = bytearray()
        self.error: str | None = None
        """`stream_broken`, `malformed_http` or a reason given to `abort`; None on success."""
        self.error_detail: str | None = None

    # httptools callbacks -------------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        """Keep the few headers the client needs."""
        lname = name.lower()
        if lname == b"content-type":
            self.content_type = value.decode("latin-1")
        elif lname == b"server":
            self.server_header = value.decode("latin-1")
        elif lname in (b"content-length", b"transfer-encoding"):
            self.framed = True

    def on_headers_complete(self) -> None:
        """Status and keep-alive are known once the headers are in."""
        self.headers_ns = self.now_ns
        self.status_code = self.parser.get_status_code()
        self.keep_alive = self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        """Hand 2xx bodies to the stream reader; buffer error bodies (bounded) for the message."""
        self.body_started = True
        if self._on_body is not None and self.status_code is not None and self.status_code < 300:
            self._on_body(body, self.now_ns)
        elif len(self.body) < _ERROR_BODY_LIMIT:
            self.body += body[: _ERROR_BODY_LIMIT - len(self.body)]

    def on_message_complete(self) -> None:
        """The whole response is in."""
        self.connection.exchange_finished(self)
        if not self.done.done():
            self.done.set_result(None)

    # -----------------------------------------------------------------------------------------
    def abort(self, reason: str, detail: str) -> None:
        """Give up on the exchange (timeout, stall, cancellation) and drop the connection."""
        if self.done.done():
            return
        self.error = reason
        self.error_detail = detail
        self.keep_alive = False
        self.connection.close()
        self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        """The peer closed before the response was complete."""
        if self.done.done():
            return
        self.keep_alive = False
        if self.status_code is not None and not self.framed:
            # No length and not chunked: the body ends with the connection (HTTP/1.0 style).
            self.done.set_result(None)
            return
        self.error = "stream_broken"
        self.error_detail = (
            f"connection closed by the server ({exc})"
            if exc is not None
            else "connection closed by the server"
        )
        self.done.set_result(None)


class HttpConnection(asyncio.Protocol):
    """A client socket that stamps every read before anything else runs."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.exchange: Exchange | None = None
        self._clock = time.perf_counter_ns

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Remember the transport (uvloop's are not `asyncio.Transport` subclasses)."""
        self.transport = cast("asyncio.Transport", transport)

    def data_received(self, data: bytes) -> None:
        """Stamp, then parse: the stamp is the arrival time of every event in `data`."""
        exchange = self.exchange
        if exchange is None:
            self.close()  # bytes nobody asked for: the connection is no longer trustworthy
            return
        exchange.now_ns = exchange.last_activity_ns = self._clock()
        exchange.got_bytes = True
        try:
            exchange.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            exchange.abort("malformed_http", f"invalid HTTP from the server: {exc}")

    def eof_received(self) -> bool:
        """Close our side too."""
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        """Fail the exchange in flight, if any."""
        self.closed = True
        exchange = self.exchange
        if exchange is not None:
            self.exchange = None
            exchange.connection_lost(exc)

    def start(self, request: bytes, on_body: Callable[[bytes, int], None] | None) -> Exchange:
        """Write a request and return its exchange; the caller awaits `exchange.done`."""
        assert self.transport is not None
        assert self.exchange is None
        loop = asyncio.get_running_loop()
        exchange = Exchange(self, on_body, loop.create_future())
        exchange.last_activity_ns = self._clock()
        self.exchange = exchange
        self.transport.write(request)
        return exchange

    def exchange_finished(self, exchange: Exchange) -> None:
        """Called by the exchange when its response completed."""
        if self.exchange is exchange:
            self.exchange = None
        if not exchange.keep_alive:
            self.close()

    def close(self) -> None:
        """Close the socket (idempotent)."""
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class ConnectionPool:
    """Kept-alive connections to one server; a new one is timed as the request's connect time."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None,
        connect_timeout_s: float,
    ) -> None:
        self.host = host
        self.port = port
        self._ssl = ssl_context
        self._connect_timeout_s = connect_timeout_s
        self._idle: list[HttpConnection] = []
        self.opened = 0

    async def acquire(self) -> tuple[HttpConnection, int | None, bool]:
        """A connection, the ns spent opening it (None when reused), and whether it was reused."""
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection, None, True
        return (*(await self.open()), False)

    async def open(self) -> tuple[HttpConnection, int]:
        """Open a fresh connection, timed."""
        loop = asyncio.get_running_loop()
        started_ns = time.perf_counter_ns()
        _, connection = await asyncio.wait_for(
            loop.create_connection(
                HttpConnection,
                self.host,
                self.port,
                ssl=self._ssl,
                server_hostname=self.host if self._ssl else None,
            ),
            self._connect_timeout_s,
        )
        self.opened += 1
        return connection, time.perf_counter_ns() - started_ns

    def release(self, connection: HttpConnection, *, reusable: bool) -> None:
        """Return a connection after its exchange finished."""
        if reusable and not connection.closed and connection.exchange is None:
            self._idle.append(connection)
        else:
            connection.close()

    def close(self) -> None:
        """Close every idle connection."""
        for connection in self._idle:
            connection.close()
        self._idle.clear()
