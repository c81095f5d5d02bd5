"""Preflight names the backend: from /v1/models, else /metrics names, else the Server header."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson
import pytest

from gputui.engine.preflight import preflight
from gputui.engine.target import parse_target
from gputui.sim.runner import SimProcess

SGLANG_METRICS = b"# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 0.0\n"


class _Server(ThreadingHTTPServer):
    routes: dict[str, tuple[int, bytes]]
    server_header: str


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        status, body = self.server.routes.get(self.path, (404, b'{"detail":"Not Found"}'))
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def version_string(self) -> str:
        return self.server.server_header

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def fake() -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.server_header = "uvicorn"
    models = {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "m"}]}
    server.routes = {"/v1/models": (200, orjson.dumps(models)), "/health": (200, b"")}
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _url(server: _Server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_metrics_names_decide_when_the_model_list_does_not(fake: _Server) -> None:
    fake.routes["/metrics"] = (200, SGLANG_METRICS)
    checked = preflight(parse_target(_url(fake)), "m", api_key=None)
    assert checked.backend.name == "sglang"
    assert checked.backend.evidence == "/metrics names sglang:*"


def test_no_metrics_and_no_sign_is_openai_compatible(fake: _Server) -> None:
    checked = preflight(parse_target(_url(fake)), "m", api_key=None)
    assert checked.backend.name == "openai-compatible"


def test_server_header(fake: _Server) -> None:
    fake.server_header = "llama.cpp"
    checked = preflight(parse_target(_url(fake)), "m", api_key=None)
    assert checked.backend.name == "llamacpp"
    assert checked.backend.evidence == "Server: llama.cpp"


def test_the_simulator_names_itself(fixed_sim: SimProcess) -> None:
    checked = preflight(parse_target(fixed_sim.url), "sim", api_key=None)
    assert checked.backend.name == "gputui-sim"
