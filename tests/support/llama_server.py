"""llama.cpp's llama-server on loopback, for the realserver tests.

The binary and the tiny model come from ../shared/tools/build_llama_server.sh (`.ci/run` calls it
with a cache folder). They are found through `GPUTUI_LLAMA_SERVER` and `GPUTUI_TINY_MODEL`, else
in `GPUTUI_LLAMA_CACHE` (default `~/.cache/gputui-llama`) at the paths the script prints. When they
are absent the tests skip and say how to build them, so a run without the build still passes.

The server runs with one thread (`-t 1`: a 2-core machine), continuous batching, `--parallel N`
slots, Prometheus metrics, on 127.0.0.1 and a free port. Startup waits at most `startup_s` for
`/health`; the server is stopped by its PID (SIGTERM, then SIGKILL), never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support import alone
from tests.support.launch import on_a_free_port

MODEL_ALIAS = "tiny-llama"
CTX_PER_SLOT = 2048
"""The tiny model's training context; each slot gets this much."""
BUILD_HINT = (
    "build it with: bash ../shared/tools/build_llama_server.sh ~/.cache/gputui-llama "
    "(about 7 min once), or set GPUTUI_LLAMA_SERVER and GPUTUI_TINY_MODEL"
)


def default_cache() -> Path:
    """Where .ci/run builds llama-server (the same default as its `GPUTUI_LLAMA_CACHE`)."""
    return Path(os.environ.get("GPUTUI_LLAMA_CACHE") or Path.home() / ".cache" / "gputui-llama")


def find_llama_server() -> tuple[Path, Path] | str:
    """(binary, model), or the reason they cannot be used."""
    cache = default_cache()
    binary = Path(os.environ.get("GPUTUI_LLAMA_SERVER") or cache / "bin" / "llama-server")
    model = Path(os.environ.get("GPUTUI_TINY_MODEL") or cache / "models" / "tiny-llama.gguf")
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        return f"llama-server not found at {binary}; {BUILD_HINT}"
    if not model.is_file():
        return f"tiny model not found at {model}; {BUILD_HINT}"
    return binary, model


@dataclass
class LlamaServer:
    """A running llama-server."""

    process: subprocess.Popen[bytes]
    port: int
    parallel: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, timeout=10.0)

    def metrics_text(self) -> str:
        response = self.get("/metrics")
        response.raise_for_status()
        return response.text

    def counters(self) -> dict[str, float]:
        """Every unlabelled sample of /metrics by name (llama.cpp labels none)."""
        values: dict[str, float] = {}
        for line in self.metrics_text().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                values[name] = float(value)
        return values

    def slots(self) -> list[dict[str, Any]]:
        response = self.get("/slots")
        response.raise_for_status()
        data: list[dict[str, Any]] = response.json()
        return data

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _wait_healthy(server: LlamaServer, deadline: float) -> None:
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"llama-server exited with {server.process.returncode}:\n{server.log_tail()}"
            )
        with contextlib.suppress(httpx.HTTPError):
            if server.get("/health").status_code == 200:
                return
        time.sleep(0.1)
    raise TimeoutError(f"llama-server not healthy in time:\n{server.log_tail()}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=3)  # it finishes the generations in flight first: no need to wait
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@contextlib.contextmanager
def llama_server(
    binary: Path,
    model: Path,
    *,
    parallel: int = 8,
    startup_s: float = 60.0,
    extra_args: tuple[str, ...] = (),
) -> Iterator[LlamaServer]:
    """Start llama-server, wait for /health, yield it, and stop it by PID."""
    alone.HOLDER.share()  # the start runs beside the other workers, not while they wait
    log_dir = Path(tempfile.mkdtemp(prefix="gputui-llama-"))

    def launch(port: int) -> LlamaServer:
        log_path = log_dir / f"llama-server-{port}.log"
        args = [
            str(binary),
            *("-m", str(model), "-a", MODEL_ALIAS),
            *("--host", "127.0.0.1", "--port", str(port)),
            *("--metrics", "--slots", "--cont-batching", "--no-webui"),
            *("--parallel", str(parallel), "-c", str(CTX_PER_SLOT * parallel), "-t", "1"),
            *extra_args,
        ]
        with log_path.open("wb") as log:
            process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        return LlamaServer(process, port, parallel, log_path)

    with on_a_free_port(
        launch,
        lambda server: _wait_healthy(server, time.monotonic() + startup_s),
        lambda server: _stop(server.process),
        lost_port="bind",
        name="llama-server",
    ) as server:
        yield server
