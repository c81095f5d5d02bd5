"""`gputui compare` with intervals: significance against the first run, cost ranges, all formats."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace

import pytest

from gputui.metrics.capacity import qualified_capacity
from gputui.metrics.confidence import difference_ci, significant
from gputui.metrics.cost import cost_per_million_output_tokens_ci
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult
from gputui.snapshot.compare import NamedSnapshot, build_comparison, name_snapshots
from gputui.snapshot.compare_render import render
from gputui.snapshot.models import (
    CapacityModel,
    SlaBounds,
    Snapshot,
    Target,
    Workload,
    step_from_result,
)
from tests.support.steps import make_step

SLA = Sla(ttft_p95_s=1.0, tpot_p95_s=0.035)


def _measured(level: float, tok_s: float, ttft: float, spread: float, index: int) -> StepResult:
    """A step whose tok/s and P95 TTFT carry +-spread intervals, as aggregate_step gives them."""
    step = make_step(level, output_tokens_per_s=tok_s, ttft_p95_s=ttft, index=index, sla=SLA)
    return replace(
        step,
        output_tokens_per_s_ci=(tok_s * (1 - spread), tok_s * (1 + spread)),
        goodput_output_tokens_per_s_ci=(tok_s * (1 - spread), tok_s * (1 + spread)),
        ttft_s=replace(step.ttft_s, p95_ci=(ttft * (1 - spread), ttft * (1 + spread))),
        tpot_s=replace(step.tpot_s, p95_ci=(0.019, 0.021)),
    )


def _snap(label: str, tok_s: float, spread: float, price: float) -> Snapshot:
    # Level 1 passes, level 2 breaks the TTFT bound: capacity at level 1.
    steps = [_measured(1, tok_s, 0.5, spread, 0), _measured(2, tok_s * 1.2, 2.0, spread, 1)]
    cap = qualified_capacity(steps, SLA)
    assert cap.capacity is not None
    return Snapshot.model_validate(
        {
            "label": label,
            "complete": True,
            "target": Target(url="http://x/v1", model="llama", endpoint="completions"),
            "workload": Workload(input_tokens=512, output_tokens=128, endpoint="completions"),
            "sla": SlaBounds.from_sla(SLA),
            "steps": tuple(step_from_result(s) for s in steps),
            "capacity": CapacityModel.from_capacity(cap.capacity),
            "capacity_reason": cap.reason,
            "price_per_hour": price,
        }
    )


def test_difference_inside_the_uncertainty_is_not_significant() -> None:
    base = _snap("a", 1000.0, 0.05, 7.0)  # 950-1050 tok/s
    close = _snap("b", 1030.0, 0.05, 7.0)  # 978.5-1081.5: overlaps, difference +30 +- 72
    far = _snap("c", 1500.0, 0.05, 7.0)  # 1425-1575
    cmp = build_comparison(name_snapshots([(base, None), (close, None), (far, None)]))
    first, second, third = cmp.rows
    assert first.qualified_output_tokens_per_s_ci == pytest.approx((950.0, 1050.0))
    assert first.output_tokens_per_s_vs_first_significant is None  # the reference itself
    assert second.output_tokens_per_s_vs_first_significant is False
    assert third.output_tokens_per_s_vs_first_significant is True
    # Same P95 TTFT everywhere (0.5 s +- 5 %): never significant.
    assert second.ttft_p95_vs_first_significant is False
    assert third.ttft_p95_vs_first_significant is False
    assert (first.above_level, first.above_verdict) == (2.0, "fail")
    text = render(cmp, "table")
    assert "out tok/s CI" in text
    assert max(len(x) for x in text.splitlines()[:-1]) <= 120
    line = next(x for x in text.splitlines() if x.startswith("b ") and "not significant" in x)
    assert "978.5-1081.5" in line
    assert "475.0-525.0 ms" in line


def test_cost_range_follows_the_throughput_interval() -> None:
    snap = _snap("a", 1000.0, 0.05, 7.0)
    row = build_comparison(name_snapshots([(snap, None)])).rows[0]
    # 7 / (1050 x 3600) x 1e6 = 1.85185; 7 / (950 x 3600) x 1e6 = 2.04678.
    assert row.cost_per_million_output_tokens_ci == pytest.approx((1.851852, 2.046784), abs=1e-6)
    assert row.cost_per_million_output_tokens is not None
    lo, hi = row.cost_per_million_output_tokens_ci or (0.0, 0.0)
    assert lo is not None and hi is not None
    assert lo < row.cost_per_million_output_tokens < hi
    open_lo, open_hi = cost_per_million_output_tokens_ci(7.0, (0.0, 1000.0)) or (0.0, 0.0)
    assert open_lo == pytest.approx(1.944444, abs=1e-6)
    assert open_hi is None  # a throughput interval reaching 0 leaves the cost unbounded
    assert cost_per_million_output_tokens_ci(7.0, None) is None


def test_machine_formats_carry_the_intervals() -> None:
    cmp = build_comparison(
        name_snapshots(
            [(_snap("a", 1000.0, 0.05, 7.0), None), (_snap("b", 1030.0, 0.05, 7.0), None)]
        )
    )
    doc = json.loads(render(cmp, "json"))
    rows = doc["rows"]
    assert rows[0]["qualified_output_tokens_per_s_ci"] == pytest.approx([950.0, 1050.0])
    assert rows[1]["output_tokens_per_s_vs_first_significant"] is False
    assert rows[0]["cost_per_million_output_tokens_ci"] == pytest.approx(
        [1.851852, 2.046784], abs=1e-6
    )
    assert rows[0]["qualified_above_verdict"] == "fail"
    records = list(csv.DictReader(io.StringIO(render(cmp, "csv"))))
    assert records[0]["qualified_output_tokens_per_s_ci"] == "950;1050"
    assert records[1]["output_tokens_per_s_vs_first_significant"] == "false"
    md = render(cmp, "md")
    assert "not significant" in md and "tok/s vs first" in md
    html = render(cmp, "html")
    assert "Uncertainty: 95 % intervals" in html and "not significant" in html


def test_difference_ci_by_hand() -> None:
    # a = 100 [90, 110], b = 130 [120, 145]: d = 30, below hypot(10, 10), above hypot(15, 10).
    lo, hi = difference_ci(100.0, (90.0, 110.0), 130.0, (120.0, 145.0)) or (0.0, 0.0)
    assert lo == pytest.approx(30 - 14.142136, abs=1e-6)
    assert hi == pytest.approx(30 + 18.027756, abs=1e-6)
    assert significant(100.0, (90.0, 110.0), 130.0, (120.0, 145.0)) is True
    assert significant(100.0, (90.0, 110.0), 110.0, (100.0, 120.0)) is False
    assert significant(100.0, (90.0, None), 130.0, (120.0, 145.0)) is None  # open: cannot tell
    assert significant(100.0, None, 130.0, (120.0, 145.0)) is None


def test_the_reference_is_the_first_row_not_its_name() -> None:
    """Rows named alike (a caller's own names) still get their significance."""
    base, far = _snap("a", 1000.0, 0.05, 7.0), _snap("a", 1500.0, 0.05, 7.0)
    cmp = build_comparison([NamedSnapshot("a", base, None), NamedSnapshot("a", far, None)])
    assert cmp.rows[0].output_tokens_per_s_vs_first_significant is None
    assert cmp.rows[1].output_tokens_per_s_vs_first_significant is True
