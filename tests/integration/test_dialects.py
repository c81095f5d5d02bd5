"""Every streaming dialect a server speaks, one named test each, through the real client.

Real bytes come from tests/fixtures/real-servers/, copies of ../shared/fixtures/real-servers/
(llama-server, llama-cpp-python, `transformers serve`); vLLM, SGLang, TGI and TensorRT-LLM shapes
are written by hand from reference.md §5 and the servers' protocol definitions, and say so. Each
test checks the verdict a user sees: ok or failed with one reason, and the token counts and where
they came from.
"""

from __future__ import annotations

import asyncio
import io

import pytest

from gputui.engine.client import ClientConfig, StreamingClient, Timeouts
from gputui.engine.records import RequestRecord
from gputui.engine.target import parse_target
from gputui.frontends.run import StepPrinter
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepSpec, aggregate_step
from gputui.metrics.step_quality import step_warnings
from gputui.snapshot.assemble import request_totals
from tests.support.fixtures import fixture_path, split_response, sse_events
from tests.support.replay import CLOSE, Part, chunked, fixed, replay

SSE = [("Content-Type", "text/event-stream")]
JSON = [("Content-Type", "application/json")]
TEXT = [("Content-Type", "text/plain; charset=utf-8")]


def _chunk(delta: str, finish: str = "null", tail: str = "") -> bytes:
    return (
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",'
        b'"choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}]%s}\n\n'
        % (delta.encode(), finish.encode(), tail.encode())
    )


USAGE_3 = '"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}'
USAGE_CHUNK = b'data: {"id":"c1","object":"chat.completion.chunk","choices":[],%s}\n\n' % (
    USAGE_3.encode()
)
DONE = b"data: [DONE]\n\n"

# vLLM (protocol.py): the role chunk carries content "", every chunk "usage": null until the
# usage chunk (choices []) that `stream_options.include_usage` adds before [DONE].
VLLM = [
    _chunk('{"role":"assistant","content":""}', tail=',"usage":null'),
    _chunk('{"content":"a"}', tail=',"usage":null'),
    _chunk('{"content":"b"}', tail=',"usage":null'),
    _chunk('{"content":"c"}', '"length"', tail=',"stop_reason":null,"usage":null'),
    USAGE_CHUNK,
    DONE,
]
# SGLang: the same framing; its finish chunk adds `matched_stop`.
SGLANG = [
    _chunk('{"role":"assistant","content":""}'),
    _chunk('{"content":"a"}'),
    _chunk('{"content":"b"}'),
    _chunk('{"content":"c"}', '"length"', tail=',"matched_stop":null'),
    USAGE_CHUNK,
    DONE,
]
# TGI's Messages API: the role repeats on every delta, text arrives from the first chunk.
TGI = [
    _chunk('{"role":"assistant","content":"a"}', tail=',"usage":null'),
    _chunk('{"role":"assistant","content":"b"}', tail=',"usage":null'),
    _chunk('{"role":"assistant","content":"c"}', '"length"', tail=',"usage":null'),
    USAGE_CHUNK,
    DONE,
]
# trtllm-serve: vLLM's shapes (its protocol module descends from vLLM's).
TRTLLM = [
    _chunk('{"role":"assistant","content":""}'),
    _chunk('{"content":"a"}'),
    _chunk('{"content":"b"}'),
    _chunk('{"content":"c"}', '"length"', tail=',"stop_reason":null'),
    USAGE_CHUNK,
    DONE,
]


async def send(
    parts: list[Part], *, endpoint: str = "chat", model: str = "m", max_tokens: int = 3
) -> RequestRecord:
    async with replay([parts]) as server:
        config = ClientConfig(
            target=parse_target(server.url),
            model=model,
            endpoint=endpoint,  # type: ignore[arg-type]
            timeouts=Timeouts(connect_s=2, request_s=5, stall_s=2),
        )
        client = StreamingClient(config)
        try:
            return await client.send("hello", max_tokens, request_id=0, step_index=0)
        finally:
            await client.aclose()


async def real(name: str, *, gap_s: float = 0.0, endpoint: str = "chat") -> RequestRecord:
    status, headers, body = split_response(name)
    return await send(chunked(status, headers, sse_events(body), gap_s=gap_s), endpoint=endpoint)


# -- a role-only first chat chunk is not the first token ------------------------------------------


