"""One phrase for a step of a reasoning model's run: TTFAT and the thinking share beside TTFT."""

from __future__ import annotations

from gputui.metrics.step import StepResult


def stream_text(result: StepResult) -> str:
    """E.g. "TTFAT p50/p95 412.3/455.0 ms, reasoning 60.0 %, "; "" without thinking tokens."""
    ttfat = result.ttfat_s
    if ttfat is None:
        return ""
    share = (
        ""
        if result.reasoning_share is None
        else f", reasoning {100 * result.reasoning_share:.1f} %"
    )
    return f"TTFAT p50/p95 {_ms(ttfat.p50)}/{_ms(ttfat.p95)} ms{share}, "


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"
