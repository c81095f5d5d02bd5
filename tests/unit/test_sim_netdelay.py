"""The simulator's far-away client: every write leaves late, in order, and close waits for them."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from gputui.sim.netdelay import DelayedTransport, NetworkDelay


class _Inner(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[float, bytes]] = []
        self.closed_at: float | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append((time.perf_counter(), bytes(data)))

    def close(self) -> None:
        self.closed_at = time.perf_counter()

    def is_closing(self) -> bool:
        return self.closed_at is not None


def test_writes_leave_late_in_order_and_close_waits() -> None:
    async def scenario() -> tuple[_Inner, float]:
        inner = _Inner()
        loop = asyncio.get_running_loop()
        delayed = DelayedTransport(inner, NetworkDelay(30.0, 20.0), loop, random.Random(1))
        start = time.perf_counter()
        for i in range(50):
            delayed.write(b"%d," % i)
        delayed.close()
        assert delayed.is_closing()
        await asyncio.sleep(0.12)
        return inner, start

    inner, start = asyncio.run(scenario())
    assert b"".join(d for _, d in inner.writes) == b"".join(b"%d," % i for i in range(50))
    first = inner.writes[0][0] - start
    assert first >= 0.010 - 0.002  # 30 ms minus up to 20 ms of jitter
    assert inner.closed_at is not None
    assert inner.closed_at >= inner.writes[-1][0]


def test_negative_delays_are_refused() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        NetworkDelay(-1.0)
    assert not NetworkDelay(0.0).active


def test_a_drawn_hold_is_the_one_the_next_write_gets() -> None:
    # The simulator says a /health answer's hold before writing it (x-sim-network-delay-ms), so
    # the hold it declares must be the one that answer is scheduled with, jitter included (the
    # loop's timer may then fire late on a busy host: that is not the check).
    async def scenario() -> list[tuple[float, float]]:
        loop = asyncio.get_running_loop()
        delayed = DelayedTransport(_Inner(), NetworkDelay(30.0, 20.0), loop, random.Random(3))
        pairs = []
        for _ in range(5):
            declared_ms = delayed.draw_ms()
            written = loop.time()
            delayed.write(b"x")
            pairs.append((declared_ms, (delayed._queue[-1][0] - written) * 1e3))
            await asyncio.sleep(0.06)
        return pairs

    pairs = asyncio.run(scenario())
    assert len({round(d, 3) for d, _ in pairs}) > 1  # drawn afresh each time
    for declared_ms, scheduled_ms in pairs:
        assert 10.0 <= declared_ms <= 50.0
        assert scheduled_ms == pytest.approx(declared_ms, abs=0.5)
