"""Trace replay: every request of a trace, sent once, on the trace's own clock.

Contract (engine.driven): `TraceWorkload` is picklable; its source's first `drive` starts one
dispatch loop (later level changes leave it alone) that sends entry i at t0 + offset_i. It sleeps
to 1 ms before each send and yields to the loop (`sleep(0)`) for the rest, because the loop's timers
are only good to about a millisecond; the scheduled time goes into the record (`queued_ns`), so
the lateness of every send (its `sent_ns` minus the schedule, connection setup excluded) is measured
and reported (metrics.conversations.dispatch_lateness): a client that cannot keep a trace's clock
says so. Every prompt is built in `build()`, before the clock starts.

Prompts: an entry with Mooncake `hash_ids` is the concatenation of one seeded 512-token word block
per hash id (the last one cut to the entry's length), so entries that share hash ids share that
prefix token for token and a prefix cache can serve it; other entries get the plan's unique prefix
and a body of their length, as synthetic prompts do.
"""

from __future__ import annotations

import asyncio
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
        t0 = time.perf_counter_ns() + START_DELAY_NS
        for entry, spec in zip(self._spec.trace.entries, self._specs, strict=True):
            target = t0 + entry.offset_ns
            delay = target - SPIN_NS - time.perf_counter_ns()
            if delay > 0 and not await load.wait(delay):
                return
            while time.perf_counter_ns() < target:  # noqa: ASYNC110 (sub-ms: timers are too coarse)
                await asyncio.sleep(0)
            if load.stopping:
                return
            load.spawn(self._send(load, spec, target))

    async def _send(self, load: LoadControl, spec: RequestSpec, scheduled_ns: int) -> None:
        await load.send(spec, scheduled_ns)


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
            words = [LEAD]
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
