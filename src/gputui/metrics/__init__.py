"""Pure statistics on request records and arrays: summaries, steps, SLA, goodput, rolling windows.

Nothing here does I/O or asyncio, or imports textual, rich or httpx.
"""

from gputui.metrics.capacity import (
    Capacity,
    CapacityResult,
    majority_mode,
    qualified_capacity,
    sla_violations,
)
from gputui.metrics.cost import (
    AtThroughput,
    cost_per_million_output_tokens,
    demand_output_tokens_per_s,
    interpolate_at_throughput,
    servers_needed,
)
from gputui.metrics.knee import Knee, KneeResult, find_knee, gain_per_doubling, knee_from_steps
from gputui.metrics.request_metrics import RequestMetrics, request_metrics
from gputui.metrics.sla import Sla, error_rate, meets_sla, step_meets_sla
from gputui.metrics.step import StepResult, StepSpec, aggregate_step
from gputui.metrics.summary import EMPTY_SUMMARY, Summary, summarize
from gputui.metrics.window import RollingWindow, WindowStats

__all__ = [
    "EMPTY_SUMMARY",
    "AtThroughput",
    "Capacity",
    "CapacityResult",
    "Knee",
    "KneeResult",
    "RequestMetrics",
    "RollingWindow",
    "Sla",
    "StepResult",
    "StepSpec",
    "Summary",
    "WindowStats",
    "aggregate_step",
    "cost_per_million_output_tokens",
    "demand_output_tokens_per_s",
    "error_rate",
    "find_knee",
    "gain_per_doubling",
    "interpolate_at_throughput",
    "knee_from_steps",
    "majority_mode",
    "meets_sla",
    "qualified_capacity",
    "request_metrics",
    "servers_needed",
    "sla_violations",
    "step_meets_sla",
    "summarize",
]
