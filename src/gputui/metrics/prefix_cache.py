"""Prefix-cache hit rates of any group of requests (a step, a turn, a run), labelled by source.

Contract: `PrefixCacheMeter(records, server_samples)` is built once over a run's records and the
server's samples (`telemetry.samples.ServerSample`, with `prefix_cache_queries_total` and
`prefix_cache_hits_total` where the server exposes them); `meter.share(group)` returns a
`CacheShare` (hit and queried prompt tokens, `hit_rate`, `source`) or None when nothing reports.

- Source "usage": the ok requests whose usage carried `prompt_tokens_details.cached_tokens`
  (vLLM with `--enable-prompt-tokens-details`, the simulator); "server timings": llama.cpp's
  `timings.cache_n`. Exact per request.
- Source "server counters": when no request of the group reports cached tokens (vLLM's default),
  from the server's counters (vLLM `vllm:prefix_cache_queries_total` / `_hits_total`, in tokens).
  The counters are cumulative over every request, so a group's share is estimated: the server
  counts a request's lookup when it schedules it, shortly before its first token. The counters'
  change between two consecutive samples (about 1 s apart) is shared among the requests whose
  first token (else end) fell in that interval, each getting the interval's hit rate (hits /
  queries) on its own prompt tokens (usage). An interval whose counters moved with no such request
  (the lookup before a sample, the first token after it) is merged into the next one, and an
  interval with such requests but no counted query likewise; a counter that went down (a restart)
  drops what was pending. A group's rate is then the token-weighted mean of its requests' interval
  rates: exact when the group's requests alone fill their intervals, blurred when groups share an
  interval (turns 1 and 3 of different conversations in flight together get the same rate), and
  polluted by other clients of the same server. Requests outside the sampled span are left out.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from gputui.engine.records import RequestRecord
from gputui.metrics.conversations import cached_tokens

SOURCE_USAGE: Final = "usage"
SOURCE_TIMINGS: Final = "server timings"
SOURCE_COUNTERS: Final = "server counters"


class CounterSample(Protocol):
    """What the meter reads of a server sample."""

    @property
    def t_ns(self) -> int: ...

    @property
    def prefix_cache_queries_total(self) -> int | None: ...

    @property
    def prefix_cache_hits_total(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class CacheShare:
    """Prompt tokens served from the prefix cache, of those queried, and where that was read."""

    hit_tokens: float
    queried_tokens: float
    source: str
    requests: int

    @property
    def hit_rate(self) -> float | None:
        """Hit tokens / queried tokens (None when nothing was queried)."""
        return self.hit_tokens / self.queried_tokens if self.queried_tokens else None

    def to_dict(self) -> dict[str, Any]:
        """The snapshot's form."""
        return {
            "hit_rate": self.hit_rate,
            "source": self.source,
            "hit_tokens": round(self.hit_tokens),
            "queried_tokens": round(self.queried_tokens),
            "requests": self.requests,
        }


def counter_points(samples: Iterable[CounterSample]) -> list[tuple[int, int, int]]:
    """(t_ns, queried, hit) of the samples that carry both counters, in time order."""
    points = [
        (s.t_ns, q, h)
        for s in samples
        if (q := s.prefix_cache_queries_total) is not None
        and (h := s.prefix_cache_hits_total) is not None
    ]
    return sorted(points)


@dataclass(slots=True)
class _Block:
    """Intervals merged until they hold both counted queries and requests."""

    queried: int = 0
    hit: int = 0
    members: list[int] = field(default_factory=list)


def counter_shares(
    records: Sequence[RequestRecord], points: Sequence[tuple[int, int, int]]
) -> list[tuple[float, float] | None]:
    """Per record, its estimated (hit, queried) tokens from the counters (module docstring)."""
    shares: list[tuple[float, float] | None] = [None] * len(records)
    if len(points) < 2:
        return shares
    times = [t for t, _, _ in points]
    by_interval: dict[int, list[int]] = {}
    for k, r in enumerate(records):
        stamp = r.first_token_ns if r.first_token_ns is not None else r.end_ns
        if not r.ok or not r.input_tokens:
            continue
        i = bisect_left(times, stamp)  # interval i is (times[i-1], times[i]]
        if 0 < i < len(times):
            by_interval.setdefault(i, []).append(k)
    block = _Block()
    for i in range(1, len(points)):
        dq = points[i][1] - points[i - 1][1]
        dh = points[i][2] - points[i - 1][2]
        members = by_interval.get(i, [])
        if dq < 0 or dh < 0:  # the server restarted: what was pending cannot be split
            block = _Block()
            continue
        if not block.members and not members and dq > 0:
            block = _Block()  # counted queries with no request of ours: keep only the latest
        block.queried += dq
        block.hit += dh
        block.members.extend(members)
        if block.members and block.queried > 0:
            rate = min(block.hit / block.queried, 1.0)
            for k in block.members:
                tokens = float(records[k].input_tokens or 0)
                shares[k] = (rate * tokens, tokens)
            block = _Block()
    return shares


class PrefixCacheMeter:
    """Hit rates of groups of one run's requests (see the module docstring)."""

    def __init__(
        self, records: Sequence[RequestRecord], samples: Iterable[CounterSample] = ()
    ) -> None:
        self._position = {id(r): k for k, r in enumerate(records)}
        self._shares = counter_shares(records, counter_points(samples))

    def share(self, group: Iterable[RequestRecord]) -> CacheShare | None:
        """The group's share: from usage (or timings) when any reports it, else the counters."""
        ok = [r for r in group if r.ok and r.input_tokens]
        reported = [(r, n) for r in ok if (n := cached_tokens(r)) is not None]
        if reported:
            source = (
                SOURCE_USAGE
                if any(r.cached_input_tokens is not None for r, _ in reported)
                else SOURCE_TIMINGS
            )
            return CacheShare(
                float(sum(n for _, n in reported)),
                float(sum(r.input_tokens or 0 for r, _ in reported)),
                source,
                len(reported),
            )
        counted = [
            share
            for r in ok
            if (k := self._position.get(id(r))) is not None and (share := self._shares[k])
        ]
        if not counted:
            return None
        return CacheShare(
            sum(h for h, _ in counted), sum(q for _, q in counted), SOURCE_COUNTERS, len(counted)
        )


def counter_delta_rate(samples: Iterable[CounterSample]) -> float | None:
    """The server's own hit rate over the whole sampled span (last minus first sample)."""
    points = counter_points(samples)
    if len(points) < 2:
        return None
    dq = points[-1][1] - points[0][1]
    dh = points[-1][2] - points[0][2]
    return dh / dq if dq > 0 and dh >= 0 else None


COLD_HIT_RATE: Final = 0.05
"""A step meant to be cold whose hit rate is above this was served from someone's cache."""


def cold_warning(
    step_index: int, level: float, records: Sequence[RequestRecord], meter: PrefixCacheMeter
) -> str | None:
    """A warning when the step's cold requests (every one, or first turns) hit the cache."""
    first = [r for r in records if r.turn in (None, 1)]
    share = meter.share(first)
    rate = share.hit_rate if share is not None else None
    if share is None or rate is None or rate <= COLD_HIT_RATE:
        return None
    which = "first turns' " if any(r.turn is not None for r in first) else ""
    return (
        f"step {step_index + 1} ({level:g}): {rate:.0%} of its {which}prompt tokens were served "
        f"from the prefix cache ({share.source}) although its prompts were salted to be cold: "
        "another client is sending the same prompts, or the salt did not reach the first block"
    )
