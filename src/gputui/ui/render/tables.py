"""Text tables: the rolling latency table (with sparklines) and the finished steps table.

Values over an SLA bound are drawn in the "crit" role and followed by "!", values above 80 % of it
in "warn", so the verdict reads in colour and in monochrome alike. A P95 with its 95 % interval is
judged by the interval (`metrics.verdict.bound_verdict`): one that straddles its bound is
"inconclusive", in its own role and followed by "?"; the ±p95 column is half the interval's width.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable

from gputui.frontends.view import LiveView
from gputui.metrics.confidence import Interval
from gputui.metrics.step import StepResult
from gputui.metrics.summary import Summary
from gputui.metrics.verdict import bound_verdict
from gputui.ui.render import breakdown
from gputui.ui.render import format as fmt
from gputui.ui.render.spans import Line, fit
from gputui.ui.render.spark import sparkline

_PERCENTILES = ("p50", "p90", "p95", "p99")


def sla_role(value: float | None, bound: float | None) -> str:
    """A value's role against its bound: crit over it, warn above 80 %, else ok ("" if none)."""
    if value is None or bound is None:
        return ""
    if value > bound:
        return "crit"
    return "warn" if value > 0.8 * bound else "ok"


def _cell(value: float | None, bound: float | None, width: int) -> tuple[str, str]:
    role = sla_role(value, bound)
    mark = "!" if role == "crit" else " "
    return (fmt.duration(value) + mark).rjust(width), role


def p95_cell(summary: Summary | None, bound: float | None, width: int) -> tuple[str, str]:
    """The P95 against its bound by its 95 % interval: "!" fail, "?" inconclusive (straddles)."""
    ci = summary.p95_ci if summary is not None else None
    value = summary.p95 if summary is not None else None
    if ci is None or bound is None or value is None:
        return _cell(value, bound, width)
    verdict = bound_verdict(ci, bound)
    if verdict == "inconclusive":
        return (fmt.duration(value) + "?").rjust(width), "inconclusive"
    if verdict == "fail":
        return (fmt.duration(value) + "!").rjust(width), "crit"
    return (fmt.duration(value) + " ").rjust(width), sla_role(value, bound)


def half_width(interval: Interval | None) -> str:
    """A P95 interval as "±18.2ms" (half its width), "open" when it has an open end."""
    if interval is None:
        return fmt.NONE
    lo, hi = interval
    if lo is None or hi is None:
        return "open"
    return "±" + fmt.duration((hi - lo) / 2)


def _latency_columns(width: int, *, ci: bool) -> tuple[tuple[str, ...], int, int]:
    """The percentile columns that fit, their width and the n column's (± only with intervals)."""
    full = ("p50", "p90", "p95", "ci", "p99") if ci else ("p50", "p90", "p95", "p99")
    for columns, col, n_w in (
        (full, 9, 7),
        (full, 8, 7),
        (tuple(c for c in full if c != "p90"), 8, 6),
    ):
        if 6 + len(columns) * col + n_w <= width:
            return columns, col, n_w
    return tuple(c for c in full if c != "p90"), 8, 6


