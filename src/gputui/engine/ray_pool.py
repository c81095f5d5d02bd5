"""Engine workers placed on a Ray cluster (`--ray ADDRESS`): the same pool, other machines.

Ray only places the processes: each actor runs the ordinary engine loop (engine.process) in a
thread of its own process, with a queue pair instead of a pipe, and the parent drains its batches
every 100 ms. Every interval a worker reports (TTFT, ITL, E2E) is measured on its own clock. To
attribute requests to steps and windows, the parent shifts each worker's stamps onto its own clock
by an offset measured once, at start, as the midpoint of a round trip (on one machine the offset
is ~0, CLOCK_MONOTONIC being shared); intervals never depend on it.

Ray is an optional extra (`pip install 'gputui[distributed]'`), imported only here.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import replace
from types import ModuleType
from typing import Protocol

from gputui.engine.commands import Command, Stop
from gputui.engine.handle import BatchCallback
from gputui.engine.pool import WorkerBook, merge_status, split_command
from gputui.engine.process import EngineConfig, EngineMessage, EngineStatus, run_engine
from gputui.engine.records import RequestRecord
from gputui.errors import EngineFailed, UsageError

_DRAIN_S = 0.1


class _QueueConnection:
    """The engine's link to the parent inside an actor: an inbox and an outbox."""

    def __init__(self) -> None:
        self.inbox: queue.Queue[Command] = queue.Queue()
        self.outbox: queue.Queue[EngineMessage] = queue.Queue()

    def send(self, obj: EngineMessage) -> None:
        self.outbox.put(obj)

    def recv(self) -> Command:
        return self.inbox.get()


class EngineActorBody:
    """The class Ray turns into an actor (kept importable without Ray for its logic)."""

    def __init__(self, config: EngineConfig) -> None:
        self._conn = _QueueConnection()
        self._thread = threading.Thread(
            target=run_engine, args=(self._conn, config), name="gputui-engine", daemon=True
        )
        self._thread.start()

    def clock_ns(self) -> int:
        """This worker's monotonic clock, for the parent's offset estimate."""
        return time.perf_counter_ns()

    def command(self, message: Command) -> None:
        """A command from the parent."""
        self._conn.inbox.put(message)

    def drain(self) -> list[EngineMessage]:
        """Every message the engine sent since the last drain."""
        out = []
        while True:
            try:
                out.append(self._conn.outbox.get_nowait())
            except queue.Empty:
                return out


class _RemoteMethod(Protocol):
    """An actor method as Ray exposes it: `.remote(...)` queues the call, returns an ObjectRef."""

    def remote(self, *args: object) -> object: ...


class _EngineActor(Protocol):
    """A Ray actor handle of `EngineActorBody`: each method is called through `.remote`."""

    @property
    def clock_ns(self) -> _RemoteMethod: ...
    @property
    def command(self) -> _RemoteMethod: ...
    @property
    def drain(self) -> _RemoteMethod: ...


def _import_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise UsageError("--ray needs Ray: pip install 'gputui[distributed]'") from None
    return ray


class RayPool:
    """N engine actors on a Ray cluster, with WorkerPool's interface."""

    def __init__(
        self, config: EngineConfig, workers: int, on_batch: BatchCallback, address: str
    ) -> None:
        self._ray = _import_ray()
        self._config = config
        self._count = workers
        self._address = address
        self._on_batch = on_batch
        self._book = WorkerBook(workers)
        self._actors: list[_EngineActor] = []
        self._offsets_ns: list[int] = []
        self._final: list[EngineStatus | None] = [None] * workers
        self._ready = [threading.Event() for _ in range(workers)]
        self._done = [threading.Event() for _ in range(workers)]
        self._reader: threading.Thread | None = None
        self.stopped = threading.Event()

    @property
    def worker_run_wait_percent(self) -> list[float | None]:
        """Each worker's run-queue wait over its last batch interval (% of its wall time)."""
        return self._book.run_wait_percent

    @property
    def worker_cpu_percent(self) -> list[float]:
        """Each worker's CPU use over its last batch interval."""
        return self._book.cpu_percent

    def start(self) -> None:
        """Connect to the cluster, place the actors, measure each one's clock offset."""
        ray = self._ray
        try:
            ray.init(address=self._address, ignore_reinit_error=True, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise EngineFailed(f"cannot join the Ray cluster at {self._address}: {exc}") from None
        actor_class = ray.remote(num_cpus=1)(EngineActorBody)
        for i in range(self._count):
            config = replace(
                self._config,
                worker_index=i,
                worker_count=self._count,
                seed=self._config.seed + 7919 * i,
                probe_path=self._config.probe_path if i == 0 else None,
            )
            self._actors.append(actor_class.remote(config))
        for actor in self._actors:
            sent_ns = time.perf_counter_ns()
            remote_ns = ray.get(actor.clock_ns.remote(), timeout=60)
            back_ns = time.perf_counter_ns()
            self._offsets_ns.append((sent_ns + back_ns) // 2 - remote_ns)
        self._reader = threading.Thread(target=self._drain, name="gputui-ray", daemon=True)
        self._reader.start()

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait until every actor's engine runs."""
        return all(event.wait(timeout_s) for event in self._ready)

    def send(self, command: Command) -> None:
        """Split load and bursts across the actors; broadcast the rest."""
        for actor, part in zip(self._actors, split_command(command, self._count), strict=True):
            if part is not None:
                actor.command.remote(part)

    def stop(self, *, cancel: bool, timeout_s: float) -> EngineStatus | None:
        """Stop every actor, wait for their last batches, release them."""
        self.send(Stop(cancel))
        deadline = time.monotonic() + timeout_s
        for event in self._done:
            event.wait(max(0.0, deadline - time.monotonic()))
        self.stopped.set()
        if self._reader is not None:
            self._reader.join(timeout=5.0)
        for actor in self._actors:
            self._ray.kill(actor)
        reported = [s for s in self._final if s is not None]
        return merge_status(reported) if reported else None

    def _drain(self) -> None:
        while not self.stopped.is_set():
            for index, actor in enumerate(self._actors):
                if self._done[index].is_set():
                    continue
                for message in self._ray.get(actor.drain.remote()):
                    self._handle(index, message)
            time.sleep(_DRAIN_S)

    def _handle(self, index: int, message: EngineMessage) -> None:
        if message[0] == "stopped":
            self._final[index] = message[1]
            self._done[index].set()
            return
        _, records, sent_by_step, status, rtt = message
        offset = self._offsets_ns[index]
        records = [rebase(r, offset) for r in records] if offset else records
        total, merged = self._book.update(index, sent_by_step, status)
        self._on_batch(records, total, merged, rtt)
        self._ready[index].set()


def rebase(record: RequestRecord, offset_ns: int) -> RequestRecord:
    """The record with every stamp moved onto the parent's clock (intervals unchanged)."""
    return replace(
        record,
        sent_ns=record.sent_ns + offset_ns,
        end_ns=record.end_ns + offset_ns,
        first_token_ns=None if record.first_token_ns is None else record.first_token_ns + offset_ns,
        token_ns=record.token_ns + offset_ns,
        queued_ns=None if record.queued_ns is None else record.queued_ns + offset_ns,
    )
