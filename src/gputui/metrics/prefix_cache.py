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
  The counters are cumulative over every request, so a group's share is estimated:
  1. Each request is placed in the interval between two consecutive samples (about 1 s apart)
     that holds its first token (else its end). The server counts its lookup when it schedules
     it, earlier, sometimes one interval earlier.
  2. Intervals are merged into blocks until the queries the server counted and the prompt tokens
     (usage) of the requests placed there agree within 5 % (or after 8 intervals, when other
     clients keep them apart); an interval with counted queries and none of our requests is
     dropped (only the latest is kept, in case its requests follow); a counter that went down (a
     restart) drops what was pending; the last block is kept as it stands. A block's hits are
     then its requests' hits, whole.
  3. Within a block the hits are split over its requests in proportion to prompt tokens x their
     turn's hit rate, each turn's rate fitted by least squares over all blocks (blocks mixing
     turns differently pin the rates down; what they cannot separate stays at a prior: the run's
     hits spread over the turns' histories, the only part of a turn a cache can serve, so turn 1
     gets none unless the histories cannot hold them all); without turns, in proportion to
     prompt tokens (every request of a block gets its rate).
  A group's rate is the sum of its requests' estimated hits over their prompt tokens: exact for a
  run's total and for steps (they fill their own blocks), close for turns when their rates are
  steady over the run, polluted by other clients of the same server. Requests outside the sampled
  span are left out.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

import numpy as np

from gputui.engine.records import RequestRecord, cached_tokens

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

    def to_dict(self) -> dict[str, float | str | None]:
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


SYNC_TOLERANCE: Final = 0.05
"""A block closes where the counted queries and our requests' prompt tokens agree this closely."""
MAX_BLOCK_INTERVALS: Final = 8
"""...or after this many intervals (other clients keep the two apart for good)."""
RIDGE: Final = 1e-3
"""How strongly the turn-rate fit leans on the run's mean rate, relative to the data's scale."""
HISTORY_RIDGE: Final = 1.0
"""...and on the histories' split, when known: as much as on the blocks. A closed loop mixes the
turns alike in every block, so the blocks barely tell them apart and their noise (lookups
counted an interval before the first token) swung turn rates by 15-20 points on a real vLLM;
the histories are what a cache serves in a salted run, and the total stays the blocks'."""


@dataclass(slots=True)
class _Block:
    """Consecutive intervals, merged until they hold both counted queries and our requests."""

    queried: int = 0
    hit: int = 0
    members: list[int] = field(default_factory=list)
    tokens: int = 0
    intervals: int = 0

    def add(self, dq: int, dh: int, members: list[int], tokens: int) -> None:
        self.queried += dq
        self.hit += dh
        self.members.extend(members)
        self.tokens += tokens
        self.intervals += 1

    def in_sync(self) -> bool:
        """The server counted about what our requests sent: a fair place to cut."""
        if not self.members or self.queried <= 0:
            return False
        gap = abs(self.queried - self.tokens) <= SYNC_TOLERANCE * max(self.queried, self.tokens)
        return gap or self.intervals >= MAX_BLOCK_INTERVALS


def _blocks(
    records: Sequence[RequestRecord], points: Sequence[tuple[int, int, int]]
) -> list[_Block]:
    """The counters' change cut into blocks of whole requests (see the module docstring)."""
    times = [t for t, _, _ in points]
    by_interval: dict[int, list[int]] = {}
    for k, r in enumerate(records):
        stamp = r.first_token_ns if r.first_token_ns is not None else r.end_ns
        if not r.ok or not r.input_tokens:
            continue
        i = bisect_left(times, stamp)  # interval i is (times[i-1], times[i]]
        if 0 < i < len(times):
            by_interval.setdefault(i, []).append(k)
    blocks: list[_Block] = []
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
        block.add(dq, dh, members, sum(records[k].input_tokens or 0 for k in members))
        if block.in_sync():
            blocks.append(block)
            block = _Block()
    if block.members and block.queried > 0:  # the run's end: what was counted is all there is
        blocks.append(block)
    return blocks


