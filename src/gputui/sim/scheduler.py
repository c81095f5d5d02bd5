"""Continuous batching as vLLM (V1) does it, as a pure, deterministic state machine.

Contract: the caller alternates `next_iteration()` (decide what the next forward pass computes and
how long it takes) and `complete_iteration(it)` (apply it: tokens emitted, requests finished). The
scheduler never reads a clock: the caller owns time, real (`GpuProfile` on the event loop) or
virtual (`sim.virtual`, tests, benchmarks). Given the same requests in the same order it makes the
same decisions; the only randomness is the early-EOS draw, a pure function of (seed, request id).

Policy (vLLM V1 `Scheduler.schedule`, FCFS):
- Every iteration has a token budget (`max_batched_tokens`). Running requests are served first, in
  admission order: a decoding request takes 1 token, a request still prefilling takes as much of
  its remaining prompt as the budget allows (chunked prefill).
- KV lives in 16-token blocks. A request gets blocks for the tokens it computes this iteration;
  when the pool is exhausted the newest running request is preempted: its blocks are freed, it goes
  back to the head of the waiting queue and will recompute its prompt and the tokens it had
  generated (vLLM V1 has no swapping). Preemptions are counted.
- Waiting requests are admitted FIFO while budget, `max_num_seqs` and blocks allow, and never in an
  iteration that preempted. Head-of-line blocking is deliberate: vLLM does not skip ahead.
- A token is sampled when a request has computed every token it knows: the end of its prefill
  (that is its first output token) or each decode step.
- Automatic prefix caching (vLLM V1's default; `prefix_caching=False` turns it off): at admission a
  request looks up the longest cached prefix of its full prompt blocks (sim.prefix_cache) and starts
  with those tokens computed; the full prompt blocks it computes itself become cached. A request's
  `cached` tokens go out in usage as `prompt_tokens_details.cached_tokens`.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Final

from gputui.catalog.memory import BLOCK_SIZE_TOKENS
from gputui.sim.prefix_cache import BlockPool
from gputui.sim.profile import SimRequest
from gputui.sim.roofline import Roofline

ITERATION_BOUNDS: Final = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
"""vLLM 0.32's `iteration_tokens_total` buckets (tokens per engine step)."""
EOS_MEAN_TOKENS: Final = 512
"""Mean natural answer length when a request allows early EOS (`ignore_eos` false). The stop point
is drawn from a geometric law, the maximum-entropy choice when only a mean is assumed; with the
common max_tokens=256 about 40 % of such requests stop early with finish_reason "stop"."""

_MASK64: Final = (1 << 64) - 1


