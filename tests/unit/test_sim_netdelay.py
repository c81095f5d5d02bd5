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
    # the hold it declares must be the one that answer gets, jitter included.
    async def scenario() -> tuple[float, float, float]:
        inner = _Inner()
        loop = asyncio.get_running_loop()
        delayed = DelayedTransport(inner, NetworkDelay(30.0, 20.0), loop, random.Random(3))
        declared_ms = delayed.draw_ms()
        start = time.perf_counter()
        delayed.write(b"x")
        await asyncio.sleep(0.07)
        return declared_ms, inner.writes[0][0] - start, start

    declared_ms, held_s, _ = asyncio.run(scenario())
    assert 10.0 <= declared_ms <= 50.0
    assert held_s * 1e3 == pytest.approx(declared_ms, abs=3.0)
