"""One client connection of the simulator: llhttp parsing, keep-alive, requests served in order.

Contract: an `HttpConnection` is the `asyncio.Protocol` of one connection (`SimServer.
protocol_factory`). It stamps each request's arrival with `perf_counter_ns()` when its first byte
is parsed (`on_message_begin`), queues pipelined requests and hands them to `SimServer.handle` one
at a time; the response in progress is `active` (a sink) until `response_done`. A client that goes
away mid-response is reported to `SimServer.cancelled`; a body over 64 MiB or a malformed request
is answered 400 and the connection closed; a handler that raises is answered 500. With a
`NetworkDelay` on the server, the transport is wrapped so every response byte leaves late.
Why a module of its own: the wire handling is independent of what the endpoints answer (server.py).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol, cast

import httptools

from gputui.sim.http_responses import error_response
from gputui.sim.netdelay import DelayedTransport

if TYPE_CHECKING:
    import random

    from gputui.sim.faults import FaultySink
    from gputui.sim.netdelay import NetworkDelay
    from gputui.sim.sinks import BufferedSink, StreamSink

_MAX_BODY_BYTES: Final = 64 * 1024 * 1024


@dataclass(slots=True)
class ParsedRequest:
    """One complete request as parsed (its body whole)."""

    method: str
    path: str
    body: bytes
    arrival_ns: int
    keep_alive: bool


class ConnectionServer(Protocol):
    """What a connection needs of its server (`SimServer`; a protocol, so no import cycle)."""

    @property
    def network(self) -> NetworkDelay | None: ...
    @property
    def network_rng(self) -> random.Random: ...
    @property
    def connections(self) -> set[HttpConnection]: ...
    def handle(self, conn: HttpConnection, request: ParsedRequest) -> None: ...
    def cancelled(self, sink: StreamSink | BufferedSink | FaultySink) -> None: ...


class HttpConnection(asyncio.Protocol):
    """One client connection: parse requests, answer them one at a time, in order."""

    def __init__(self, server: ConnectionServer) -> None:
        self._server = server
        self._parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport
        self.active: StreamSink | BufferedSink | FaultySink | None = None
        """The response in progress; None when idle."""
        self._pending: deque[ParsedRequest] = deque()
        self._keep_alive = True
        """Whether the connection stays open after the response in progress."""
        self._dispatching = False
        self._closing = False
        self._arrival_ns = 0
        self._url: list[bytes] = []
        self._body: list[bytes] = []
        self._body_len = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        network = self._server.network
        if network is not None:
            self.transport = DelayedTransport(
                self.transport, network, asyncio.get_running_loop(), self._server.network_rng
            )
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: ARG002 - asyncio's signature
        self._closing = True
        self._server.connections.discard(self)
        self._pending.clear()
        sink, self.active = self.active, None
        if sink is not None and not sink.closed:
            self._server.cancelled(sink)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail("Protocol upgrades are not supported")
        except httptools.HttpParserError as exc:
            self._fail(f"Malformed HTTP request: {exc}")

    def close(self) -> None:
        """Close the connection; an unfinished response counts as cancelled."""
        self._closing = True
        self.transport.close()

    # httptools parser callbacks
    def on_message_begin(self) -> None:
        self._arrival_ns = time.perf_counter_ns()
        self._url.clear()
        self._body.clear()
        self._body_len = 0

    def on_url(self, url: bytes) -> None:
        self._url.append(url)

    def on_body(self, body: bytes) -> None:
        self._body_len += len(body)
        if self._body_len > _MAX_BODY_BYTES:
            raise httptools.HttpParserError("request body too large")
        self._body.append(body)

    def on_message_complete(self) -> None:
        path = b"".join(self._url).split(b"?", 1)[0].decode("latin-1")
        request = ParsedRequest(
            method=self._parser.get_method().decode("latin-1"),
            path=path,
            body=b"".join(self._body),
            arrival_ns=self._arrival_ns,
            keep_alive=self._parser.should_keep_alive(),
        )
        self._pending.append(request)
        if self.active is None and not self._dispatching:
            self._dispatch()

    # responses
    def respond(self, data: bytes) -> None:
        """Write a complete response at once."""
        self.transport.write(data)
        if not self._keep_alive:
            self.close()

    def response_done(self) -> None:
        """A sink completed its response: serve the next pipelined request or close."""
        self.active = None
        if not self._keep_alive:
            self.close()
        elif not self._dispatching:
            self._dispatch()

    def _dispatch(self) -> None:
        self._dispatching = True
        try:
            while self._pending and self.active is None and not self._closing:
                request = self._pending.popleft()
                self._keep_alive = request.keep_alive
                self._serve(request)
        finally:
            self._dispatching = False

    def _serve(self, request: ParsedRequest) -> None:
        try:
            self._server.handle(self, request)
        except Exception as exc:  # noqa: BLE001 - a profile bug must answer 500, not kill the loop
            sink, self.active = self.active, None
            if sink is None:
                self._keep_alive = False
                self.respond(error_response(500, f"{type(exc).__name__}: {exc}", keep_alive=False))
            else:
                sink.abort()
                self.close()
            asyncio.get_running_loop().call_exception_handler(
                {"message": "gputui sim: request failed", "exception": exc}
            )

    def _fail(self, message: str) -> None:
        if self.active is None:
            self.transport.write(error_response(400, message, keep_alive=False))
        self.close()
