"""A step measures exactly its own load (issue 28): the old level hands over before the new starts.

On the simulator, closed and open loop, up and down: every measured request of step k has ended
before step k+1's level started; what the old load sent meanwhile is step k+1's, unmeasured; the
time it took is each step's `handover_s`.
"""

from __future__ import annotations

import itertools
import time

from gputui.sim.runner import SimProcess
from tests.integration.test_session import make_session

LEVELS = [("concurrency", 2.0), ("concurrency", 8.0), ("concurrency", 1.0), ("rate", 40.0)]


def test_old_level_requests_finish_before_the_new_level_starts(fixed_sim: SimProcess) -> None:
    session = make_session(fixed_sim.url)
    session.start(frame_interval_s=None)
    for mode, level in LEVELS:
        session.set_load(mode, level)  # type: ignore[arg-type]
        time.sleep(0.8)
    session.stop(cancel=False, drain_timeout_s=10)
    specs = session.step_specs()
    results = session.finished_steps()
    records = session.all_records()
    assert [(s.mode, s.level) for s in specs] == LEVELS
    assert [r.index for r in results] == [0, 1, 2, 3]
    for step, after in itertools.pairwise(specs):
        mine = [r for r in records if r.step_index == step.index]
        measured = [r for r in mine if step.measure_start_ns <= r.sent_ns < step.end_ns]
        assert len(measured) == results[step.index].requests_ok > 0
        last_end_ns = max(r.end_ns for r in measured)
        assert last_end_ns <= after.start_ns  # none of them saw the next level
        # It waited for them, then started once a batch (every 0.1 s) brought the last one.
        assert after.start_ns > step.end_ns
        assert after.start_ns - last_end_ns < 300_000_000
        assert abs(results[step.index].handover_s - (last_end_ns - step.end_ns) / 1e9) < 1e-6
        # Sent by the old load during the hand-over: the next step's, before its start.
        tail = [r for r in records if r.step_index == after.index and r.sent_ns < after.start_ns]
        assert tail
        assert results[after.index].requests_warmup >= len(tail)


def test_a_burst_is_measured_apart_and_the_step_resettles_after_it(fixed_sim: SimProcess) -> None:
    """Issue 28: the TUI's `b` never enters a step's figures; the level re-settles after it."""
    session = make_session(fixed_sim.url)
    session.start(frame_interval_s=0.25)
    session.set_load("concurrency", 4)
    time.sleep(2.0)
    session.burst(16, resettle=True)
    time.sleep(3.0)
    session.stop(cancel=False, drain_timeout_s=10)
    before, after = session.finished_steps()
    assert (before.level, after.level) == (4.0, 4.0)
    assert before.requests_burst == 0 and after.requests_burst == 16
    specs = session.step_specs()
    burst = [r for r in session.all_records() if r.burst]
    assert len(burst) == 16
    assert min(r.sent_ns for r in burst) >= specs[1].start_ns  # fired once step 0 handed over
    assert specs[1].measure_start_ns >= max(r.end_ns for r in burst)  # settled after it
    # Its throughput is the 4 streams' alone: within the burst-free step's interval.
    ci = before.output_tokens_per_s_ci
    assert ci is not None and ci[0] is not None and ci[1] is not None
    assert ci[0] <= after.output_tokens_per_s <= ci[1]
    told = [e.text for e in session.events.items() if e.text.startswith("burst of 16 at 4")]
    assert told and "all back in" in told[0] and "P95 TTFT" in told[0]
