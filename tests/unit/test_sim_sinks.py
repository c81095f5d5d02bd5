"""The sim's sinks write vLLM's exact wire format, one write per token, and record the truth."""

from __future__ import annotations

import json
from typing import Any

from gputui.sim.sinks import TOKEN_TEXTS, BufferedSink, StreamSink
from gputui.sim.tokenizer import count_tokens
from gputui.sim.truth import TruthRecorder


class FakeTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return False


def dechunk(data: bytes) -> tuple[list[bytes], bool]:
    """The chunk payloads of a chunked body and whether the terminating chunk was seen."""
    payloads: list[bytes] = []
    while data:
        size_line, data = data.split(b"\r\n", 1)
        size = int(size_line, 16)
        if size == 0:
            assert data == b"\r\n"
            return payloads, True
        payloads.append(data[:size])
        assert data[size : size + 2] == b"\r\n"
        data = data[size + 2 :]
    return payloads, False


def events(writes: list[bytes]) -> tuple[list[Any], bool]:
    body = b"".join(writes).split(b"\r\n\r\n", 1)[1]
    payloads, ended = dechunk(body)
    out: list[Any] = []
    for payload in payloads:
        assert payload.startswith(b"data: ")
        assert payload.endswith(b"\n\n")
        text = payload[6:-2]
        out.append("[DONE]" if text == b"[DONE]" else json.loads(text))
    return out, ended


def make_stream(
    transport: FakeTransport, truth: TruthRecorder, *, chat: bool, max_tokens: int = 4, usage: bool
) -> tuple[StreamSink, list[int]]:
    done: list[int] = []
    sink = StreamSink(
        transport,  # type: ignore[arg-type]
        truth,
        lambda: done.append(1),
        request_id=7,
        chat=chat,
        model="served",
        prompt_tokens=11,
        max_tokens=max_tokens,
        arrival_ns=0,
        include_usage=usage,
        keep_alive=True,
    )
    return sink, done


def test_completion_stream_is_vllm_shaped_with_one_write_per_token() -> None:
    transport, truth = FakeTransport(), TruthRecorder()
    sink, done = make_stream(transport, truth, chat=False, usage=True)
    assert transport.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"content-type: text/event-stream\r\n" in transport.writes[0]
    assert b"transfer-encoding: chunked\r\n" in transport.writes[0]
    for _ in range(4):
        sink.emit_tokens()
    assert sink.closed
    assert done == [1]
    assert len(transport.writes) == 1 + 4 + 1  # headers, one per token, usage + [DONE] + end
    evs, ended = events(transport.writes)
    assert ended
    tokens, usage, last = evs[:4], evs[4], evs[5]
    assert [e["choices"][0]["text"] for e in tokens] == [t.decode() for t in TOKEN_TEXTS[:4]]
    assert [e["choices"][0]["finish_reason"] for e in tokens] == [None, None, None, "length"]
    assert all(e["object"] == "text_completion" and e["model"] == "served" for e in tokens)
    assert all(e["id"].startswith("cmpl-") and e["usage"] is None for e in tokens)
    assert tokens[0]["choices"][0]["logprobs"] is None
    assert tokens[0]["choices"][0]["stop_reason"] is None
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}
    assert last == "[DONE]"
    assert truth.tokens == 4
    assert truth.requests_completed == 1
    assert len(truth.ttft_ns) == 1
    assert len(truth.itl_ns) == 3


def test_chat_stream_sends_role_chunk_before_first_token_and_stop_reason() -> None:
    transport, truth = FakeTransport(), TruthRecorder()
    sink, _ = make_stream(transport, truth, chat=True, max_tokens=16, usage=False)
    sink.emit_tokens(2)
    sink.emit_tokens(1, finish_reason="stop")
    assert sink.closed
    evs, ended = events(transport.writes)
    assert ended
    role, *tokens, done = evs
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert role["object"] == "chat.completion.chunk"
    assert role["id"].startswith("chatcmpl-")
    assert [e["choices"][0]["delta"]["content"] for e in tokens] == [
        t.decode() for t in TOKEN_TEXTS[:3]
    ]
    assert tokens[-1]["choices"][0]["finish_reason"] == "stop"
    assert tokens[0]["choices"][0]["finish_reason"] is None
    assert done == "[DONE]"
    # role chunk and first token are separate writes; TTFT is stamped on the content write
    assert len(transport.writes) == 1 + 1 + 3 + 1


def test_finish_without_a_reason_sent_writes_an_empty_final_chunk() -> None:
    transport, truth = FakeTransport(), TruthRecorder()
    sink, _ = make_stream(transport, truth, chat=False, max_tokens=16, usage=True)
    sink.emit_tokens(3)
    sink.finish("stop")
    sink.finish("stop")  # idempotent
    sink.emit_tokens(1)  # ignored after the end
    evs, _ = events(transport.writes)
    assert evs[3]["choices"][0] == {
        "index": 0,
        "text": "",
        "logprobs": None,
        "finish_reason": "stop",
        "stop_reason": None,
    }
    assert evs[4]["usage"]["completion_tokens"] == 3
    assert truth.tokens == 3


def test_aborted_stream_writes_nothing_more() -> None:
    transport, truth = FakeTransport(), TruthRecorder()
    sink, done = make_stream(transport, truth, chat=False, max_tokens=16, usage=False)
    sink.emit_tokens()
    sink.abort()
    sink.emit_tokens()
    sink.finish("stop")
    assert len(transport.writes) == 2
    assert done == []
    assert truth.requests_completed == 0


def test_buffered_sink_writes_one_json_response() -> None:
    transport, truth = FakeTransport(), TruthRecorder()
    done: list[int] = []
    sink = BufferedSink(
        transport,  # type: ignore[arg-type]
        truth,
        lambda: done.append(1),
        request_id=1,
        chat=True,
        model="served",
        prompt_tokens=5,
        max_tokens=3,
        keep_alive=False,
    )
    sink.emit_tokens(2)
    assert transport.writes == []
    sink.emit_tokens(5)  # clamped to max_tokens, finishes with "length"
    assert done == [1]
    head, body = transport.writes[0].split(b"\r\n\r\n", 1)
    assert b"content-type: application/json" in head
    assert b"connection: close" in head
    reply = json.loads(body)
    assert reply["object"] == "chat.completion"
    choice = reply["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert count_tokens(choice["message"]["content"]) == 3
    assert choice["finish_reason"] == "length"
    assert reply["usage"] == {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    assert truth.tokens == 3
    assert len(truth.ttft_ns) == 0
