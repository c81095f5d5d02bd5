"""The SSE reader on real servers' bytes and on every dialect rule of reference.md §5."""

from __future__ import annotations

import pytest

from gputui.engine.sse import StreamReader
from tests.support.fixtures import fixture_path, split_response, sse_events


def read_all(events: list[bytes], start_ns: int = 1000, step_ns: int = 10) -> StreamReader:
    reader = StreamReader()
    for i, event in enumerate(events):
        reader.feed(event, start_ns + i * step_ns)
    reader.end_of_body(start_ns + len(events) * step_ns)
    return reader


@pytest.mark.parametrize(
    ("name", "tokens", "prompt_tokens", "from_usage"),
    [
        ("llama_server.chat_stream.txt", 8, 18, True),
        ("llama_server.completions_stream.txt", 8, None, True),
        ("transformers_serve.chat_stream.txt", 8, 18, True),
        ("llama_cpp_python.chat_stream.txt", None, None, False),
    ],
)
def test_real_streams_count_tokens(
    name: str, tokens: int | None, prompt_tokens: int | None, from_usage: bool
) -> None:
    status, _, body = split_response(name)
    assert status == 200
    reader = read_all(sse_events(body))
    assert reader.error is None
    assert reader.finish_reason in ("length", "stop")
    assert (reader.output_tokens is not None) == from_usage
    if tokens is not None:
        assert reader.output_tokens == tokens
    if prompt_tokens is not None:
        assert reader.input_tokens == prompt_tokens
    assert reader.first_token_ns is not None
    assert reader.first_token_ns == reader.token_ns[0]


def test_role_only_chat_chunk_is_not_the_first_token() -> None:
    _, _, body = split_response("llama_server.chat_stream.txt")
    events = sse_events(body)
    assert b'"role":"assistant"' in events[0]
    reader = read_all(events, start_ns=0, step_ns=100)
    assert reader.first_token_ns == 100  # the second event, not the role-only first one


def test_transformers_serve_has_no_done_but_finishes() -> None:
    _, _, body = split_response("transformers_serve.chat_stream.txt")
    reader = read_all(sse_events(body))
    assert not reader.done
    assert reader.finish_reason == "length"
    assert reader.error is None


def test_interrupted_llama_cpp_python_stream_has_no_finish_reason() -> None:
    text = fixture_path("llama_cpp_python.interrupted_stream.txt").read_bytes()
    stream_a = text.split(b"# --- stream B")[0]
    kept = [line for line in stream_a.split(b"\n") if not line.startswith((b"#", b"..."))]
    lines = b"\n".join(kept)
    reader = read_all(sse_events(lines))
    assert reader.done
    assert reader.finish_reason is None  # the client must call this truncated


def test_events_split_across_reads_and_coalesced() -> None:
    event = b'data: {"choices":[{"text":"a","finish_reason":null}]}\n\n'
    reader = StreamReader()
    reader.feed(event[:10], 1)
    reader.feed(event[10:] + event + event[:5], 2)
    reader.feed(event[5:], 3)
    assert reader.token_ns == [2, 2, 3]


def test_crlf_framing_comments_and_keepalive_pings() -> None:
    reader = StreamReader()
    reader.feed(b": ping\r\n\r\n", 1)
    reader.feed(b'data: {"choices":[{"text":"x"}]}\r\n\r\n', 2)
    reader.feed(
        b'event: message\r\ndata: {"choices":[{"text":"y","finish_reason":"stop"}]}\r\n\r\n', 3
    )
    reader.feed(b"data: [DONE]\r\n\r\n", 4)
    assert reader.error is None
    assert reader.token_ns == [2, 3]
    assert reader.finish_reason == "stop"
    assert reader.done


def test_error_event_inside_200_stream() -> None:
    reader = StreamReader()
    reader.feed(b'data: {"choices":[{"text":"x"}]}\n\n', 1)
    reader.feed(b'data: {"error": {"message": "engine died", "code": 500}}\n\n', 2)
    assert reader.error == "error_event"
    assert reader.error_detail == "engine died"


