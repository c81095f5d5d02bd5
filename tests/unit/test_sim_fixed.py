"""The fixed profile: exact token counts, finish reasons, absolute deadlines, metrics."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from gputui.sim.fixed import ZERO_ITL_BURST, FixedProfile, FixedProfileSpec
from gputui.sim.profile import SimRequest

pytestmark = pytest.mark.timeout(30)

REQUEST = SimRequest(
    request_id=1,
    arrival_ns=0,
    prompt_tokens=9,
    max_tokens=16,
    min_tokens=0,
    ignore_eos=False,
    chat=False,
    model="m",
)


class RecordingSink:
    def __init__(self, max_tokens: int, loop: asyncio.AbstractEventLoop) -> None:
        self.max_tokens = max_tokens
        self.stamps: list[int] = []
        self.calls: list[int] = []
        self.one_writes: list[bool] = []
        self.reason: str | None = None
        self.done = loop.create_future()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def emit_tokens(
        self,
        count: int = 1,
        finish_reason: str | None = None,
        *,
        one_write: bool = False,
        one_event: bool = False,
    ) -> None:
        self.calls.append(count)
        self.one_writes.append(one_write)
        self.stamps.extend([time.perf_counter_ns()] * count)
        if finish_reason is not None or len(self.stamps) >= self.max_tokens:
            self.finish(finish_reason or "length")

    def finish(self, finish_reason: str) -> None:
        self.reason = finish_reason
        self._closed = True
        self.done.set_result(None)


@pytest.mark.parametrize(
    ("eos_after", "ignore_eos", "min_tokens", "expected"),
    [
        (None, False, 0, (16, "length")),
        (5, False, 0, (5, "stop")),
        (5, True, 0, (16, "length")),
        (5, False, 8, (8, "stop")),
        (16, False, 0, (16, "length")),
        (40, False, 0, (16, "length")),
        (5, False, 16, (16, "length")),
    ],
)
def test_output_tokens(
    eos_after: int | None, ignore_eos: bool, min_tokens: int, expected: tuple[int, str]
) -> None:
    profile = FixedProfile(eos_after=eos_after)
    request = replace(REQUEST, ignore_eos=ignore_eos, min_tokens=min_tokens)
    assert profile.output_tokens(request) == expected


async def test_tokens_follow_absolute_deadlines() -> None:
    loop = asyncio.get_running_loop()
    profile = FixedProfile(ttft_ms=5, itl_ms=2)
    profile.bind(loop)
    arrival = time.perf_counter_ns()
    sink = RecordingSink(10, loop)
    profile.start(replace(REQUEST, arrival_ns=arrival, max_tokens=10), sink)
    await asyncio.wait_for(sink.done, 5)
    assert sink.reason == "length"
    assert sink.calls == [1] * 10
    for k, stamp in enumerate(sink.stamps):
        assert stamp >= arrival + 5_000_000 + k * 2_000_000
    text = profile.prometheus_text()
    assert 'vllm:generation_tokens_total{model_name="sim-model"} 10.0' in text
    assert 'vllm:prompt_tokens_total{model_name="sim-model"} 9.0' in text
    assert 'vllm:request_success_total{finished_reason="length",model_name="sim-model"} 1.0' in text
    assert 'vllm:num_requests_running{model_name="sim-model"} 0.0' in text
    assert 'vllm:num_requests_waiting{model_name="sim-model"} 0.0' in text


async def test_zero_itl_writes_in_bursts() -> None:
    loop = asyncio.get_running_loop()
    profile = FixedProfile(ttft_ms=0, itl_ms=0)
    profile.bind(loop)
    sink = RecordingSink(40, loop)
    profile.start(replace(REQUEST, arrival_ns=time.perf_counter_ns(), max_tokens=40), sink)
    await asyncio.wait_for(sink.done, 5)
    assert sink.calls == [ZERO_ITL_BURST, ZERO_ITL_BURST, 40 - 2 * ZERO_ITL_BURST]


async def test_cancel_stops_emitting_and_counts_an_abort() -> None:
    loop = asyncio.get_running_loop()
    profile = FixedProfile(ttft_ms=1, itl_ms=1)
    profile.bind(loop)
    sink = RecordingSink(1000, loop)
    profile.start(replace(REQUEST, arrival_ns=time.perf_counter_ns(), max_tokens=1000), sink)
    assert 'vllm:num_requests_running{model_name="sim-model"} 1.0' in profile.prometheus_text()
    await asyncio.sleep(0.02)
    sink._closed = True
    profile.cancel(REQUEST.request_id)
    emitted = len(sink.stamps)
    await asyncio.sleep(0.01)
    assert len(sink.stamps) == emitted
    text = profile.prometheus_text()
    assert 'vllm:request_success_total{finished_reason="abort",model_name="sim-model"} 1.0' in text
    assert 'vllm:num_requests_running{model_name="sim-model"} 0.0' in text


def test_invalid_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="ttft_ms"):
        FixedProfile(ttft_ms=-1)
    with pytest.raises(ValueError, match="eos_after"):
        FixedProfile(eos_after=0)
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(RuntimeError, match="bind"):
            FixedProfile().start(REQUEST, RecordingSink(1, loop))
    finally:
        loop.close()


def test_spec_builds_the_profile() -> None:
    profile = FixedProfileSpec(ttft_ms=20, itl_ms=5, eos_after=3, served_model_name="x").build()
    assert isinstance(profile, FixedProfile)
    assert (profile.ttft_ns, profile.itl_ns, profile.eos_after) == (20_000_000, 5_000_000, 3)
    assert profile.served_model_name == "x"


async def test_coalesced_writes_still_emit_every_event() -> None:
    loop = asyncio.get_running_loop()
    profile = FixedProfile(ttft_ms=0, itl_ms=0, coalesce_writes=True)
    profile.bind(loop)
    sink = RecordingSink(40, loop)
    profile.start(replace(REQUEST, arrival_ns=time.perf_counter_ns(), max_tokens=40), sink)
    await asyncio.wait_for(sink.done, 5)
    assert sink.calls == [ZERO_ITL_BURST, ZERO_ITL_BURST, 40 - 2 * ZERO_ITL_BURST]
    assert sink.one_writes == [True, True, True]