def _unit_draw(seed: int, request_id: int) -> float:
    """A uniform (0, 1) draw from (seed, request id) by splitmix64: arrival order is irrelevant."""
    z = (seed * 0x9E3779B97F4A7C15 + request_id * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    z ^= z >> 31
    return ((z >> 11) + 0.5) / float(1 << 53)


def stop_length(seed: int, request: SimRequest) -> tuple[int, str]:
    """Output length at which a request finishes, and the finish reason it will report."""
    if request.ignore_eos:
        return request.max_tokens, "length"
    # Geometric on {1, 2, ...} with mean EOS_MEAN_TOKENS, by inversion of its CDF.
    p = 1.0 / EOS_MEAN_TOKENS
    u = _unit_draw(seed, request.request_id)
    length = 1 + int(math.log(u) / math.log1p(-p))
    length = max(length, request.min_tokens, 1)
    if length >= request.max_tokens:
        return request.max_tokens, "length"
    return length, "stop"


class SeqState:
    """One request inside the scheduler."""

    __slots__ = (
        "blocks",
        "cached",
        "computed",
        "finish_reason",
        "hashes",
        "held",
        "next_block",
        "output",
        "prompt",
        "request_id",
        "stop_at",
    )

    def __init__(
        self,
        request_id: int,
        prompt: int,
        stop_at: int,
        finish_reason: str,
        hashes: tuple[int, ...] = (),
    ) -> None:
        self.request_id = request_id
        self.prompt = prompt
        self.stop_at = stop_at
        """Output count at which the request finishes."""
        self.finish_reason = finish_reason
        self.output = 0
        """Tokens sampled (and emitted) so far."""
        self.computed = 0
        """Tokens whose KV is in the cache."""
        self.blocks = 0
        """KV blocks held."""
        self.hashes = hashes
        """Chained hashes of the prompt's full blocks."""
        self.held: list[int] = []
        """Cached blocks this request references (hits, and blocks it computed and cached)."""
        self.next_block = 0
        """The first prompt block not yet offered to the cache."""
        self.cached: int | None = None
        """Prompt tokens served from the cache at the first admission."""


@dataclass(slots=True)
class Iteration:
    """One scheduled forward pass."""

    index: int
    duration_s: float
    compute_share: float
    """0..1, how compute-bound the pass is (the thermal model's power draw follows it)."""
    prefill_tokens: int
    decode_seqs: int
    preempted: list[int]
    """Request ids preempted while scheduling this pass."""
    scheduled: list[tuple[SeqState, int, bool]] = field(repr=False)
    """(request, tokens computed, is a decode step)."""
    host_s: float = 0.0
    """The engine's host time to schedule and launch the pass (sim.roofline)."""

    def prefill_chunks(self) -> list[tuple[int, int]]:
        """(request id, prompt tokens computed) for each request prefilling in this pass."""
        return [(s.request_id, n) for s, n, is_decode in self.scheduled if not is_decode]

    def decode_ids(self) -> list[int]:
        """Request ids taking a decode step in this pass."""
        return [s.request_id for s, _, is_decode in self.scheduled if is_decode]


@dataclass(slots=True)
class StepResult:
    """What a completed iteration produced."""

    emitted: dict[int, int]
    """Request id -> output tokens emitted by this iteration."""
    finished: list[tuple[int, str]]
    """(request id, finish reason "stop" | "length") for requests that completed."""
    preempted: list[int]
    cached: dict[int, int] = field(default_factory=dict)
    """Request id -> cached prompt tokens, for requests that emitted their first token."""


class Scheduler:
    """vLLM-style continuous batching over a fixed pool of KV blocks (see the module docstring)."""

    def __init__(
        self,
        roofline: Roofline,
        num_blocks: int,
        max_num_seqs: int = 256,
        max_batched_tokens: int = 2048,
        seed: int = 0,
        *,
        prefix_caching: bool = True,
    ) -> None:
        if num_blocks < 1 or max_num_seqs < 1 or max_batched_tokens < 1:
            raise ValueError("num_blocks, max_num_seqs and max_batched_tokens must be positive")
        self.roofline = roofline
        self.num_blocks = num_blocks
        self.max_num_seqs = max_num_seqs
        self.max_batched_tokens = max_batched_tokens
        self.seed = seed
        self.pool = BlockPool(num_blocks, caching=prefix_caching)
        self.waiting: deque[SeqState] = deque()
        self.running: list[SeqState] = []
        self._seqs: dict[int, SeqState] = {}
        self._index = 0
        self.num_preemptions_total = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.iteration_counts = [0] * (len(ITERATION_BOUNDS) + 1)
        """Engine steps per `ITERATION_BOUNDS` bucket (not cumulative; the last is +Inf)."""
        self.iteration_tokens_sum = 0
        self.finished_total: dict[str, int] = {"stop": 0, "length": 0, "abort": 0}

    @property
    def max_model_len(self) -> int:
        """Longest sequence (prompt + output) the pool can ever hold."""
        return self.num_blocks * BLOCK_SIZE_TOKENS

    @property
    def free_blocks(self) -> int:
        """Blocks an allocation may use: empty ones plus evictable cached ones."""
        return self.pool.free

    @property
    def kv_usage(self) -> float:
        """Fraction 0..1 of KV blocks in use (vllm:kv_cache_usage_perc)."""
        return (self.num_blocks - self.free_blocks) / self.num_blocks

    @property
    def has_work(self) -> bool:
        """True while any request is running or waiting."""
        return bool(self.running or self.waiting)

    def add(self, request: SimRequest) -> None:
        """Queue a request (FIFO). It must fit the pool on its own, or it could never finish."""
        if request.request_id in self._seqs:
            raise ValueError(f"request id {request.request_id} is already scheduled")
        if request.prompt_tokens < 1 or request.max_tokens < 1:
            raise ValueError("a request needs at least one prompt token and one output token")
        if request.prompt_tokens + request.max_tokens > self.max_model_len:
            raise ValueError(
                f"prompt ({request.prompt_tokens}) + max_tokens ({request.max_tokens}) exceeds "
                f"the KV capacity of {self.max_model_len} tokens"
            )
        stop_at, reason = stop_length(self.seed, request)
        seq = SeqState(
            request.request_id, request.prompt_tokens, stop_at, reason, request.block_hashes
        )
        self._seqs[request.request_id] = seq
        self.waiting.append(seq)

    def cancel(self, request_id: int) -> bool:
        """Drop a request (client gone) and free its blocks; False if it was not scheduled."""
        seq = self._seqs.pop(request_id, None)
        if seq is None:
            return False
        if seq in self.waiting:
            self.waiting.remove(seq)
        else:
            self.running.remove(seq)
        self._release(seq)
        self.finished_total["abort"] += 1
        return True

    def _release(self, seq: SeqState) -> None:
        self.pool.release(seq.held, seq.blocks - len(seq.held))
        seq.blocks = 0
        seq.held = []
        seq.next_block = 0

    def _preempt(self, seq: SeqState) -> None:
        self._release(seq)
        seq.computed = 0
        self.waiting.appendleft(seq)
        self.num_preemptions_total += 1

    def next_iteration(self, clock_ratio: float = 1.0) -> Iteration | None:
        """Schedule the next forward pass; None when there is nothing to run."""
        budget = self.max_batched_tokens
        scheduled: list[tuple[SeqState, int, bool]] = []
        preempted: list[int] = []
        tokens = pairs = kv_read = prefill_tokens = decode_seqs = 0
        running = self.running
        i = 0
        while i < len(running) and budget > 0:
            seq = running[i]
            needed = seq.prompt + seq.output - seq.computed
            n = needed if needed < budget else budget
            start = seq.computed
            need_blocks = -(-(start + n) // BLOCK_SIZE_TOKENS) - seq.blocks
            if need_blocks > self.free_blocks:
                victim = None
                while need_blocks > self.free_blocks and victim is not seq:
                    victim = running.pop()
                    self._preempt(victim)
                    preempted.append(victim.request_id)
                if victim is seq:
                    break
            self.pool.take(need_blocks)
            seq.blocks += need_blocks
            is_decode = needed == 1 and seq.output > 0
            scheduled.append((seq, n, is_decode))
            budget -= n
            tokens += n
            pairs += n * start + (n * (n + 1) >> 1)
            kv_read += start + n
            if is_decode:
                decode_seqs += 1
            else:
                prefill_tokens += n
            i += 1
        if not preempted or not scheduled:
            waiting = self.waiting
            pool = self.pool
            while waiting and budget > 0 and len(running) < self.max_num_seqs:
                seq = waiting[0]
                hits, evictable_hits = pool.lookup(seq.hashes, seq.prompt)
                start = hits * BLOCK_SIZE_TOKENS
                needed = seq.prompt + seq.output - start
                n = needed if needed < budget else budget
                need_blocks = -(-(start + n) // BLOCK_SIZE_TOKENS) - hits
                if need_blocks + evictable_hits > pool.free:
                    break
                waiting.popleft()
                running.append(seq)
                pool.count_query(seq.prompt, hits)
                if seq.cached is None:
                    seq.cached = start
                seq.held = list(seq.hashes[:hits])
                pool.acquire(seq.held)
                pool.take(need_blocks)
                seq.blocks = hits + need_blocks
                seq.computed = start
                seq.next_block = hits
                scheduled.append((seq, n, False))
                budget -= n
                tokens += n
                pairs += n * start + (n * (n + 1) >> 1)
                kv_read += start + n
                prefill_tokens += n
        if not scheduled:
            return None
        cost = self.roofline.iteration(tokens, len(scheduled), pairs, kv_read, clock_ratio)
        self._index += 1
        return Iteration(
            index=self._index,
            duration_s=cost.duration_s,
            compute_share=cost.compute_share,
            prefill_tokens=prefill_tokens,
            decode_seqs=decode_seqs,
            preempted=preempted,
            scheduled=scheduled,
            host_s=cost.host_s,
        )

    def complete_iteration(self, it: Iteration) -> StepResult:
        """Apply a finished pass: advance each request, sample tokens, retire finished requests."""
        emitted: dict[int, int] = {}
        finished: list[tuple[int, str]] = []
        cached: dict[int, int] = {}
        seqs = self._seqs
        tokens = sum(n for _, n, _ in it.scheduled)
        self.iteration_counts[bisect.bisect_left(ITERATION_BOUNDS, tokens)] += 1
        self.iteration_tokens_sum += tokens
        for seq, n, is_decode in it.scheduled:
            rid = seq.request_id
            if seqs.get(rid) is not seq:
                continue  # cancelled while the pass was in flight
            seq.computed += n
            if not is_decode and seq.next_block < len(seq.hashes):
                self._cache_computed(seq)
            if seq.computed != seq.prompt + seq.output:
                continue  # a prefill chunk that has not reached the end of the prompt yet
            if seq.output == 0:
                self.prompt_tokens_total += seq.prompt
                cached[rid] = seq.cached or 0
            seq.output += 1
            emitted[rid] = 1
            if seq.output >= seq.stop_at:
                finished.append((rid, seq.finish_reason))
        self.generation_tokens_total += len(emitted)
        if finished:
            for rid, reason in finished:
                seq = seqs.pop(rid)
                self._release(seq)
                self.finished_total[reason] += 1
            self.running = [s for s in self.running if s.request_id in seqs]
        return StepResult(emitted, finished, it.preempted, cached)

    def _cache_computed(self, seq: SeqState) -> None:
        """Offer the prompt blocks `seq` has now fully computed to the prefix cache."""
        full = min(seq.computed // BLOCK_SIZE_TOKENS, len(seq.hashes))
        for b in range(seq.next_block, full):
            h = seq.hashes[b]
            if self.pool.register(h):
                seq.held.append(h)
        seq.next_block = max(seq.next_block, full)
