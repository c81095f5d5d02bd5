"""Text tables: the rolling latency table (with sparklines) and the finished steps table.

Values over an SLA bound are drawn in the "crit" role and followed by "!", values above 80 % of it
in "warn", so the verdict reads in colour and in monochrome alike.
"""

from __future__ import annotations

from collections.abc import Callable

from gputui.live import LiveView
from gputui.metrics.summary import Summary
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


def latency_lines(view: LiveView, width: int, height: int, *, ascii: bool = False) -> list[Line]:
    """Percentiles of the rolling window, then throughput and error-rate sparklines."""
    frame = view.frame
    col = 9 if width >= 52 else 8
    lines: list[Line] = []
    head = "".join(p.rjust(col) for p in _PERCENTILES)
    lines.append([("".ljust(6), "label"), (head + "n".rjust(7), "label")])
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
        for p in _PERCENTILES:
            value = getattr(summary, p) if summary is not None else None
            line.append(_cell(value, bound, col))
        line.append((str(summary.n if summary else 0).rjust(6), "dim"))
        lines.append(line)
    window = frame.window if frame else None
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


def _steps_columns(width: int) -> list[tuple[str, int]]:
    columns = [("#", 3), ("level", 6), ("ok/fail", 9), ("tok/s", 7), ("TTFT95", 9)]
    columns += [("TPOT95", 9), ("err", 6)]
    optional = [("ITL95", 9), ("E2E95", 9), ("goodput", 9), ("req/s", 7)]
    used = sum(w for _, w in columns) + 18
    for column in optional:
        if used + column[1] <= width:
            columns.append(column)
            used += column[1]
    return columns


def steps_lines(view: LiveView, width: int, height: int) -> list[Line]:
    """One row per finished step (newest at the bottom when they do not all fit)."""
    columns = _steps_columns(width)
    header: Line = [("".join(name.rjust(w) for name, w in columns) + "  SLA", "label")]
    if not view.steps:
        rows = [fit(header, width), fit([("  no finished step yet", "dim")], width)]
        return rows + [fit([], width) for _ in range(height - 2)]
    sla = view.sla
    knee_index = view.knee.index if view.knee is not None else None
    body: list[Line] = []
    for i, step in enumerate(view.steps):
        values: dict[str, tuple[str, str]] = {
            "#": (str(step.index + 1), "dim"),
            "level": (f"{step.level:g}" + ("/s" if step.mode == "rate" else ""), ""),
            "ok/fail": (f"{step.requests_ok}/{step.requests_failed}", ""),
            "tok/s": (fmt.rate(step.output_tokens_per_s), "s1"),
            "TTFT95": _cell(step.ttft_s.p95, sla.ttft_p95_s, 0),
            "TPOT95": _cell(step.tpot_s.p95, sla.tpot_p95_s, 0),
            "err": (fmt.percent(step.error_rate, 1), "crit" if step.requests_failed else "dim"),
            "ITL95": (fmt.duration(step.itl_s.p95), ""),
            "E2E95": (fmt.duration(step.e2e_s.p95), ""),
            "goodput": (fmt.rate(step.goodput_output_tokens_per_s), ""),
            "req/s": (fmt.rate(step.requests_per_s), ""),
        }
        line: Line = [(values[name][0].rjust(w), values[name][1]) for name, w in columns]
        verdict = "  ok " if step.sla_ok else "  FAIL"
        line.append((verdict, "ok" if step.sla_ok else "crit"))
        if step.incomplete:
            line.append((" partial", "dim"))
        if i == view.best_step_index:
            line.append((" ★ capacity", "best"))
            line = [
                (text, "best" if role in ("", "s1", "dim", "ok") else role) for text, role in line
            ]
        if i == knee_index:
            line.append((" ┊ knee", "knee"))
        body.append(line)
    keep = max(height - 1, 0)
    shown = body[-keep:] if keep else []
    lines = [fit(header, width)] + [fit(line, width) for line in shown]
    return lines + [fit([], width) for _ in range(height - len(lines))]
