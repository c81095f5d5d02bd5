"""Failures never vanish (issue 31): a server failing 20 % of requests has no capacity under the
default error-rate bound (5 %), and one under --max-error-rate 0.25. End to end: `gputui run`
against the simulator with http503=0.2, one short step each."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.sim.faults import FaultSpec
from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import start_background
from gputui.snapshot.store import load_snapshot
from tests.faults.harness import gputui_run

pytestmark = pytest.mark.timeout(120)


def test_a_fifth_failed_is_no_capacity_by_default_and_one_under_a_looser_bound(
    tmp_path: Path,
) -> None:
    profile = FixedProfileSpec(ttft_ms=20, itl_ms=2, served_model_name="sim")
    step = ("--concurrency", "8", "--step-seconds", "5")
    with start_background(profile, faults=FaultSpec({"http503": 0.2}, seed=1)) as sim:
        strict = gputui_run(sim.url, tmp_path / "default.json", *step)
        loose = gputui_run(sim.url, tmp_path / "loose.json", *step, "--max-error-rate", "0.25")
    assert strict.returncode == 0, strict.stderr
    assert loose.returncode == 0, loose.stderr
    default = load_snapshot(tmp_path / "default.json")
    assert default.sla.max_error_rate == 0.05
    (only,) = default.steps
    assert only.requests_failed > 0.1 * (only.requests_ok + only.requests_failed)
    assert default.capacity is None
    assert "error rate" in (default.capacity_reason or "")
    # failed requests are never good output, and the latencies say how many they leave out
    assert f"{only.requests_failed} failed left out" in strict.stdout
    assert only.goodput_requests_per_s <= only.requests_per_s
    looser = load_snapshot(tmp_path / "loose.json")
    assert looser.capacity is not None and looser.capacity.level == 8
    assert looser.capacity.error_rate is not None and 0.1 < looser.capacity.error_rate < 0.25
