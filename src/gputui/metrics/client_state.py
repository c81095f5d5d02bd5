"""Client-bound, host-contended or stalled: why the load generator was late, and what would help.

The engine's loop lagging (or its CPU near a core) may delay the client's stamps; the remedy
depends on the cause. `client_state(cpu, wait, lagging)` decides from the engine process's CPU
use and its run-queue wait (`engine.schedstat`), both in % of wall time:

- `HOST_CONTENDED`: it waited for a CPU at least `HOST_WAIT_PCT` of the time, and longer than it
  ran: other processes hold the CPUs, so more `--workers` would only add waiters;
- `CLIENT_BOUND`: its own work fills its core: it ran >= `CLIENT_BOUND_CPU_PCT` of the time on
  average, and ran plus waited >= `CLIENT_DEMAND_PCT` (a core's worth of demand, most of it its
  own): add `--workers`;
- `STALLED`: late with neither (low CPU, low or unmeasured wait): the loop was paused, not
  busy, by a garbage collection, by steal time (a hypervisor ran another guest on our CPU) or a
  blocking call (`stall_evidence` names what the tool saw); more workers would not help;
- None when nothing was late (`lagging` False).

Measured here (2 cores, a busy loop pinned to the client's core): a light client ran 0.7 % and
waited 20 % of the time, its loop 25 ms late; a client at its own limit runs far more than it waits
(64 streams at ITL 0 on one worker: 95-100 % CPU). A client that only opened connections or sat
on a shared host read 1-3 % CPU with its loop 20 ms late: a stall, not a saturated client.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

HOST_WAIT_PCT: Final = 10.0
"""100 ms per second in the run queue: events are then routinely tens of ms late."""
CLIENT_BOUND_CPU_PCT: Final = 50.0
"""The engine's mean CPU under which its own work is never the limit (a core is 100)."""
CLIENT_DEMAND_PCT: Final = 70.0
"""Its CPU plus its run-queue wait from which it wants about a whole core."""
GC_EXPLAINS: Final = 0.5
"""A GC pause at least this share of the loop's lag explains it."""
STEAL_VISIBLE_PCT: Final = 1.0
"""Steal time from which it is named as a cause (% of the host's CPU time)."""
CLIENT_BOUND: Final = "client-bound"
HOST_CONTENDED: Final = "host-contended"
STALLED: Final = "stalled"

ADVICE: Final[dict[str, str]] = {
    CLIENT_BOUND: "the client's own CPU is the limit: add --workers",
    HOST_CONTENDED: "other processes hold the CPUs: more --workers will not help; "
    "free the host (or run gputui on another)",
    STALLED: "not a saturated client (more --workers will not help)",
}


def client_state(cpu_pct: float | None, wait_pct: float | None, *, lagging: bool) -> str | None:
    """CLIENT_BOUND, HOST_CONTENDED, STALLED or None (module contract)."""
    if not lagging:
        return None
    if wait_pct is not None and wait_pct >= HOST_WAIT_PCT and wait_pct > (cpu_pct or 0.0):
        return HOST_CONTENDED
    cpu = cpu_pct or 0.0
    if cpu >= CLIENT_BOUND_CPU_PCT and cpu + (wait_pct or 0.0) >= CLIENT_DEMAND_PCT:
        return CLIENT_BOUND
    return STALLED


class ClientStateTracker:
    """The live state over the last few frames: one frame's CPU and wait are too noisy to judge.

    CPU and run-queue wait are averaged over `frames` frames (1 s at the Session's 4 Hz); a frame
    without a wait measure counts for the CPU only.
    """

    def __init__(self, frames: int = 4) -> None:
        self._cpu: deque[float] = deque(maxlen=frames)
        self._wait: deque[float] = deque(maxlen=frames)

    def update(self, cpu_pct: float, wait_pct: float | None, *, lagging: bool) -> str | None:
        """Take one frame's numbers; the state they and the frames before imply."""
        self._cpu.append(cpu_pct)
        if wait_pct is not None:
            self._wait.append(wait_pct)
        cpu = sum(self._cpu) / len(self._cpu)
        wait = sum(self._wait) / len(self._wait) if self._wait else None
        return client_state(cpu, wait, lagging=lagging)


def state_evidence(state: str, cpu_pct: float | None, wait_pct: float | None) -> str:
    """'client CPU 3 %, run-queue wait 45 % (450 ms/s): other processes hold the CPUs: ...'."""
    cpu = "client CPU -" if cpu_pct is None else f"client CPU {cpu_pct:.0f} %"
    wait = (
        "run-queue wait not measured"
        if wait_pct is None
        else f"run-queue wait {wait_pct:.0f} % ({wait_pct * 10:.0f} ms/s)"
    )
    return f"{state}: {cpu}, {wait}: {ADVICE[state]}"


