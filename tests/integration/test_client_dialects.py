"""The real client against byte-exact server behaviour on loopback: every outcome has one reason."""

from __future__ import annotations

import pytest

from gputui.engine.client import ClientConfig, StreamingClient, Timeouts
from gputui.engine.records import RequestRecord
from gputui.engine.target import parse_target
from tests.support.fixtures import split_response, sse_events
from tests.support.replay import CLOSE, Part, chunked, fixed, replay

SSE = [("Content-Type", "text/event-stream")]
TOKEN = b'data: {"choices":[{"text":"x","finish_reason":null}]}\n\n'
FINISH = b'data: {"choices":[{"text":"y","finish_reason":"length"}]}\n\n'
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
DONE = b"data: [DONE]\n\n"


async def one(
    parts: list[Part],
    *,
    endpoint: str = "completions",
    timeouts: Timeouts | None = None,
    n: int = 1,
) -> list[RequestRecord]:
    async with replay([parts]) as server:
        config = ClientConfig(
            target=parse_target(server.url),
            model="m",
            endpoint=endpoint,  # type: ignore[arg-type]
            timeouts=timeouts or Timeouts(connect_s=2, request_s=5, stall_s=2),
        )
        client = StreamingClient(config)
        try:
            return [
                await client.send("hello world", 2, request_id=i, step_index=0) for i in range(n)
            ]
        finally:
            await client.aclose()


@pytest.mark.parametrize(
    ("name", "tokens", "from_usage"),
    [
        ("llama_server.chat_stream.txt", 8, True),
        ("llama_server.chat_stream_no_usage_option.txt", None, None),
        ("transformers_serve.chat_stream.txt", 8, True),
        ("llama_cpp_python.chat_stream.txt", None, False),
    ],
)
async def test_real_chat_streams_ok(name: str, tokens: int | None, from_usage: bool | None) -> None:
    status, headers, body = split_response(name)
    (record,) = await one(chunked(status, headers, sse_events(body), gap_s=0.002), endpoint="chat")
    assert record.ok, record.error_detail
    assert record.first_token_ns is not None and record.first_token_ns > record.sent_ns
    assert record.end_ns >= int(record.token_ns[-1])
    if tokens is not None:
        assert record.output_tokens == tokens
    if from_usage is not None:
        assert record.tokens_from_usage is from_usage
    if not record.tokens_from_usage:
        assert record.output_tokens == len(record.token_ns)


async def test_token_gaps_are_measured() -> None:
    parts = chunked(200, SSE, [TOKEN] * 5 + [FINISH, USAGE, DONE], gap_s=0.02)
    (record,) = await one(parts)
    assert record.ok
    gaps_ms = [
        (b - a) / 1e6 for a, b in zip(record.token_ns[:-1], record.token_ns[1:], strict=True)
    ]
    assert len(gaps_ms) == 5
    assert all(15 < g < 60 for g in gaps_ms), gaps_ms
    assert record.output_tokens == 2 and record.tokens_from_usage  # usage wins over counting
    assert record.input_tokens == 3


async def test_keepalive_reuses_the_connection_and_times_only_the_first_connect() -> None:
    records = await one(chunked(200, SSE, [TOKEN, FINISH, DONE]), n=3)
    assert all(r.ok for r in records)
    assert records[0].connect_ns is not None and records[0].connect_ns > 0
    assert records[1].connect_ns is None and records[2].connect_ns is None


@pytest.mark.parametrize(
    ("parts", "reason"),
    [
        (
            fixed(
                503, [("Content-Type", "application/json")], b'{"error":{"message":"overloaded"}}'
            ),
            "http_503",
        ),
        (fixed(500, [("Content-Type", "text/plain")], b"Internal Server Error"), "http_500"),
        (
            chunked(200, SSE, [TOKEN, b'data: {"error":{"message":"boom","code":500}}\n\n', DONE]),
            "error_event",
        ),
        (chunked(200, SSE, [TOKEN, b"data: {garbage\n\n"]), "malformed_event"),
        (chunked(200, SSE, [TOKEN, TOKEN, DONE]), "truncated"),
        (chunked(200, SSE, []), "empty_body"),
        ([*chunked(200, SSE, [TOKEN, TOKEN], terminate=False), (0.0, CLOSE)], "stream_broken"),
        ([(0.0, b"NOT HTTP AT ALL\r\n\r\n")], "malformed_http"),
    ],
)
async def test_failures_have_a_reason(parts: list[Part], reason: str) -> None:
    (record,) = await one(parts)
    assert not record.ok
    assert record.error == reason
    assert record.error_detail


async def test_http_error_detail_comes_from_the_body() -> None:
    status, headers, body = split_response("llama_server.error_bad_request.txt")
    (record,) = await one(fixed(status, headers, body))
    assert record.error == "http_400"
    assert record.error_detail is not None and record.error_detail.startswith("HTTP 400: ")


async def test_llama_cpp_python_200_with_empty_body() -> None:
    status, headers, body = split_response("llama_cpp_python.error_context_overflow_stream.txt")
    (record,) = await one(chunked(status, headers, sse_events(body)))
    assert record.error == "empty_body"


async def test_stall_timeout() -> None:
    parts = [*chunked(200, SSE, [TOKEN, TOKEN], terminate=False), (3.0, FINISH)]
    (record,) = await one(parts, timeouts=Timeouts(connect_s=1, request_s=10, stall_s=0.5))
    assert record.error == "stall"


async def test_request_timeout() -> None:
    (record,) = await one([(3.0, b"")], timeouts=Timeouts(connect_s=1, request_s=0.5, stall_s=10))
    assert record.error == "timeout"


async def test_connect_failure() -> None:
    config = ClientConfig(target=parse_target("http://127.0.0.1:1"), model="m")
    client = StreamingClient(config)
    record = await client.send("x", 2, request_id=0, step_index=0)
    await client.aclose()
    assert record.error == "connect"
    assert record.error_detail is not None and "127.0.0.1:1" in record.error_detail


async def test_request_body_carries_usage_option_extra_fields_and_key() -> None:
    async with replay([chunked(200, SSE, [FINISH, DONE])]) as server:
        config = ClientConfig(
            target=parse_target(server.url + "/v1"),
            model="m",
            endpoint="chat",
            api_key="sk-secret",
            extra_body={"ignore_eos": True, "min_tokens": 2},
        )
        client = StreamingClient(config)
        await client.send("hi", 7, request_id=0, step_index=0)
        await client.aclose()
        request = server.requests[0]
    assert request.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"Authorization: Bearer sk-secret" in request
    for fragment in (
        b'"stream":true',
        b'"include_usage":true',
        b'"ignore_eos":true',
        b'"min_tokens":2',
        b'"max_tokens":7',
        b'"messages":[{"role":"user"',
    ):
        assert fragment in request
    assert "sk-secret" not in repr(config)
