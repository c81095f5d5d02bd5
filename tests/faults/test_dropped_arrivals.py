"""When --max-in-flight binds, a level change drops the arrivals still waiting for a slot: they are
counted (issue 31), in the engine's status and so in the snapshot's `client` section, and per
step (`steps[].dropped_arrivals`: the step whose schedule they were in)."""

from __future__ import annotations

import time

import pytest

from gputui.engine.client import ClientConfig
from gputui.engine.load import RequestShape
from gputui.engine.process import EngineConfig
from gputui.engine.target import parse_target
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepSpec, aggregate_step
from gputui.session import Session
from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import start_background
from gputui.snapshot.assemble import _with_dropped
from gputui.snapshot.models import Step, step_from_result

pytestmark = pytest.mark.timeout(60)


def test_arrivals_waiting_for_a_slot_at_a_level_change_are_counted() -> None:
    profile = FixedProfileSpec(ttft_ms=20, itl_ms=20, served_model_name="sim")  # ~0.3 s each
    with start_background(profile) as sim:
        config = EngineConfig(
            client=ClientConfig(
                target=parse_target(sim.url), model="sim", extra_body={"ignore_eos": True}
            ),
            shape=RequestShape(16, 16),
            max_in_flight=2,  # 2 slots of ~0.3 s: ~7 req/s of the 40 asked for
        )
        session = Session(config, Sla(), warmup_s=0.0)
        session.start(frame_interval_s=None)
        session.set_load("rate", 40.0)
        time.sleep(2.0)
        session.set_load("rate", 1.0)  # the overdue arrivals of rate 40 are dropped here
        time.sleep(1.0)
        session.stop(cancel=False, drain_timeout_s=10)
        status = session.status
    assert status is not None
    # ~2 s at 40/s asked, ~7/s sent: some 60 were due and unsent when the level changed
    assert 20 <= status.arrivals_dropped <= 80
    sent = sum(1 for r in session.all_records() if r.step_index == 0)
    assert sent + status.arrivals_dropped == pytest.approx(80, abs=25)
    # Per step, by the step index they were scheduled under: most at the change from rate 40
    # (step 0); the hand-over runs rate 40 on under step 1's index (as its sent requests are
    # step 1's warm-up), and what that carry-on left unsent when rate 1 started counts there.
    by_step = status.arrivals_dropped_by_step
    assert set(by_step) <= {0, 1} and sum(by_step.values()) == status.arrivals_dropped
    assert by_step[0] >= 20
    # In the snapshot: a hidden carry-on step's (index 1, after a hold) go to the step it ran on.
    steps = _with_dropped(
        [_step(0, "rate"), _step(2, "rate"), _step(3, "concurrency")], {0: 7, 1: 2, 2: 0}
    )
    assert [getattr(s, "dropped_arrivals", None) for s in steps] == [9, 0, None]


def _step(index: int, mode: str) -> Step:
    result = aggregate_step(StepSpec(index, mode, 1.0, 0, 0, 10**9), [], Sla())  # type: ignore[arg-type]
    return step_from_result(result)
