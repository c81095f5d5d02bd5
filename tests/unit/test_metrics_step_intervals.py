"""Intervals and the three-way verdict on step aggregates, via `aggregate_step` and snapshots."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gputui.engine.records import RequestRecord
from gputui.metrics.capacity import qualified_capacity
from gputui.metrics.confidence import counting_half_width, quantile_ci, wilson_ci
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult, StepSpec, aggregate_step
from gputui.metrics.verdict import judge_step, step_verdict
from gputui.snapshot.models import Step, step_from_result
from gputui.snapshot.store import load_snapshot
from tests.support.records import ns, rec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots"
SLA = Sla(ttft_p95_s=1.0, tpot_p95_s=0.05)


def _spec(end_ms: float) -> StepSpec:
    return StepSpec(
        index=0,
        mode="concurrency",
        level=4,
        start_ns=ns(0),
        measure_start_ns=ns(0),
        end_ns=ns(end_ms),
    )


def _requests(
    ttfts_ms: list[float], *, gap_ms: float = 100.0, tokens: int = 8
) -> list[RequestRecord]:
    """One request every `gap_ms`, each with this TTFT and `tokens` tokens 20 ms apart."""
    out = []
    for i, ttft in enumerate(ttfts_ms):
        sent = i * gap_ms
        stamps = [sent + ttft + 20.0 * k for k in range(tokens)]
        out.append(rec(sent_ms=sent, end_ms=stamps[-1], tokens_ms=stamps))
    return out


def _step(ttfts_ms: list[float], sla: Sla = SLA, **kw: float) -> StepResult:
    records = _requests(ttfts_ms, **kw)  # type: ignore[arg-type]
    end = max(r.end_ns for r in records) - ns(0)
    return aggregate_step(_spec(end / 1e6 + 1), records, sla)


def test_five_requests_are_inconclusive_never_pass() -> None:
    # Every TTFT is a tenth of the bound, and the point estimate passes: too few samples to say.
    step = _step([100.0, 110.0, 120.0, 105.0, 95.0])
    assert step.requests_ok == 5
    assert step.sla_ok is True
    assert step.sla_verdict == "inconclusive"
    assert step.ttft_s.p95_ci is not None
    assert step.ttft_s.p95_ci[1] is None  # open upper end at n = 5
    reasons = judge_step(step, SLA).reasons
    assert reasons[0] == (
        "P95 TTFT has no upper bound on 5 samples (needs 59); 95 % CI >= 110.0 ms (open above)"
    )


def test_five_slow_requests_fail() -> None:
    # Even 5 samples show P95 TTFT > 1 s: its lower end is the 4th of 5 (2.05 s here).
    step = _step([1900.0, 2000.0, 2100.0, 2050.0, 1950.0], gap_ms=500.0)
    assert step.ttft_s.p95_ci is not None and step.ttft_s.p95_ci[0] == pytest.approx(2.05)
    assert step.sla_verdict == "fail"
    assert step.sla_ok is False


def test_enough_samples_pass_fail_and_straddle() -> None:
    rng = np.random.default_rng(5)
    fast = list(rng.uniform(100.0, 400.0, size=200))
    assert _step(fast).sla_verdict == "pass"
    slow = list(rng.uniform(1200.0, 2000.0, size=200))
    assert _step(slow, gap_ms=300.0).sla_verdict == "fail"
    # 95 % of TTFTs below 0.8 s and 5 % near 1.2 s: the P95 sits on the bound.
    edge = [*rng.uniform(100.0, 800.0, size=190), *rng.uniform(900.0, 1200.0, size=10)]
    rng.shuffle(edge)
    straddle = _step(list(edge))
    lo, hi = straddle.ttft_s.p95_ci or (None, None)
    assert lo is not None and hi is not None and lo <= 1.0 < hi
    assert straddle.sla_verdict == "inconclusive"


def test_intervals_on_the_step_aggregate() -> None:
    rng = np.random.default_rng(9)
    ttfts = list(rng.uniform(100.0, 400.0, size=300))
    step = _step(ttfts)
    values = np.sort(np.array(ttfts) / 1000.0)
    for q, ci in (
        (0.5, step.ttft_s.p50_ci),
        (0.95, step.ttft_s.p95_ci),
        (0.99, step.ttft_s.p99_ci),
    ):
        assert ci == pytest.approx(quantile_ci(values, q), abs=1e-9)
    for stats in (step.tpot_s, step.itl_s, step.e2e_s):
        assert stats.p95_ci is not None and stats.n > 0
    assert step.connect_s.p95_ci is None  # not a step statistic anyone judges
    lo, hi = step.output_tokens_per_s_ci or (0.0, 0.0)
    assert lo <= step.output_tokens_per_s <= hi
    lo, hi = step.requests_per_s_ci or (0.0, 0.0)
    assert lo <= step.requests_per_s <= hi
    assert step.rate_ci_batches is not None and 3 <= step.rate_ci_batches <= 20
    # Steady arrivals (one every 100 ms): the slices agree, so the Poisson counting floor sets the
    # width: 1.96 sqrt(300) / 30.3 s = +-1.12 req/s.
    assert (hi - lo) / 2 == pytest.approx(counting_half_width(300, step.duration_s), rel=0.01)
    assert step.error_rate_ci == wilson_ci(0, 300)
    assert step.goodput_share == 1.0
    assert step.goodput_share_ci == wilson_ci(300, 300)


def test_error_rate_bound_uses_wilson() -> None:
    ok = _requests([100.0] * 200)
    failed = [rec(sent_ms=50.0 + i, end_ms=60.0 + i, ok=False, error="http_503") for i in range(10)]
    spec = _spec(max(r.end_ns for r in ok) / 1e6 - ns(0) / 1e6 + 1)
    # 10 of 210 failed: 4.8 %, Wilson 2.6-8.5 %: fails 2 %, straddles 5 %, passes 10 %.
    verdicts = [
        aggregate_step(spec, ok + failed, Sla(max_error_rate=b)).sla_verdict
        for b in (0.02, 0.05, 0.1)
    ]
    assert verdicts == ["fail", "inconclusive", "pass"]
    # A bound of 0 means "no failure": nothing statistical about it.
    assert aggregate_step(spec, ok, Sla(max_error_rate=0.0)).sla_verdict == "pass"
    assert aggregate_step(spec, ok + failed, Sla(max_error_rate=0.0)).sla_verdict == "fail"


def test_snapshot_round_trip_keeps_intervals_and_verdict() -> None:
    step = _step([100.0, 110.0, 120.0, 105.0, 95.0])
    saved = step_from_result(step)
    data = json.loads(saved.model_dump_json())
    assert data["ttft_s"]["p95_ci"][1] is None
    assert data["sla_verdict"] == "inconclusive"
    loaded = Step.model_validate(data)
    assert loaded.ttft_s.p95_ci == step.ttft_s.p95_ci
    assert loaded.output_tokens_per_s_ci == step.output_tokens_per_s_ci
    assert step_verdict(loaded, SLA) == "inconclusive"
    assert loaded.ttft_s.to_summary() == step.ttft_s


@pytest.mark.parametrize("name", ["a100-80gb-pcie.json", "rtx4090-48gb.json"])
def test_old_fixture_snapshots_load_and_are_judged_on_point_estimates(name: str) -> None:
    snap = load_snapshot(FIXTURES / name)
    sla = snap.sla.to_sla()
    for step in snap.steps:
        assert step.ttft_s.p95_ci is None and step.sla_verdict is None  # saved before issue 16
        # No intervals: judged as when it was saved, so old files keep their capacity.
        assert step_verdict(step, sla) == ("pass" if step.sla_ok else "fail")
    capacity = qualified_capacity(snap.steps, sla).capacity
    assert capacity is not None and snap.capacity is not None
    assert capacity.level == snap.capacity.level
