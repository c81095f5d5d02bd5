"""gputui's own Prometheus metrics (`--serve-metrics HOST:PORT`) for a Grafana beside the server's.

Contract: `RequestTotals` is a journal tap (`snapshot.journal.JournalTap`): after each journal
flush (its writer's thread, about once a second; never the engine's loop) it adds the finished
requests to counters and to histograms kept as numpy bucket counts (ITL has one sample per
output token: one `observe` call each would cost more than the run). `GputuiCollector` reads
those totals and, at scrape time, the Session's published frame, status and finished steps
(reference reads: no lock, no wait on the session loop), into a private `CollectorRegistry`; no
global registry is touched. Names follow Prometheus conventions: `gputui_` prefix, base units
(seconds, ratios), `_total` counters. `METRIC_NAMES` lists every family exported, which the
example dashboard (examples/grafana-gputui.json) may reference and a test checks.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Final, Protocol

import numpy as np
import numpy.typing as npt
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from gputui import __version__
from gputui.engine.process import EngineStatus
from gputui.engine.records import RequestRecord, cached_tokens
from gputui.metrics.goodput import good_mask
from gputui.metrics.request_metrics import (
    e2e_aligned_s,
    itl_s,
    record_columns,
    tpot_aligned_s,
    ttft_aligned_s,
)
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult
from gputui.session.frames import StatsFrame

TTFT_BUCKETS_S: Final = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0,
    7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip
"""From a cached prompt on a fast card (ms) to a long queue (minutes)."""
TPOT_BUCKETS_S: Final = (
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.05, 0.075,
    0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0,
)  # fmt: skip
"""Per output token: a speculative-decoding ms to a preempted second; the 35 ms SLA on an edge."""
ITL_BUCKETS_S: Final = TPOT_BUCKETS_S
E2E_BUCKETS_S: Final = (
    0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0,
    180.0, 300.0, 600.0, 1200.0, 1800.0,
)  # fmt: skip
"""A short answer (100 ms) to a long one behind a queue (30 minutes)."""

VERDICTS: Final = ("pass", "fail", "inconclusive")

METRIC_NAMES: Final = (
    "gputui_build_info",
    "gputui_requests_total",
    "gputui_good_requests_total",
    "gputui_input_tokens_total",
    "gputui_output_tokens_total",
    "gputui_cached_input_tokens_total",
    "gputui_ttft_seconds",
    "gputui_tpot_seconds",
    "gputui_itl_seconds",
    "gputui_e2e_seconds",
    "gputui_in_flight_requests",
    "gputui_load_level",
    "gputui_paused",
    "gputui_step_index",
    "gputui_step_verdict",
    "gputui_steps_finished_total",
    "gputui_finished_step_verdict",
    "gputui_client_cpu_seconds_total",
    "gputui_client_cpu_ratio",
    "gputui_event_loop_lag_seconds",
)
"""Every family exported (histograms add `_bucket`, `_sum`, `_count` to theirs)."""


class LiveReads(Protocol):
    """What the collector reads of a Session at scrape time (`session.Session` satisfies it)."""

    @property
    def latest(self) -> StatsFrame | None:
        """The latest frame."""
        ...

    @property
    def status(self) -> EngineStatus | None:
        """The engine's latest status."""
        ...

    def finished_steps(self) -> Sequence[StepResult]:
        """Finished steps in order."""
        ...