def _turn_weights(records: Sequence[RequestRecord], blocks: Sequence[_Block]) -> dict[int, float]:
    """Each turn's hit rate over the run, by least squares over the blocks' hits.

    A block's hits are the sum over its requests of (prompt tokens x their turn's rate); blocks
    of different mixes of turns pin each turn's rate down; a light ridge term keeps what they
    cannot tell apart (blocks that all mix the turns alike) at the prior (`_prior_rates`: the
    hits spread over the turns' histories). Rates are clipped to [0, 1]; a run without turns (or
    a single one) gives no weights.
    """
    turns = sorted({t for b in blocks for k in b.members if (t := records[k].turn) is not None})
    if len(turns) < 2:
        return {}
    column = {t: j for j, t in enumerate(turns)}
    matrix = np.zeros((len(blocks), len(turns)))
    hits = np.zeros(len(blocks))
    for i, b in enumerate(blocks):
        scale = b.queried / b.tokens if b.tokens else 1.0  # the block's tokens as counted
        for k in b.members:
            turn = records[k].turn
            if turn is not None:
                matrix[i, column[turn]] += (records[k].input_tokens or 0) * scale
        hits[i] = b.hit
    # A light pull toward a prior: what the blocks cannot tell apart stays at it.
    shares = history_shares(records, turns)
    prior = _prior_rates(hits.sum(), matrix.sum(axis=0), shares)
    ridge = RIDGE if shares is None else HISTORY_RIDGE
    weight = np.sqrt(ridge * np.trace(matrix.T @ matrix) / len(turns))
    stacked = np.vstack([matrix, weight * np.eye(len(turns))])
    target = np.concatenate([hits, weight * prior])
    rates = np.linalg.lstsq(stacked, target, rcond=None)[0]
    return {t: float(min(max(rates[column[t]], 0.0), 1.0)) for t in turns}


def _histories(records: Sequence[RequestRecord]) -> dict[int, int | None]:
    """Per ok multi-turn record (by id), the tokens its history holds; None when unknown.

    Turn t re-sends turn t - 1's prompt and answer: those are all a prefix cache can serve
    (turn 1: nothing). Unknown when the previous turn is not among the records.
    """
    earlier: dict[tuple[int | None, int | None], RequestRecord] = {
        (r.conversation_id, r.turn): r for r in records if r.conversation_id is not None
    }
    out: dict[int, int | None] = {}
    for r in records:
        if r.turn is None or not r.ok or not r.input_tokens:
            continue
        before = earlier.get((r.conversation_id, r.turn - 1)) if r.turn > 1 else None
        if r.turn > 1 and (before is None or before.input_tokens is None):
            out[id(r)] = None
            continue
        held = 0 if before is None else (before.input_tokens or 0) + before.output_tokens
        out[id(r)] = min(held, r.input_tokens)
    return out


def history_shares(records: Sequence[RequestRecord], turns: Sequence[int]) -> list[float] | None:
    """Per turn, the share of its prompt tokens that its history makes up (None: unknown)."""
    held = _histories(records)
    history = dict.fromkeys(turns, 0.0)
    prompts = dict.fromkeys(turns, 0.0)
    for r in records:
        tokens = held.get(id(r))
        if r.turn in history and tokens is not None:
            history[r.turn] += tokens
            prompts[r.turn] += r.input_tokens or 0
    if any(prompts[t] <= 0 for t in turns):
        return None
    return [history[t] / prompts[t] for t in turns]


def _prior_rates(hits: float, tokens: np.ndarray, shares: list[float] | None) -> np.ndarray:
    """Each turn's rate before the blocks are read: the hits spread as the histories allow.

    Without histories, the run's mean rate for every turn. With them, the hits go to the
    history tokens (a cache serves histories: turn 1 gets none); hits beyond what the histories
    hold go to the other tokens alike (another client's, or a salt that did not isolate).
    """
    total = float(tokens.sum())
    if shares is None or total <= 0:
        return np.full(len(tokens), hits / total if total > 0 else 0.0)
    share = np.asarray(shares)
    held = float(tokens @ share)
    if hits <= held:
        return share * (hits / held if held > 0 else 0.0)
    rest = total - held
    return share + (1 - share) * ((hits - held) / rest if rest > 0 else 0.0)


