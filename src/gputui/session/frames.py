"""The Session's live frame: `StatsFrame`, frozen, what the live view shows at one instant.

Contract: built by `session.publisher` on the frame thread and swapped into `Session.latest`, so
readers never see a half-built frame and never lock. Importable from `gputui.session`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.engine.load import LoadMode
from gputui.metrics.verdict_progress import VerdictProgress
from gputui.metrics.window import WindowStats

SATURATION_CPU_PERCENT = 90.0
"""An engine process this busy delays its own stamps: add workers (`--workers`)."""
SATURATION_LAG_MS = 20.0
"""An event loop this late stamps tokens this late."""


@dataclass(frozen=True, slots=True)
class StatsFrame:
    """What the live view shows, at one instant."""

    seq: int
    mode: LoadMode
    level: float
    step_index: int
    step_elapsed_s: float
    in_warmup: bool
    in_flight: int
    paused: bool
    window: WindowStats
    client_cpu_percent: float
    """Engine process CPU over the last frame interval (100 = one full core)."""
    loop_lag_max_ms: float
    rtt_last_s: float | None
    steps_finished: int
    workers: int = 1
    busiest_worker_cpu_percent: float = 0.0
    client_saturated: bool = False
    """The client's own CPU may be limiting the measurement (see `SATURATION_*`): add workers."""
    client_run_wait_percent: float | None = None
    """The engine processes' largest run-queue wait, % of wall time (engine.schedstat)."""
    host_contended: bool = False
    """The client is late because other processes hold the CPUs (metrics.client_state)."""
    step_phase: str = "measuring"
    """"settling" (waiting for steady state), "measuring", "holding" (`hold_until_precise`)
    or "auto" (`start_auto` runs the sweep)."""
    settle_remaining_s: float | None = None
    """While settling: seconds until the maximum warm-up opens the window anyway."""
    measured_n: int = 0
    """Requests of the current step finished inside its measured window so far."""
    precision: float | None = None
    """Largest relative 95 % CI half-width of P95 TTFT, P95 TPOT and output tok/s so far."""
    verdict_progress: VerdictProgress | None = None
    """The step's SLA verdict so far and what deciding it still needs (the header's line)."""