def stall_cause(lag_ms: float, gc_pause_ms: float | None, steal_pct: float | None) -> str:
    """What paused the loop, as far as the tool can see: a GC pause, steal time, else a call."""
    if gc_pause_ms is not None and gc_pause_ms >= GC_EXPLAINS * lag_ms:
        return f"a garbage collection of {gc_pause_ms:.0f} ms"
    if steal_pct is not None and steal_pct >= STEAL_VISIBLE_PCT:
        return f"steal time {steal_pct:.0f} % (the hypervisor ran another guest on our CPUs)"
    return "a blocking call (no GC pause or steal time explains it)"


def stall_evidence(
    lag_ms: float | None,
    cpu_pct: float | None,
    wait_pct: float | None,
    *,
    gc_pause_ms: float | None = None,
    steal_pct: float | None = None,
) -> str:
    """'stalled: loop 21 ms late with client CPU 3 %, run-queue wait 2 % (20 ms/s): ...'."""
    lag = lag_ms or 0.0
    cpu = "-" if cpu_pct is None else f"{cpu_pct:.0f} %"
    wait = "not measured" if wait_pct is None else f"{wait_pct:.0f} % ({wait_pct * 10:.0f} ms/s)"
    gc = "" if gc_pause_ms is None else f", longest GC {gc_pause_ms:.1f} ms"
    steal = "" if steal_pct is None else f", steal {steal_pct:.1f} %"
    return (
        f"{STALLED}: loop up to {lag:.0f} ms late with client CPU {cpu}, run-queue wait {wait}"
        f"{gc}{steal}: a pause, likely {stall_cause(lag, gc_pause_ms, steal_pct)}; "
        f"{ADVICE[STALLED]}; stamps near it may be up to {lag:.0f} ms late"
    )


@dataclass(frozen=True, slots=True)
class ClientSaturation:
    """How often the published frames found the client saturated or the host contended."""

    saturated_share: float
    host_contended_share: float
    busiest_worker_cpu_percent_max: float | None
    busiest_worker_cpu_percent_mean: float | None

    def to_json(self) -> dict[str, float | None]:
        """The snapshot's `client` keys, in their saved order."""
        return {
            "saturated_share": self.saturated_share,
            "host_contended_share": self.host_contended_share,
            "busiest_worker_cpu_percent_max": self.busiest_worker_cpu_percent_max,
            "busiest_worker_cpu_percent_mean": self.busiest_worker_cpu_percent_mean,
        }


def client_saturation(
    saturated: Sequence[bool], contended: Sequence[bool], busiest_cpu_pct: Sequence[float]
) -> ClientSaturation:
    """The shares of frames saturated and contended, and the busiest engine process's CPU."""
    frames = len(saturated)
    cpu = busiest_cpu_pct
    return ClientSaturation(
        saturated_share=round(sum(saturated) / frames if frames else 0.0, 3),
        host_contended_share=round(sum(contended) / frames, 3) if frames else 0.0,
        busiest_worker_cpu_percent_max=round(max(cpu), 1) if cpu else None,
        busiest_worker_cpu_percent_mean=round(sum(cpu) / len(cpu), 1) if cpu else None,
    )


def run_warning(
    saturation: ClientSaturation, verdicts: Sequence[Mapping[str, object] | None]
) -> str | None:
    """The run's closing warning about its client, following the steps' verdicts.

    `saturation`: the frames' shares (`session.in_flight.InFlightTrace.saturation`). A step judged
    host-contended outweighs frames that looked client-bound: the advice is then not to add
    workers. None when neither happened often enough to mention.
    """
    states = [v.get("client_state") for v in verdicts if v]
    contended = states.count(HOST_CONTENDED)
    share = saturation.saturated_share
    if contended and contended >= states.count(CLIENT_BOUND):
        return (
            f"warning: the host was contended in {contended} of {len(states)} steps (the client "
            "waited for a CPU longer than it ran): its timings include that wait; "
            + ADVICE[HOST_CONTENDED]
        )
    if share > 0.05:
        return (
            f"warning: the client itself was saturated in {share:.0%} of the run (busiest engine "
            f"process up to {saturation.busiest_worker_cpu_percent_max}% CPU): its "
            "timings include its own queueing; rerun with more --workers"
        )
    return None