def test_flat_vllm_error_object() -> None:
    reader = StreamReader()
    reader.feed(b'data: {"object": "error", "message": "bad things", "code": 400}\n\n', 1)
    assert reader.error == "error_event"
    assert reader.error_detail == "bad things"


@pytest.mark.parametrize(
    "garbage",
    [
        b"data: {not json\n\n",
        b"data: [1,2]\n\n",
        b"\xff\xfe\x00garbage\n\n",
        b'data: {"choices":[7]}\n\n',
    ],
)
def test_garbage_is_malformed(garbage: bytes) -> None:
    reader = StreamReader()
    reader.feed(garbage, 1)
    assert reader.error == "malformed_event"
    assert reader.error_detail


def test_usage_on_finish_chunk_and_reasoning_tokens() -> None:
    reader = StreamReader()
    reader.feed(b'data: {"choices":[{"delta":{"reasoning_content":"hm"}}]}\n\n', 1)
    reader.feed(
        b'data: {"choices":[{"delta":{"content":"ok"},"finish_reason":"stop"}],'
        b'"usage":{"prompt_tokens":5,"completion_tokens":2}}\n\n',
        2,
    )
    reader.end_of_body(3)
    assert reader.token_ns == [1, 2]
    assert (reader.input_tokens, reader.output_tokens) == (5, 2)


def test_last_event_without_blank_line_is_flushed_at_end() -> None:
    reader = StreamReader()
    reader.feed(b'data: {"choices":[{"text":"x","finish_reason":"length"}]}', 5)
    assert reader.token_ns == []
    reader.end_of_body(9)
    assert reader.token_ns == [9]
    assert reader.finish_reason == "length"


def test_llama_server_timings_and_cached_prompt_tokens() -> None:
    _, _, body = split_response("llama_server.chat_stream.txt")
    reader = read_all(sse_events(body))
    assert reader.cached_input_tokens == 17
    timings = reader.timings
    assert timings is not None
    assert (timings.prompt_n, timings.cache_n, timings.predicted_n) == (1, 17, 8)
    assert timings.prompt_ms == pytest.approx(1.289)
    assert timings.predicted_ms == pytest.approx(0.571)


def test_timings_without_usage_still_count() -> None:
    """Without `include_usage` llama-server still puts `timings` on its finish chunk."""
    _, _, body = split_response("llama_server.chat_stream_no_usage_option.txt")
    reader = read_all(sse_events(body))
    assert reader.output_tokens is None
    assert reader.timings is not None and reader.timings.predicted_n == 8


def test_model_comes_from_the_first_chunk_that_names_one() -> None:
    reader = StreamReader()
    reader.feed(b'data: {"model":"served-name","choices":[{"delta":{"role":"assistant"}}]}\n\n', 1)
    reader.feed(b'data: {"model":"other","choices":[{"delta":{"content":"x"}}]}\n\n', 2)
    assert reader.model == "served-name"


def test_empty_data_line_is_a_keepalive_not_garbage() -> None:
    reader = StreamReader()
    reader.feed(b"data: \n\ndata:\n\n", 1)
    reader.feed(b'data: {"choices":[{"text":"x","finish_reason":"stop"}]}\n\n', 2)
    assert reader.error is None
    assert reader.events == 1
    assert reader.token_ns == [2]


@pytest.mark.parametrize("timings", [b'"x"', b"[1]", b'{"prompt_n":"7","predicted_ms":true}'])
def test_odd_timings_are_ignored(timings: bytes) -> None:
    reader = StreamReader()
    reader.feed(b'data: {"choices":[{"text":"x"}],"timings":%s}\n\n' % timings, 1)
    assert reader.error is None
    assert reader.timings is None or reader.timings.prompt_n is None