def counter_shares(
    records: Sequence[RequestRecord], points: Sequence[tuple[int, int, int]]
) -> list[tuple[float, float] | None]:
    """Per record, its estimated (hit, queried) tokens from the counters (module docstring)."""
    shares: list[tuple[float, float] | None] = [None] * len(records)
    if len(points) < 2:
        return shares
    blocks = _blocks(records, points)
    weights = _turn_weights(records, blocks)
    for b in blocks:
        rate = min(b.hit / b.queried, 1.0)
        tokens = [float(records[k].input_tokens or 0) for k in b.members]
        split = [
            q * weights.get(records[k].turn or 0, 1.0)
            for k, q in zip(b.members, tokens, strict=True)
        ]
        total = sum(split)
        for k, q, w in zip(b.members, tokens, split, strict=True):
            # the block's hits kept whole, split by each turn's run-wide rate when known
            hit = rate * sum(tokens) * w / total if total > 0 else rate * q
            shares[k] = (min(hit, q), q)
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
SHARED_BY_DESIGN_TOKENS: Final = 16
"""Prompt tokens every salted prompt of a run shares on purpose: the lead word, the run's salt (a
few one-token words) and a chat template's opening. A cache that reuses any common prefix token by
token (llama.cpp's slots) serves them from one request to the next; a block cache (vLLM's 16- or
128-token blocks) never does. Hits up to this many per request are no sign of another run."""
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
    beyond = share.hit_tokens - SHARED_BY_DESIGN_TOKENS * share.requests
    if beyond <= COLD_HIT_RATE * share.queried_tokens:
        return None  # the salt's own prefix, served token by token (see SHARED_BY_DESIGN_TOKENS)
    turns = any(r.turn is not None for r in first)
    if turns and share.source == SOURCE_COUNTERS and _histories_hold(records, meter):
        return None
    which = "first turns' " if turns else ""
    return (
        f"step {step_index + 1} ({level:g}): {rate:.0%} of its {which}prompt tokens were served "
        f"from the prefix cache ({share.source}) although its prompts were salted to be cold: "
        "another client is sending the same prompts, or the salt did not reach the first block"
    )


def _histories_hold(records: Sequence[RequestRecord], meter: PrefixCacheMeter) -> bool:
    """The counted hits fit in the later turns' histories: nothing says a first turn hit.

    From the counters a first turn's share is an estimate that noise can push past the warning's
    threshold; hits no more than the histories hold are what a salted conversation run is
    expected to get (a history not among the records counts as a whole prompt).
    """
    whole = meter.share(records)
    if whole is None:
        return False
    held = _histories(records)
    room = sum(
        tokens if (tokens := held.get(id(r))) is not None else r.input_tokens or 0
        for r in records
        if r.ok and (r.turn or 1) > 1
    )
    return whole.hit_tokens <= room


def step_meter(
    step_index: int, records: Sequence[RequestRecord], samples: Iterable[CounterSample]
) -> PrefixCacheMeter:
    """A meter over the step's requests and its neighbours' (enough to cut its blocks).

    Cheap enough to run at every step's end: its cost follows the step, not the whole run.
    """
    near = [r for r in records if abs(r.step_index - step_index) <= 1]
    return PrefixCacheMeter(near, samples)


def step_cache_line(
    step_index: int, records: Sequence[RequestRecord], samples: Iterable[CounterSample]
) -> str | None:
    """'prefix cache: 3.1% of prompt tokens hit (server counters)' for a finished step."""
    meter = step_meter(step_index, records, samples)
    share = meter.share(r for r in records if r.step_index == step_index)
    if share is None or share.hit_rate is None:
        return None
    return f"prefix cache: {share.hit_rate:.1%} of prompt tokens hit ({share.source})"
