"""What a live session needs, built by the CLI (`ui.command`) from `gputui.settings`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.engine.load import LoadMode
from gputui.engine.process import EngineConfig
from gputui.metrics.sla import Sla

if TYPE_CHECKING:
    from gputui.workloads.sources import SourcePlan


@dataclass(frozen=True, slots=True)
class LiveSettings:
    """What a live session needs (built by the CLI from flags or a scenario)."""

    engine: EngineConfig
    sla: Sla
    warmup_s: float | None = None
    """None: each step measures once its load has settled (the Session's steady-state rule)."""
    window_s: float = 30.0
    start_mode: LoadMode = "concurrency"
    start_level: float = 1.0
    factor: float = 2.0
    burst_size: int = 16
    snapshot_dir: Path = Path()
    label: str | None = None
    gpu_description: str | None = None
    """For a simulated target, the card and model it simulates."""
    journal: bool = True
    """Keep an append-only journal in `snapshot_dir` while the session runs (crash recovery)."""
    workers: int = 1
    """Engine processes sharing the load (engine.pool)."""
    ray_address: str | None = None
    price_per_hour: float | None = None
    energy_price: float | None = None
    """Electricity per kWh (`--energy-price`): the energy cost beside the hourly one."""
    pue: float = 1.0
    precision: str | None = None
    """The weights' precision, recorded in the snapshot (the simulator's own in the demo)."""
    source: SourcePlan | None = None
    """Conversations, a trace replay or a dataset order (`workloads.sources`): what its live
    panel shows and the keys its snapshot adds."""
    metrics_url: str | None = None
    """The server's /metrics, whose latency histograms the step diagnosis reads (issue 18)."""
    target_precision: float = 0.05
    """Relative CI half-width the hold key (`h`) and the auto sweep (`a`) wait for
    (`--target-precision`)."""
    max_step_s: float | None = None
    """`--max-step-seconds`: the longest a held or auto step runs (None: the shared default)."""
    workload_details: dict[str, object] = field(default_factory=dict)
    """The prepared workload's snapshot fields (`workloads.prepare.PreparedRun.details`)."""
    notices: tuple[str, ...] = ()
    """What the header must say about the prompts (`workloads.report.prompt_notices`)."""
    records: Path | None = None
    """`--records FILE`: per-request JSON Lines (`frontends.outputs`)."""
    serve_metrics: tuple[str, int] | None = None
    """`--serve-metrics HOST:PORT`: gputui's own /metrics while the TUI runs."""


def backend_from_server(server_header: str) -> str | None:
    """The backend a `Server` header names, when it names one."""
    header = server_header.lower()
    if "llama.cpp" in header:
        return "llamacpp"
    if "gputui-sim" in header:
        return "gputui-sim"
    return None
