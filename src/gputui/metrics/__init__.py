"""Pure statistics on request records and arrays: summaries, steps, SLA, goodput, rolling windows.

Nothing here does I/O or asyncio, or imports textual, rich or httpx.
"""

from gputui.metrics.request_metrics import RequestMetrics, request_metrics
from gputui.metrics.sla import Sla, error_rate, meets_sla, step_meets_sla
from gputui.metrics.step import StepResult, StepSpec, aggregate_step
from gputui.metrics.summary import EMPTY_SUMMARY, Summary, summarize
from gputui.metrics.window import RollingWindow, WindowStats

__all__ = [
    "EMPTY_SUMMARY",
    "RequestMetrics",
    "RollingWindow",
    "Sla",
    "StepResult",
    "StepSpec",
    "Summary",
    "WindowStats",
    "aggregate_step",
    "error_rate",
    "meets_sla",
    "request_metrics",
    "step_meets_sla",
    "summarize",
]
