"""Today's streams on byte fixtures: thinking in either field, tool calls, multi-token events."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import orjson
import pytest

from gputui.engine.event_tokens import (
    EventCounter,
    EventCounterSpec,
    counts_from_running,
    reconcile,
)
from gputui.engine.records import RequestRecord
from gputui.engine.request_outcome import with_event_counts
from gputui.engine.sse import StreamReader
from gputui.metrics.request_metrics import itl_counts, record_columns, request_metrics


def chunk(delta: Mapping[str, object], finish: str | None = None, usage: object = None) -> bytes:
    obj: dict[str, object] = {
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
    }
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def usage_chunk(completion: int, reasoning: int | None = None) -> bytes:
    usage: dict[str, object] = {"prompt_tokens": 5, "completion_tokens": completion}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return b"data: " + orjson.dumps({"choices": [], "usage": usage}) + b"\n\n"


def read(events: list[bytes], *, keep_texts: bool = False) -> StreamReader:
    reader = StreamReader(keep_texts=keep_texts)
    for i, event in enumerate(events):
        reader.feed(event, 1_000 + 100 * i)
    reader.end_of_body(1_000 + 100 * len(events))
    return reader


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_thinking_in_either_field_is_the_first_token_and_not_the_answer(field: str) -> None:
    events = [
        chunk({"role": "assistant", "content": ""}),
        chunk({field: " let"}),
        chunk({field: " me"}),
        chunk({field: " think"}),
        chunk({"content": " Paris"}),
        chunk({"content": "."}, finish="stop"),
        usage_chunk(5, reasoning=3),
        b"data: [DONE]\n\n",
    ]
    reader = read(events)
    assert reader.error is None
    assert reader.token_ns == [1_100, 1_200, 1_300, 1_400, 1_500]
    assert reader.first_token_ns == 1_100  # TTFT: the first thinking token
    assert reader.first_answer_ns == 1_400  # TTFAT: the first content token
    assert reader.reasoning_events == [0, 1, 2]
    assert reader.reasoning_tokens == 3
    assert reader.output_tokens == 5


def test_thinking_without_usage_details_leaves_reasoning_tokens_to_be_counted() -> None:
    reader = read(
        [chunk({"reasoning_content": " a"}), chunk({"content": " b"}, "stop"), usage_chunk(2)]
    )
    assert reader.reasoning_tokens is None
    assert reader.reasoning_events == [0]
    assert reader.first_answer_ns == 1_100


def test_tool_call_deltas_are_output_tokens_and_answers() -> None:
    first = {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": ""},
            }
        ]
    }
    events = [
        chunk({"role": "assistant", "content": None}),
        chunk(first),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
        chunk({}, finish="tool_calls"),
        usage_chunk(6),
    ]
    reader = read(events, keep_texts=True)
    assert reader.error is None
    assert reader.token_ns == [1_100, 1_200, 1_300]
    assert reader.first_token_ns == reader.first_answer_ns == 1_100
    assert reader.texts == ["get_weather", '{"city": ', '"Paris"}']
    assert reader.finish_reason == "tool_calls"
    assert reader.output_tokens == 6


def test_continuous_usage_gives_each_events_tokens() -> None:
    def running(n: int) -> dict[str, int]:
        return {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n}

    events = [
        chunk({"content": " a b c d"}, usage=running(4)),
        chunk({"content": " e f g h"}, usage=running(8)),
        chunk({"content": " i j"}, "length", usage=running(10)),
        usage_chunk(10),
    ]
    reader = read(events)
    assert reader.running == [4, 8, 10]
    counts = counts_from_running(reader.running, len(reader.token_ns))
    assert counts is not None
    assert counts.tolist() == [4, 4, 2]
    assert reader.output_tokens == 10


def test_continuous_usage_missing_on_one_event_is_not_trusted() -> None:
    assert counts_from_running([4, None, 10], 3) is None
    assert counts_from_running([4, 8], 3) is None
    assert counts_from_running([4, 3, 10], 3) is None  # a count that goes backwards


def test_tokenizer_counts_are_reconciled_with_the_usage_total() -> None:
    assert reconcile([4, 4, 2], 10).tolist() == [4, 4, 2]
    assert reconcile([4, 4, 2], None).tolist() == [4, 4, 2]
    # The tokenizer found one token fewer than the server: it goes where the remainder is largest.
    assert reconcile([3, 4, 2], 10).tolist() == [3, 5, 2]
    assert reconcile([0, 1], 5).tolist() == [3, 2]  # no extra tokens found: shared evenly
    assert reconcile([2, 2], 1).tolist() == [2, 2]  # fewer tokens than events: left as counted


def record(stamps: list[int], counts: list[int] | None, tokens: int) -> RequestRecord:
    return RequestRecord(
        request_id=0,
        step_index=0,
        sent_ns=0,
        end_ns=stamps[-1],
        ok=True,
        first_token_ns=stamps[0],
        token_ns=np.array(stamps, dtype=np.int64),
        output_tokens=tokens,
        tokens_from_usage=True,
        requested_output_tokens=tokens,
        event_tokens=None if counts is None else np.array(counts, dtype=np.int32),
        event_tokens_method="events" if counts is None else "continuous_usage",
    )


def test_itl_has_one_gap_per_token_and_the_per_token_mean() -> None:
    # 10 tokens in events of 4, 4, 2, 40 ms apart: 9 gaps whose mean is 80 ms / 9.
    multi = record([50_000_000, 90_000_000, 130_000_000], [4, 4, 2], 10)
    single = record([10, 20, 40], None, 3)
    cols = record_columns([multi, single])
    assert itl_counts(cols).tolist() == [9, 2]
    itl = request_metrics([multi, single]).itl_s
    assert itl.size == 11
    first = itl[:9]
    assert first[:3].tolist() == [0.0, 0.0, 0.0]  # tokens that came with the first one
    assert first[3:].tolist() == pytest.approx([0.01] * 4 + [0.02] * 2)
    assert first.mean() == pytest.approx(0.08 / 9)
    assert itl[9:].tolist() == pytest.approx([10e-9, 20e-9])


def test_events_that_carry_no_token_are_merged_into_the_next() -> None:
    reader = read(
        [
            chunk({"reasoning": " x"}, usage={"completion_tokens": 2}),
            chunk({"content": "\u00e9"}, usage={"completion_tokens": 2}),
            chunk({"content": " y"}, "stop", usage={"completion_tokens": 4}),
        ]
    )
    counts = counts_from_running(reader.running, len(reader.token_ns))
    assert counts is not None
    base = record([int(s) for s in reader.token_ns], None, 4)
    merged = with_event_counts(base, counts, "continuous_usage", reader)
    assert merged.token_ns.tolist() == [1_000, 1_200]
    assert merged.event_tokens is not None
    assert merged.event_tokens.tolist() == [2, 2]
    assert merged.reasoning_tokens == 2
    assert itl_counts(record_columns([merged])).tolist() == [3]


async def test_local_tokenizer_counts_event_texts_without_special_tokens(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"<s>": 0, "a": 1, "b": 2}, "<s>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.post_processor = tokenizers.processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 0)]
    )
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    counter = EventCounter(
        EventCounterSpec(kind="tokenizer", tokenizer_file=str(path)), None, "", "m"
    )
    # Multi-token events without continuous usage: the texts kept by the reader, counted after.
    reader = read(
        [
            chunk({"content": " a b a b"}),
            chunk({"content": " a b"}),
            chunk({"content": " a b a"}, "length"),
            usage_chunk(9),
        ],
        keep_texts=True,
    )
    assert reader.texts is not None
    counts = await counter.count(reader.texts)
    assert counts == [4, 2, 3]  # no <s> per event
    assert reconcile(counts, reader.output_tokens).tolist() == [4, 2, 3]
    broken = EventCounter(
        EventCounterSpec(kind="tokenizer", tokenizer_file="/nonexistent"), None, "", "m"
    )
    assert await broken.count(["a"]) is None
    assert broken.broken is not None
