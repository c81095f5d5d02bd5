"""Issue 23's screen, as pure functions: folded events, fixed steps columns, a header that fits."""

from __future__ import annotations

import io
from dataclasses import replace

from gputui.frontends.run_printer import StepPrinter
from gputui.metrics.outcome import hold_outcome, step_outcome
from gputui.metrics.verdict_progress import VerdictProgress
from gputui.session.events import LiveEvent
from gputui.ui.render.chart import Axis, Whisker, line_chart
from gputui.ui.render.events import collapse, events_lines
from gputui.ui.render.keys import key_rows
from gputui.ui.render.spans import texts
from gputui.ui.render.status import header_lines
from gputui.ui.render.steps import left_out_note, steps_lines
from gputui.ui.render.sweep import latest_per_level, other_sweep, sweep_lines
from tests.ui.conftest import DIAG_FIXTURE, replay_views

THROTTLE = "GPU 0 throttling: sw_power_cap"


def _flood() -> list[LiveEvent]:
    """A throttle notice every 8 s between a load change and an SLA miss."""
    events = [LiveEvent(1.0, "info", "load 64 concurrent")]
    events += [LiveEvent(92.0 + 8 * k, "throttle", THROTTLE) for k in range(9)]
    events.insert(4, LiveEvent(110.0, "sla", "step 7 (64) missed the SLA"))
    return [*events, LiveEvent(170.0, "info", "load 128 concurrent")]


def test_repeats_fold_into_one_line_with_count_and_span() -> None:
    groups = collapse(_flood())
    assert [g.kind for g in groups] == ["info", "sla", "throttle", "info"]
    throttle = groups[2]
    assert (throttle.count, throttle.first_s, throttle.last_s) == (9, 92.0, 156.0)
    assert throttle.line_text == f"{THROTTLE} since 0:01:32, x9"
    lines = texts(events_lines(_flood(), 70, 6))
    assert lines[2] == f"0:02:36 throttle {THROTTLE} since 0:01:32, x9".ljust(70)
    assert sum(THROTTLE in line for line in lines) == 1  # the SLA miss stays in view


def test_info_events_fold_only_into_the_one_just_before() -> None:
    events = [
        LiveEvent(1.0, "info", "load 2 concurrent"),
        LiveEvent(2.0, "info", "load 4 concurrent"),
        LiveEvent(3.0, "info", "load 2 concurrent"),
        LiveEvent(4.0, "info", "load 2 concurrent"),
    ]
    assert [(g.text, g.count) for g in collapse(events)] == [
        ("load 2 concurrent", 1),
        ("load 4 concurrent", 1),
        ("load 2 concurrent", 2),
    ]


def test_a_long_event_wraps_whole_under_its_text() -> None:
    text = (
        "the client is saturated (100 % CPU, 1 worker(s)): its timings include its own "
        "queueing; restart with more --workers"
    )
    for width in (76, 62, 40):
        lines = texts(events_lines([LiveEvent(5.0, "error", text)], width, 6))
        assert all(len(line) == width for line in lines)
        assert " ".join(" ".join(lines).split()[2:]) == text  # every word, none cut


def test_the_header_never_cuts_an_item_at_80_columns() -> None:
    view = replay_views(DIAG_FIXTURE)[-1]
    whole = " ".join(texts(header_lines(view, 400, 2)))
    for width, height in ((78, 3), (78, 2), (60, 3), (158, 2)):
        lines = texts(header_lines(view, width, height))
        assert len(lines) == height and all(len(line) == width for line in lines)
        for line in lines:
            for item in filter(None, (i.strip() for i in line.split("  "))):
                assert item in whole, (width, item)  # whole items only, never one cut
    at_80 = "\n".join(texts(header_lines(view, 78, 3)))
    assert "step 9" in at_80 and "capacity 16 (32: fail)" in at_80


def test_every_key_fits_on_two_rows_at_80_columns() -> None:
    items = [("↑", "Load ×"), ("↓", "Load ÷"), ("[", "factor−"), ("]", "factor+")]
    items += [("r", "Mode"), ("space", "Pause"), ("b", "Burst"), ("s", "Save"), ("?", "Help")]
    items += [("q", "Quit"), ("o", "Sessions"), ("h", "Hold"), ("a", "Auto")]
    rows = key_rows(items, 80)
    assert len(rows) == 2 and all(sum(len(t) for t, _ in row) <= 80 for row in rows)
    shown = " ".join(texts(rows))
    assert all(f" {key} {text}" in shown for key, text in items)
    assert len(key_rows(items, 160)) == 1


