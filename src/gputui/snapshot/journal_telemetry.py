"""Hardware and telemetry in the session journal, so that a recovered snapshot keeps them.

Contract: `JournalTelemetry(sampler, origin_ns).lines()` returns the journal lines due since its
last call: a `hardware` line whenever the snapshot's hardware section changes (the first poll
that knows the GPUs, and again should the server's backend be detected later), and one
`telemetry` line with the samples that arrived since, at most one point per series every
`interval_s` (2 s: an hour is ~1,800 points a series, a few hundred kB a GPU). The points have the
snapshot's trace form (`t_s` from the session's start), so `telemetry_from_lines` only joins and
downsamples them into the snapshot's `telemetry` section, as a live save does (MAX_POINTS a
series). The journal writer's thread calls `lines()` about once a second, never the UI's loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from gputui.telemetry.sampler import TelemetrySampler, downsample, flatten_states
from gputui.telemetry.samples import GpuSample, HostSample, ServerSample
from gputui.telemetry.snapshot_sections import (
    GPU_TRACE_FIELDS,
    HOST_TRACE_FIELDS,
    MAX_POINTS,
    SERVER_TRACE_FIELDS,
    hardware_from_sampler,
    trace_point,
)

JOURNAL_POINT_INTERVAL_S: Final = 2.0
"""The journal keeps at most one telemetry point per series this often."""

SERIES: Final = ("gpu", "server", "host")
SERVER_JOURNAL_FIELDS: Final = (
    *SERVER_TRACE_FIELDS,
    "prefix_cache_queries_total",
    "prefix_cache_hits_total",
)
"""The server's trace fields, and the prefix-cache counters a recovered hit rate is read from."""


class JournalTelemetry:
    """What a live session's sampler adds to its journal (see the module docstring)."""

    def __init__(
        self,
        sampler: TelemetrySampler,
        origin_ns: int,
        *,
        interval_s: float = JOURNAL_POINT_INTERVAL_S,
    ) -> None:
        self._sampler = sampler
        self._origin_ns = origin_ns
        self._interval_ns = int(interval_s * 1e9)
        self._hardware: dict[str, object] | None = None
        self._last_ns: dict[tuple[str, int], int] = {}
        """The newest journalled point's time, by (series, GPU index or 0)."""

    def lines(self) -> list[dict[str, object]]:
        """The journal lines due now: hardware when it changed, then new telemetry points."""
        out: list[dict[str, object]] = []
        hardware: dict[str, object] = hardware_from_sampler(self._sampler)
        hardware["sources"] = flatten_states(self._sampler.latest().states)
        if hardware != self._hardware:
            self._hardware = hardware
            out.append({"kind": "hardware", "hardware": hardware})
        points = self._new_points()
        if any(points.values()):
            out.append({"kind": "telemetry", **points})
        return out

    def _new_points(self) -> dict[str, list[dict[str, object]]]:
        traces = self._sampler.traces(downsample_to=None)
        return {
            "gpu": self._due("gpu", traces.gpu, GPU_TRACE_FIELDS),
            "server": self._due("server", traces.server, SERVER_JOURNAL_FIELDS),
            "host": self._due("host", traces.host, HOST_TRACE_FIELDS),
        }

    def _due(
        self,
        series: str,
        samples: Sequence[GpuSample | ServerSample | HostSample],
        fields: Sequence[str],
    ) -> list[dict[str, object]]:
        points: list[dict[str, object]] = []
        for sample in samples:
            key = (series, sample.index if isinstance(sample, GpuSample) else 0)
            last = self._last_ns.get(key)
            if last is not None and sample.t_ns < last + self._interval_ns:
                continue
            self._last_ns[key] = sample.t_ns
            points.append(trace_point(sample, fields, self._origin_ns))
        return points


@dataclass(frozen=True, slots=True)
class JournalledCounters:
    """A journalled server point's prefix-cache counters (`metrics.prefix_cache.CounterSample`)."""

    t_ns: int
    prefix_cache_queries_total: int | None
    prefix_cache_hits_total: int | None


def _points(line: Mapping[str, object], series: str) -> list[dict[str, object]]:
    """A journalled line's points of one series (the objects among them)."""
    found = line.get(series)
    if not isinstance(found, list):
        return []
    return [{str(k): v for k, v in p.items()} for p in found if isinstance(p, dict)]


def counters_from_lines(
    telemetry_lines: Iterable[Mapping[str, object]],
) -> list[JournalledCounters]:
    """The server's prefix-cache counters as journalled, on the session's clock."""
    out = []
    for line in telemetry_lines:
        for point in _points(line, "server"):
            t_s = point.get("t_s")
            queries = point.get("prefix_cache_queries_total")
            hits = point.get("prefix_cache_hits_total")
            if (
                isinstance(t_s, int | float)
                and isinstance(queries, int | float)
                and isinstance(hits, int | float)
            ):
                out.append(JournalledCounters(int(t_s * 1e9), int(queries), int(hits)))
    return out


def hardware_from_lines(lines: Iterable[Mapping[str, object]]) -> dict[str, object] | None:
    """The last journalled hardware section (without the telemetry sources), or None."""
    hardware = None
    for line in lines:
        if isinstance(found := line.get("hardware"), dict):
            hardware = {str(k): v for k, v in found.items() if k != "sources"}
    return hardware


def telemetry_from_lines(
    hardware_lines: Sequence[Mapping[str, object]],
    telemetry_lines: Iterable[Mapping[str, object]],
    max_points: int = MAX_POINTS,
) -> dict[str, object] | None:
    """The snapshot's telemetry section from journalled points, or None when there were none."""
    joined: dict[str, list[dict[str, object]]] = {name: [] for name in SERIES}
    for line in telemetry_lines:
        for name in SERIES:
            joined[name].extend(_points(line, name))
    if not any(joined.values()):
        return None
    by_gpu: dict[object, list[dict[str, object]]] = {}
    for point in joined["gpu"]:
        by_gpu.setdefault(point.get("index"), []).append(point)
    section: dict[str, object] = {
        "gpu": [p for index in by_gpu for p in downsample(by_gpu[index], max_points)],
        "server": downsample(joined["server"], max_points),
        "host": downsample(joined["host"], max_points),
    }
    sources = next(
        (
            hardware["sources"]
            for line in reversed(hardware_lines)
            if isinstance(hardware := line.get("hardware"), dict) and "sources" in hardware
        ),
        None,
    )
    if sources is not None:
        section["sources"] = sources
    return section
