"""Issue 23 on screen: a provisional capacity, its caveats, and a likely bound read as such."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gputui.metrics.capacity import Capacity
from gputui.ui.render.breakdown import bound_by
from gputui.ui.render.spans import texts
from gputui.ui.render.status import capacity_bracket
from gputui.ui.replay import load_views

FIXTURE = Path(__file__).parent / "fixtures" / "sweep-a100-ci.json"


def test_a_provisional_capacity_and_its_caveats_are_in_the_header() -> None:
    view = load_views(FIXTURE)[-1]
    capacity = Capacity(
        level=42.0, mode="concurrency", output_tokens_per_s=900.0, requests_per_s=7.0,
        ttft_p95_s=0.4, tpot_p95_s=0.03, error_rate=0.0, above_level=64.0, above_verdict="fail",
    )  # fmt: skip
    marked = replace(
        capacity,
        provisional=True,
        provisional_reason="P95 on 14 requests; 59 decide it",
        caveats=("21 and 32 fail below it: re-run", "SUSPECT: measured while the client was..."),
    )
    plain = "".join(texts([capacity_bracket(replace(view, capacity=capacity))]))
    assert plain == "capacity 42 (64: fail)"
    text = "".join(texts([capacity_bracket(replace(view, capacity=marked))]))
    assert text == "capacity ~42 provisional (64: fail) · 21 and 32 fail below it · SUSPECT"


def test_a_likely_bound_carries_a_question_mark() -> None:
    diagnosis = {"verdict": "prefill-interference", "low_confidence": True}
    assert bound_by(diagnosis) == ("prefill-interference?", "accent")
    assert bound_by(diagnosis, short=True)[0] == "prefill-intf?"
