"""A light round-trip probe, so a user can tell network delay from server delay.

Every few seconds the probe times one TCP handshake: a new connection's SYN and SYN-ACK, which the
server's kernel answers with no server application code on the way, so the time is the network's
round trip (on loopback tens of microseconds). It is then closed at once, nothing sent.

It also sends `GET /health` (or `/v1/models` where the server has no health route) on its own
kept-alive connection, never one that carries load: over loopback that round trip is the server's
HTTP stack, not the network (a real vLLM's API server took 9-10 ms, once 30 ms while busy), so it
is not the network figure. It is there for the simulator: `gputui sim --network-delay-ms` plays a
far-away client by holding its responses back, above the kernel, where a handshake cannot see it,
and says on each `/health` answer how long it held that answer (`x-sim-network-delay-ms`). A sample
is the handshake plus that declared hold (0 from any other server).

It runs on its own thread with blocking sockets, off the engine's event loop: a loop late by tens
of ms (a busy client, a GC pause) would otherwise stamp the answer late, and that lag would count
as network. Each sample is handed to the loop (`call_soon_threadsafe`) once timed.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from gputui import __version__

_HEAD_END = b"\r\n\r\n"
SIM_DELAY_HEADER = "x-sim-network-delay-ms"
"""The simulator's hold on a response that plays network distance (sim/netdelay.DELAY_HEADER)."""


class RttProbe:
    """Sends one probe every `interval_s` from its thread; reports rtt_ns, or None on a failure."""

    def __init__(
        self,
        host: str,
        port: int,
        path: str,
        interval_s: float,
        on_sample: Callable[[int | None], None],
        *,
        timeout_s: float = 10.0,
    ) -> None:
        self._address = (host, port)
        self._request = (
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"User-Agent: gputui/{__version__}\r\nAccept: */*\r\n\r\n"
        ).encode("latin-1")
        self._interval_s = interval_s
        self._on_sample = on_sample
        self._timeout_s = timeout_s
        self._stop = threading.Event()
        self._socket: socket.socket | None = None
        self._resolved: tuple[socket.AddressFamily, socket.SocketKind, int, Any] | None = None
        self._thread: threading.Thread | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Probe from a daemon thread, each sample handed to `on_sample` on `loop`."""

        def run() -> None:
            while not self._stop.is_set():
                sample = self.probe_once()
                with contextlib.suppress(RuntimeError):  # the loop closed: the run is over
                    loop.call_soon_threadsafe(self._on_sample, sample)
                if self._stop.wait(self._interval_s):
                    break
            self._close()

        self._thread = threading.Thread(target=run, name="gputui-rtt-probe", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop probing (the thread ends after its current probe)."""
        self._stop.set()

    def probe_once(self) -> int | None:
        """One probe, blocking: the network round trip in ns; None when the handshake failed."""
        try:
            handshake_ns = self.handshake()
        except OSError:
            return None
        declared = self.http_probe()
        return handshake_ns + (declared[1] if declared is not None else 0)

    def handshake(self) -> int:
        """A new TCP connection's handshake in ns (the kernel answers it); closed unused."""
        if self._resolved is None:  # resolved once: a name lookup is not the network's time
            found = socket.getaddrinfo(*self._address, type=socket.SOCK_STREAM)[0]
            self._resolved = (found[0], found[1], found[2], found[4])
        family, kind, proto, address = self._resolved
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(self._timeout_s)
            started_ns = time.perf_counter_ns()
            sock.connect(address)
            return time.perf_counter_ns() - started_ns
        finally:
            sock.close()

    def http_probe(self) -> tuple[int, int] | None:
        """`GET path` on the kept-alive connection: (round trip, declared hold) in ns, or None.

        None when it failed or was not a 200; the hold is 0 unless the server declares one.
        """
        try:
            sock = self._connection()
            sent_ns = time.perf_counter_ns()
            sock.sendall(self._request)
            answer = _read_response(sock)
            done_ns = time.perf_counter_ns()
        except (OSError, ValueError):
            self._close()
            return None
        if answer is None:
            self._close()
            return None
        keep, declared_ns = answer
        if not keep:
            self._close()
        return done_ns - sent_ns, declared_ns

    def _connection(self) -> socket.socket:
        if self._socket is None:
            sock = socket.create_connection(self._address, timeout=self._timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._socket = sock
        return self._socket

    def _close(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.close()
            self._socket = None


def _read_response(sock: socket.socket) -> tuple[bool, int] | None:
    """Read one response to its end: (keep the connection, declared hold in ns); None: not 200."""
    data = b""
    while _HEAD_END not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ValueError("closed before the headers ended")
        data += chunk
    head, _, body = data.partition(_HEAD_END)
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ")
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while not body.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ValueError("closed inside a chunked body")
            body += chunk
    else:
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                raise ValueError("closed inside the body")
            body += chunk
    if len(status) < 2 or status[1] != "200":
        return None
    declared_ms = float(headers.get(SIM_DELAY_HEADER, "0") or 0.0)
    keep = headers.get("connection", "").lower() != "close"
    return keep, round(max(declared_ms, 0.0) * 1e6)
