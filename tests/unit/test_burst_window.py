"""A burst's window (`metrics.burst_window`): a step that stays open through a burst
(`gputui run --burst`) leaves out its requests under the burst's load and that time of its rates.

The scenario (ms from T0): one stream, a request a second over W = [0, 20 s), each 1 s long with
10 tokens from 50 to 950 ms (TPOT 106 ms). A burst of 4 fires at 8 s, all back at 10 s; the
step's requests sent at 8, 9 and 10 s run under its load (4 tokens each, TPOT 317 ms). One
lifetime is 1 s, so the window is [8 s, 11 s).
"""

from __future__ import annotations

import io
from dataclasses import replace

from gputui.engine.records import RequestRecord
from gputui.frontends.run_printer import StepPrinter
from gputui.metrics.burst_window import merge_windows
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepSpec, aggregate_step
from gputui.snapshot.records import session_table, table_rows
from tests.support.records import T0, ns, rec

SPEC = StepSpec(0, "concurrency", 1.0, ns(0), ns(0), ns(20_000))
SLOW = {8, 9, 10}


def _step(k: int) -> RequestRecord:
    sent = 1000 * k
    gaps = (50, 350, 650, 950) if k in SLOW else tuple(50 + 100 * t for t in range(10))
    return rec(sent_ms=sent, end_ms=sent + 1000, tokens_ms=[sent + t for t in gaps])


def _records(burst: bool) -> list[RequestRecord]:
    own = [_step(k) for k in range(20)]
    if not burst:
        return own
    fired = [
        replace(rec(sent_ms=8000, end_ms=10_000, tokens_ms=[8500, 10_000]), burst=True)
        for _ in range(4)
    ]
    return own + fired


def test_the_steps_figures_leave_out_the_bursts_window() -> None:
    step = aggregate_step(SPEC, _records(burst=True), Sla())
    assert (step.requests_burst, step.requests_under_burst, step.requests_ok) == (4, 3, 17)
    assert step.requests_warmup == 0  # under the burst is not warm-up: every request counted once
    assert step.burst_window_s == 3.0 and step.duration_s == 20.0
    # 17 requests x 10 tokens outside the window, over 17 s; before: (170 + 3 x 4) / 20 = 9.1
    assert abs(step.output_tokens_per_s - 10.0) < 1e-9
    # ends at 1..7 s and 11..19 s (8 s is in the window, 20 s is the close): 16 over 17 s
    assert abs(step.requests_per_s - 16 / 17) < 1e-9
    # TPOT (end - first token) / 9 = 105.6 ms everywhere; none of the 317 ms under the burst
    assert step.tpot_s.p95 is not None and abs(step.tpot_s.p95 - 0.95 / 9) < 1e-9
    assert step.tpot_s.n == 17
    # the records table decides the same requests as the step's
    rows = list(table_rows(session_table(_records(burst=True), [SPEC], [0], T0, Sla())))
    assert sum(1 for r in rows if r["step"] == 0) == 17
    # `gputui run` prints what it left out on the step's line
    out = io.StringIO()
    StepPrinter(out).step(step)
    assert "ok 17 failed 0, under a burst 3 (3.0 s) left out, 0.94 req/s" in out.getvalue()


def test_without_a_burst_nothing_is_left_out() -> None:
    step = aggregate_step(SPEC, _records(burst=False), Sla())
    out = io.StringIO()
    StepPrinter(out).step(step)
    assert "under a burst" not in out.getvalue()
    assert (step.requests_under_burst, step.burst_window_s, step.requests_ok) == (0, 0.0, 20)
    assert abs(step.output_tokens_per_s - (17 * 10 + 3 * 4) / 20) < 1e-9
    assert step.tpot_s.p95 is not None and step.tpot_s.p95 > 0.25


def test_windows_end_one_lifetime_after_the_burst_and_merge_when_they_overlap() -> None:
    assert merge_windows([(10, 20), (0, 5), (24, 30)], 5) == [(0, 35)]
    assert merge_windows([(0, 5), (11, 12)], 5) == [(0, 10), (11, 17)]