@pytest.mark.parametrize(
    "name", ["llama_server.chat_stream.txt", "transformers_serve.chat_stream.txt"]
)
async def test_role_only_first_chunk_is_not_the_first_token_real(name: str) -> None:
    gap_s = 0.03
    record = await real(name, gap_s=gap_s)
    assert record.ok
    assert record.first_token_ns is not None
    # The role chunk arrives after one gap, the first text after two.
    assert (record.first_token_ns - record.sent_ns) / 1e9 > 1.5 * gap_s
    assert record.first_token_ns == int(record.token_ns[0])


@pytest.mark.parametrize("events", [VLLM, SGLANG, TRTLLM], ids=["vllm", "sglang", "trtllm"])
async def test_role_chunk_with_empty_content_is_not_the_first_token(events: list[bytes]) -> None:
    record = await send(chunked(200, SSE, events, gap_s=0.03))
    assert record.ok
    assert record.first_token_ns is not None
    assert (record.first_token_ns - record.sent_ns) / 1e9 > 0.045
    assert len(record.token_ns) == 3


async def test_tgi_text_in_the_first_chunk_is_the_first_token() -> None:
    record = await send(chunked(200, SSE, TGI, gap_s=0.03))
    assert record.ok
    assert record.first_token_ns is not None
    assert (record.first_token_ns - record.sent_ns) / 1e9 < 0.045
    assert len(record.token_ns) == 3


# -- usage: separate chunk, on the finish chunk, on the last chunk, on every chunk, missing -------


@pytest.mark.parametrize(
    ("events", "name"),
    [(VLLM, "vllm"), (SGLANG, "sglang"), (TGI, "tgi"), (TRTLLM, "trtllm"), (None, "llama-server")],
)
async def test_usage_in_a_separate_chunk(events: list[bytes] | None, name: str) -> None:
    if events is None:
        record = await real("llama_server.chat_stream.txt")
        assert (record.output_tokens, record.input_tokens) == (8, 18)
        assert record.cached_input_tokens == 17
    else:
        record = await send(chunked(200, SSE, events))
        assert (record.output_tokens, record.input_tokens) == (3, 5)
    assert record.ok and record.tokens_from_usage, name


async def test_usage_on_the_finish_chunk() -> None:
    record = await real("llama_server.completions_stream.txt", endpoint="completions")
    assert record.ok and record.tokens_from_usage
    assert (record.output_tokens, record.input_tokens) == (8, 3)
    timings = record.server_timings
    assert timings is not None
    assert (timings.prompt_n, timings.cache_n, timings.predicted_n) == (3, 0, 8)


async def test_usage_on_the_last_chunk_of_a_stream_without_done() -> None:
    record = await real("transformers_serve.chat_stream.txt")
    assert record.ok and record.tokens_from_usage
    assert (record.output_tokens, record.input_tokens) == (8, 18)


async def test_usage_on_every_chunk_the_last_one_counts() -> None:
    """vLLM's `continuous_usage_stats`: a running count on every chunk, the total on the last."""
    events = [
        _chunk('{"content":"a"}', tail=',"usage":{"prompt_tokens":5,"completion_tokens":1}'),
        _chunk(
            '{"content":"b"}', '"length"', tail=',"usage":{"prompt_tokens":5,"completion_tokens":2}'
        ),
        USAGE_CHUNK,
        DONE,
    ]
    record = await send(chunked(200, SSE, events))
    assert record.ok and record.tokens_from_usage
    assert record.output_tokens == 3


@pytest.mark.parametrize(
    "name", ["llama_cpp_python.chat_stream.txt", "llama_server.chat_stream_no_usage_option.txt"]
)
async def test_usage_missing_counts_chunks_and_says_so(name: str) -> None:
    record = await real(name)
    assert record.ok
    assert not record.tokens_from_usage
    assert record.output_tokens == len(record.token_ns) > 0
    spec = StepSpec(0, "concurrency", 1.0, record.sent_ns, record.sent_ns, record.end_ns + 1)
    step = aggregate_step(spec, [record], Sla())
    assert not step.output_tokens_from_usage
    assert any("no usage report" in line for line in step_warnings(step))
    assert request_totals([record])["ok_requests_without_usage"] == 1


# -- the end of the stream ------------------------------------------------------------------------


async def test_no_done_the_stream_just_ends() -> None:
    status, headers, body = split_response("transformers_serve.completions_stream.txt")
    assert b"[DONE]" not in body
    record = await send(chunked(status, headers, sse_events(body)), endpoint="completions")
    assert record.ok
    assert record.finish_reason == "length"