def test_steps_columns_do_not_depend_on_the_data() -> None:
    view = replay_views(DIAG_FIXTURE)[-1]
    bare = replace(view, diagnoses={}, steps=tuple(replace(s, ttft_s=s.e2e_s) for s in view.steps))
    for width in (76, 130):
        assert texts(steps_lines(view, width, 12))[0] == texts(steps_lines(bare, width, 12))[0]


def test_steps_are_numbered_in_order_and_never_run_together() -> None:
    view = replay_views(DIAG_FIXTURE)[-1]
    # hidden continuation steps leave gaps in the indices; a rate level has 6 digits
    steps = [replace(s, index=2 * s.index) for s in view.steps]
    steps[-1] = replace(steps[-1], mode="rate", level=1216.13)
    shown = replace(view, steps=tuple(steps), knee=None, best_step_index=None)
    rows = texts(steps_lines(shown, 76, 12))[1 : 1 + len(steps)]
    assert [row.split()[0] for row in rows] == [str(k) for k in range(1, len(steps) + 1)]
    assert rows[-1].split()[:2] == [str(len(steps)), "1216/s"]


def test_every_step_ends_with_one_word_of_the_shared_vocabulary() -> None:
    view = replay_views(DIAG_FIXTURE)[-1]
    step = view.steps[0]
    empty = replace(step, requests_ok=0, requests_failed=0, sla_ok=False, sla_verdict="fail")
    assert step_outcome(empty) == "no data"
    assert step_outcome(replace(step, sla_verdict="inconclusive", sla_ok=True)) == "inconclusive"
    assert step_outcome(replace(step, sla_verdict=None, sla_ok=False)) == "fail"
    rows = texts(steps_lines(replace(view, steps=(empty, *view.steps[1:])), 76, 12))
    assert rows[1].split()[-3:] == ["no", "data", "decode-bw"]
    assert not any("unsure" in row or "FAIL" in row for row in rows)

    out = io.StringIO()
    printer = StepPrinter(out)
    printer.step(replace(step, sla_verdict="inconclusive", sla_ok=True))
    printer.step(empty)
    printer.table([empty])
    text = out.getvalue()
    assert "SLA inconclusive (n=8)" in text and "SLA no data (n=" in text
    assert "ok (inconclusive)" not in text and text.splitlines()[-2].endswith(" no data")


def test_a_hold_that_times_out_says_so() -> None:
    view = replay_views(DIAG_FIXTURE)[-1]
    step = replace(view.steps[3], duration_s=60.0)
    timed_out = replace(step, imprecise=True, precision={"ttft_p95": 0.31, "tpot_p95": None})
    assert hold_outcome(timed_out, 4) == (
        "hold timed out after 60 s: step 4 not precise, worst ±31.0 %; operator control"
    )
    assert hold_outcome(replace(step, imprecise=False), 4) == (
        "hold ended: step 4 precise; operator control"
    )


def test_r_keeps_the_other_sweep_and_its_knee_on_the_chart() -> None:
    view = replay_views(DIAG_FIXTURE)[-1]
    assert view.knee is not None
    in_rate = replace(view, mode="rate", frame=None, best_step_index=None, knee=None)
    points, knee = other_sweep(in_rate)
    assert len(points) == len({s.level for s in view.steps})
    assert knee is not None and knee.level == view.knee.level
    # each concurrency step sits at the rate it reached
    assert points[0] == (view.steps[0].requests_per_s, view.steps[0].output_tokens_per_s)
    chart = texts(sweep_lines(in_rate, 120, 20))
    assert "◌ by concurrency, knee 64 (r)" in chart[0]


def test_a_revisited_level_draws_one_point() -> None:
    view = replay_views(DIAG_FIXTURE)[-1]
    again = replace(view.steps[2], index=99, output_tokens_per_s=1.0)
    latest = latest_per_level([*view.steps, again])
    assert [s.level for s in latest] == sorted({s.level for s in view.steps})
    assert latest[2] is again


