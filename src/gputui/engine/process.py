"""The engine process: its own interpreter, its own event loop, nothing else competing for it.

Why a process: a thread would share the GIL with the UI's repaints and the statistics, delaying
token stamps by milliseconds. The parent talks to it over one `multiprocessing` pipe: commands in
(`("load", mode, level, step)`, `("pause",)`, `("resume",)`, `("burst", k)`, `("stop", cancel)`),
and batches out every `batch_interval_s`: `("batch", records, sent_by_step, status, rtt_samples)`,
then one `("stopped", status)`. The child ignores SIGINT and SIGHUP: a Ctrl-C or a dropped SSH
session reaches the whole process group, and it is the parent that decides to stop and save.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Literal, Protocol

from gputui.engine.arrivals import Arrival, ArrivalProcess
from gputui.engine.client import ClientConfig, StreamingClient
from gputui.engine.commands import (
    Burst,
    Command,
    Load,
    Pause,
    Reconnect,
    Resume,
    Stop,
    UnknownCommand,
    check_command,
)
from gputui.engine.load import LoadController, RequestShape
from gputui.engine.probe import RttProbe
from gputui.engine.records import RequestRecord
from gputui.engine.schedstat import GcPauses, run_wait_s
from gputui.engine.workload import WorkloadSpec


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Everything the engine process needs (picklable)."""

    client: ClientConfig
    shape: RequestShape
    workload: WorkloadSpec | None = None
    """When set, it decides each request's content and length instead of `shape`."""
    arrival: Arrival = "poisson"
    burstiness: float = 1.0
    max_in_flight: int = 1024
    seed: int = 0
    probe_path: str | None = "/health"
    probe_interval_s: float = 2.0
    batch_interval_s: float = 0.1
    use_uvloop: bool = True
    worker_index: int = 0
    """This engine's place among `worker_count` engines sharing one load (see engine.pool)."""
    worker_count: int = 1


@dataclass(frozen=True, slots=True)
class EngineStatus:
    """The engine's own health, sent with every batch."""

    in_flight: int
    step_index: int
    """The step the engine is sending for now."""
    cpu_s: float
    """CPU time (user + system) of the engine process so far."""
    wall_s: float
    loop_lag_max_ms: float
    """Worst lateness of a 50 ms timer since the last batch: the loop's own congestion."""
    connections_opened: int
    uvloop: bool
    paused: bool
    error: str | None = None
    """Why the engine stopped on its own (an unknown command), if it did."""
    run_wait_s: float | None = None
    """Time its threads waited for a CPU so far (engine.schedstat); None where unmeasured."""
    gc_pause_max_ms: float = 0.0
    """Longest garbage collection since the last batch: a loop lag it explains is a GC pause."""
    arrivals_dropped: int = 0
    """Open-loop arrivals a level change dropped while they waited for a slot (`max_in_flight`)."""
    arrivals_dropped_by_step: dict[int, int] = field(default_factory=dict)
    """The same by the step whose schedule they were in (snapshot `steps[].dropped_arrivals`)."""
    tokens_streamed: int | None = None
    """Output tokens received so far, requests still streaming included (`StreamingClient.
    tokens_streamed`): the live tok/s reads its rise; None where unreported."""


BatchMessage = tuple[
    Literal["batch"], list[RequestRecord], dict[int, int], EngineStatus, list[int | None]
]
"""Records finished since the last batch, requests sent per step, the status, RTT probes."""
StoppedMessage = tuple[Literal["stopped"], EngineStatus]
"""The engine's last message: its final status."""
EngineMessage = BatchMessage | StoppedMessage
"""What the engine sends its parent."""


class EngineConnection(Protocol):
    """What the engine needs of its link to the parent (a multiprocessing pipe or a queue pair)."""

    def send(self, obj: EngineMessage) -> None:
        """Send one message."""
        ...

    def recv(self) -> object:
        """Block for the next command; EOFError when the parent is gone."""
        ...


def engine_main(conn: Connection[EngineMessage, object], config: EngineConfig) -> None:
    """Entry point of the engine process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    run_engine(conn, config)


def run_engine(conn: EngineConnection, config: EngineConfig) -> None:
    """Run the engine's loop until a stop command (in whatever process or thread calls it)."""
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    if config.use_uvloop:
        try:
            import uvloop

            loop_factory = uvloop.new_event_loop
        except ImportError:
            loop_factory = None
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(_Engine(conn, config, loop_factory is not None).run())