async def test_done_without_a_finish_reason_is_a_counted_failure() -> None:
    text = fixture_path("llama_cpp_python.interrupted_stream.txt").read_bytes()
    stream_a = text.split(b"# --- stream B")[0]
    body = b"\n".join(line for line in stream_a.split(b"\n") if not line.startswith((b"#", b"...")))
    record = await send(chunked(200, SSE, sse_events(body)), endpoint="completions")
    assert not record.ok
    assert record.error == "truncated"
    assert record.error_detail == "[DONE] without a finish_reason"
    spec = StepSpec(0, "concurrency", 1.0, record.sent_ns, record.sent_ns, record.end_ns + 1)
    step = aggregate_step(spec, [record], Sla())
    assert (step.requests_ok, step.requests_failed, step.errors) == (0, 1, {"truncated": 1})


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "detail"),
    [
        # vLLM / SGLang: a nested OpenAI error object, then [DONE].
        (
            b'data: {"error":{"object":"error","message":"oops","type":"Bad","code":400}}\n\n',
            "oops",
        ),
        # vLLM (older): the flat error object.
        (
            b'data: {"object":"error","message":"flat oops","type":"BadRequest","code":400}\n\n',
            "flat oops",
        ),
        # TGI: the error is a string, with `error_type`.
        (
            b'data: {"error":"Request failed during generation: OOM","error_type":"gen"}\n\n',
            "generation: OOM",
        ),
        # llama.cpp: a nested error with its own type.
        (
            b'data: {"error":{"code":500,"message":"slot died","type":"server_error"}}\n\n',
            "slot died",
        ),
        # An SSE `event: error`.
        (b"event: error\ndata: upstream went away\n\n", "upstream went away"),
    ],
    ids=["vllm-sglang", "vllm-flat", "tgi", "llamacpp", "sse-event"],
)
async def test_error_event_inside_a_200_stream(event: bytes, detail: str) -> None:
    record = await send(chunked(200, SSE, [_chunk('{"content":"a"}'), event, DONE]))
    assert not record.ok
    assert record.status_code == 200
    assert record.error == "error_event"
    assert record.error_detail is not None and detail in record.error_detail


async def test_200_with_an_empty_body() -> None:
    record = await real("llama_cpp_python.error_context_overflow_stream.txt")
    assert record.error == "empty_body"
    assert record.error_detail == "200 with an empty body"


@pytest.mark.parametrize(
    ("parts", "reason", "detail"),
    [
        ("llama_server.error_bad_request.txt", "http_400", "Expected 'messages'"),
        (
            "llama_server.error_context_overflow_stream.txt",
            "http_400",
            "exceeds the available context",
        ),
        ("llama_cpp_python.error_500_validation.txt", "http_500", "validation error"),
        ("transformers_serve.error_bad_request.txt", "http_500", "Internal Server Error"),
    ],
)
async def test_http_errors_from_real_servers(parts: str, reason: str, detail: str) -> None:
    status, headers, body = split_response(parts)
    record = await send(fixed(status, headers, body))
    assert record.error == reason
    assert record.error_detail is not None and detail in record.error_detail


@pytest.mark.parametrize(
    ("status", "headers", "body", "detail"),
    [
        (
            400,
            JSON,
            b'{"object":"error","message":"max_tokens too large","code":400}',
            "max_tokens too large",
        ),
        (400, TEXT, b"Bad Request: no prompt", "no prompt"),
        (
            422,
            JSON,
            b'{"error":"Input validation error: inputs too long","error_type":"validation"}',
            "inputs too long",
        ),
        (
            500,
            JSON,
            b'{"error":{"message":"engine dead","type":"InternalServerError","code":500}}',
            "engine dead",
        ),
        (500, TEXT, b"Internal Server Error", "Internal Server Error"),
        (
            503,
            JSON,
            b'{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}',
            "Loading model",
        ),
        (503, TEXT, b"Service Unavailable", "Service Unavailable"),
        (503, TEXT, b"", "HTTP 503"),
    ],
    ids=[
        "400-vllm-flat",
        "400-text",
        "422-tgi",
        "500-json",
        "500-text",
        "503-llamacpp-loading",
        "503-text",
        "503-empty",
    ],
)
async def test_http_errors_json_or_plain_text(
    status: int, headers: list[tuple[str, str]], body: bytes, detail: str
) -> None:
    record = await send(fixed(status, headers, body))
    assert record.error == f"http_{status}"
    assert record.error_detail is not None and detail in record.error_detail


# -- framing --------------------------------------------------------------------------------------


