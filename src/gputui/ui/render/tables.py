"""Text tables: the rolling latency table (with sparklines); the steps table is `render.steps`.

Values over an SLA bound are drawn in the "crit" role and followed by "!", values above 80 % of it
in "warn", so the verdict reads in colour and in monochrome alike. A P95 with its 95 % interval is
judged by the interval (`metrics.verdict.bound_verdict`): one that straddles its bound is
"inconclusive", in its own role and followed by "?"; the ±p95 column is half the interval's width.
"""

from __future__ import annotations

from collections.abc import Callable

from gputui.frontends.view import LiveView
from gputui.metrics.confidence import Interval
from gputui.metrics.summary import Summary
from gputui.metrics.verdict import bound_verdict
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
