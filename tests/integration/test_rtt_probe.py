"""The RTT probe is timed off the engine's loop: a loop blocked for 300 ms is not network.

Against the simulator 40 ms away, a probe sent while the event loop is blocked (a stall of the
client) still reads about 40 ms; timed on the loop, as before issue 31, it read the block too.
"""

from __future__ import annotations

import asyncio
import time

from gputui.engine.probe import RttProbe
from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.netdelay import NetworkDelay
from gputui.sim.runner import start_background

BLOCK_S = 0.3


def test_a_blocked_loop_does_not_count_as_network() -> None:
    spec = FixedProfileSpec(ttft_ms=5, itl_ms=1, served_model_name="sim")
    samples: list[int | None] = []

    async def scenario(probe: RttProbe) -> None:
        probe.start(asyncio.get_running_loop())
        for _ in range(3):
            time.sleep(BLOCK_S)  # noqa: ASYNC251 - the loop stalls while probes are in flight
            await asyncio.sleep(0.05)
        probe.stop()
        await asyncio.sleep(0.1)  # the samples are handed over on the loop

    with start_background(spec, network=NetworkDelay(40.0, 0.0)) as sim:
        host, port = sim.url.removeprefix("http://").split(":")
        probe = RttProbe(host, int(port), "/health", 0.05, samples.append, timeout_s=5.0)
        asyncio.run(scenario(probe))
    rtts = [s / 1e6 for s in samples if s is not None]
    print(f"\nRTT samples while the loop blocked {BLOCK_S * 1e3:.0f} ms at a time: {rtts}")
    assert len(rtts) >= 5 and None not in samples
    assert all(35.0 <= r < 40.0 + 0.5 * BLOCK_S * 1e3 for r in rtts), rtts
    assert sorted(rtts)[len(rtts) // 2] < 60.0  # the median is the network's 40 ms
