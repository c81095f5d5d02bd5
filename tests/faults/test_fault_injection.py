"""The simulator's fault injection, piece by piece: the spec, the draws, and each fault's bytes."""

from __future__ import annotations

import argparse
import math
import re
from typing import Any

import orjson
import pytest

from gputui.cli.sim_flags import add_sim_arguments
from gputui.cli.typed import take
from gputui.engine.records import REASON_ERROR_EVENT, REASON_MALFORMED_EVENT
from gputui.engine.sse import StreamReader
from gputui.sim.command import SimOptions, fault_spec
from gputui.sim.faults import (
    EXPECTED_REASON,
    FAULTS,
    GARBAGE,
    HTTP429,
    HTTP503,
    RESET,
    STALL,
    FaultInjector,
    FaultSpec,
    FaultySink,
    http_fault_response,
)
from gputui.sim.sinks import BufferedSink, StreamSink
from gputui.sim.truth import TruthRecorder


class FakeTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def abort(self) -> None:
        self.aborted = True

    def get_extra_info(self, name: str) -> Any:
        return None

    def is_closing(self) -> bool:
        return self.aborted


def dechunk(body: bytes) -> tuple[bytes, bool]:
    out = b""
    while body:
        size_line, body = body.split(b"\r\n", 1)
        size = int(size_line, 16)
        if size == 0:
            return out, True
        out += body[:size]
        body = body[size + 2 :]
    return out, False


def faulty_stream(
    fault: str, max_tokens: int = 8
) -> tuple[FaultySink, FakeTransport, list[int], list[int]]:
    transport = FakeTransport()
    done: list[int] = []
    released: list[int] = []
    inner = StreamSink(
        transport,  # type: ignore[arg-type]
        TruthRecorder(),
        lambda: done.append(1),
        request_id=5,
        chat=False,
        model="m",
        prompt_tokens=3,
        max_tokens=max_tokens,
        arrival_ns=0,
        include_usage=True,
        keep_alive=True,
    )
    return FaultySink(inner, fault, max_tokens, released.append), transport, done, released


def read(transport: FakeTransport) -> tuple[StreamReader, bool]:
    body, ended = dechunk(b"".join(transport.writes).split(b"\r\n\r\n", 1)[1])
    reader = StreamReader()
    reader.feed(body, 1)
    reader.end_of_body(2)
    return reader, ended