class _Engine:
    def __init__(self, conn: EngineConnection, config: EngineConfig, uvloop_used: bool) -> None:
        self._conn = conn
        self._config = config
        self._uvloop = uvloop_used
        self._records: list[RequestRecord] = []
        self._rtt: list[int | None] = []
        self._lag_max_ns = 0
        self._gc = GcPauses()
        self._started_ns = time.perf_counter_ns()
        self._stop_requested: asyncio.Future[bool] | None = None
        self.error: str | None = None

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        config = self._config
        self._stop_requested = loop.create_future()
        self._client = StreamingClient(config.client)
        self._load = LoadController(
            self._client,
            config.workload.build() if config.workload is not None else config.shape,
            ArrivalProcess(config.arrival, burstiness=config.burstiness, seed=config.seed),
            self._add_record,
            max_in_flight=config.max_in_flight,
            seed=config.seed,
            id_start=config.worker_index,
            id_step=config.worker_count,
        )
        # Commands are read by a thread blocked in recv(): an event-loop reader would make the
        # pipe non-blocking, and a full pipe would then tear a batch in half mid-write.
        threading.Thread(
            target=self._read_commands, args=(loop,), name="gputui-commands", daemon=True
        ).start()
        self._flush()  # the first (empty) batch tells the parent the engine is ready
        background = [loop.create_task(self._flush_forever()), loop.create_task(self._lag())]
        probe = None
        target = config.client.target
        if config.probe_path and target.scheme == "http":
            probe = RttProbe(
                target.host,
                target.port,
                config.probe_path,
                config.probe_interval_s,
                self._add_rtt,
                timeout_s=max(config.client.timeouts.connect_s, 10.0),
            )
            probe.start(loop)  # timed on its own thread: the loop's lag is not network
        cancel = await self._stop_requested
        await self._load.stop(cancel=cancel, drain_timeout_s=config.client.timeouts.request_s)
        if probe is not None:
            probe.stop()
        for task in background:
            task.cancel()
        await self._client.aclose()
        self._gc.close()
        self._flush()
        self._conn.send(("stopped", self._status()))

    def _read_commands(self, loop: asyncio.AbstractEventLoop) -> None:
        """Thread: hand each command to the loop; a closed pipe means the parent is gone.

        An unknown command is an error, not ignored: the engine says so and stops (cancelling).
        """
        try:
            while True:
                message = self._conn.recv()
                try:
                    command = check_command(message)
                except UnknownCommand as exc:
                    self.error = str(exc)
                    loop.call_soon_threadsafe(self._request_stop_cancel)
                    return
                loop.call_soon_threadsafe(self._command, command)
                if isinstance(command, Stop):
                    return
        except (EOFError, OSError):
            loop.call_soon_threadsafe(self._request_stop_cancel)

    def _request_stop_cancel(self) -> None:
        self._request_stop(cancel=True)

    def _command(self, command: Command) -> None:
        match command:
            case Load(mode, level, step):
                self._load.set_load(mode, float(level), int(step))
            case Pause():
                self._load.pause()
            case Resume():
                self._load.resume()
            case Burst(count):
                self._load.burst(int(count))
            case Reconnect():
                self._client.close_idle()
            case Stop(cancel):
                self._request_stop(cancel=cancel)

    def _request_stop(self, *, cancel: bool) -> None:
        if self._stop_requested is not None and not self._stop_requested.done():
            self._stop_requested.set_result(cancel)

    async def _flush_forever(self) -> None:
        while True:
            await asyncio.sleep(self._config.batch_interval_s)
            self._flush()

    def _flush(self) -> None:
        records, self._records = self._records, []
        rtt, self._rtt = self._rtt, []
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._conn.send(("batch", records, dict(self._load.sent_by_step), self._status(), rtt))

    def _add_record(self, record: RequestRecord) -> None:
        self._records.append(record)

    def _add_rtt(self, rtt_ns: int | None) -> None:
        self._rtt.append(rtt_ns)

    def _status(self) -> EngineStatus:
        lag_ms = self._lag_max_ns / 1e6
        self._lag_max_ns = 0
        gc_ms = self._gc.take_max_ns() / 1e6
        return EngineStatus(
            in_flight=self._load.in_flight,
            step_index=self._load.step_index,
            cpu_s=time.process_time(),
            wall_s=(time.perf_counter_ns() - self._started_ns) / 1e9,
            loop_lag_max_ms=lag_ms,
            connections_opened=self._client.connections_opened,
            uvloop=self._uvloop,
            paused=self._load.paused,
            error=self.error,
            run_wait_s=run_wait_s(),
            gc_pause_max_ms=gc_ms,
            tokens_streamed=self._client.tokens_streamed,
            arrivals_dropped=self._load.arrivals_dropped,
            arrivals_dropped_by_step=dict(self._load.arrivals_dropped_by_step),
        )

    async def _lag(self) -> None:
        period_ns = 50_000_000
        while True:
            before = time.perf_counter_ns()
            await asyncio.sleep(period_ns / 1e9)
            late = time.perf_counter_ns() - before - period_ns
            self._lag_max_ns = max(self._lag_max_ns, late)