class Histogram:
    """Cumulative bucket counts of many samples at once (Prometheus `le` semantics)."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = np.asarray(bounds, dtype=np.float64)
        self.counts = np.zeros(self.bounds.size + 1, dtype=np.int64)
        self.sum = 0.0

    def add(self, values: npt.NDArray[np.float64]) -> None:
        """Count `values` (NaN ones are skipped)."""
        kept = values[~np.isnan(values)]
        if kept.size:
            where = np.searchsorted(self.bounds, kept, side="left")  # first bound >= value
            self.counts += np.bincount(where, minlength=self.counts.size)
            self.sum += float(kept.sum())

    def family(self, name: str, documentation: str) -> HistogramMetricFamily:
        """The exposition of the counts so far."""
        cumulative = np.cumsum(self.counts).tolist()
        buckets = [(f"{b:g}", c) for b, c in zip(self.bounds.tolist(), cumulative, strict=False)]
        buckets.append(("+Inf", cumulative[-1]))
        return HistogramMetricFamily(
            name, documentation, buckets=buckets, sum_value=self.sum, unit="seconds"
        )


class RequestTotals:
    """Counters and histograms of every finished request, fed by the journal (a tap)."""

    def __init__(self, sla: Callable[[], Sla]) -> None:
        self._sla = sla
        self._lock = threading.Lock()
        self.outcomes: Counter[str] = Counter()
        """Requests by outcome: "ok" or the failure reason (`engine.records` REASON_*)."""
        self.good = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cached_tokens = 0
        self.ttft = Histogram(TTFT_BUCKETS_S)
        self.tpot = Histogram(TPOT_BUCKETS_S)
        self.itl = Histogram(ITL_BUCKETS_S)
        self.e2e = Histogram(E2E_BUCKETS_S)

    def take(self, lines: Sequence[Mapping[str, object]], records: Sequence[RequestRecord]) -> None:
        """Add the requests the journal just wrote (`good`: judged by the SLA of now)."""
        del lines
        if not records:
            return
        cols = record_columns(records)
        ttft = ttft_aligned_s(cols)
        tpot = tpot_aligned_s(cols)
        itl = itl_s(cols, np.ones(len(cols), dtype=np.bool_))
        e2e = e2e_aligned_s(cols)
        good = int(good_mask(cols, self._sla()).sum())
        outcomes = Counter("ok" if r.ok else (r.error or "unknown") for r in records)
        cached = sum(c for c in (cached_tokens(r) for r in records) if c is not None)
        with self._lock:
            self.outcomes.update(outcomes)
            self.good += good
            self.input_tokens += int(cols.input_tokens.sum())
            self.output_tokens += int(cols.output_tokens.sum())
            self.cached_tokens += cached
            for histogram, values in (
                (self.ttft, ttft),
                (self.tpot, tpot),
                (self.itl, itl),
                (self.e2e, e2e),
            ):
                histogram.add(values)

    def close(self) -> None:
        """Nothing to release: the totals stay readable until the server closes."""

    def families(self) -> Iterator[Metric]:
        """The counters and histograms, read under the lock (one consistent scrape)."""
        with self._lock:
            requests = CounterMetricFamily(
                "gputui_requests", "Finished requests by outcome (ok or the failure reason).",
                labels=["outcome"],
            )  # fmt: skip
            for outcome, count in sorted(self.outcomes.items()):
                requests.add_metric([outcome], count)
            yield requests
            yield CounterMetricFamily(
                "gputui_good_requests", "Ok requests as long as asked within every SLA bound.",
                value=self.good,
            )  # fmt: skip
            for name, value, text in (
                ("input", self.input_tokens, "Input tokens of finished requests (usage)."),
                ("output", self.output_tokens, "Output tokens of finished requests."),
                ("cached_input", self.cached_tokens, "Input tokens served from a prefix cache."),
            ):
                yield CounterMetricFamily(f"gputui_{name}_tokens", text, value=value)
            yield self.ttft.family("gputui_ttft", "Time to first token of ok requests.")
            yield self.tpot.family("gputui_tpot", "Time per output token of ok requests.")
            yield self.itl.family("gputui_itl", "Inter-token latency, one sample per token gap.")
            yield self.e2e.family("gputui_e2e", "End-to-end latency of ok requests.")


class GputuiCollector(Collector):
    """The families of one run: request totals, and the session's live state (module contract)."""

    def __init__(self, totals: RequestTotals) -> None:
        self.totals = totals
        self.session: LiveReads | None = None
        """Set once the Session exists (`frontends.outputs.RunOutputs.watch`)."""

    def collect(self) -> Iterator[Metric]:
        """Every family, read now."""
        info = GaugeMetricFamily("gputui_build_info", "gputui's version.", labels=["version"])
        info.add_metric([__version__], 1)
        yield info
        yield from self.totals.families()
        session = self.session
        if session is not None:
            steps = session.finished_steps()
            yield from _live_families(session.latest, session.status, steps)
            yield from _step_families(steps)


def _live_families(
    frame: StatsFrame | None, status: EngineStatus | None, steps: Sequence[StepResult]
) -> Iterator[Metric]:
    """Load, in flight, the open step and its verdict so far, the client's own CPU and lag.

    Steps are numbered as the snapshot numbers them (0, 1, 2 ...: hidden carry-on steps take
    none), so the open step's index is the count of finished steps before it.
    """
    if status is not None:
        yield GaugeMetricFamily(
            "gputui_in_flight_requests", "Requests sent and not yet finished.",
            value=status.in_flight,
        )  # fmt: skip
        yield CounterMetricFamily(
            "gputui_client_cpu_seconds", "CPU time of the load engine process(es).",
            value=status.cpu_s,
        )  # fmt: skip
    if frame is None:
        return
    level = GaugeMetricFamily(
        "gputui_load_level", "The load: concurrency (streams) or arrival rate (requests/s).",
        labels=["mode"],
    )  # fmt: skip
    level.add_metric([frame.mode], frame.level)
    yield level
    yield GaugeMetricFamily("gputui_paused", "1 while sending is paused.", value=int(frame.paused))
    before = sum(1 for step in steps if step.index < frame.step_index)
    yield GaugeMetricFamily(
        "gputui_step_index", "The open step's index (as the snapshot will number it).",
        value=before,
    )  # fmt: skip
    verdict = GaugeMetricFamily(
        "gputui_step_verdict", "The open step's SLA verdict so far (1 on the current one).",
        labels=["verdict"],
    )  # fmt: skip
    current = frame.verdict_progress.verdict if frame.verdict_progress is not None else None
    for name in VERDICTS:
        verdict.add_metric([name], 1 if name == current else 0)
    yield verdict
    yield GaugeMetricFamily(
        "gputui_client_cpu_ratio", "Engine CPU over the last frame interval (1 = one core).",
        value=frame.client_cpu_percent / 100.0,
    )  # fmt: skip
    yield GaugeMetricFamily(
        "gputui_event_loop_lag_seconds", "Worst lateness of the engine's event loop lately.",
        value=frame.loop_lag_max_ms / 1000.0,
    )  # fmt: skip


def _step_families(steps: Sequence[StepResult]) -> Iterator[Metric]:
    """How many steps finished, and each one's verdict (one series per finished step)."""
    yield CounterMetricFamily(
        "gputui_steps_finished", "Steps finished (their figures are final).", value=len(steps)
    )
    verdicts = GaugeMetricFamily(
        "gputui_finished_step_verdict",
        "1 for each finished step, labelled with its level and SLA verdict.",
        labels=["step", "mode", "level", "verdict"],
    )
    for number, step in enumerate(steps):  # the snapshot's numbering
        labels = [str(number), step.mode, f"{step.level:g}", step.sla_verdict or "none"]
        verdicts.add_metric(labels, 1)
    yield verdicts
