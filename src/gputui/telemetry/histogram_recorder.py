"""Scrape the server's latency histograms often enough to cut them at any step's edges.

Contract: `HistogramRecorder(url)` scrapes `/metrics` in its own daemon thread every `interval_s`
(0.5 s by default) through a `MetricsScraper`: its own, or the run's shared one (`scraper=`, the
telemetry sampler's, whose every scrape it also hears, so the panel's server samples cost no GET of
their own while the recorder runs), and keeps the last `max_scrapes` (t_ns, histograms) pairs, each
stamped midway between sending and receiving on `perf_counter_ns` (the steps' clock).
`between(lo_ns, hi_ns)` returns the histograms' change over the window, cut at the last scrape at
or before `lo_ns` and the first at or after `hi_ns` (if there is none yet, it asks the scraper for
one more, now: the step boundary's precision), with the times it was really cut at: a window edge
is off by at most `interval_s` plus one scrape. An edge marked `inner_lo`/`inner_hi` is a hard one
(other requests are seen beyond it): it is cut at the scrape just inside it instead, when that
leaves a window. A failing scrape is counted (`failures`, `last_error`) and the next tick tries
again; a server without latency histograms (llama.cpp, Triton) gives empty windows, never an error.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import httpx

from gputui.errors import MetricsUnavailable, TelemetryUnavailable
from gputui.telemetry.latency_histograms import Histogram, latency_histograms, window_delta
from gputui.telemetry.prom import DEFAULT_TIMEOUT_S
from gputui.telemetry.scraper import MetricsScraper, Scrape
from gputui.telemetry.server_metrics import ServerMetricsSource, detect_backend

if TYPE_CHECKING:
    from gputui.telemetry.sampler import TelemetrySampler

DEFAULT_INTERVAL_S: Final = 0.5
MAX_SCRAPES: Final = 7200
"""One hour at 2 Hz; older scrapes are dropped (their steps were diagnosed long ago)."""


@dataclass(frozen=True, slots=True)
class HistogramWindow:
    """The latency histograms' change between two scrapes."""

    start_ns: int
    end_ns: int
    backend: str | None
    histograms: dict[str, Histogram] = field(default_factory=dict)


class HistogramRecorder:
    """Background scrapes of the latency histograms (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_scrapes: int = MAX_SCRAPES,
        clock: Callable[[], int] = time.perf_counter_ns,
        scraper: MetricsScraper | None = None,
    ) -> None:
        self.url = url
        self._interval_s = interval_s
        self._own_scraper = scraper is None
        self._scraper = (
            scraper
            if scraper is not None
            else MetricsScraper(url, timeout_s=timeout_s, clock=clock)
        )
        self._scrapes: deque[tuple[int, dict[str, Histogram]]] = deque(maxlen=max_scrapes)
        self._lock = threading.Lock()
        self._scrape_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.backend: str | None = None
        self.failures = 0
        self.last_error: str | None = None
        self._scraper.subscribe(self._on_scrape)

    def start(self) -> HistogramRecorder:
        """Scrape once now, then every `interval_s` in a daemon thread."""
        self.scrape()
        self._thread = threading.Thread(target=self._run, name="gputui-histograms", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and stop hearing the scraper (closing it when it is this one's own)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        self._scraper.unsubscribe(self._on_scrape)
        if self._own_scraper:
            self._scraper.close()

    def scrape(self) -> bool:
        """One scrape (heard through `_on_scrape`); False (and counted) when it failed."""
        with self._scrape_lock:
            try:
                self._scraper.scrape()
            except (MetricsUnavailable, TelemetryUnavailable, httpx.HTTPError) as exc:
                self.failures += 1
                self.last_error = str(exc)
                return False
            return True

    def _on_scrape(self, scrape: Scrape) -> None:
        """Keep the latency histograms of every scrape of the shared scraper, in time order."""
        backend = detect_backend(scrape.index)
        histograms = latency_histograms(scrape.index, backend)
        with self._lock:
            if self._scrapes and scrape.t_ns < self._scrapes[-1][0]:
                return
            self.backend = backend
            self._scrapes.append((scrape.t_ns, histograms))

    def add(self, t_ns: int, histograms: dict[str, Histogram], backend: str | None) -> None:
        """Insert a scrape taken elsewhere (tests, replays); times must not go backwards."""
        with self._lock:
            self.backend = backend
            self._scrapes.append((t_ns, histograms))

    def between(
        self,
        lo_ns: int,
        hi_ns: int,
        *,
        inner_lo: bool = False,
        inner_hi: bool = False,
        floor_ns: int = 0,
    ) -> HistogramWindow | None:
        """The change over [lo_ns, hi_ns], cut at the nearest scrapes outside it (None: unknown).

        `floor_ns`: other requests were observed up to then (an earlier load's last): a start
        scrape before it would take them in, so the window starts at the first scrape at or
        after it instead, when that leaves a window.
        """
        with self._lock:
            latest = self._scrapes[-1][0] if self._scrapes else None
        if (latest is None or latest < hi_ns) and not self._stop.is_set():
            self.scrape()
        with self._lock:
            scrapes = list(self._scrapes)
            backend = self.backend
        if len(scrapes) < 2:
            return None
        times = [t for t, _ in scrapes]
        i = max(bisect_right(times, lo_ns) - 1, 0)
        j = min(bisect_left(times, hi_ns), len(scrapes) - 1)
        # A hard edge (other requests are seen beyond it) is cut at the scrape inside it instead.
        if inner_lo and bisect_left(times, lo_ns) < j:
            i = bisect_left(times, lo_ns)
        if times[i] < floor_ns and bisect_left(times, floor_ns) < j:
            i = bisect_left(times, floor_ns)
        if inner_hi and bisect_right(times, hi_ns) - 1 > i:
            j = bisect_right(times, hi_ns) - 1
        if j <= i:
            return None
        (t0, before), (t1, after) = scrapes[i], scrapes[j]
        return HistogramWindow(t0, t1, backend, window_delta(before, after))

    def _run(self) -> None:
        next_s = time.monotonic() + self._interval_s
        while not self._stop.wait(max(next_s - time.monotonic(), 0.0)):
            self.scrape()
            next_s += self._interval_s
            if next_s < time.monotonic():
                next_s = time.monotonic() + self._interval_s


def recorder_for(url: str, sampler: TelemetrySampler | None) -> HistogramRecorder:
    """A recorder on `url` sharing the sampler's scraper when it scrapes the same URL."""
    port = sampler.server_port if sampler is not None else None
    if isinstance(port, ServerMetricsSource) and port.url == url:
        return HistogramRecorder(url, scraper=port.scraper)
    return HistogramRecorder(url)
