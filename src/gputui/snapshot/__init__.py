"""Snapshots: the saved form of a run (schema, atomic save, validated load)."""

from gputui.snapshot.models import (
    SCHEMA_VERSION,
    CapacityModel,
    Client,
    KneeModel,
    Network,
    SlaBounds,
    Snapshot,
    Stats,
    Step,
    Target,
    Workload,
    now_iso,
    stats_from_summary,
    step_from_result,
)
from gputui.snapshot.store import load_snapshot, save_snapshot

__all__ = [
    "SCHEMA_VERSION",
    "CapacityModel",
    "Client",
    "KneeModel",
    "Network",
    "SlaBounds",
    "Snapshot",
    "Stats",
    "Step",
    "Target",
    "Workload",
    "load_snapshot",
    "now_iso",
    "save_snapshot",
    "stats_from_summary",
    "step_from_result",
]
