"""The sim's HTTP server, started with `start_background` on an ephemeral port, seen by httpx."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import SimProcess, SimStartError, start_background
from gputui.sim.tokenizer import count_tokens, make_prompt

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    with start_background(FixedProfileSpec(ttft_ms=50, itl_ms=10)) as process:
        yield process


@pytest.fixture(scope="module")
def eos_sim() -> Iterator[SimProcess]:
    spec = FixedProfileSpec(ttft_ms=1, itl_ms=1, eos_after=5, served_model_name="served-x")
    with start_background(spec) as process:
        yield process


@pytest.fixture
def client(sim: SimProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.url, timeout=10) as c:
        yield c


def sse_events(text: str) -> list[Any]:
    out: list[Any] = []
    for block in text.split("\n\n"):
        if not block:
            continue
        assert block.startswith("data: "), block
        payload = block[len("data: ") :]
        out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def test_completions_stream(client: httpx.Client) -> None:
    body = {
        "model": "anything",
        "prompt": "one two three",
        "max_tokens": 7,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    r = client.post("/v1/completions", json=body)
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/event-stream"
    assert r.headers["transfer-encoding"] == "chunked"
    *tokens, usage, done = sse_events(r.text)
    assert done == "[DONE]"
    assert len(tokens) == 7
    assert all(t["choices"][0]["text"] for t in tokens)
    assert [t["choices"][0]["finish_reason"] for t in tokens] == [None] * 6 + ["length"]
    assert {t["model"] for t in tokens} == {"sim-model"}
    assert len({t["id"] for t in tokens}) == 1
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": 3, "completion_tokens": 7, "total_tokens": 10}


def test_chat_stream_role_chunk_first(client: httpx.Client) -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hello there"}]},
        ],
        "max_completion_tokens": 5,
        "stream": True,
    }
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200
    role, *tokens, done = sse_events(r.text)
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert done == "[DONE]"
    assert len(tokens) == 5
    assert all(t["object"] == "chat.completion.chunk" for t in tokens)
    assert tokens[-1]["choices"][0]["finish_reason"] == "length"
    contents = "".join(t["choices"][0]["delta"]["content"] for t in tokens)
    assert count_tokens(contents) == 5


def test_stream_without_usage_option_has_no_usage_chunk(client: httpx.Client) -> None:
    r = client.post("/v1/completions", json={"prompt": "x", "max_tokens": 3, "stream": True})
    evs = sse_events(r.text)
    assert len(evs) == 4
    assert evs[-1] == "[DONE]"


def test_non_stream_responses(client: httpx.Client) -> None:
    started = time.perf_counter()
    r = client.post("/v1/completions", json={"prompt": ["ab cd", "ef"], "max_tokens": 4})
    assert time.perf_counter() - started >= 0.08  # 50 ms + 3 * 10 ms, simulated in full
    reply = r.json()
    assert r.status_code == 200
    assert reply["object"] == "text_completion"
    assert count_tokens(reply["choices"][0]["text"]) == 4
    assert reply["choices"][0]["finish_reason"] == "length"
    assert reply["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    r = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
    reply = r.json()
    assert reply["object"] == "chat.completion"
    assert count_tokens(reply["choices"][0]["message"]["content"]) == 16  # the default max_tokens


def test_models_health_tokenize_metrics(client: httpx.Client) -> None:
    models = client.get("/v1/models").json()
    assert models["object"] == "list"
    assert models["data"][0]["id"] == "sim-model"
    assert models["data"][0]["max_model_len"] > 0
    health = client.get("/health")
    assert health.status_code == 200
    assert health.content == b""
    prompt = make_prompt(123, seed=4) + " averyveryverylongword"
    tok = client.post("/tokenize", json={"model": "sim-model", "prompt": prompt}).json()
    assert tok["count"] == count_tokens(prompt) == 126
    assert len(tok["tokens"]) == tok["count"]
    assert tok["max_model_len"] == models["data"][0]["max_model_len"]
    chat_tok = client.post("/tokenize", json={"messages": [{"role": "user", "content": "a b"}]})
    assert chat_tok.json()["count"] == 2
    metrics = client.get("/metrics")
    assert metrics.headers["content-type"] == "text/plain; version=0.0.4"
    assert "vllm:generation_tokens_total{" in metrics.text


@pytest.mark.parametrize(
    ("method", "path", "content", "status"),
    [
        ("POST", "/v1/completions", b"{not json", 400),
        ("POST", "/v1/completions", b"[1, 2]", 400),
        ("POST", "/v1/completions", b'{"model": "m"}', 400),
        ("POST", "/v1/chat/completions", b'{"messages": []}', 400),
        ("POST", "/v1/completions", b'{"prompt": "x", "max_tokens": 0}', 400),
        ("POST", "/v1/completions", b'{"prompt": "x", "max_tokens": 1000000}', 400),
        ("POST", "/tokenize", b"{}", 400),
        ("GET", "/nope", b"", 404),
        ("GET", "/v1/completions", b"", 405),
        ("POST", "/v1/models", b"", 405),
    ],
)
def test_errors_are_openai_shaped(
    client: httpx.Client, method: str, path: str, content: bytes, status: int
) -> None:
    r = client.request(method, path, content=content)
    assert r.status_code == status
    error = r.json()["error"]
    assert error["code"] == status
    assert error["message"]
    if status == 400:
        assert error["type"] == "BadRequestError"


def test_connection_is_kept_alive_across_requests(sim: SimProcess) -> None:
    body = b'{"prompt":"hi","max_tokens":2,"stream":true}'
    request = (
        b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )
    get = b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", sim.port), timeout=5) as sock:
        sock.sendall(request + get + request)  # pipelined: answered in order
        data = b""
        while data.count(b"data: [DONE]\n\n\r\n0\r\n\r\n") < 2:
            chunk = sock.recv(65536)
            assert chunk
            data += chunk
    assert data.count(b"HTTP/1.1 200 OK") == 3
    first_done = data.index(b"data: [DONE]")
    assert data.index(b"content-length: 0") > first_done


def test_malformed_http_gets_400_and_close(sim: SimProcess) -> None:
    with socket.create_connection(("127.0.0.1", sim.port), timeout=5) as sock:
        sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        data = sock.recv(65536)
        assert data.startswith(b"HTTP/1.1 400")
        assert sock.recv(65536) == b""


def test_eos_after_stops_unless_ignore_eos(eos_sim: SimProcess) -> None:
    with httpx.Client(base_url=eos_sim.url, timeout=10) as c:
        base = {"prompt": "p", "max_tokens": 16, "stream": True}
        *tokens, _ = sse_events(c.post("/v1/completions", json=base).text)
        assert len(tokens) == 5
        assert tokens[-1]["choices"][0]["finish_reason"] == "stop"
        assert tokens[-1]["model"] == "served-x"
        ignore = c.post("/v1/completions", json={**base, "ignore_eos": True}).text
        *tokens, _ = sse_events(ignore)
        assert len(tokens) == 16
        assert tokens[-1]["choices"][0]["finish_reason"] == "length"
        at_least = c.post("/v1/completions", json={**base, "min_tokens": 8}).text
        assert len(sse_events(at_least)) - 1 == 8
        short = c.post("/v1/completions", json={**base, "max_tokens": 3}).text
        *tokens, _ = sse_events(short)
        assert [t["choices"][0]["finish_reason"] for t in tokens] == [None, None, "length"]
        whole = c.post("/v1/completions", json={"prompt": "p", "max_tokens": 16}).json()
        assert whole["choices"][0]["finish_reason"] == "stop"
        assert whole["usage"]["completion_tokens"] == 5


async def test_client_side_timing_matches_the_profile(sim: SimProcess) -> None:
    body = {"prompt": make_prompt(20, seed=1), "max_tokens": 32, "stream": True}
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as c:
        await c.get("/health")  # connect first: TTFT below excludes the TCP handshake
        for _ in range(3):
            sent = time.perf_counter_ns()
            async with c.stream("POST", "/v1/completions", json=body) as r:
                stamps = [
                    time.perf_counter_ns()
                    async for line in r.aiter_lines()
                    if line.startswith('data: {"id"') and '"text":""' not in line
                ]
            assert len(stamps) == 32
            ttft_ms = (stamps[0] - sent) / 1e6
            mean_itl_ms = (stamps[-1] - stamps[0]) / 31 / 1e6
            assert 50 - 15 <= ttft_ms <= 50 + 15
            assert 10 - 1 <= mean_itl_ms <= 10 + 1


def test_sim_stats_and_reset(sim: SimProcess, client: httpx.Client) -> None:
    assert client.post("/sim/reset").json() == {"reset": True}
    body = {"prompt": "hello", "max_tokens": 20, "stream": True}
    for _ in range(3):
        client.post("/v1/completions", json=body)
    stats = client.get("/sim/stats").json()
    assert stats["requests_started"] == stats["requests_completed"] == 3
    assert stats["requests_cancelled"] == 0
    assert stats["tokens"] == 60
    assert stats["ttft_ms"]["n"] == 3
    assert stats["itl_ms"]["n"] == 57
    assert 50 <= stats["ttft_ms"]["mean"] <= 52
    assert 9.8 <= stats["itl_ms"]["mean"] <= 10.2
    assert stats["ttft_ms"]["p50"] <= stats["ttft_ms"]["p90"] <= stats["ttft_ms"]["p99"]
    client.post("/sim/reset")
    stats = client.get("/sim/stats").json()
    assert stats["requests_started"] == stats["requests_completed"] == stats["tokens"] == 0
    assert stats["ttft_ms"] == {"mean": None, "p50": None, "p90": None, "p99": None, "n": 0}
    assert stats["itl_ms"]["n"] == 0


def test_disconnect_mid_stream_counts_as_cancelled(sim: SimProcess, client: httpx.Client) -> None:
    client.post("/sim/reset")
    body = {"prompt": "x", "max_tokens": 500, "stream": True}
    with (
        httpx.Client(base_url=sim.url, timeout=10) as other,
        other.stream("POST", "/v1/completions", json=body) as r,
    ):
        for line in r.iter_lines():
            if line.startswith("data: {"):
                break
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        stats = client.get("/sim/stats").json()
        if stats["requests_cancelled"] == 1:
            break
        time.sleep(0.02)
    assert stats["requests_cancelled"] == 1
    assert stats["requests_completed"] == 0
    assert client.get("/health").status_code == 200
    metrics = client.get("/metrics").text
    assert 'vllm:request_success_total{finished_reason="abort",model_name="sim-model"}' in metrics


def test_start_background_reports_a_port_in_use() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(SimStartError, match=r"address already in use|Errno"):
            start_background(FixedProfileSpec(), port=taken.getsockname()[1])
