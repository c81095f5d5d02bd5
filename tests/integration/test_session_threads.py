"""The Session under every thread that touches it at once, on an injected engine (issue 22).

Four worker readers deliver batches through the worker pool's own bookkeeping (`WorkerBook`,
outside the Session's lock, as `WorkerPool` does), the frame thread publishes, and a job thread
changes the load and holds it. Afterwards every finished request is counted in exactly one step,
and each step's counts are the sum of its records.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import pytest

from gputui.engine.client import ClientConfig
from gputui.engine.commands import Command, Load, Stop
from gputui.engine.handle import BatchCallback
from gputui.engine.load import RequestShape
from gputui.engine.pool import WorkerBook, merge_status
from gputui.engine.process import EngineConfig, EngineStatus
from gputui.engine.records import RequestRecord
from gputui.engine.target import parse_target
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepSpec
from gputui.session import Session

WORKERS = 4
RUN_S = 20.0
MS = 1_000_000


@dataclass
class _Worker:
    """One engine process's side: its current step, what it sent, what is still in flight."""

    index: int
    step: int = -1
    pending: int = -1
    """The step of the last load command, taken at `pending_ns` (the pipe and the loop's delay)."""
    pending_ns: int = 0
    sent: dict[int, int] = field(default_factory=dict)
    in_flight: list[tuple[int, int, int]] = field(default_factory=list)
    """(step, sent_ns, due_ns) of each request not back yet."""
    delivered: list[RequestRecord] = field(default_factory=list)


class FakePool:
    """Four workers on their own reader threads, merged like `WorkerPool` (engine.api.Engine)."""

    def __init__(self, on_batch: BatchCallback) -> None:
        self._on_batch = on_batch
        self._book = WorkerBook(WORKERS)
        self._workers = [_Worker(i) for i in range(WORKERS)]
        self._commands = threading.Lock()
        self._draining = threading.Event()
        self._threads: list[threading.Thread] = []
        self._ids = iter(range(1 << 62))
        self._started_ns = time.perf_counter_ns()
        self._delays = random.Random(3)

    @property
    def delivered(self) -> list[RequestRecord]:
        return [r for w in self._workers for r in w.delivered]

    def start(self) -> None:
        for worker in self._workers:
            thread = threading.Thread(target=self._run, args=(worker,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def wait_ready(self, timeout_s: float) -> bool:
        return True

    def send(self, command: Command) -> None:
        with self._commands:  # each worker takes the new step at its own next turn
            if isinstance(command, Load):
                now = time.perf_counter_ns()
                for worker in self._workers:
                    worker.pending = command.step
                    worker.pending_ns = now + self._delays.randint(0, 30) * MS
            elif isinstance(command, Stop):
                self._draining.set()

    def stop(self, *, cancel: bool, timeout_s: float) -> EngineStatus | None:
        self._draining.set()
        for thread in self._threads:
            thread.join(timeout=timeout_s)
        return merge_status([self._status(w) for w in self._workers])

    def _status(self, worker: _Worker) -> EngineStatus:
        return EngineStatus(
            in_flight=len(worker.in_flight),
            step_index=worker.step,
            cpu_s=0.0,
            wall_s=(time.perf_counter_ns() - self._started_ns) / 1e9,
            loop_lag_max_ms=0.0,
            connections_opened=1,
            uvloop=False,
            paused=False,
        )

    def _run(self, worker: _Worker) -> None:
        rng = random.Random(worker.index)
        while True:
            draining = self._draining.is_set()
            now = time.perf_counter_ns()
            with self._commands:
                if now >= worker.pending_ns:
                    worker.step = worker.pending
                step = worker.step
            if not draining and step >= 0 and rng.random() < 0.3:
                worker.sent[step] = worker.sent.get(step, 0) + 1
                worker.in_flight.append((step, now, now + rng.randint(1, 10) * MS))
            back = [f for f in worker.in_flight if f[2] <= now or draining]
            worker.in_flight = [f for f in worker.in_flight if not (f[2] <= now or draining)]
            records = [self._record(rng, *f, now) for f in back]
            worker.delivered += records
            sent = dict(worker.sent)
            total, merged = self._book.update(worker.index, sent, self._status(worker))
            self._on_batch(records, total, merged, [None] * len(records))
            if draining:
                return
            time.sleep(rng.uniform(0.001, 0.01))

    def _record(
        self, rng: random.Random, step: int, sent_ns: int, due_ns: int, now: int
    ) -> RequestRecord:
        ok = rng.random() > 0.05
        end_ns = min(due_ns, now)
        stamps = np.linspace(sent_ns + (end_ns - sent_ns) // 4, end_ns, 8).astype(np.int64)
        return RequestRecord(
            request_id=next(self._ids),
            step_index=step,
            sent_ns=sent_ns,
            end_ns=end_ns,
            ok=ok,
            first_token_ns=int(stamps[0]) if ok else None,
            token_ns=stamps if ok else np.empty(0, dtype=np.int64),
            output_tokens=8 if ok else 0,
            requested_output_tokens=8,
            error=None if ok else "http_500",
        )


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_every_request_lands_in_exactly_one_step_under_all_the_threads() -> None:
    pools: list[FakePool] = []

    def build(on_batch: BatchCallback) -> FakePool:
        pools.append(FakePool(on_batch))
        return pools[-1]

    config = EngineConfig(
        client=ClientConfig(target=parse_target("http://127.0.0.1:9"), model="m"),
        shape=RequestShape(16, 8),
    )
    session = Session(config, Sla(1.0, 0.1, 0.5), warmup_s=0.0, engine=build, workers=WORKERS)
    (pool,) = pools
    session.start(frame_interval_s=0.1)  # the frame thread
    hidden: set[int] = set()
    done = threading.Event()

    def job() -> None:  # the auto sweep's pattern: new levels, and holds between them
        rng = random.Random(7)
        level = 1.0
        while not done.wait(rng.uniform(0.05, 0.4)):
            if rng.random() < 0.3:
                held = session.hold()
                if held is not None:
                    hidden.add(held.index)
            else:
                level = level * 2 if level < 64 else 1.0
                session.set_load("concurrency", level)

    session.set_load("concurrency", 1)
    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    time.sleep(RUN_S)
    done.set()
    thread.join(timeout=5)
    session.stop(cancel=False, drain_timeout_s=5.0)

    delivered = pool.delivered
    received = session.all_records()
    assert len(received) == len(delivered) > 1000
    assert sorted(r.request_id for r in received) == sorted(r.request_id for r in delivered)
    specs = {s.index: s for s in session.step_specs()}
    finished = {s.index: s for s in session.finished_steps()}
    assert set(finished) == set(specs) - hidden  # every step shown has finished
    assert len(finished) > 20
    for index, step in finished.items():
        spec = specs[index]
        mine = [r for r in delivered if r.step_index == index and _measured(r, spec)]
        assert not step.incomplete, index
        assert step.requests_ok == sum(r.ok for r in mine), index
        assert step.requests_failed == sum(not r.ok for r in mine), index
    counted = sum(s.requests_ok + s.requests_failed for s in finished.values())
    shown = [r for r in delivered if r.step_index in finished]
    assert counted == sum(_measured(r, specs[r.step_index]) for r in shown)


def _measured(record: RequestRecord, spec: StepSpec) -> bool:
    """Sent inside the step's window: after it settled, before it closed (`metrics.step`)."""
    return spec.measure_start_ns <= record.sent_ns < spec.end_ns
