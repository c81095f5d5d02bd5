"""One phrase for a step of a reasoning model's run: TTFAT and the thinking share beside TTFT."""

from __future__ import annotations

from gputui.metrics.step import StepResult


def stream_text(result: StepResult) -> str:
    """E.g. "TTFAT p50/p95 412.3/455.0 ms (p95 CI 430.1-480.2), no answer: 2, reasoning 60.0 %, ".

    "" without thinking tokens. TTFAT is censored at E2E for a request that never answered.
    """
    ttfat = result.ttfat_s
    if ttfat is None:
        return ""
    share = (
        ""
        if result.reasoning_share is None
        else f", reasoning {100 * result.reasoning_share:.1f} %"
    )
    ci = ttfat.p95_ci
    interval = (
        f" (p95 CI {_ms(ci[0])}-{'open' if ci[1] is None else _ms(ci[1])})"
        if ci is not None and ci[0] is not None
        else ""
    )
    missing = f", no answer: {result.ttfat_no_answer}" if result.ttfat_no_answer else ""
    return f"TTFAT p50/p95 {_ms(ttfat.p50)}/{_ms(ttfat.p95)} ms{interval}{missing}{share}, "


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"
