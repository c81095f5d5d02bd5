"""Issue 18 in the TUI: the verdict event rule, the decomposition bar, the verdicts in the table."""

from __future__ import annotations

from typing import Any

from gputui.metrics.bottleneck import VERDICTS
from gputui.metrics.json_read import number
from gputui.metrics.ttft_breakdown import ttft_breakdown
from gputui.session.events import verdict_event
from gputui.ui.render.breakdown import bound_by, decomposition_bar, knee_label
from gputui.ui.render.format import duration
from gputui.ui.render.spans import texts
from gputui.ui.render.steps import steps_lines
from gputui.ui.screens.help import DIAGNOSIS
from tests.support.steps import make_step
from tests.ui.conftest import DIAG_FIXTURE, replay_views


def _verdict(name: str, **flags: bool) -> dict[str, Any]:
    return {"verdict": name, "evidence": [], "suspect": False, "throttled": False, **flags}


def test_a_verdict_event_only_when_it_changes() -> None:
    step = make_step(32, index=3)
    assert verdict_event(step, _verdict("none"), None) is None  # nothing bounds it yet
    assert verdict_event(step, _verdict("queue"), "queue") is None
    assert verdict_event(step, _verdict("queue"), "decode-bandwidth") == (
        "info",
        "step 4 (32): bound by queue (was decode-bandwidth)",
    )
    assert verdict_event(step, _verdict("decode-bandwidth"), None) == (
        "info",
        "step 4 (32): bound by decode-bandwidth",
    )
    kind, text = verdict_event(step, _verdict("queue", suspect=True), "none") or ("", "")
    assert kind == "info" and text.endswith("[suspect: client-bound]")
    assert verdict_event(step, _verdict("throttled", throttled=True), "queue") == (
        "warning",
        "step 4 (32): bound by throttled (was queue)",
    )


def test_the_bar_splits_the_ttft_by_part_with_distinct_glyphs() -> None:
    # TTFT 620 ms = network 3 + queue 410 + prefill 180 + client 27 (the example).
    b = ttft_breakdown(0.620, 0.003, 0.410, 0.180)
    line = decomposition_bar(b, 31, 0.620)
    assert "".join(t for t, _ in line) == "▒" * 21 + "█" * 9 + "·"  # 3 ms: under half a cell
    assert [r for t, r in line if t.strip()] == ["bqueue", "bprefill", "bclient"]
    # Half the scale: half the cells, the rest blank; ASCII glyphs for --ascii.
    half = decomposition_bar(b, 20, 1.24, ascii=True)
    assert "".join(t for t, _ in half) == "=" * 7 + "###" + " " * 10
    assert "".join(t for t, _ in decomposition_bar(None, 5, 1.0)) == "     "


def test_bound_by_marks_suspect_and_throttled_steps() -> None:
    assert bound_by(_verdict("client", suspect=True)) == ("client SUSPECT", "crit")
    assert bound_by(_verdict("queue", throttled=True)) == (
        "queue THROTTLED",
        "warn",
    )
    assert bound_by(_verdict("throttled", throttled=True)) == ("throttled", "warn")
    assert bound_by(None) == ("-", "dim")
    # a narrow table: short names and flags (a client verdict is suspect by its name)
    short = _verdict("decode-bandwidth", suspect=True, throttled=True)
    assert bound_by(short, short=True) == ("decode-bw SUSP THR", "crit")
    assert bound_by(_verdict("client", suspect=True), short=True)[0] == "client"


def test_the_help_explains_every_verdict_once() -> None:
    names = [name for name, _ in DIAGNOSIS]
    assert names[: len(VERDICTS)] == list(VERDICTS)
    assert dict(DIAGNOSIS[: len(VERDICTS)]) == VERDICTS


def test_the_replayed_steps_table_shows_verdicts_and_bars() -> None:
    view = replay_views(DIAG_FIXTURE)[-1]
    assert view.diagnoses and view.knee is not None
    lines = texts(steps_lines(view, 137, 12))  # 130 before the J/out column (issue 29)
    assert "bound by" in lines[0] and "░n ▒q █p ▓s ·c" in lines[0]  # a 24-cell bar: the short key
    assert "░net ▒queue █prefill ▓srv ·client" in texts(steps_lines(view, 200, 12))[0]
    rows = lines[1 : 1 + len(view.steps)]
    for step, row in zip(view.steps, rows, strict=True):
        found = view.diagnosis(step).bottleneck
        assert found is not None
        verdict = found["verdict"]
        assert f" {verdict} " in row, row
        assert "█" in row  # every step has a prefill part
    past = next(s for s in view.steps if s.level > view.knee.level)
    past_verdict = view.diagnosis(past).bottleneck
    assert past_verdict is not None
    first_past = past_verdict["verdict"]
    assert knee_label(view) == f"knee {view.knee.level:g} · {first_past}"
    assert view.knee_explanation is not None
    knee_line = next(line for line in lines if line.startswith("┊ knee at"))
    assert knee_line.startswith(f"┊ knee at {view.knee.level:g}: bound by {first_past}")
    # Too narrow for a bar per row: the newest step's bar under the rows, its parts in ms.
    narrow = texts(steps_lines(view, 78, 12))
    assert all("█" not in row for row in narrow[1 : 1 + len(view.steps)])
    newest = view.diagnosis(view.steps[-1]).ttft_breakdown
    assert newest is not None
    bar_line = narrow[1 + len(view.steps)]
    assert bar_line.startswith(
        f"step {len(view.steps)} mean TTFT {duration(number(newest, 'ttft_s') or 0.0)} ▒"
    )
    # every part keeps its value: too many for one line, they take the next
    parts = narrow[2 + len(view.steps)].split()
    assert parts[0:2] == ["▒queue", duration(number(newest, "queue_s") or 0.0)]
    assert parts[4:6] == ["░net", duration(number(newest, "network_s") or 0.0)]
