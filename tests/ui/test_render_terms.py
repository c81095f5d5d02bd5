"""The header's third line: the verdict's progress, the SLA, the price and the cost range."""

from __future__ import annotations

from dataclasses import replace

from gputui.metrics.sla import Sla
from gputui.metrics.verdict_progress import VerdictProgress
from gputui.ui.render.spans import text_of
from gputui.ui.render.status import header_lines
from gputui.ui.render.terms import terms_line
from tests.ui.conftest import replay_views


def test_the_cost_at_the_capacity_is_a_range_when_its_interval_is_wide() -> None:
    view = replay_views()[-1]  # capacity at 16 concurrent streams, no price saved
    assert view.capacity is not None and view.capacity.level == 16
    assert text_of(terms_line(view)).endswith("price none (e sets it)")
    capacity = replace(view.capacity, output_tokens_per_s=160.0)
    narrow = replace(
        view, price_per_hour=7.0, capacity=replace(capacity, output_tokens_per_s_ci=(155.0, 165.0))
    )
    # domain.md §4: 7/h at 160 tok/s is 12.2 per million output tokens.
    assert text_of(terms_line(narrow)) == (
        "SLA TTFT p95 1 s · TPOT p95 35 ms  price 7/h  cost 12.2/M out tok at 16"
    )
    wide = replace(narrow, capacity=replace(capacity, output_tokens_per_s_ci=(120.0, 200.0)))
    assert text_of(terms_line(wide)).endswith("cost 9.72-16.2/M out tok at 16")
    none = replace(narrow, capacity=None)
    assert text_of(terms_line(none)).endswith("cost - (no qualified capacity yet)")


def test_the_verdict_line_leads_while_a_step_measures() -> None:
    view = replay_views()[-1]
    assert view.frame is not None
    waiting = replace(
        view, frame=replace(view.frame, verdict_progress=VerdictProgress("inconclusive", 23, 0.9))
    )
    assert text_of(terms_line(waiting)).startswith("P95 verdict: 23 of 59 requests, ~40 s  SLA ")
    failed = replace(
        view, frame=replace(view.frame, verdict_progress=VerdictProgress("fail", 12, 2.0))
    )
    line = terms_line(failed)
    assert line[0] == ("SLA verdict: fail (n=12)", "crit")
    no_bounds = replace(view, sla=Sla())
    assert "SLA none  price" in text_of(terms_line(no_bounds))
    assert len(header_lines(waiting, 160)) == 3


def test_at_80_columns_the_price_and_the_cost_stay_in_view() -> None:
    view = replay_views()[-1]
    assert view.capacity is not None and view.frame is not None
    capacity = replace(view.capacity, output_tokens_per_s=160.0, output_tokens_per_s_ci=None)
    priced = replace(
        view,
        price_per_hour=7.0,
        capacity=capacity,
        frame=replace(view.frame, verdict_progress=VerdictProgress("inconclusive", 23, 0.9)),
    )
    for height in (3, 2):
        header = "\n".join(text_of(line) for line in header_lines(priced, 80, height))
        assert "price 7/h" in header and "cost 12.2/M out tok at 16" in header, header
    third = text_of(header_lines(priced, 80, 3)[2])
    # The SLA went first (the chart labels its lines); the verdict's progress still fits.
    assert (
        third.rstrip()
        == "P95 verdict: 23 of 59 requests, ~40 s  price 7/h  cost 12.2/M out tok at 16"
    )
    unpriced = replace(priced, price_per_hour=None)
    assert "price none (e sets it)" in text_of(header_lines(unpriced, 80, 3)[2])


def test_during_a_hold_the_header_shows_the_verdict_the_hold_will_save() -> None:
    view = replay_views()[-1]
    assert view.frame is not None
    nominal = VerdictProgress("pass", 130, 4.0)  # the nominal interval already passes ...
    basis = "inconclusive at look 1 of 4 (n=120, 0.625 % each side)"  # ... the look does not
    frame = replace(view.frame, verdict_progress=nominal, hold_look=("inconclusive", basis))
    held = replace(view, control="holding", frame=frame)
    line = terms_line(held)
    assert line[0] == (f"hold verdict: {basis}", "inconclusive")
    passed = replace(held, frame=replace(frame, hold_look=("pass", basis.replace("in", "", 1))))
    assert terms_line(passed)[0][1] == "ok"
    waiting = replace(held, frame=replace(frame, hold_look=("inconclusive", "no look yet")))
    assert terms_line(waiting)[0] == ("hold verdict: no look yet", "warn")
