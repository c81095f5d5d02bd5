"""The session's terms: the change record, the cost range at the capacity, the labels."""

from __future__ import annotations

import pytest

from gputui.metrics.capacity import Capacity
from gputui.metrics.sla import Sla
from gputui.metrics.sla_terms import (
    SessionTerms,
    TermsHistory,
    bound_text,
    change_text,
    cost_range,
    sla_text,
    terms_change,
)


def _capacity(tok_s: float, ci: tuple[float | None, float | None] | None) -> Capacity:
    return Capacity(16, "concurrency", tok_s, 1.0, 0.5, 0.02, 0.0, output_tokens_per_s_ci=ci)


def test_the_change_record_holds_only_what_changed() -> None:
    old = SessionTerms(Sla(1.0, 0.035, 0.01), 7.0)
    new = SessionTerms(Sla(0.2, 0.035, 0.01), 4.0)
    record = terms_change(12.3456, old, new)
    assert record == {
        "t_s": 12.346,
        "old": {"ttft_p95_s": 1.0, "price_per_hour": 7.0},
        "new": {"ttft_p95_s": 0.2, "price_per_hour": 4.0},
    }
    assert change_text(record) == "TTFT p95 1 s -> 200 ms, price 7/h -> 4/h"
    assert terms_change(1.0, old, old) is None
    history = TermsHistory(old)
    assert history.change(5.0, old) is None and history.changes == []
    assert history.change(6.0, new) is not None and history.terms == new
    assert [c["t_s"] for c in history.changes] == [6.0]


def test_cost_at_the_capacity_with_its_range() -> None:
    # domain.md §4: 7/h at 160 tok/s is 12.2 per million output tokens.
    narrow = cost_range(_capacity(160.0, (155.0, 165.0)), 7.0)
    assert narrow is not None and narrow.point == pytest.approx(12.152777, rel=1e-5)
    assert not narrow.wide
    wide = cost_range(_capacity(160.0, (120.0, 200.0)), 7.0)
    assert wide is not None and wide.wide
    assert wide.low == pytest.approx(7 / (200 * 3600) * 1e6)  # 9.72: the high throughput
    assert wide.high == pytest.approx(7 / (120 * 3600) * 1e6)  # 16.2
    open_low = cost_range(_capacity(160.0, (0.0, 200.0)), 7.0)
    assert open_low is not None and open_low.high is None and not open_low.wide
    assert cost_range(_capacity(160.0, None), None) is None
    assert cost_range(None, 7.0) is None


def test_the_labels() -> None:
    assert bound_text("TTFT", 1.0) == "TTFT p95 1 s"
    assert bound_text("TPOT", 0.035) == "TPOT p95 35 ms"
    assert sla_text(Sla(1.0, 0.035, 0.01)) == "TTFT p95 1 s · TPOT p95 35 ms · errors ≤ 1 %"
    assert sla_text(Sla(None, None, 0.0)) == "no errors"
    assert sla_text(Sla()) == "none"
