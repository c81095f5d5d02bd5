"""The Session's live frame: `StatsFrame`, frozen, what the live view shows at one instant.

Contract: `build_frame` (pure) makes one from what the session loop keeps; the loop swaps it into
`Session.latest`, so readers never see a half-built frame and never lock. `StatsFrame` is
importable from `gputui.session`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.engine.load import LoadMode
from gputui.engine.process import EngineStatus
from gputui.metrics.client_state import CLIENT_BOUND, HOST_CONTENDED
from gputui.metrics.step import StepSpec
from gputui.metrics.verdict_progress import VerdictProgress
from gputui.metrics.window import WindowStats
from gputui.session.steady import StepPhase

SATURATION_CPU_PERCENT = 90.0
"""An engine process this busy delays its own stamps: add workers (`--workers`)."""
SATURATION_LAG_MS = 20.0
"""An event loop this late stamps tokens this late."""


@dataclass(frozen=True, slots=True)
class Handover:
    """A step closing while its measured requests finish at its own load (`session.loads`)."""

    index: int
    """The closing step (0-based, as `StatsFrame.step_index`)."""
    level: float
    """Its load, still running."""
    requests_left: int
    """Its requests not back yet."""
    eta_s: float | None
    """About how long until they are (its P90 E2E less the time since it closed; None: unknown)."""
    next_level: float
    """The level that starts then."""


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
    gc_pause_max_ms: float = 0.0
    """The engine's longest garbage collection in the last interval (a stall it can name)."""
    step_phase: str = "measuring"
    """"handover" (the step before still closes: `handover`), "settling" (waiting for steady
    state), "measuring", "holding" (`hold_until_precise`), "auto" (`start_auto` runs the sweep)
    or "unmeasured" (no step open: after a hold)."""
    settle_remaining_s: float | None = None
    """While settling: seconds until the maximum warm-up opens the window anyway."""
    first_verdict_s: float | None = None
    """While settling: about how long until the step's first verdict can come."""
    measured_n: int = 0
    """Requests of the current step finished inside its measured window so far."""
    precision: float | None = None
    """Largest relative 95 % CI half-width of P95 TTFT, P95 TPOT and output tok/s so far."""
    verdict_progress: VerdictProgress | None = None
    """The step's SLA verdict so far and what deciding it still needs (the header's line)."""
    handover: Handover | None = None
    """Set while the step before this one closes: this step's level has not started yet."""
    hold_look: tuple[str, str] | None = None
    """During a hold (`h`): the step's verdict as it will be saved, and why ('pass at look 1 of
    4 (...)'): the hold's latest look (`metrics.hold_looks`), not the nominal interval's."""


def build_frame(
    *,
    seq: int,
    step: StepSpec,
    now_ns: int,
    window: WindowStats,
    phase: StepPhase,
    status: EngineStatus | None,
    client_cpu_percent: float,
    busiest_cpu_percent: float,
    run_wait_percent: float | None,
    client_state: str | None,
    rtt_last_s: float | None,
    steps_finished: int,
    workers: int,
    paused: bool,
    handover: Handover | None = None,
    paused_at_ns: int | None = None,
    hold_look: tuple[str, str] | None = None,
) -> StatsFrame:
    """The frame of the latest step at `now_ns`, from the figures the session loop keeps (pure).

    While paused (since `paused_at_ns`) the step's clock stands at the pause.
    """
    clock_ns = now_ns if paused_at_ns is None else max(min(paused_at_ns, now_ns), step.start_ns)
    return StatsFrame(
        seq=seq,
        mode=step.mode,
        level=step.level,
        step_index=step.index,
        step_elapsed_s=(clock_ns - step.start_ns) / 1e9,
        in_warmup=now_ns < step.measure_start_ns,
        in_flight=status.in_flight if status else 0,
        paused=paused,
        window=window,
        client_cpu_percent=client_cpu_percent,
        loop_lag_max_ms=status.loop_lag_max_ms if status else 0.0,
        rtt_last_s=rtt_last_s,
        steps_finished=steps_finished,
        workers=workers,
        busiest_worker_cpu_percent=busiest_cpu_percent,
        client_saturated=client_state == CLIENT_BOUND,
        client_run_wait_percent=run_wait_percent,
        host_contended=client_state == HOST_CONTENDED,
        gc_pause_max_ms=status.gc_pause_max_ms if status else 0.0,
        step_phase=phase.step_phase,
        settle_remaining_s=phase.settle_remaining_s,
        first_verdict_s=phase.first_verdict_s,
        measured_n=phase.measured_n,
        precision=phase.precision,
        verdict_progress=phase.verdict_progress,
        handover=handover,
        hold_look=hold_look,
    )


def client_lagging(busiest_cpu_percent: float, status: EngineStatus | None) -> bool:
    """Whether the client's own CPU or loop lag may be delaying its stamps (`SATURATION_*`)."""
    lag_ms = status.loop_lag_max_ms if status else 0.0
    return busiest_cpu_percent >= SATURATION_CPU_PERCENT or lag_ms >= SATURATION_LAG_MS
