"""The client's three timeouts, and which silence each one bounds.

A server that sends its headers and then queues the request says nothing until the first token:
that wait is TTFT, bounded only by the request timeout. Once the body has started, silence longer
than the stall timeout is a stall.
"""

from __future__ import annotations

import pytest

from gputui.engine.client import ClientConfig, StreamingClient, Timeouts
from gputui.engine.records import RequestRecord
from gputui.engine.target import parse_target
from tests.support.replay import Part, chunked, replay

pytestmark = pytest.mark.timeout(30)

SSE = [("Content-Type", "text/event-stream")]
TOKEN = b'data: {"choices":[{"text":"x","finish_reason":null}]}\n\n'
FINISH = b'data: {"choices":[{"text":"y","finish_reason":"length"}]}\n\n'
DONE = b"data: [DONE]\n\n"


async def send(parts: list[Part], timeouts: Timeouts) -> RequestRecord:
    async with replay([parts]) as server:
        client = StreamingClient(
            ClientConfig(target=parse_target(server.url), model="m", timeouts=timeouts)
        )
        try:
            return await client.send("hi", 2, request_id=0, step_index=0)
        finally:
            await client.aclose()


def headers_then(*events: tuple[float, bytes]) -> list[Part]:
    head, *_ = chunked(200, SSE, [])
    return [head, *((gap, b"%x\r\n%s\r\n" % (len(e), e)) for gap, e in events), (0.0, b"0\r\n\r\n")]


async def test_a_long_queue_before_the_first_token_is_not_a_stall() -> None:
    parts = headers_then((0.8, TOKEN), (0.0, FINISH), (0.0, DONE))
    record = await send(parts, Timeouts(connect_s=2, request_s=5, stall_s=0.3))
    assert record.ok, record.error_detail
    assert record.first_token_ns is not None
    assert record.first_token_ns - record.sent_ns > 700_000_000


async def test_silence_after_the_first_token_is_a_stall() -> None:
    parts = headers_then((0.0, TOKEN), (3.0, FINISH), (0.0, DONE))
    record = await send(parts, Timeouts(connect_s=2, request_s=5, stall_s=0.3))
    assert record.error == "stall"
    assert record.end_ns - record.sent_ns < 1_000_000_000


async def test_the_request_timeout_bounds_the_wait_for_the_first_token() -> None:
    parts = headers_then((3.0, TOKEN), (0.0, FINISH), (0.0, DONE))
    record = await send(parts, Timeouts(connect_s=2, request_s=0.5, stall_s=0.3))
    assert record.error == "timeout"


def test_defaults_suit_llm_serving() -> None:
    defaults = Timeouts()
    assert defaults.connect_s == 10.0  # a healthy server accepts in milliseconds
    assert defaults.request_s == 600.0  # a long queue plus thousands of tokens at ~20 tok/s
    assert defaults.stall_s == 60.0  # far above any inter-token gap, preemptions included
