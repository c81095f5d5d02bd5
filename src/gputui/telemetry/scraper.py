"""One /metrics scraper for the whole run: each GET parsed once, shared by every reader.

Contract: `MetricsScraper(url)` owns the one HTTP connection to a server's /metrics. `scrape()`
does one GET, parses it once with prometheus-client's parser (`prom.parse`), stamps it midway
between sending and receiving on `perf_counter_ns` (the steps' clock), keeps it as `latest` and
hands the `Scrape` to every `subscribe`d listener (the histogram recorder) before returning it.
Scrapes are serialized, so listeners see them in time order. `recent(after_ns, max_age_s)` is the
newest scrape taken after `after_ns` and at most `max_age_s` old, or None: the telemetry sampler
takes that instead of a GET of its own whenever a faster reader (the recorder's 2 Hz) already
fetched one. A failing GET raises `MetricsUnavailable` (listeners hear nothing); after `close()`
every scrape fails that way. `gets` counts the GETs sent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from gputui.errors import MetricsUnavailable
from gputui.telemetry.prom import DEFAULT_TIMEOUT_S, PromIndex, fetch, parse


@dataclass(frozen=True, slots=True)
class Scrape:
    """One parsed /metrics response and when the server rendered it (about)."""

    t_ns: int
    index: PromIndex


class MetricsScraper:
    """The run's one /metrics client (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        clock: Callable[[], int] = time.perf_counter_ns,
        client: httpx.Client | None = None,
    ) -> None:
        self.url = url
        self._timeout_s = timeout_s
        self._clock = clock
        self._client = client if client is not None else httpx.Client(timeout=timeout_s)
        self._lock = threading.Lock()
        self._listeners: list[Callable[[Scrape], None]] = []
        self._closed = False
        self.latest: Scrape | None = None
        self.gets = 0

    def subscribe(self, listener: Callable[[Scrape], None]) -> None:
        """Hear every successful scrape from now on (called on the scraping thread)."""
        with self._lock:
            self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[Scrape], None]) -> None:
        """Stop hearing scrapes."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def scrape(self) -> Scrape:
        """One GET, parsed once, handed to every listener (`MetricsUnavailable` on failure)."""
        with self._lock:
            if self._closed:
                raise MetricsUnavailable(f"{self.url}: scraper closed")
            sent_ns = self._clock()
            self.gets += 1
            index = parse(fetch(self.url, self._client, self._timeout_s))
            scrape = Scrape((sent_ns + self._clock()) // 2, index)
            self.latest = scrape
            listeners = list(self._listeners)
            for listener in listeners:
                listener(scrape)
        return scrape

    def recent(self, after_ns: int, max_age_s: float) -> Scrape | None:
        """The newest scrape later than `after_ns` and at most `max_age_s` old; None if none."""
        latest = self.latest
        if latest is None or latest.t_ns <= after_ns:
            return None
        if self._clock() - latest.t_ns > max_age_s * 1e9:
            return None
        return latest

    def close(self) -> None:
        """Close the connection; later scrapes fail with `MetricsUnavailable`."""
        with self._lock:
            self._closed = True
            self._client.close()
