"""A light round-trip probe, so a user can tell network delay from server delay.

Every few seconds, on its own kept-alive connection (never one that carries load), the probe sends
`GET /health` (or `/v1/models` where the server has no health route) and times it from the write to
the last byte. Over a real network that is the round trip plus a trivial handler; on loopback it is
the floor of what any request can cost.

It runs on its own thread with a blocking socket, off the engine's event loop: a loop late by
tens of ms (a busy client, a GC pause) would otherwise stamp the answer late, and that lag would
count as network. Each sample is handed to the loop (`call_soon_threadsafe`) once timed.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable

from gputui import __version__

_HEAD_END = b"\r\n\r\n"


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
        """One probe, blocking: the round trip in ns, or None when it failed."""
        try:
            sock = self._connection()
            sent_ns = time.perf_counter_ns()
            sock.sendall(self._request)
            keep = _read_response(sock)
            done_ns = time.perf_counter_ns()
        except (OSError, ValueError):
            self._close()
            return None
        if keep is None:
            self._close()
            return None
        if not keep:
            self._close()
        return done_ns - sent_ns

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


def _read_response(sock: socket.socket) -> bool | None:
    """Read one response to its last byte: whether the connection stays open; None if not 200."""
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
    return headers.get("connection", "").lower() != "close"
