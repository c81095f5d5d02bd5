"""Run the telemetry sources off every event loop and keep their samples, bounded.

Contract: `TelemetrySampler(gpu=..., server=..., host=...)` takes up to three ports (any may be
None = absent, with the reason in `absent`), and `start()` runs each in its own daemon thread at its
own rate (GPU 4 Hz, server /metrics 1 Hz, host 1 Hz by default): NVML and nvidia-smi block, and a
slow /metrics must not delay GPU samples. A failing poll never escapes its thread: it becomes that
source's `SourceState` ("error: <reason>") and the next tick tries again. `latest()` returns an
immutable `TelemetryFrame`, swapped in whole (readers never lock, never see half a frame).
`traces(downsample_to=N)` returns the whole run, at most N points per series, for snapshots;
`recent()` the last raw samples for live graphs. `stop()` joins the threads and closes the ports.

Memory stays bounded however long the run: each series keeps an archive that halves its resolution
whenever it fills (every other point dropped, then only every 2nd, 4th... new one kept), so the
whole run is covered at a resolution that degrades gracefully, plus a ring of recent raw samples.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Generic, Literal, Protocol, TypeVar

from gputui.errors import TelemetryUnavailable
from gputui.telemetry.samples import GpuHealth, GpuIdentity, GpuSample, HostSample, ServerSample

if TYPE_CHECKING:  # the sampler itself needs neither httpx nor prometheus-client
    from gputui.telemetry.server_metrics import MetricsView

T = TypeVar("T")

DEFAULT_GPU_INTERVAL_S: Final = 0.25
DEFAULT_SERVER_INTERVAL_S: Final = 1.0
DEFAULT_HOST_INTERVAL_S: Final = 1.0
ARCHIVE_POINTS: Final = 2400
RECENT_POINTS: Final = 240


class GpuPort(Protocol):
    """NVML, nvidia-smi or dcgm-exporter."""

    name: str

    def sample(self) -> tuple[GpuSample, ...]:
        """One sample per GPU."""
        ...

    def identities(self) -> tuple[GpuIdentity, ...]:
        """What each GPU is."""
        ...

    def health(self, index: int) -> GpuHealth:
        """ECC, retired pages, remapped rows of one GPU."""
        ...

    def close(self) -> None:
        """Release the source."""
        ...


class ServerPort(Protocol):
    """An inference server's /metrics."""

    url: str

    def scrape(self) -> MetricsView:
        """One normalized scrape."""
        ...

    def close(self) -> None:
        """Release the source."""
        ...


class HostPort(Protocol):
    """This machine's CPU and memory."""

    def sample(self) -> HostSample:
        """One sample."""
        ...

    def close(self) -> None:
        """Release the source."""
        ...


Kind = Literal["gpu", "server", "host"]


@dataclass(frozen=True, slots=True)
class SourceState:
    """How one kind of source is doing: "ok", "starting", "unavailable" (absent) or "error"."""

    kind: Kind
    source: str
    """e.g. "nvml", "nvidia-smi", "dcgm", "server", "host", or "none"."""
    status: Literal["ok", "starting", "unavailable", "error"]
    detail: str = ""


@dataclass(frozen=True, slots=True)
class TelemetryFrame:
    """The newest sample of each kind, and how each source is doing."""

    seq: int
    gpus: tuple[GpuSample, ...]
    server: ServerSample | None
    host: HostSample | None
    states: tuple[SourceState, ...]

    def state(self, kind: Kind) -> SourceState | None:
        """The state of one kind of source."""
        return next((s for s in self.states if s.kind == kind), None)


@dataclass(frozen=True, slots=True)
class Traces:
    """Time series of each kind (GPU samples of one poll share a `t_ns`)."""

    gpu: tuple[GpuSample, ...]
    server: tuple[ServerSample, ...]
    host: tuple[HostSample, ...]


class Archive(Generic[T]):
    """A whole-run series in bounded memory: halves its resolution whenever it fills."""

    __slots__ = ("_capacity", "_count", "_items", "_last", "_stride")

    def __init__(self, capacity: int = ARCHIVE_POINTS) -> None:
        if capacity < 2:
            raise ValueError("capacity must be >= 2")
        self._capacity = capacity
        self._items: list[T] = []
        self._stride = 1
        self._count = 0
        self._last: T | None = None

    def append(self, item: T) -> None:
        """Add the newest item."""
        if self._count % self._stride == 0:
            self._items.append(item)
            if len(self._items) >= self._capacity:
                self._items = self._items[::2]
                self._stride *= 2
        self._count += 1
        self._last = item

    def items(self) -> list[T]:
        """The kept items, oldest first, always ending with the newest."""
        out = list(self._items)
        if self._last is not None and (not out or out[-1] is not self._last):
            out.append(self._last)
        return out


