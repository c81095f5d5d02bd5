"""The RTT probe times the network by a TCP handshake, never the server's HTTP stack.

A server whose `/health` takes 30 ms to answer (a busy API server, as a real vLLM's read 9-30 ms
on loopback) is still a loopback hop away: the probe reads the handshake, not the 30 ms.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gputui.engine.probe import SIM_DELAY_HEADER, RttProbe

SLOW_S = 0.03


class _SlowHealth(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        time.sleep(SLOW_S)
        self.send_response(200)
        self.send_header("content-length", "0")
        if self.path == "/far":
            self.send_header(SIM_DELAY_HEADER, "40.000")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def _probe(path: str) -> tuple[list[int | None], list[tuple[int, int] | None]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowHealth)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        probe = RttProbe("127.0.0.1", server.server_address[1], path, 1.0, lambda _: None)
        samples = [probe.probe_once() for _ in range(3)]
        http = [probe.http_probe() for _ in range(2)]
        return samples, http
    finally:
        server.shutdown()
        server.server_close()


def test_a_slow_http_stack_is_not_network() -> None:
    samples, http = _probe("/health")
    assert all(h is not None and h[0] >= SLOW_S * 1e9 for h in http), http  # the stack: 30 ms
    assert all(s is not None and s < 5_000_000 for s in samples), samples  # the hop: < 5 ms


def test_a_declared_hold_counts_as_network() -> None:
    # The simulator playing a far client holds answers above the kernel and says by how much.
    samples, _ = _probe("/far")
    assert all(s is not None and 40_000_000 <= s < 45_000_000 for s in samples), samples


def test_no_server_no_sample() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowHealth)
    port = server.server_address[1]
    server.server_close()
    assert RttProbe("127.0.0.1", port, "/health", 1.0, lambda _: None).probe_once() is None
