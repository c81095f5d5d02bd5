"""Multi-turn conversations against the GPU-profile simulator over loopback HTTP.

The issue's acceptance: 16 conversations of 5 turns; the context grows by the previous answer at
every turn with exact token counts; the prefix-cache hit rate rises turn by turn and matches the
simulator's own counters; TTFT at turn 5 is lower than with prefix caching off.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from itertools import pairwise

import httpx
import pytest

from gputui.engine.arrivals import ArrivalProcess
from gputui.engine.client import ClientConfig, StreamingClient
from gputui.engine.load import LoadController, LoadMode
from gputui.engine.records import RequestRecord
from gputui.engine.target import parse_target
from gputui.metrics.conversations import conversation_stats, turn_stats
from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.runner import start_background
from gputui.workloads.config import WorkloadConfig
from gputui.workloads.conversations import ConversationWorkload
from gputui.workloads.distributions import FixedDist
from gputui.workloads.prepare import prepare_workload

USERS, TURNS, IN, OUT = 16, 5, 512, 48


def counters(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics", timeout=5).text
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("vllm:prefix_cache_"):
            name, value = line.split("{")[0], float(line.rsplit(" ", 1)[1])
            out[name] = value
    return out


async def talk(
    url: str,
    workload: ConversationWorkload,
    *,
    mode: LoadMode,
    level: float,
    until: int = USERS,
    arrivals_s: float | None = None,
) -> list[RequestRecord]:
    """Run until `until` conversations finished all turns (bounded in time), then stop.

    With `arrivals_s`, no conversation starts after that many seconds: an open loop that keeps
    starting them would otherwise pile up far more than the server can finish.
    """
    records: list[RequestRecord] = []
    client = StreamingClient(
        ClientConfig(
            target=parse_target(url),
            model="llama-3.1-8b",
            endpoint="chat",
            extra_body={"ignore_eos": True},
        )
    )
    load = LoadController(client, workload.build(), ArrivalProcess("constant"), records.append)
    load.set_load(mode, level, 0)
    started = time.perf_counter()
    deadline, closed = started + 60, False
    while time.perf_counter() < deadline:
        if sum(1 for r in records if r.turn == TURNS and r.ok) >= until:
            break
        if not closed and arrivals_s is not None and time.perf_counter() - started >= arrivals_s:
            load.set_load(mode, 0, 1)  # no new conversation; those under way finish every turn
            closed = True
        await asyncio.sleep(0.05)
    if not closed:
        load.set_load(mode, 0, 1)
    await load.stop(cancel=False, drain_timeout_s=30)
    await client.aclose()
    return records


def complete(records: list[RequestRecord]) -> dict[int, list[RequestRecord]]:
    by: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in records:
        if r.conversation_id is not None and r.ok:
            by[r.conversation_id].append(r)
    return {c: sorted(rs, key=lambda r: r.turn or 0) for c, rs in by.items() if len(rs) == TURNS}


def run_once(
    *,
    caching: bool,
    mode: LoadMode = "concurrency",
    level: float = USERS,
    max_active: int | None = None,
    until: int = USERS,
    arrivals_s: float | None = None,
) -> tuple[list[RequestRecord], dict[str, float]]:
    # Usage's cached_tokens, as vLLM sends it with --enable-prompt-tokens-details.
    spec = GpuProfileSpec(
        gpu="a100-80gb-pcie",
        model="llama-3.1-8b",
        prefix_caching=caching,
        prompt_tokens_details=True,
    )
    with start_background(spec) as sim:
        prepared = prepare_workload(
            WorkloadConfig(input=FixedDist(tokens=IN), output=FixedDist(tokens=OUT)),
            target=parse_target(sim.url),
            model="llama-3.1-8b",
            endpoint="chat",
            backend="gputui-sim",
        )
        workload = ConversationWorkload(prepared.spec, TURNS, max_active=max_active)
        records = asyncio.run(
            talk(sim.url, workload, mode=mode, level=level, until=until, arrivals_s=arrivals_s)
        )
        return records, counters(sim.url)


@pytest.fixture(scope="module")
def cached_run() -> tuple[list[RequestRecord], dict[str, float]]:
    return run_once(caching=True)


def test_context_grows_by_the_previous_answer_exactly(
    cached_run: tuple[list[RequestRecord], dict[str, float]],
) -> None:
    talks = complete(cached_run[0])
    assert len(talks) >= USERS
    for turns in talks.values():
        first = turns[0]
        assert first.input_tokens == IN and first.requested_input_tokens == IN
        for prev, cur in pairwise(turns):
            assert prev.output_tokens == OUT
            # the server's count: the whole previous prompt, its answer, and a new IN-token message
            assert cur.input_tokens == prev.input_tokens + prev.output_tokens + IN  # type: ignore[operator]
            assert cur.requested_input_tokens == cur.input_tokens
        assert turns[-1].input_tokens == TURNS * IN + (TURNS - 1) * OUT


def test_hit_rate_rises_turn_by_turn_and_matches_the_server(
    cached_run: tuple[list[RequestRecord], dict[str, float]],
) -> None:
    records, server = cached_run
    rows = turn_stats(records)
    rates = [rate for row in rows[:TURNS] if (rate := row["prefix_cache_hit_rate"]) is not None]
    assert len(rates) == TURNS and rates[0] == 0.0
    assert all(b > a for a, b in pairwise(rates)), rates
    # turn t hits the full 16-token blocks of turn t-1's prompt (answers are not hashed)
    prompt4 = 4 * IN + 3 * OUT
    assert rates[4] == pytest.approx((prompt4 // 16 * 16) / (5 * IN + 4 * OUT), abs=0.02)
    ok = [r for r in records if r.ok]
    client_hits = sum(r.cached_input_tokens or 0 for r in ok)
    client_queries = sum(r.input_tokens or 0 for r in ok)
    hits, queries = (
        server["vllm:prefix_cache_hits_total"],
        server["vllm:prefix_cache_queries_total"],
    )
    # every request the server saw finished and reported its usage: the two accounts agree
    assert all(r.ok for r in records)
    assert client_hits == hits
    assert client_queries == queries
    stats = conversation_stats(records, TURNS)
    assert stats["complete"] >= USERS
    e2e, first_ttft = stats["e2e_s"], rows[0]["ttft_s"]
    assert e2e is not None and first_ttft is not None
    assert e2e["p50"] > 5 * first_ttft["p50"]


@pytest.mark.slow
def test_turn_five_ttft_is_lower_with_caching(
    cached_run: tuple[list[RequestRecord], dict[str, float]],
) -> None:
    uncached, server = run_once(caching=False)
    assert server.get("vllm:prefix_cache_hits_total", 0.0) == 0.0
    on = turn_stats(cached_run[0])[TURNS - 1]
    off = turn_stats(uncached)[TURNS - 1]
    assert off["prefix_cache_hit_rate"] == 0.0
    on_ttft, off_ttft = on["ttft_s"], off["ttft_s"]
    assert on_ttft is not None and off_ttft is not None
    assert on_ttft["p50"] < 0.8 * off_ttft["p50"], (on, off)


@pytest.mark.slow
def test_open_loop_conversations_start_at_a_rate() -> None:
    # 2.5 s of arrivals start ~20 conversations, enough for USERS to finish; more would only
    # overload the server (each adds 5 growing turns) and delay those the test reads.
    records, _ = run_once(caching=True, mode="rate", level=8.0, arrivals_s=(USERS + 4) / 8.0)
    talks = complete(records)
    assert len(talks) >= USERS
    starts = sorted(t[0].sent_ns for t in talks.values())[:USERS]
    rate = (len(starts) - 1) / ((starts[-1] - starts[0]) / 1e9)
    assert 6.0 < rate < 10.0, rate  # constant arrivals at 8/s


def test_open_loop_sessions_cap_the_conversations_under_way() -> None:
    """`--sessions 4 --rate 40`: 40 new conversations a second, never more than 4 at once."""
    cap = 4
    records, _ = run_once(caching=True, mode="rate", level=40.0, max_active=cap, until=2 * cap)
    talks = complete(records)
    assert len(talks) >= 2 * cap
    spans = [(t[0].sent_ns, t[-1].end_ns) for t in talks.values()]
    edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    under_way = peak = 0
    for _, change in edges:
        under_way += change
        peak = max(peak, under_way)
    assert peak == cap  # the cap is reached and held, not exceeded
    # later arrivals waited for a free slot: their scheduled time is kept, so the wait is seen
    waits = sorted((t[0].sent_ns - (t[0].queued_ns or t[0].sent_ns)) / 1e9 for t in talks.values())
    assert waits[0] < 0.05 and waits[-1] > 0.5, waits