def latency_lines(view: LiveView, width: int, height: int, *, ascii: bool = False) -> list[Line]:
    """Percentiles (P95 with its ± and verdict) of the rolling window, then rate sparklines."""
    frame = view.frame
    window = frame.window if frame else None
    ci = window is not None and any(
        s is not None and s.p95_ci is not None for s in (window.ttft_s, window.tpot_s)
    )
    columns, col, n_w = _latency_columns(width, ci=ci)
    lines: list[Line] = []
    head = "".join(("±p95" if c == "ci" else c).rjust(col) for c in columns)
    lines.append([("".ljust(6), "label"), (head + "n".rjust(n_w), "label")])
    sla = view.sla
    rows: list[tuple[str, Callable[[LiveView], Summary | None], float | None]] = [
        ("TTFT", lambda v: v.frame.window.ttft_s if v.frame else None, sla.ttft_p95_s),
        ("TPOT", lambda v: v.frame.window.tpot_s if v.frame else None, sla.tpot_p95_s),
        ("ITL", lambda v: v.frame.window.itl_s if v.frame else None, None),
        ("E2E", lambda v: v.frame.window.e2e_s if v.frame else None, None),
    ]
    if frame is not None and frame.window.ttfat_s is not None:
        # A reasoning model: the time to the first answer token, beside the first token's.
        rows.insert(1, ("TTFAT", lambda v: v.frame.window.ttfat_s if v.frame else None, None))
    for name, get, bound in rows:
        summary = get(view)
        line: Line = [(name.ljust(6), "label")]
        for c in columns:
            if c == "ci":
                interval = summary.p95_ci if summary is not None else None
                line.append((half_width(interval).rjust(col), "dim"))
            elif c == "p95":
                line.append(p95_cell(summary, bound, col))
            else:
                line.append(_cell(getattr(summary, c) if summary is not None else None, bound, col))
        line.append((str(summary.n if summary else 0).rjust(n_w), "dim"))
        lines.append(line)
    spark_w = max(width - 24, 4)
    tput = fmt.rate(window.output_tokens_per_s if window else None)
    lines.append(
        [
            ("tok/s ", "label"),
            (tput.rjust(6) + " ", "s1"),
            (sparkline(view.throughput_history, spark_w, lo=0.0, ascii=ascii), "s1"),
        ]
    )
    err = window.error_rate if window else None
    bound = sla.max_error_rate
    err_role = sla_role(err, bound) if bound is not None else ("crit" if err else "ok")
    lines.append(
        [
            ("errors", "label"),
            (fmt.percent(err).rjust(6) + " ", err_role),
            (sparkline(view.error_rate_history, spark_w, lo=0.0, hi=None, ascii=ascii), err_role),
        ]
    )
    if window is not None:
        by_reason = ", ".join(f"{k} {v}" for k, v in sorted(window.errors.items()))
        lines.append(
            [
                (f"{fmt.rate(window.requests_per_s)} req/s", ""),
                (f" · {window.n_requests} requests in {window.span_s:.0f} s", "dim"),
                (
                    f" · reasoning {fmt.percent(window.reasoning_share)}"
                    if window.reasoning_share is not None
                    else "",
                    "dim",
                ),
                (f" · {by_reason}" if by_reason else "", "crit"),
            ]
        )
    return [fit(line, width) for line in lines[:height]] + [
        fit([], width) for _ in range(height - len(lines))
    ]


_BAR_MIN = 20
_TTFT_W = 8
"""The bar column starts with the step's mean TTFT; the bar splits it (100 % = that TTFT)."""
_BAR_FIRST = 28
"""Cells the bar takes before the optional columns (ITL95, E2E95, goodput, req/s)."""
_BAR_MAX = 42
"""Wide enough for the full key (net, queue, prefill, srv, client) beside the TTFT column."""
_SLA_CELLS = {"pass": ("  ok    ", "ok"), "fail": ("  FAIL  ", "crit")}
_UNSURE = ("  unsure", "inconclusive")
"""An SLA verdict the confidence intervals cannot decide (issue 16): its own role."""
_BASE = [("#", 3), ("level", 6), ("ok/fail", 8), ("tok/s", 7), ("TTFT95", 8), ("TPOT95", 8)]
_BASE += [("err", 6)]
_MARKS = {
    "partial": (" partial", " part."),
    "best": (" ★ capacity", " ★"),
    "knee": (" ┊ knee", " ┊"),
}
"""Each row mark's text, in full and narrow (when the full marks and verdicts do not fit)."""


def _steps_columns(
    width: int, used: int, *, diagnosed: bool, intervals: set[str]
) -> tuple[list[tuple[str, int]], int]:
    """The value columns that fit beside `used` cells, and the TTFT bar's width (0: none).

    A ± column comes only when some step has that interval (`intervals`).
    """
    columns = list(_BASE)
    used += sum(w for _, w in columns)
    for column, after in ((("±TTFT", 8), "TTFT95"), (("±tok/s", 7), "tok/s")):
        if column[0] in intervals and used + column[1] <= width:
            columns.insert(next(i for i, c in enumerate(columns) if c[0] == after) + 1, column)
            used += column[1]
    bar = 0
    if diagnosed and used + _BAR_MIN + 1 <= width:
        bar = min(_BAR_FIRST, width - used - 1)
        used += bar + 1
    for column in (("ITL95", 9), ("E2E95", 9), ("goodput", 9), ("req/s", 7)):
        if used + column[1] <= width:
            columns.append(column)
            used += column[1]
    if bar:
        bar = min(_BAR_MAX, bar + width - used)
    return columns, bar


def _half(interval: tuple[float | None, float | None] | None) -> float | None:
    if interval is None or interval[0] is None or interval[1] is None:
        return None
    return (interval[1] - interval[0]) / 2


def _sla_cell(step: StepResult) -> tuple[str, str]:
    verdict = step.sla_verdict
    if verdict == "inconclusive":
        return _UNSURE
    if verdict is None:
        verdict = "pass" if step.sla_ok else "fail"
    return _SLA_CELLS[verdict]


def _marks(view: LiveView, i: int, narrow: bool) -> str:
    step, knee = view.steps[i], view.knee
    kinds = [
        kind
        for kind, on in (
            ("partial", step.incomplete),
            ("best", i == view.best_step_index),
            ("knee", knee is not None and i == knee.index),
        )
        if on
    ]
    return "".join(_MARKS[k][1 if narrow else 0] for k in kinds)