def test_parse_and_describe() -> None:
    spec = FaultSpec.parse("stall=0.005, reset=0.01,http503=0.02,,slow_start=0.1", seed=3)
    assert spec.probabilities == {"stall": 0.005, "reset": 0.01, "http503": 0.02, "slow_start": 0.1}
    assert spec.seed == 3
    assert spec.describe() == "reset=0.01,stall=0.005,http503=0.02,slow_start=0.1"
    assert FaultSpec.parse("").probabilities == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bogus=0.1", "unknown fault 'bogus'"),
        ("reset", "expected NAME=PROBABILITY"),
        ("reset=x", "not a number"),
        ("reset=1.5", "must be in [0, 1]"),
        ("reset=-0.1", "must be in [0, 1]"),
        ("reset=nan", "must be in [0, 1]"),
        ("reset=0.6,stall=0.6", "add up to 1.2"),
        ("reset=0.1,reset=0.2", "given twice"),
    ],
)
def test_bad_specs_say_why_in_one_line(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        FaultSpec.parse(text)
    assert "\n" not in str(info.value)


def test_bad_spec_is_a_usage_error_of_gputui_sim(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_sim_arguments(parser)
    with pytest.raises(SystemExit) as info:
        parser.parse_args(["--faults", "reset=2"])
    assert info.value.code == 2
    assert "--faults: fault reset: probability must be in [0, 1]" in capsys.readouterr().err
    args = parser.parse_args(["--faults", "reset=0.2", "--faults-seed", "9", "--die-after", "3"])
    assert fault_spec(take(SimOptions, args)) == FaultSpec({"reset": 0.2}, seed=9)
    assert args.die_after == 3.0
    assert fault_spec(take(SimOptions, parser.parse_args([]))) is None


def test_draws_are_seeded_exclusive_and_at_their_probabilities() -> None:
    probabilities = dict.fromkeys(FAULTS, 0.1)
    n = 20_000
    first = FaultInjector(FaultSpec(probabilities, seed=1))
    draws = [first.draw() for _ in range(n)]
    again = FaultInjector(FaultSpec(probabilities, seed=1))
    assert [again.draw() for _ in range(n)] == draws
    other = FaultInjector(FaultSpec(probabilities, seed=2))
    assert [other.draw() for _ in range(n)] != draws
    assert first.drawn == n
    assert sum(first.injected.values()) + draws.count(None) == n
    sigma = math.sqrt(n * 0.1 * 0.9)
    for name in FAULTS:
        assert first.injected[name] == draws.count(name)
        assert abs(first.injected[name] - 0.1 * n) < 4 * sigma
    first.reset()
    assert first.drawn == 0 and not any(first.injected.values())


def test_no_faults_draws_nothing() -> None:
    injector = FaultInjector(FaultSpec())
    assert {injector.draw() for _ in range(100)} == {None}
    assert injector.snapshot()["drawn"] == 100
    assert injector.snapshot()["spec"] == ""


@pytest.mark.parametrize(("fault", "status"), [(HTTP503, 503), (HTTP429, 429)])
def test_http_faults_are_openai_errors(fault: str, status: int) -> None:
    response = http_fault_response(fault, keep_alive=True)
    head, body = response.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 %d " % status)
    assert b"connection: close" not in head
    assert (b"retry-after: 1" in head) == (status == 429)
    assert orjson.loads(body)["error"]["code"] == status


def test_reset_strikes_mid_stream_and_releases_the_profile() -> None:
    sink, transport, done, released = faulty_stream(RESET, max_tokens=8)
    sink.emit_tokens(3)
    assert not transport.is_closing()
    sink.emit_tokens(2)  # crosses the fault point (token 4): one more token, then the reset
    assert transport.is_closing()
    assert sink.closed
    assert released == [5]
    assert done == []  # the response never completes
    reader, ended = read(transport)
    assert len(reader.token_ns) == 4
    assert not ended
    sink.emit_tokens(3)
    assert len(read(transport)[0].token_ns) == 4


def test_stall_goes_silent_and_keeps_the_connection() -> None:
    sink, transport, done, released = faulty_stream(STALL, max_tokens=8)
    for _ in range(8):
        sink.emit_tokens()
    sink.finish("length")
    assert not transport.is_closing()
    assert done == []
    assert released == [5]
    reader, ended = read(transport)
    assert len(reader.token_ns) == 4
    assert not ended


def test_error_event_ends_the_stream_like_vllm() -> None:
    sink, transport, done, released = faulty_stream("error_event", max_tokens=8)
    for _ in range(8):
        sink.emit_tokens()
    assert done == [1]
    assert released == [5]
    reader, ended = read(transport)
    assert ended
    assert reader.error == REASON_ERROR_EVENT
    assert reader.error_detail is not None and "injected fault" in reader.error_detail
    assert len(reader.token_ns) == 4


def test_garbage_is_one_bad_event_in_a_stream_that_ends_normally() -> None:
    sink, transport, done, released = faulty_stream(GARBAGE, max_tokens=8)
    sink.emit_tokens(8)
    assert done == [1]
    assert released == []  # the profile serves the rest of the stream
    body, ended = dechunk(b"".join(transport.writes).split(b"\r\n\r\n", 1)[1])
    assert ended
    assert body.count(b'"text":" tok') == 8  # every token still sent
    reader = StreamReader()
    reader.feed(body, 1)
    assert reader.error == REASON_MALFORMED_EVENT


def test_a_profile_that_ends_early_still_gets_the_fault() -> None:
    sink, transport, _, released = faulty_stream(RESET, max_tokens=16)
    sink.emit_tokens(2, finish_reason="stop")  # EOS before the fault point (token 8)
    assert transport.is_closing() and released == [5]
    sink, transport, done, _ = faulty_stream(GARBAGE, max_tokens=16)
    sink.emit_tokens(2)
    sink.finish("stop")
    assert done == [1]
    assert read(transport)[0].error == REASON_MALFORMED_EVENT


def test_one_token_requests_strike_before_the_first_token() -> None:
    sink, transport, _, _ = faulty_stream(RESET, max_tokens=1)
    sink.emit_tokens(1)
    assert transport.is_closing()
    assert read(transport)[0].token_ns == []


def test_non_streamed_requests_get_the_fault_in_one_response() -> None:
    for fault, status in (("error_event", b"500"), (GARBAGE, b"200")):
        transport, done = FakeTransport(), []
        inner = BufferedSink(
            transport,  # type: ignore[arg-type]
            TruthRecorder(),
            lambda: done.append(1),  # noqa: B023 - called before the loop moves on
            request_id=1,
            chat=False,
            model="m",
            prompt_tokens=1,
            max_tokens=4,
            keep_alive=True,
        )
        sink = FaultySink(inner, fault, 4, lambda _: None)
        sink.emit_tokens(4)
        (response,) = transport.writes
        assert response.startswith(b"HTTP/1.1 " + status)
        body = response.split(b"\r\n\r\n", 1)[1]
        if fault == GARBAGE:
            with pytest.raises(orjson.JSONDecodeError):
                orjson.loads(body)
        else:
            assert "injected fault" in orjson.loads(body)["error"]["message"]
        assert done == [1]


def test_every_fault_has_an_expected_reason() -> None:
    assert set(EXPECTED_REASON) == set(FAULTS)
    with pytest.raises(ValueError, match="not a mid-stream fault"):
        faulty_stream(HTTP503)
