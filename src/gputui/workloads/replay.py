"""Trace replay: every request of a trace, sent once, on the trace's own clock.

Contract (engine.driven): `TraceWorkload` is picklable; its source's first `drive` starts one
dispatch loop (later level changes leave it alone) that sends entry i at t0 + offset_i. It sleeps
to `SPIN_NS` before each send and yields to the loop (`sleep(0)`) for the rest, because the loop's
timers are only good to about a millisecond (libuv's are in whole ms: 5 % of wake-ups came a median
0.5 ms past the margin). The request's own task does the yielding, spawned as its spin starts, so
the send's stamp comes in the same step as the spin's end, not a loop iteration after a spawn
(p50 0.05 ms instead of 0.12). A longer spin was worse on a loaded machine (p99 8.4 ms with 3 ms
against 3.0 ms with 1 ms, load 2.4 on 2 cores): a process that spins stays runnable and is
preempted, one woken from sleep is favoured by the scheduler.
The scheduled time goes into the record (`queued_ns`), so the lateness of every send (its
`sent_ns` minus the schedule, connection setup excluded) is measured and reported
(metrics.conversations.dispatch_lateness): a client that cannot keep a trace's clock says so.
Every prompt is built in `build()`, before the clock starts.

Garbage collection: a full collection of a process holding thousands of records stops the loop
for tens of ms (34 ms measured), so during the replay the objects alive at its start are frozen
out of the collector (`gc.freeze`) and automatic collection is off; the dispatcher collects, by
the interpreter's own thresholds, only in a gap of at least `GC_GAP_NS` before the next arrival,
and regardless once garbage piles up past `GC_FORCE_FACTOR` times the threshold (a trace without
gaps still has bounded memory). The collector is restored when the replay ends.

Prompts: an entry with Mooncake `hash_ids` is the concatenation of one seeded 512-token word block
per hash id (the last one cut to the entry's length), so entries that share hash ids share that
prefix token for token and a prefix cache can serve it; other entries get the plan's unique prefix
and a body of their length, as synthetic prompts do.
"""

from __future__ import annotations

import asyncio
import gc
import time
from dataclasses import dataclass
from typing import Final

from gputui.engine.driven import LoadControl, LoadMode
from gputui.engine.workload import RequestSpec
from gputui.workloads.prompts import LEAD, BodyText, seeded_words
from gputui.workloads.source import PreparedWorkload
from gputui.workloads.traces import MOONCAKE_BLOCK_TOKENS, Trace

SPIN_NS: Final = 1_000_000
"""How long before a send the dispatcher stops sleeping and yields to the loop instead."""
GC_GAP_NS: Final = 10_000_000
"""The dispatcher collects garbage only when the next arrival is at least this far away."""
GC_FORCE_FACTOR: Final = 20
"""...or once this many times the young generation's threshold of allocations piled up."""
START_DELAY_NS: Final = 20_000_000
"""The first arrival is this far after the dispatch loop starts (room to start the loop)."""


@dataclass(frozen=True, slots=True)
class TraceWorkload:
    """Replay `trace` with prompts written by `base.plan`."""

    base: PreparedWorkload
    trace: Trace

    def build(self) -> TraceSource:
        """The driving source, with every prompt already written."""
        return TraceSource(self)


class TraceSource:
    """Sends a trace on its clock (engine.driven.DrivenSource)."""

    def __init__(self, spec: TraceWorkload) -> None:
        self._spec = spec
        self._specs = _prompts(spec.base, spec.trace)
        self._started = False

    def next(self, request_id: int) -> RequestSpec:
        """A burst request: a trace entry picked by id."""
        return self._specs[request_id % len(self._specs)]

    async def drive(self, load: LoadControl, mode: LoadMode, level: float) -> None:  # noqa: ARG002
        """Start the replay once; a later level change does not restart or stop it."""
        if not self._started:
            self._started = True
            load.spawn(self._dispatch(load))

    async def _dispatch(self, load: LoadControl) -> None:
        was_enabled = gc.isenabled()
        gc.collect()
        gc.freeze()
        gc.disable()
        try:
            await self._replay(load)
        finally:
            gc.unfreeze()
            if was_enabled:
                gc.enable()

    async def _replay(self, load: LoadControl) -> None:
        t0 = time.perf_counter_ns() + START_DELAY_NS
        for entry, spec in zip(self._spec.trace.entries, self._specs, strict=True):
            target = t0 + entry.offset_ns
            _collect_if_due(target - time.perf_counter_ns())
            delay = target - SPIN_NS - time.perf_counter_ns()
            if delay > 0 and not await load.wait(delay):
                return
            if load.stopping:
                return
            load.spawn(self._send(load, spec, target))

    async def _send(self, load: LoadControl, spec: RequestSpec, scheduled_ns: int) -> None:
        """Yield until the schedule, then send in the same step: the stamp follows at once."""
        while time.perf_counter_ns() < scheduled_ns:  # noqa: ASYNC110 (sub-ms: timers too coarse)
            await asyncio.sleep(0)
        if not load.stopping:
            await load.send(spec, scheduled_ns)


def _collect_if_due(gap_ns: int) -> None:
    """Collect by the interpreter's thresholds in a long enough gap, or when garbage piles up."""
    threshold = gc.get_threshold()
    counts = gc.get_count()
    if counts[0] < threshold[0]:
        return
    if gap_ns < GC_GAP_NS and counts[0] < GC_FORCE_FACTOR * threshold[0]:
        return
    generation = 2 if counts[2] >= threshold[2] else 1 if counts[1] >= threshold[1] else 0
    gc.collect(generation)


def _prompts(base: PreparedWorkload, trace: Trace) -> list[RequestSpec]:
    plan = base.plan
    longest = max(e.input_tokens for e in trace.entries)
    body = BodyText(plan.words, base.seed, plan.body_words(max(longest, plan.base_tokens)))
    blocks: dict[int, list[str]] = {}
    block_words = max(round(MOONCAKE_BLOCK_TOKENS / plan.tokens_per_word), 1)
    specs = []
    for k, entry in enumerate(trace.entries):
        n_out = entry.output_tokens
        extra = {"min_tokens": n_out} if base.min_tokens else None
        if entry.hash_ids:
            words = [LEAD, *plan.salt.split()]  # the run's salt: blocks shared in this run only
            for h in entry.hash_ids:
                if h not in blocks:
                    blocks[h] = seeded_words(
                        plan.words, base.seed, block_words, salt=h & (2**63 - 1)
                    )
                words.extend(blocks[h])
            n_words = max(round((entry.input_tokens - plan.overhead) / plan.tokens_per_word), 0)
            n_words = min(n_words, len(words) - 1)  # a length past its blocks is cut to them
            prompt = " ".join(words[: n_words + 1])
            n_in = plan.overhead + round(n_words * plan.tokens_per_word)
            specs.append(RequestSpec(prompt, n_out, n_in, extra_body=extra))
            continue
        n_in = max(entry.input_tokens, plan.base_tokens)
        prompt, messages = plan.render(k, body.slice(k, plan.body_words(n_in)))
        specs.append(RequestSpec(prompt, n_out, n_in, messages, extra))
    return specs