def test_a_repeated_error_folds_whatever_its_figures() -> None:
    saturated = "the client is saturated ({} % CPU, 1 worker(s)): restart with more --workers"
    events = [LiveEvent(60.0 + k, "error", saturated.format(cpu)) for k, cpu in enumerate((6, 9))]
    events += [LiveEvent(70.0, "sla", "step 5 (16) missed the SLA")]
    events += [LiveEvent(80.0, "sla", "step 6 (32) missed the SLA")]
    events += [LiveEvent(90.0, "throttle", "GPU 1 throttling: sw_power_cap")]
    groups = collapse(events)
    assert [(g.text, g.count) for g in groups] == [
        (saturated.format(9), 2),  # the latest figures
        ("step 5 (16) missed the SLA", 1),  # a step's number is its identity: never folded
        ("step 6 (32) missed the SLA", 1),
        ("GPU 1 throttling: sw_power_cap", 1),  # another GPU: its own line
    ]
    assert collapse([*events, LiveEvent(95.0, "throttle", THROTTLE)])[-1].text == THROTTLE


def test_a_wide_interval_draws_a_short_uncapped_whisker() -> None:
    x, y = Axis(1.0, 10.0), Axis(0.0, 100.0)
    wide = Whisker(5.0, 0.0, 100.0, "s1", mid=50.0)  # the whole axis: a grid line, uncut
    rows = texts(line_chart([], 30, 22, x=x, left=y, whiskers=[wide], ascii=True))
    drawn = [k for k, row in enumerate(rows[:-1]) if ":" in row or "-" in row]
    assert 0 < len(drawn) <= 2 * 22 // 5 + 1  # a fifth of the plot either side of the point
    assert not any("-" in rows[k] for k in drawn)  # cut ends have no caps


def test_the_header_says_what_the_p95_verdict_still_needs() -> None:
    view = replay_views(DIAG_FIXTURE)[-1]
    assert view.frame is not None
    progress = VerdictProgress("inconclusive", 23, 0.9)  # the step's own rate so far
    frame = replace(view.frame, measured_n=23, verdict_progress=progress)
    header = " ".join(texts(header_lines(replace(view, frame=frame), 158, 2)))
    assert "P95 verdict: 23 of 59 requests, ~40 s" in header  # (59 - 23) / 0.9 req/s
    at_80 = "\n".join(texts(header_lines(replace(view, frame=frame), 78, 3)))
    assert "P95 verdict: 23 of 59 requests, ~40 s" in at_80
    decided = replace(frame, verdict_progress=replace(progress, verdict="pass", n=59))
    assert "P95 verdict" not in " ".join(texts(header_lines(replace(view, frame=decided), 158)))
    settling = replace(frame, settle_remaining_s=3.0)
    assert "P95 verdict" not in " ".join(texts(header_lines(replace(view, frame=settling), 158)))


def test_the_latency_percentiles_say_how_many_failed_requests_they_leave_out() -> None:
    view = replay_views(DIAG_FIXTURE)[-1]
    steps = list(view.steps)
    steps[1] = replace(steps[1], requests_failed=3)
    steps[-1] = replace(steps[-1], requests_failed=12)
    shown = replace(view, steps=tuple(steps))
    for width in (76, 156):
        rows = texts(steps_lines(shown, width, 12))
        (note,) = [row for row in rows if "left out" in row]
        assert note.startswith("latency P95s: #2 3 failed left out, ")
        assert note.rstrip().endswith(f"#{len(steps)} 12 failed left out")
        # kept when the rows fill the panel: the newest rows show beside it
        tight = texts(steps_lines(shown, width, 4))
        assert tight[-1].startswith("latency P95s: #2 3 failed left out, ")
        assert tight[-2].split()[0] == str(len(steps))
    assert left_out_note([replace(steps[0], requests_failed=0)], 76) is None
    # Where the newest do not all fit, the newest are named.
    many = tuple(replace(steps[0], requests_failed=k + 1) for k in range(9))
    assert left_out_note(many, 76) == "latency P95s: #8 8 failed left out, #9 9 failed left out"
