"""The deadline scheduler: callbacks in deadline order, never early, failures contained."""

from __future__ import annotations

import asyncio
import time

import pytest

from gputui.sim.deadlines import DeadlineScheduler, timerfd_available

pytestmark = pytest.mark.timeout(30)

MODES = [pytest.param(False, id="call_at")]
if timerfd_available():
    MODES.append(pytest.param(True, id="timerfd"))


@pytest.mark.parametrize("use_timerfd", MODES)
async def test_callbacks_run_in_order_and_never_early(use_timerfd: bool) -> None:
    loop = asyncio.get_running_loop()
    scheduler = DeadlineScheduler(loop, use_timerfd=use_timerfd)
    assert scheduler.precise is use_timerfd
    fired: list[tuple[int, int]] = []
    done = loop.create_future()
    start = time.perf_counter_ns()
    deadlines = [start + ms * 1_000_000 for ms in (30, 5, 20, 5, 1, 12)]

    def make(deadline: int) -> None:
        def callback() -> None:
            fired.append((deadline, time.perf_counter_ns()))
            if len(fired) == len(deadlines):
                done.set_result(None)

        scheduler.call_at_ns(deadline, callback)

    for deadline in deadlines:
        make(deadline)
    await asyncio.wait_for(done, 5)
    scheduler.close()
    assert [d for d, _ in fired] == sorted(deadlines)
    assert all(at >= deadline for deadline, at in fired)


@pytest.mark.flaky(reruns=1)  # real time: one wake-up 5 ms late (a busy host) moves the mean
@pytest.mark.parametrize("use_timerfd", MODES)
async def test_periodic_chain_keeps_absolute_deadlines(use_timerfd: bool) -> None:
    loop = asyncio.get_running_loop()
    scheduler = DeadlineScheduler(loop, use_timerfd=use_timerfd)
    period = 2_000_000
    first = time.perf_counter_ns() + period
    stamps: list[int] = []
    done = loop.create_future()

    def tick() -> None:
        stamps.append(time.perf_counter_ns())
        if len(stamps) == 50:
            done.set_result(None)
        else:
            scheduler.call_at_ns(first + len(stamps) * period, tick)

    scheduler.call_at_ns(first, tick)
    await asyncio.wait_for(done, 5)
    scheduler.close()
    assert all(stamp >= first + k * period for k, stamp in enumerate(stamps))
    # No drift: the mean period over the chain is exact within one late wake-up.
    mean_period = (stamps[-1] - stamps[0]) / (len(stamps) - 1)
    assert abs(mean_period - period) < 100_000


async def test_a_failing_callback_does_not_stop_the_others() -> None:
    loop = asyncio.get_running_loop()
    errors: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    scheduler = DeadlineScheduler(loop)
    ran = loop.create_future()
    now = time.perf_counter_ns()

    def boom() -> None:
        raise RuntimeError("boom")

    scheduler.call_at_ns(now + 1_000_000, boom)
    scheduler.call_at_ns(now + 1_000_000, lambda: ran.set_result(True))
    assert await asyncio.wait_for(ran, 5)
    scheduler.close()
    assert isinstance(errors[0]["exception"], RuntimeError)


async def test_due_callbacks_yield_to_the_loop_between_batches() -> None:
    loop = asyncio.get_running_loop()
    scheduler = DeadlineScheduler(loop)
    order: list[str] = []
    done = loop.create_future()
    now = time.perf_counter_ns()

    def spin(left: int) -> None:
        order.append("tick")
        if left:
            scheduler.call_at_ns(now, lambda: spin(left - 1))
        else:
            done.set_result(None)

    scheduler.call_at_ns(now, lambda: spin(20))
    loop.call_soon(order.append, "other")
    await asyncio.wait_for(done, 5)
    scheduler.close()
    assert "other" in order[:3]
