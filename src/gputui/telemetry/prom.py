"""Fetch and index Prometheus text: the shared half of the DCGM and server-metrics readers.

Contract: `parse(text)` runs prometheus-client's own text parser (never regular expressions) and
returns a `PromIndex`: every sample by its exposed name, with its labels. prometheus-client renames
a counter sample that lacks `_total` (TGI's `tgi_request_count`) to `..._total`, so `get` tries a
name with and without that suffix. `fetch(url)` does one GET with a short timeout and turns every
failure into `MetricsUnavailable` with a one-line reason; a 404 says which flag the common servers
need to expose /metrics. `metrics_url` normalises a user-given URL (no path means `/metrics`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit, urlunsplit

import httpx
from prometheus_client.parser import text_string_to_metric_families

from gputui.errors import MetricsUnavailable, UsageError

DEFAULT_TIMEOUT_S: Final = 2.0
NO_METRICS_HINT: Final = (
    "this server exposes no /metrics (llama.cpp needs --metrics, SGLang --enable-metrics)"
)

Labels = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class PromSample:
    """One exposed sample."""

    name: str
    labels: Labels
    value: float


class PromIndex:
    """Samples of one scrape, looked up by exposed name."""

    __slots__ = ("_by_name",)

    def __init__(self, samples: Iterable[PromSample]) -> None:
        by_name: dict[str, list[PromSample]] = {}
        for sample in samples:
            by_name.setdefault(sample.name, []).append(sample)
        self._by_name = by_name

    @property
    def names(self) -> frozenset[str]:
        """Every exposed sample name."""
        return frozenset(self._by_name)

    def get(self, name: str) -> list[PromSample]:
        """Samples called `name` (or its `_total` twin); empty when absent."""
        found = self._by_name.get(name)
        if found is None:
            twin = name.removesuffix("_total") if name.endswith("_total") else name + "_total"
            found = self._by_name.get(twin, [])
        return found

    def values(self, name: str, **labels: str) -> list[float]:
        """Finite values of `name` whose labels include `labels`."""
        return [
            s.value
            for s in self.get(name)
            if math.isfinite(s.value) and all(s.labels.get(k) == v for k, v in labels.items())
        ]

    def total(self, name: str, **labels: str) -> float | None:
        """Sum over matching series (engines, models); None when there is none."""
        found = self.values(name, **labels)
        return sum(found) if found else None

    def highest(self, name: str, **labels: str) -> float | None:
        """Largest value over matching series; None when there is none."""
        found = self.values(name, **labels)
        return max(found) if found else None


def parse(text: str) -> PromIndex:
    """Index Prometheus exposition text; `MetricsUnavailable` when it is not Prometheus text."""
    try:
        samples = [
            PromSample(s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        ]
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise MetricsUnavailable(f"not Prometheus text ({type(exc).__name__}: {exc})") from None
    return PromIndex(samples)


def metrics_url(url: str, flag: str = "--url") -> str:
    """Validate a metrics URL; one with no path gets `/metrics` (UsageError when unusable)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise UsageError(f"{flag} must start with http:// or https://, got {url!r}")
    if not parts.hostname:
        raise UsageError(f"{flag} has no host: {url!r}")
    try:
        _ = parts.port
    except ValueError:
        raise UsageError(f"{flag} has an invalid port: {url!r}") from None
    path = parts.path if parts.path not in ("", "/") else "/metrics"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def fetch(
    url: str, client: httpx.Client | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
) -> str:
    """GET a metrics endpoint's text, or raise `MetricsUnavailable` saying why."""
    try:
        if client is None:
            response = httpx.get(url, timeout=timeout_s)
        else:
            response = client.get(url, timeout=timeout_s)
    except httpx.TimeoutException:
        raise MetricsUnavailable(f"{url}: no answer within {timeout_s:g} s") from None
    except httpx.HTTPError as exc:
        raise MetricsUnavailable(f"{url}: unreachable ({type(exc).__name__}: {exc})") from None
    if response.status_code == 404:
        raise MetricsUnavailable(f"{url}: 404 Not Found: {NO_METRICS_HINT}")
    if response.status_code != 200:
        raise MetricsUnavailable(f"{url}: HTTP {response.status_code} {response.reason_phrase}")
    return response.text
