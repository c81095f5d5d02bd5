"""The finished steps table: fixed columns, every step, one vocabulary (issue 23).

The columns depend on the table's width only, never on the data, so they do not come and go as
steps finish; each cell is cut to its column and keeps a space before the next. Rows are numbered
in the order the steps finished (1, 2, 3, ...: the hold's and the auto sweep's hidden
continuation steps take no number), the number led by the row's marks: `★` the capacity, `┊` the
knee, `~` a partial step. The SLA column says pass / fail / inconclusive, or "no data" for a step
in which no request finished (`metrics.outcome`; "inconcl." where the table is narrow). `J/out`
is the step's joules per output token over its measured window (issue 29; "-" without an energy
figure). When a step has been diagnosed, "bound by" and, where the table is wide enough, its
TTFT decomposition bar follow. The latency percentiles are of the requests that succeeded: where
a step had failures, a note under the rows says how many each leaves out (issue 31), kept
however many rows there are.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from gputui.frontends.view import LiveView
from gputui.metrics.energy import joules_cell
from gputui.metrics.json_read import number
from gputui.metrics.outcome import step_outcome
from gputui.metrics.step import StepResult
from gputui.ui.render import breakdown
from gputui.ui.render import format as fmt
from gputui.ui.render.spans import Line, fit
from gputui.ui.render.tables import p95_cell

_BASE = [("#", 4), ("level", 8), ("ok/fail", 8), ("tok/s", 7), ("TTFT95", 8), ("TPOT95", 8)]
_BASE += [("err", 6)]
_SLA_W = 13
"""' inconclusive': the longest word of the SLA column."""
_BOUND_NARROW, _BOUND_WIDE = 14, 20
_EXTRA = [("±TTFT", 8), ("±tok/s", 7)]
_ENERGY = ("J/out", 7)
"""Joules per output token over the step's measured window (issue 29)."""
_SLA_NARROW = 9
"""The SLA column when the detail view makes room for the energy column: ' inconcl.'."""
_BOUND_TIGHT = 11
_TAIL = [("ITL95", 9), ("E2E95", 9), ("goodput", 9), ("req/s", 7)]
_TTFT_W = 8
"""The bar column starts with the step's mean TTFT; the bar splits it (100 % = that TTFT)."""
_BAR_MIN, _BAR_MAX = 20, 42
"""The bar's widths; 42 is wide enough for the full key (net, queue, prefill, srv, client)."""
OUTCOME_ROLES = {"pass": "ok", "fail": "crit", "inconclusive": "inconclusive", "no data": "dim"}


def level_text(step: StepResult) -> str:
    """The level at most 4 significant digits: '64', '12.5/s', '1216/s'."""
    return f"{step.level:.4g}" + ("/s" if step.mode == "rate" else "")


def steps_layout(width: int) -> tuple[list[tuple[str, int]], int, int]:
    """The value columns, the bound-by width and the TTFT bar's width (0: none) for `width`.

    The energy column (issue 29) comes before the ± columns; where it would not fit, the SLA
    and bound-by columns narrow to make room (the steps panel of a 160-column screen, the
    detail view of an 80-column one: 76 cells).
    """
    columns = list(_BASE)
    used = sum(w for _, w in columns) + _SLA_W
    bound_w = _BOUND_WIDE if used + _BOUND_WIDE + 16 <= width else _BOUND_NARROW
    used += bound_w
    if used + _ENERGY[1] > width:
        used -= _SLA_W - _SLA_NARROW + bound_w - _BOUND_TIGHT
        bound_w = _BOUND_TIGHT
    if used + _ENERGY[1] <= width:
        columns.insert(next(i for i, c in enumerate(columns) if c[0] == "tok/s") + 1, _ENERGY)
        used += _ENERGY[1]
    for column, after in zip(_EXTRA, ("TTFT95", "tok/s"), strict=True):
        if used + column[1] <= width:
            columns.insert(next(i for i, c in enumerate(columns) if c[0] == after) + 1, column)
            used += column[1]
    bar = 0
    if used + _TTFT_W + _BAR_MIN <= width:
        # Leave the first tail column (ITL95) its room when the bar can spare it.
        room = width - used - _TTFT_W
        bar = min(_BAR_MAX, room - _TAIL[0][1] if room - _TAIL[0][1] >= 34 else room)
        used += _TTFT_W + bar
    for column in _TAIL:
        if used + column[1] <= width:
            columns.append(column)
            used += column[1]
    return columns, bound_w, bar


def _half(interval: tuple[float | None, float | None] | None) -> float | None:
    if interval is None or interval[0] is None or interval[1] is None:
        return None
    return (interval[1] - interval[0]) / 2


def _marks(view: LiveView, i: int) -> str:
    step, knee = view.steps[i], view.knee
    marks = "~" if step.incomplete else ""
    marks += "★" if i == view.best_step_index else ""
    return marks + ("┊" if knee is not None and i == knee.index else "")


def _cell(text: str, width: int) -> str:
    """Right-aligned in `width` with at least one space before it (cut, never run together)."""
    return text[: width - 1].rjust(width)


