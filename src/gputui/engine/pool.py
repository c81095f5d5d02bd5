"""Several engine processes behind one handle: the load is split, the records merge.

Why: one Python process ingests only so many tokens per second (benchmarks/fidelity.py); past
that, the client's own queueing shows up as server latency. With N workers each process runs its
own event loop on its own core. Concurrency N is split as evenly as whole numbers allow, a rate R
into N independent Poisson (or gamma) streams of R/N (their superposition has the asked-for rate),
a burst of K likewise. Each worker stamps its own intervals; no two workers' clocks are compared.

The pool presents EngineHandle's interface, so the Session does not know how many workers run.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import replace

from gputui.engine.commands import Burst, Command, Load, Stop, check_command
from gputui.engine.handle import BatchCallback, EngineHandle
from gputui.engine.load import LoadMode
from gputui.engine.process import EngineConfig, EngineStatus
from gputui.engine.records import RequestRecord
from gputui.engine.schedstat import wait_percent


def split_whole(total: int, parts: int) -> list[int]:
    """`total` split into `parts` whole shares that differ by at most one."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def load_shares(mode: LoadMode, level: float, parts: int) -> list[float]:
    """Each worker's share of a load: whole streams for concurrency, an equal rate otherwise."""
    if mode == "concurrency":
        return [float(s) for s in split_whole(int(level), parts)]
    return [float(level) / parts] * parts


def split_command(command: Command, parts: int) -> list[Command | None]:
    """What each of `parts` workers gets: its share of a load or burst (None: nothing), else all.

    One rule for the process pool and the Ray pool.
    """
    match check_command(command):
        case Load(mode, level, step):
            return [Load(mode, share, step) for share in load_shares(mode, level, parts)]
        case Burst(total):
            return [Burst(share) if share else None for share in split_whole(total, parts)]
        case _:
            return [command] * parts


def merge_status(statuses: list[EngineStatus]) -> EngineStatus:
    """One status for the pool: sums of work, the worst lag, the oldest step."""
    return EngineStatus(
        in_flight=sum(s.in_flight for s in statuses),
        step_index=min(s.step_index for s in statuses),
        cpu_s=sum(s.cpu_s for s in statuses),
        wall_s=max(s.wall_s for s in statuses),
        loop_lag_max_ms=max(s.loop_lag_max_ms for s in statuses),
        connections_opened=sum(s.connections_opened for s in statuses),
        uvloop=all(s.uvloop for s in statuses),
        paused=any(s.paused for s in statuses),
        error=next((s.error for s in statuses if s.error), None),
        run_wait_s=None,  # per worker: `WorkerBook.run_wait_percent`
        gc_pause_max_ms=max(s.gc_pause_max_ms for s in statuses),
        arrivals_dropped=sum(s.arrivals_dropped for s in statuses),
        arrivals_dropped_by_step=dict(
            sum((Counter(s.arrivals_dropped_by_step) for s in statuses), Counter())
        ),
        tokens_streamed=None
        if any(s.tokens_streamed is None for s in statuses)
        else sum(s.tokens_streamed or 0 for s in statuses),
    )


class WorkerBook:
    """What each worker last reported, merged into the counts a Session reads (thread-safe)."""

    def __init__(self, workers: int) -> None:
        self._lock = threading.Lock()
        self._sent: list[dict[int, int]] = [{} for _ in range(workers)]
        self._status: list[EngineStatus | None] = [None] * workers
        self._cpu_percent = [0.0] * workers
        self._wait_percent: list[float | None] = [None] * workers

    @property
    def statuses(self) -> list[EngineStatus | None]:
        """The newest status of each worker (None until it reported)."""
        with self._lock:
            return list(self._status)

    @property
    def cpu_percent(self) -> list[float]:
        """Each worker's CPU use over its last batch interval (100 = one core)."""
        with self._lock:
            return list(self._cpu_percent)

    @property
    def run_wait_percent(self) -> list[float | None]:
        """Each worker's run-queue wait over its last batch interval (% of wall time)."""
        with self._lock:
            return list(self._wait_percent)

    def update(
        self, index: int, sent_by_step: dict[int, int], status: EngineStatus
    ) -> tuple[dict[int, int], EngineStatus]:
        """Record one worker's batch; the totals sent per step and the merged status."""
        with self._lock:
            self._sent[index] = sent_by_step
            previous = self._status[index]
            if previous is not None and status.wall_s > previous.wall_s:
                self._cpu_percent[index] = (
                    100 * (status.cpu_s - previous.cpu_s) / (status.wall_s - previous.wall_s)
                )
                self._wait_percent[index] = wait_percent(status, previous)
            self._status[index] = status
            reported = [s for s in self._status if s is not None]
            # Until every worker has reported, no step can be judged: acknowledge none.
            merged = (
                merge_status(reported)
                if len(reported) == len(self._status)
                else replace(status, step_index=-1)
            )
            total: dict[int, int] = {}
            for sent in self._sent:
                for step, n in sent.items():
                    total[step] = total.get(step, 0) + n
        return total, merged


class WorkerPool:
    """N EngineHandles with one on_batch stream of merged counts."""

    def __init__(self, config: EngineConfig, workers: int, on_batch: BatchCallback) -> None:
        self._on_batch = on_batch
        self._book = WorkerBook(workers)
        self._handles = [
            EngineHandle(
                replace(
                    config,
                    worker_index=i,
                    worker_count=workers,
                    seed=config.seed + 7919 * i,  # independent arrival streams and prompts
                    probe_path=config.probe_path if i == 0 else None,
                ),
                self._receiver(i),
            )
            for i in range(workers)
        ]
        self.stopped = threading.Event()

    @property
    def worker_statuses(self) -> list[EngineStatus | None]:
        """The newest status of each worker (None until it reported)."""
        return self._book.statuses

    @property
    def worker_cpu_percent(self) -> list[float]:
        """Each worker's CPU use over its last batch interval (100 = one core)."""
        return self._book.cpu_percent

    @property
    def worker_run_wait_percent(self) -> list[float | None]:
        """Each worker's run-queue wait over its last batch interval (% of wall time)."""
        return self._book.run_wait_percent

    @property
    def pids(self) -> list[int | None]:
        """The workers' process ids."""
        return [h.pid for h in self._handles]

    def start(self) -> None:
        """Start every worker."""
        for handle in self._handles:
            handle.start()

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait until every worker runs."""
        return all(h.wait_ready(timeout_s) for h in self._handles)

    def send(self, command: Command) -> None:
        """Split load and burst commands across the workers; broadcast the rest."""
        for handle, part in zip(
            self._handles, split_command(command, len(self._handles)), strict=True
        ):
            if part is not None:
                handle.send(part)

    def stop(self, *, cancel: bool, timeout_s: float) -> EngineStatus | None:
        """Stop every worker (in parallel) and merge their final statuses."""
        for handle in self._handles:
            handle.send(Stop(cancel))
        finals = [h.stop(cancel=cancel, timeout_s=timeout_s) for h in self._handles]
        self.stopped.set()
        reported = [f for f in finals if f is not None]
        return merge_status(reported) if reported else None

    def _receiver(self, index: int) -> BatchCallback:
        def on_batch(
            records: list[RequestRecord],
            sent_by_step: dict[int, int],
            status: EngineStatus,
            rtt: list[int | None],
        ) -> None:
            total, merged = self._book.update(index, sent_by_step, status)
            self._on_batch(records, total, merged, rtt)

        return on_batch