async def test_sse_comments_and_keepalive_pings() -> None:
    events = [
        b": ping - 2026-11-30 06:22:40.123456\r\n\r\n",
        _chunk('{"role":"assistant","content":""}'),
        b"data:\n\n",
        _chunk('{"content":"a"}').replace(b"data: ", b"data:"),
        b": keep-alive\n\n",
        _chunk('{"content":"b"}').replace(b"\n\n", b"\r\n\r\n"),
        _chunk('{"content":"c"}', '"length"'),
        b":\n\n",
        USAGE_CHUNK,
        DONE,
    ]
    record = await send(chunked(200, SSE, events, gap_s=0.001))
    assert record.ok, record.error_detail
    assert len(record.token_ns) == 3
    assert record.output_tokens == 3 and record.tokens_from_usage


async def test_only_pings_is_an_empty_body() -> None:
    record = await send(chunked(200, SSE, [b": ping\n\n", b"data: \n\n"]))
    assert record.error == "empty_body"


async def test_keep_alive_announced_but_closed_after_every_stream() -> None:
    """llama-server says `Keep-Alive` yet closes each connection after a streamed response.

    A request written on such a connection before its FIN arrived is retried once, and always on
    a fresh connection: the other pooled ones may be just as stale. Here connection B goes stale
    first, then A (still open when B fails) would fail the retry too.
    """
    status, headers, body = split_response("llama_server.completions_stream.txt")
    stream = chunked(status, headers, sse_events(body))
    a_parts = [(0.1, b""), *stream, (0.6, CLOSE)]  # in flight when B starts, stale last
    b_parts = [(0.2, b""), *stream, (0.1, CLOSE)]  # released last (so reused first), stale first
    async with replay([a_parts, b_parts]) as server:
        config = ClientConfig(target=parse_target(server.url), model="m")
        client = StreamingClient(config)

        async def later() -> RequestRecord:
            await asyncio.sleep(0.02)
            return await client.send("x", 8, request_id=1, step_index=0)

        try:
            first = await asyncio.gather(client.send("x", 8, request_id=0, step_index=0), later())
            third = await client.send("x", 8, request_id=2, step_index=0)
        finally:
            await client.aclose()
    assert all(r.ok for r in first)
    assert third.ok, third.error_detail
    assert third.connect_ns is not None  # it went out on a new connection
    assert len(server.requests) == 3  # the stale connection never delivered a request
    assert client.connections_opened == 3


# -- output length honoured ------------------------------------------------------------------------


async def test_a_server_that_stops_early_is_counted_and_said() -> None:
    """Asked for 16 tokens, the server sent 8 (finish_reason "length" on its own cap)."""
    status, headers, body = split_response("llama_server.completions_stream.txt")
    parts = chunked(status, headers, sse_events(body))
    record = await send(parts, endpoint="completions", max_tokens=16)
    assert record.ok  # a short answer is not a failure...
    assert (record.output_tokens, record.requested_output_tokens) == (8, 16)
    spec = StepSpec(0, "concurrency", 1.0, record.sent_ns, record.sent_ns, record.end_ns + 1)
    step = aggregate_step(spec, [record], Sla())
    assert step.short_outputs == 1  # ...but it is counted,
    out = io.StringIO()
    StepPrinter(out).step(step)
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("  warning: 1 of 1 ok requests (100%) stopped before the output")
    assert request_totals([record])["short_outputs"] == 1  # and kept in the snapshot.


async def test_full_outputs_say_nothing() -> None:
    status, headers, body = split_response("llama_server.completions_stream.txt")
    parts = chunked(status, headers, sse_events(body))
    record = await send(parts, endpoint="completions", max_tokens=8)
    window_end = record.sent_ns + 10_000_000_000  # many request lifetimes: no noise warning
    spec = StepSpec(0, "concurrency", 1.0, record.sent_ns, record.sent_ns, window_end)
    step = aggregate_step(spec, [record], Sla())
    assert step.short_outputs == 0
    assert step_warnings(step) == []


# -- the model the server answered with -----------------------------------------------------------


async def test_a_model_field_that_differs_is_recorded_and_reported() -> None:
    record = await real("transformers_serve.chat_stream.txt")
    assert record.ok
    assert record.response_model == "/srv/llm-models/models/hf"
    assert request_totals([record])["response_models"] == {"/srv/llm-models/models/hf": 1}
    out = io.StringIO()
    StepPrinter(out).response_models("m", [record])
    assert "answered with model '/srv/llm-models/models/hf' (asked for 'm')" in out.getvalue()
    silent = io.StringIO()
    StepPrinter(silent).response_models("/srv/llm-models/models/hf", [record])
    assert silent.getvalue() == ""