def steps_lines(view: LiveView, width: int, height: int, *, ascii: bool = False) -> list[Line]:
    """One row per finished step (newest at the bottom when they do not all fit).

    After the SLA verdict ("unsure" when its confidence intervals straddle a bound) and the row's
    marks (★ capacity, ┊ knee) come what bound the step (`bound by`, issue 18) and its TTFT
    decomposition bar, when diagnosed. A narrow table shortens the marks and verdict names.
    """
    diagnosed = any(view.diagnosis(s).get("bottleneck") for s in view.steps)
    narrow = False
    for narrow in (False, True):
        bound = {s.index: breakdown.bound_by(view.diagnosis(s), short=narrow) for s in view.steps}
        marks = [_marks(view, i, narrow) for i in range(len(view.steps))]
        marks_w = max((len(m) for m in marks), default=0)
        cells = [len(t) for t, _ in bound.values()]
        bound_w = max([len("bound by"), *cells]) + 2 if diagnosed else 0
        used = len(_UNSURE[0]) + marks_w + bound_w
        if used + sum(w for _, w in _BASE) <= width:
            break
    intervals = {
        name
        for name, ci in (
            ("±TTFT", [_half(s.ttft_s.p95_ci) for s in view.steps]),
            ("±tok/s", [_half(s.output_tokens_per_s_ci) for s in view.steps]),
        )
        if any(half is not None for half in ci)
    }
    columns, bar_w = _steps_columns(width, used, diagnosed=diagnosed, intervals=intervals)
    head = "".join(name.rjust(w) for name, w in columns) + "  SLA".ljust(len(_UNSURE[0]))
    head += " " * marks_w
    if diagnosed:
        head += "  " + "bound by".ljust(bound_w - 2)
    header: Line = [(head, "label")]
    if bar_w:
        legend = breakdown.legend(ascii=ascii, short=bar_w - _TTFT_W < 34)
        header += [(" " + "TTFT".rjust(_TTFT_W - 1) + " ", "label"), *legend]
    if not view.steps:
        rows = [fit(header, width), fit([("  no finished step yet", "dim")], width)]
        return rows + [fit([], width) for _ in range(height - 2)]
    sla = view.sla
    body: list[Line] = []
    for i, step in enumerate(view.steps):
        ttft_half, rate_half = _half(step.ttft_s.p95_ci), _half(step.output_tokens_per_s_ci)
        values: dict[str, tuple[str, str]] = {
            "#": (str(step.index + 1), "dim"),
            "level": (f"{step.level:g}" + ("/s" if step.mode == "rate" else ""), ""),
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
            "req/s": (fmt.rate(step.requests_per_s), ""),
        }
        line: Line = [(values[name][0].rjust(w), values[name][1]) for name, w in columns]
        line.append(_sla_cell(step))
        if i == view.best_step_index:
            line = [
                (text, "best" if role in ("", "s1", "dim", "ok") else role) for text, role in line
            ]
        knee_row = view.knee is not None and i == view.knee.index
        line.append((marks[i].ljust(marks_w), "knee" if knee_row else "best"))
        if diagnosed:
            text, role = bound[step.index]
            line.append(("  " + text.ljust(bound_w - 2), role))
        if bar_w:
            b = view.diagnosis(step).get("ttft_breakdown")
            ttft = float(b["ttft_s"]) if b else 0.0
            line.append((" " + (fmt.duration(ttft) if b else "").rjust(_TTFT_W - 1) + " ", ""))
            line += breakdown.decomposition_bar(b, bar_w - _TTFT_W, ttft, ascii=ascii)
        body.append(line)
    # Rows first; spare lines under them: the newest step's bar (when no row has one), the knee.
    spare = height - 1 - len(body)
    footer: list[Line] = []
    newest = view.diagnosis(view.steps[-1]).get("ttft_breakdown")
    if not bar_w and newest and spare >= 1:
        label = f"step {view.steps[-1].index + 1}"
        footer.append(breakdown.step_bar_line(label, newest, width, ascii=ascii))
    if view.knee_explanation and spare - len(footer) >= 1:
        wrapped = textwrap.wrap(view.knee_explanation, max(width - 2, 10))[: spare - len(footer)]
        footer += [[("┊ " if k == 0 else "  ", "knee"), (t, "")] for k, t in enumerate(wrapped)]
    keep = max(height - 1 - len(footer), 0)
    shown = body[-keep:] if keep else []
    lines = [fit(header, width)] + [fit(line, width) for line in [*shown, *footer]]
    return lines + [fit([], width) for _ in range(height - len(lines))]
