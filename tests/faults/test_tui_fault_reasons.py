"""Under injected faults the live view counts every failure by its reason, exactly as the server
injected them (over a rolling window long enough that nothing expires)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from gputui.frontends.live import LiveView
from gputui.sim.faults import EXPECTED_REASON, FaultSpec
from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import start_background
from tests.e2e.tmux import wait_for
from tests.faults.harness import sim_stats
from tests.faults.test_tui_server_death import live_controller

pytestmark = pytest.mark.timeout(60)

FAULTS = FaultSpec(
    {
        "reset": 0.06,
        "http503": 0.06,
        "http429": 0.06,
        "error_event": 0.06,
        "garbage": 0.06,
        "slow_start": 0.05,
    },
    seed=11,
    slow_start_ms=200.0,
)


def _drained(view: LiveView) -> bool:
    frame = view.frame
    return frame is not None and frame.paused and frame.in_flight == 0


def test_errors_by_reason_match_what_the_server_injected(tmp_path: Path) -> None:
    profile = FixedProfileSpec(ttft_ms=20, itl_ms=2, served_model_name="sim")
    with start_background(profile, faults=FAULTS) as sim:
        controller = live_controller(sim.url, tmp_path, window_s=60.0, start_level=8.0)
        try:
            controller.start()
            view = controller.view
            wait_for(view, lambda v: v.frame is not None and v.frame.window.n_requests >= 200, 20)
            controller.toggle_pause()  # no new requests; those in flight finish
            drained = wait_for(view, _drained, 10).frame
            assert drained is not None
            # A frame built after the last record came back.
            final = wait_for(view, lambda v: v.frame is not None and v.frame.seq > drained.seq)
            stats = sim_stats(sim.url)["faults"]
        finally:
            controller.stop(save=False)
    assert final.frame is not None
    window = final.frame.window
    expected: Counter[str] = Counter()
    for fault, count in stats["injected"].items():
        reason = EXPECTED_REASON[fault]
        if reason is not None and count:
            expected[reason] += count
    assert len(expected) == 5  # every failing fault was drawn at least once
    assert window.errors == dict(expected)
    assert window.requests_failed == sum(expected.values())
    assert window.requests_ok + window.requests_failed == stats["drawn"]
    # The event log tells the same story, reason by reason ("3 x http_503").
    from_events: Counter[str] = Counter()
    for event in final.events:
        count, sep, reason = event.text.partition(" x ")
        if event.kind == "error" and sep:
            from_events[reason] += int(count)
    assert from_events == expected