def downsample(items: Sequence[T], n: int | None) -> list[T]:
    """At most `n` items, evenly spaced, keeping the first and the last."""
    if n is None or len(items) <= n:
        return list(items)
    if n <= 1:
        return list(items[-1:])
    step = (len(items) - 1) / (n - 1)
    return [items[round(i * step)] for i in range(n)]


class TelemetrySampler:
    """Runs the sources in threads and keeps their samples (see the module docstring)."""

    def __init__(
        self,
        *,
        gpu: GpuPort | None = None,
        server: ServerPort | None = None,
        host: HostPort | None = None,
        absent: Mapping[Kind, str] | None = None,
        gpu_interval_s: float = DEFAULT_GPU_INTERVAL_S,
        server_interval_s: float = DEFAULT_SERVER_INTERVAL_S,
        host_interval_s: float = DEFAULT_HOST_INTERVAL_S,
        archive_points: int = ARCHIVE_POINTS,
        recent_points: int = RECENT_POINTS,
        nvml_status: str = "not used",
    ) -> None:
        self.nvml_status = nvml_status
        """"ok", "not used: ..." or "unavailable: <reason>", for the snapshot's hardware."""
        self._gpu, self._server, self._host = gpu, server, host
        self._intervals: dict[Kind, float] = {
            "gpu": gpu_interval_s,
            "server": server_interval_s,
            "host": host_interval_s,
        }
        reasons = dict(absent or {})
        self._states: dict[Kind, SourceState] = {
            "gpu": self._initial("gpu", gpu.name if gpu else "none", gpu, reasons),
            "server": self._initial("server", "server", server, reasons),
            "host": self._initial("host", "host", host, reasons),
        }
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._archive_gpu: Archive[tuple[GpuSample, ...]] = Archive(archive_points)
        self._archive_server: Archive[ServerSample] = Archive(archive_points)
        self._archive_host: Archive[HostSample] = Archive(archive_points)
        self._recent_gpu: deque[tuple[GpuSample, ...]] = deque(maxlen=recent_points)
        self._recent_server: deque[ServerSample] = deque(maxlen=recent_points)
        self._recent_host: deque[HostSample] = deque(maxlen=recent_points)
        self._latest = TelemetryFrame(0, (), None, None, tuple(self._states.values()))
        self._identities: tuple[GpuIdentity, ...] | None = None

    @staticmethod
    def _initial(kind: Kind, name: str, port: object, reasons: dict[Kind, str]) -> SourceState:
        if port is None:
            return SourceState(kind, "none", "unavailable", reasons.get(kind, "not configured"))
        return SourceState(kind, name, "starting")

    @property
    def gpu_source(self) -> str:
        """The GPU port's name, "dcgm (via /metrics)" (the server's text), or "none"."""
        return self._states["gpu"].source

    @property
    def server_port(self) -> ServerPort | None:
        """The server port (the histogram recorder shares its scraper), or None."""
        return self._server

    def start(self) -> TelemetrySampler:
        """Read the GPU identities, then start one daemon thread per present source."""
        self.identities()
        polls: list[tuple[Kind, Callable[[], None]]] = []
        if self._gpu is not None:
            polls.append(("gpu", self._poll_gpu))
        if self._server is not None:
            polls.append(("server", self._poll_server))
        if self._host is not None:
            polls.append(("host", self._poll_host))
        for kind, poll in polls:
            thread = threading.Thread(
                target=self._run, args=(kind, poll), name=f"gputui-telemetry-{kind}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the threads (each finishes its current poll), sample the server once more, close.

        The last scrape comes after the run's requests have ended (a run stops the sampler after
        draining them), so the server's counters cover every request: a run's prefix-cache hits
        read from them would otherwise miss up to a polling interval of requests at the end.
        """
        self._stop.set()
        threads, self._threads = self._threads, []
        for thread in threads:
            thread.join(timeout_s)
        if self._server is not None and threads and self._states["server"].status == "ok":
            with contextlib.suppress(Exception):  # the server may be gone: keep what was read
                self._poll_server()
        for port in (self._gpu, self._server, self._host):
            if port is not None:
                port.close()

    def __enter__(self) -> TelemetrySampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def latest(self) -> TelemetryFrame:
        """The newest frame (immutable; replaced whole on every sample)."""
        return self._latest

    def identities(self) -> tuple[GpuIdentity, ...]:
        """GPU identities from the GPU port, read once at `start` (empty when there is none)."""
        if self._identities is None:
            found: tuple[GpuIdentity, ...] = ()
            if self._gpu is not None:
                try:
                    found = self._gpu.identities()
                except TelemetryUnavailable:
                    found = ()
            self._identities = found
        return self._identities

    def traces(self, downsample_to: int | None = 600) -> Traces:
        """The whole run, at most `downsample_to` points per series."""
        with self._lock:
            gpu = self._archive_gpu.items()
            server = self._archive_server.items()
            host = self._archive_host.items()
        return Traces(
            gpu=tuple(s for poll in downsample(gpu, downsample_to) for s in poll),
            server=tuple(downsample(server, downsample_to)),
            host=tuple(downsample(host, downsample_to)),
        )

    def recent(self) -> Traces:
        """The last raw samples of each kind, for live graphs."""
        with self._lock:
            return Traces(
                gpu=tuple(s for poll in self._recent_gpu for s in poll),
                server=tuple(self._recent_server),
                host=tuple(self._recent_host),
            )

    def _run(self, kind: Kind, poll: Callable[[], None]) -> None:
        interval_s = self._intervals[kind]
        next_s = time.monotonic()
        while not self._stop.is_set():
            try:
                poll()
            except TelemetryUnavailable as exc:
                self._set_state(kind, "error", str(exc))
            except Exception as exc:  # noqa: BLE001 - a source's bug must not kill its thread
                self._set_state(kind, "error", f"{type(exc).__name__}: {exc}")
            next_s += interval_s
            delay_s = next_s - time.monotonic()
            if delay_s < 0:  # fell behind (a slow scrape): skip the missed ticks
                next_s = time.monotonic()
                delay_s = 0.0
            self._stop.wait(delay_s)

    def _poll_gpu(self) -> None:
        assert self._gpu is not None
        self._add_gpu(self._gpu.sample(), self._gpu.name)

    def _poll_server(self) -> None:
        assert self._server is not None
        view = self._server.scrape()
        with self._lock:
            if view.server is not None:
                self._archive_server.append(view.server)
                self._recent_server.append(view.server)
            self._publish(
                server=view.server,
                state=SourceState(
                    "server",
                    view.backend or "server",
                    "ok" if view.server is not None else "error",
                    "" if view.server is not None else "no known inference-server metrics",
                ),
            )
        if self._gpu is None and view.gpus:
            self._add_gpu(view.gpus, "dcgm (via /metrics)")

    def _poll_host(self) -> None:
        assert self._host is not None
        sample = self._host.sample()
        with self._lock:
            self._archive_host.append(sample)
            self._recent_host.append(sample)
            self._publish(host=sample, state=SourceState("host", "host", "ok"))

    def _add_gpu(self, samples: tuple[GpuSample, ...], source: str) -> None:
        with self._lock:
            self._archive_gpu.append(samples)
            self._recent_gpu.append(samples)
            self._publish(gpus=samples, state=SourceState("gpu", source, "ok"))

    def _set_state(self, kind: Kind, status: Literal["error"], detail: str) -> None:
        with self._lock:
            old = self._states[kind]
            self._publish(state=SourceState(kind, old.source, status, detail))

    def _publish(self, *, state: SourceState, **changes: object) -> None:
        """Swap in a new frame (caller holds the lock)."""
        self._states[state.kind] = state
        frame = self._latest
        self._latest = dataclasses.replace(
            frame,
            seq=frame.seq + 1,
            states=tuple(self._states.values()),
            **changes,  # type: ignore[arg-type]
        )


def flatten_states(states: Iterable[SourceState]) -> dict[str, str]:
    """{"gpu": "nvml: ok", ...} for one-line display or a snapshot."""
    return {
        s.kind: f"{s.source}: {s.status}" + (f" ({s.detail})" if s.detail else "") for s in states
    }


def server_trace(sampler: TelemetrySampler | None) -> tuple[ServerSample, ...]:
    """Every server sample of the run at full resolution (none without a sampler)."""
    return sampler.traces(downsample_to=None).server if sampler is not None else ()