def _values(view: LiveView, i: int, step: StepResult) -> dict[str, tuple[str, str]]:
    sla = view.sla
    ttft_half, rate_half = _half(step.ttft_s.p95_ci), _half(step.output_tokens_per_s_ci)
    return {
        "#": (f"{_marks(view, i)}{i + 1}", "dim"),
        "level": (level_text(step), ""),
        "ok/fail": (f"{step.requests_ok}/{step.requests_failed}", ""),
        "tok/s": (fmt.rate(step.output_tokens_per_s), "s1"),
        "±tok/s": ("" if rate_half is None else "±" + fmt.rate(rate_half), "dim"),
        "TTFT95": p95_cell(step.ttft_s, sla.ttft_p95_s, 0),
        "±TTFT": ("" if ttft_half is None else "±" + fmt.duration(ttft_half), "dim"),
        "TPOT95": p95_cell(step.tpot_s, sla.tpot_p95_s, 0),
        "err": (fmt.percent(step.error_rate, 1), "crit" if step.requests_failed else "dim"),
        "ITL95": (fmt.duration(step.itl_s.p95), ""),
        "E2E95": (fmt.duration(step.e2e_s.p95), ""),
        "goodput": (fmt.rate(step.goodput_output_tokens_per_s), ""),
        "J/out": (joules_cell(step.energy), "s3"),
        "req/s": (fmt.rate(step.requests_per_s), ""),
    }


def _row(
    view: LiveView, i: int, layout: tuple[list[tuple[str, int]], int, int], *, ascii: bool
) -> Line:
    columns, bound_w, bar_w = layout
    sla_w = _sla_width(columns, bound_w)
    step = view.steps[i]
    values = _values(view, i, step)
    line: Line = [(_cell(values[name][0], w), values[name][1]) for name, w in columns]
    outcome = step_outcome(step)
    shown = outcome if len(outcome) < sla_w else outcome[: sla_w - 2] + "."
    line.append((" " + shown.ljust(sla_w - 1), OUTCOME_ROLES[outcome]))
    if i == view.best_step_index:
        line = [(text, "best" if role in ("", "s1", "dim", "ok") else role) for text, role in line]
    if view.knee is not None and i == view.knee.index:
        line[0] = (line[0][0], "knee")
    text, role = breakdown.bound_by(view.diagnosis(step).bottleneck, short=bound_w < _BOUND_WIDE)
    if len(text) > bound_w - 1:
        text = text[: bound_w - 2] + "…"
    line.append((" " + text.ljust(bound_w - 1), role))
    if bar_w:
        b = view.diagnosis(step).ttft_breakdown
        ttft = (number(b, "ttft_s") or 0.0) if b else 0.0
        line.append(((fmt.duration(ttft) if b else "").rjust(_TTFT_W - 1) + " ", ""))
        line += breakdown.decomposition_bar(b, bar_w, ttft, ascii=ascii)
    return line


def _sla_width(columns: list[tuple[str, int]], bound_w: int) -> int:
    """The SLA column is narrow only where the detail view made room for the energy column."""
    return _SLA_NARROW if bound_w == _BOUND_TIGHT and _ENERGY in columns else _SLA_W


def steps_lines(view: LiveView, width: int, height: int, *, ascii: bool = False) -> list[Line]:
    """One row per finished step (the newest at the bottom when they do not all fit).

    Under the rows, in spare lines: the newest step's TTFT bar with every part's value (when the
    table has no bar column; on two lines when one is too narrow), then the knee's explanation.
    """
    layout = steps_layout(width)
    columns, bound_w, bar_w = layout
    head = "".join(name.rjust(w) for name, w in columns) + " SLA".ljust(
        _sla_width(columns, bound_w)
    )
    header: Line = [(head + " " + "bound by".ljust(bound_w - 1), "label")]
    if bar_w:
        legend = breakdown.legend(ascii=ascii, short=bar_w < 34)
        header += [("TTFT".rjust(_TTFT_W - 1) + " ", "label"), *legend]
    if not view.steps:
        rows = [fit(header, width), fit([("  no finished step yet", "dim")], width)]
        return rows + [fit([], width) for _ in range(height - 2)]
    body = [_row(view, i, layout, ascii=ascii) for i in range(len(view.steps))]
    if ascii:
        body = [[(_ascii(text), role) for text, role in line] for line in body]
    footer: list[Line] = []
    note = left_out_note(view.steps, width)
    if note is not None and height >= 3:  # kept whatever the rows: a P95 must say what it omits
        footer.append([(note, "dim")])
    spare = height - 1 - len(body) - len(footer)
    newest = view.diagnosis(view.steps[-1]).ttft_breakdown
    if not bar_w and newest:
        label = f"step {len(view.steps)}"
        bar_lines = breakdown.step_bar_lines(label, newest, width, ascii=ascii)
        if spare >= len(bar_lines):
            footer += bar_lines
            spare -= len(bar_lines)
    if view.knee_explanation and spare >= 1:
        wrapped = textwrap.wrap(view.knee_explanation, max(width - 2, 10))[:spare]
        footer += [[("┊ " if k == 0 else "  ", "knee"), (t, "")] for k, t in enumerate(wrapped)]
    keep = max(height - 1 - len(footer), 0)
    shown = body[-keep:] if keep else []
    lines = [fit(header, width)] + [fit(line, width) for line in [*shown, *footer]]
    return lines + [fit([], width) for _ in range(height - len(lines))]


def left_out_note(steps: Sequence[StepResult], width: int) -> str | None:
    """The note 'latency P95s: #2 3 failed left out, #4 12 failed left out' (issue 31).

    The table's percentiles are of the requests that succeeded; a failed or timed-out request
    has none. The newest steps with failures are named first, as many as fit in `width`.
    """
    failed = [(i + 1, s.requests_failed) for i, s in enumerate(steps) if s.requests_failed]
    if not failed:
        return None
    head = "latency P95s:"
    parts: list[str] = []
    for row, count in reversed(failed):
        part = f"#{row} {count} failed left out"
        if parts and len(head) + sum(len(p) + 2 for p in parts) + len(part) + 1 > width - 1:
            break
        parts.append(part)
    return f"{head} {', '.join(reversed(parts))}"


def _ascii(text: str) -> str:
    return text.replace("★", "*").replace("┊", "|").replace("…", "~")
