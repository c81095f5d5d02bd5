"""Multi-turn conversations against llama-server: its prompt cache serves the history.

llama.cpp keeps each slot's last prompt and answer; the next turn of the same conversation lands on
that slot (it picks the slot whose cached prompt is most similar) and reuses the common prefix,
reported as `timings.cache_n`. The tiny model never emits end-of-sequence, so every answer has
exactly `max_tokens` tokens, one per streamed event: gputui's counts can be held to the server's.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from itertools import pairwise

import pytest

from gputui.engine.arrivals import ArrivalProcess
from gputui.engine.client import ClientConfig, StreamingClient
from gputui.engine.load import LoadController
from gputui.engine.records import RequestRecord, cached_tokens
from gputui.engine.target import parse_target
from gputui.metrics.conversations import turn_stats
from gputui.workloads.config import WorkloadConfig
from gputui.workloads.conversations import ConversationWorkload
from gputui.workloads.distributions import FixedDist
from gputui.workloads.prepare import prepare_workload
from tests.support.llama_server import MODEL_ALIAS, LlamaServer

# Not `alone` (tests/conftest.py): token counts and the prompt cache's reuse, nothing timed
# (3 of 3 passed beside two busy loops on the 2 cores).
pytestmark = [pytest.mark.realserver, pytest.mark.slow, pytest.mark.not_alone]

USERS, TURNS, IN, OUT = 4, 3, 48, 16


async def talk(url: str, workload: ConversationWorkload) -> list[RequestRecord]:
    records: list[RequestRecord] = []
    client = StreamingClient(
        ClientConfig(target=parse_target(url), model=MODEL_ALIAS, endpoint="chat")
    )
    load = LoadController(client, workload.build(), ArrivalProcess("constant"), records.append)
    load.set_load("concurrency", USERS, 0)
    deadline = time.perf_counter() + 90
    while time.perf_counter() < deadline:
        if sum(1 for r in records if r.turn == TURNS) >= USERS:
            break
        await asyncio.sleep(0.05)
    load.set_load("concurrency", 0, 1)  # the conversations under way finish every turn
    await load.stop(cancel=False, drain_timeout_s=60)
    await client.aclose()
    return records


def test_multiturn_shows_the_prompt_cache_and_counts_exactly(llama: LlamaServer) -> None:
    prepared = prepare_workload(
        WorkloadConfig(input=FixedDist(tokens=IN), output=FixedDist(tokens=OUT)),
        target=parse_target(llama.url),
        model=MODEL_ALIAS,
        endpoint="chat",
        backend="llamacpp",
    )
    before = llama.counters()
    records = asyncio.run(talk(llama.url, ConversationWorkload(prepared.spec, TURNS)))
    after = llama.counters()
    assert records
    assert all(r.ok for r in records), [r.error_detail for r in records if not r.ok]
    # streams counted exactly: one event per token, the usage report and the server agree
    for r in records:
        assert r.output_tokens == OUT == len(r.token_ns)
        assert r.server_timings is not None and r.server_timings.predicted_n == OUT
    predicted = after["llamacpp:tokens_predicted_total"] - before["llamacpp:tokens_predicted_total"]
    assert predicted == OUT * len(records)

    by: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in records:
        assert r.conversation_id is not None
        by[r.conversation_id].append(r)
    complete = [sorted(t, key=lambda r: r.turn or 0) for t in by.values() if len(t) == TURNS]
    assert len(complete) >= USERS  # (a conversation begun as the run stopped has fewer turns)
    for turns in complete:
        assert [r.turn for r in turns] == list(range(1, TURNS + 1))
        for prev, cur in pairwise(turns):
            assert prev.input_tokens is not None and cur.input_tokens is not None
            # the history grew by the answer and a new message (plus the chat template's tokens)
            assert cur.input_tokens >= prev.input_tokens + OUT + IN - 8
            # the server reused at least the previous prompt from the slot's cache
            reused = cached_tokens(cur)
            assert reused is not None and reused >= prev.input_tokens - 4, (prev, cur)
    rows = turn_stats(records)
    rates = [rate for row in rows if (rate := row["prefix_cache_hit_rate"]) is not None]
    assert len(rates) == len(rows) and rates[0] < 0.3
    assert rates[1] > 0.4 and rates[2] > rates[1], rates
