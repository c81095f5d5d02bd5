"""One /metrics scraper per run: the telemetry panel and the histogram recorder share its GETs.

A tiny counting proxy stands between `gputui run` and the simulator's /metrics (`--metrics-url`
points at it; the preflight still reads the target itself), so the test counts every telemetry
GET and the connections they came on. The recorder scrapes at 2 Hz and once more at a step's
edge; the panel's 1 Hz samples reuse those scrapes, so there is one connection and about two GETs
a second. Two scrapers (before) opened two connections and sent about three a second.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.runner import SimProcess, start_background

STEPS = 2
STEP_SECONDS = 4


class CountingProxy:
    """Forwards GET /metrics to the simulator, noting when and from which client port."""

    def __init__(self, upstream: str) -> None:
        self.gets: list[tuple[float, int]] = []
        lock = threading.Lock()
        gets = self.gets

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                with lock:
                    gets.append((time.monotonic(), self.client_address[1]))
                body = httpx.get(upstream + self.path, timeout=5.0).content
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/metrics"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> CountingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def sim() -> Iterator[SimProcess]:
    with start_background(GpuProfileSpec(gpu="a100-80gb-pcie", model="llama-3.1-8b")) as sim:
        yield sim


def count_metrics_gets(sim: SimProcess, out: Path) -> tuple[int, int, float]:
    """(GETs, client connections, seconds from the first GET to the last) of one short run."""
    with CountingProxy(sim.url) as proxy:
        result = subprocess.run(
            [
                sys.executable, "-m", "gputui", "run", "--url", sim.url, "--model", "llama-3.1-8b",
                "--metrics-url", proxy.url, "--concurrency", ",".join(["2"] * STEPS),
                "--step-seconds", str(STEP_SECONDS), "--warmup-seconds", "1",
                "--input-tokens", "64", "--output-tokens", "16", "--ignore-eos",
                "--out", str(out),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )  # fmt: skip
        gets = list(proxy.gets)
    assert result.returncode == 0, result.stdout + result.stderr
    span_s = gets[-1][0] - gets[0][0] if gets else 0.0
    return len(gets), len({port for _, port in gets}), span_s


@pytest.mark.slow
def test_a_run_scrapes_metrics_through_one_scraper(sim: SimProcess, tmp_path: Path) -> None:
    gets, connections, span_s = count_metrics_gets(sim, tmp_path / "run.json")
    print(f"/metrics GETs: {gets} over {span_s:.1f} s ({gets / span_s:.2f}/s), {connections} conn")
    assert span_s >= STEPS * STEP_SECONDS
    assert connections == 1
    # The recorder's 2 Hz, its first scrape, and at most two edge scrapes per step (the TTFT and
    # E2E windows); the panel's 1 Hz adds none. Two scrapers sent 3/s over two connections.
    assert gets <= 2 * span_s + 1 + 2 * STEPS + 2
    assert gets >= 1.5 * span_s  # the recorder's 2 Hz (its edge precision) is kept
