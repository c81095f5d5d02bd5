"""Hostile bytes into the SSE reader: a verdict (ok-shaped, or one failure reason), never a raise.

Properties, for any body split into any chunks:
- `feed` and `end_of_body` never raise and finish quickly (no quadratic rescans of a long line);
- the verdict is either no error, or exactly one of `malformed_event` / `error_event` with a
  one-line detail, and every field has its documented type;
- the verdict does not depend on how the body was chunked (the socket decides that, not the server).
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.engine.records import REASON_ERROR_EVENT, REASON_MALFORMED_EVENT
from gputui.engine.sse import StreamReader

FUZZ = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
KEYS = ["choices", "text", "delta", "content", "reasoning_content", "finish_reason", "usage"]
KEYS += ["model", "error", "object", "completion_tokens", "prompt_tokens", "timings", "index"]


@st.composite
def openai_like(draw: st.DrawFn) -> Any:
    """Chunks shaped like OpenAI's, with any field possibly of the wrong type."""
    choice = draw(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=4))
    if draw(st.booleans()):
        choice["delta"] = draw(
            st.one_of(json_values, st.dictionaries(st.sampled_from(KEYS), json_values, max_size=3))
        )
    obj: dict[str, Any] = {"choices": draw(st.one_of(st.just([choice]), json_values))}
    for key in draw(st.lists(st.sampled_from(KEYS), max_size=3)):
        obj[key] = draw(
            st.one_of(json_values, st.dictionaries(st.sampled_from(KEYS), json_values, max_size=3))
        )
    return obj


@st.composite
def sse_event(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["json", "done", "raw", "comment", "field", "broken"]))
    if kind == "json":
        payload = orjson.dumps(draw(st.one_of(openai_like(), json_values)))
    elif kind == "done":
        payload = b"[DONE]"
    elif kind == "raw":
        payload = draw(st.binary(max_size=40))
    elif kind == "comment":
        return b": " + draw(st.binary(max_size=10)).replace(b"\n", b"") + b"\n\n"
    elif kind == "field":
        name = draw(st.sampled_from([b"event", b"id", b"retry", b"bogus", b""]))
        return name + b": " + draw(st.binary(max_size=10)) + b"\n\n"
    else:
        full = b"data: " + orjson.dumps(draw(openai_like()))
        payload = full[6 : draw(st.integers(6, len(full)))]
    end = draw(st.sampled_from([b"\n\n", b"\r\n\r\n", b"\r\r", b"\n", b""]))
    prefix = draw(st.sampled_from([b"data: ", b"data:", b"data:  ", b"DATA: "]))
    return prefix + payload + end


bodies = st.one_of(
    st.binary(max_size=300),
    st.lists(sse_event(), max_size=8).map(b"".join),
)


@st.composite
def chunked(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    body = draw(bodies)
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=10)))
    bounds = [0, *cuts, len(body)]
    return body, [body[a:b] for a, b in itertools.pairwise(bounds)]


def verdict(chunks: list[bytes]) -> tuple[Any, ...]:
    reader = StreamReader()
    for chunk in chunks:
        reader.feed(chunk, 1000)
    reader.end_of_body(2000)
    check_shape(reader)
    return (
        reader.error,
        reader.events,
        len(reader.token_ns),
        reader.finish_reason,
        reader.output_tokens,
        reader.input_tokens,
        reader.model,
        reader.done,
    )


def check_shape(reader: StreamReader) -> None:
    assert reader.error in (None, REASON_MALFORMED_EVENT, REASON_ERROR_EVENT)
    if reader.error is not None:
        assert isinstance(reader.error_detail, str)
        assert "\n" not in reader.error_detail and len(reader.error_detail) <= 200
    assert reader.finish_reason is None or isinstance(reader.finish_reason, str)
    assert reader.model is None or isinstance(reader.model, str)
    for count in (reader.output_tokens, reader.input_tokens):
        assert count is None or type(count) is int
    assert all(type(t) is int for t in reader.token_ns)
    assert reader.first_token_ns == (reader.token_ns[0] if reader.token_ns else None)


@FUZZ
@given(chunked())
def test_any_bytes_any_chunking_gives_one_verdict(case: tuple[bytes, list[bytes]]) -> None:
    body, chunks = case
    assert verdict(chunks) == verdict([body])


@FUZZ
@given(st.binary(max_size=2000), st.integers(1, 64))
def test_random_bytes_in_small_reads(body: bytes, size: int) -> None:
    verdict([body[i : i + size] for i in range(0, len(body), size)])


def test_invalid_utf8_and_deep_nesting_are_malformed_events() -> None:
    cases = [
        b'data: {"choices":[{"text":"\xff\xfe"}]}\n\n',
        b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n",
        b'data: {"choices":[{"text":' + b"[" * 2000 + b"]" * 2000 + b"}]}\n\n",
        b'data: {"choices":{"0":{"text":"x"}}}\n\n',
        b'data: {"choices":[{"delta":"x"}]}\n\n',
    ]
    for body in cases:
        reader = StreamReader()
        reader.feed(body, 1)
        reader.end_of_body(2)
        assert reader.error == REASON_MALFORMED_EVENT, body[:60]
        check_shape(reader)


def test_huge_lines_fail_fast_however_they_are_read() -> None:
    line = b"data: " + b"x" * (5 * 1024 * 1024)
    for size in (65536, 1024):
        reader = StreamReader()
        started = time.perf_counter()
        for i in range(0, len(line), size):
            reader.feed(line[i : i + size], i)
        reader.end_of_body(len(line))
        assert time.perf_counter() - started < 5.0
        assert reader.error == REASON_MALFORMED_EVENT
        assert reader.error_detail is not None and "4 MiB" in reader.error_detail


def test_a_long_valid_event_byte_by_byte_is_linear() -> None:
    text = "t" * 200_000
    event = b'data: {"choices":[{"text":"%s","finish_reason":"stop"}]}\n\n' % text.encode()
    reader = StreamReader()
    started = time.perf_counter()
    for i in range(0, len(event), 16):
        reader.feed(event[i : i + 16], i)
    reader.end_of_body(len(event))
    assert time.perf_counter() - started < 5.0
    assert reader.error is None
    assert len(reader.token_ns) == 1 and reader.finish_reason == "stop"
