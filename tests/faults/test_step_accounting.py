"""Per step, every request sent is accounted for: sent = ok + failed, under every kind of fault.

In-process, because the per-step sent counts live in the Session (the snapshot keeps only the
outcomes): closed loop, open loop and a burst, against a server injecting every fault.
"""

from __future__ import annotations

import time

import pytest

from gputui.engine.client import ClientConfig, Timeouts
from gputui.engine.load import RequestShape
from gputui.engine.process import EngineConfig
from gputui.engine.target import parse_target
from gputui.metrics.sla import Sla
from gputui.session import Session
from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import start_background
from tests.faults.harness import ALL_AT_ONCE, STALL_TIMEOUT_S, sim_stats

pytestmark = pytest.mark.timeout(90)


def test_sent_equals_ok_plus_failed_per_step() -> None:
    profile = FixedProfileSpec(ttft_ms=20, itl_ms=2, served_model_name="sim")
    with start_background(profile, faults=ALL_AT_ONCE) as sim:
        config = EngineConfig(
            client=ClientConfig(
                target=parse_target(sim.url),
                model="sim",
                extra_body={"ignore_eos": True},
                timeouts=Timeouts(connect_s=5, request_s=30, stall_s=STALL_TIMEOUT_S),
            ),
            shape=RequestShape(16, 16),
        )
        session = Session(config, Sla(), warmup_s=0.0)
        session.start(frame_interval_s=None)
        session.set_load("concurrency", 6)
        time.sleep(1.0)
        session.set_load("rate", 120)
        time.sleep(0.6)
        session.burst(30)
        time.sleep(0.6)
        session.stop(cancel=False, drain_timeout_s=10)
        stats = sim_stats(sim.url)
    results = session.finished_steps()
    assert [r.mode for r in results] == ["concurrency", "rate"]
    sent = session.sent_by_step()
    for result in results:
        assert result.requests_failed > 0
        # Every request is in one step: measured, or sent before its level started (the
        # hand-over from the step before: its load, unmeasured) and counted as warm-up.
        counted = result.requests_ok + result.requests_failed + result.requests_warmup
        counted += result.requests_burst  # the burst's, apart from the step's figures
        counted += result.requests_under_burst  # the step's, in flight under the burst's load
        assert sent[result.index] == counted, result.index
        assert sum(result.errors.values()) == result.requests_failed
    assert session.cancelled == 0
    assert sum(sent.values()) == stats["faults"]["drawn"]
