"""Today's streams against the simulator over real HTTP on loopback, checked against its own record.

The simulator's `/sim/requests` holds, per request, when it wrote the first token, the first
thinking token and the first answer token (its `perf_counter_ns`, the same CLOCK_MONOTONIC as the
client's); `/sim/stats` holds every per-token gap it delivered.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from gputui.engine.client import ClientConfig, StreamingClient
from gputui.engine.event_tokens import EventCounter, EventCounterSpec
from gputui.engine.http import ConnectionPool
from gputui.engine.records import RequestRecord
from gputui.engine.target import parse_target
from gputui.metrics.request_metrics import itl_counts, record_columns, request_metrics
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepSpec, aggregate_step
from gputui.metrics.step_quality import step_warnings
from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import SimProcess, start_background
from gputui.sim.stream_style import StreamStyle
from gputui.telemetry.server_metrics import read_metrics

MS = 1_000_000


@pytest.fixture
def sim(request: pytest.FixtureRequest) -> Iterator[SimProcess]:
    style: StreamStyle = request.param
    spec = FixedProfileSpec(ttft_ms=20, itl_ms=2, served_model_name="sim", stream_style=style)
    with start_background(spec) as process:
        yield process


async def send_all(
    url: str, n: int, max_tokens: int, *, concurrency: int = 4, **config: Any
) -> list[RequestRecord]:
    client = StreamingClient(
        ClientConfig(
            target=parse_target(url), model="sim", extra_body={"ignore_eos": True}, **config
        )
    )
    queue = list(range(n))
    out: list[RequestRecord] = []

    async def worker() -> None:
        while queue:
            i = queue.pop()
            out.append(await client.send("hello world", max_tokens, request_id=i, step_index=0))

    # The client runs in pytest's process, whose heap (every test module imported) a full
    # collection scans in 50-90 ms on the 2-core host: one, set off by the allocations of the
    # first requests' /tokenize counting, stamped the streams still running that much late (ITL
    # 2-4.5 % over the server's in 4 of 8 runs). gputui's own engine process is small (a full
    # collection ~6 ms); freezing what exists before the run keeps pytest's heap out of the scans.
    gc.collect()
    gc.freeze()
    try:
        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(concurrency))), 60)
    finally:
        await client.aclose()
        gc.unfreeze()
    return sorted(out, key=lambda r: r.sent_ns)


def scrape(url: str) -> str:
    return httpx.get(url + "/metrics", timeout=10).text


def server_truth(url: str) -> list[dict[str, Any]]:
    truths: list[dict[str, Any]] = httpx.get(url + "/sim/requests", timeout=10).json()
    return sorted(truths, key=lambda t: t["arrival_ns"])


def paired(records: list[RequestRecord], truths: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """Each client record with the server's record of it (requests sent one at a time)."""
    assert len(records) == len(truths)
    for record, truth in zip(records, truths, strict=True):
        assert 0 <= truth["arrival_ns"] - record.sent_ns < 20 * MS
    return list(zip(records, truths, strict=True))


def assert_close_to_server(gaps_ns: list[int], what: str) -> None:
    """Client arrival minus server write, per request: never before it, within 1 ms.

    The machine is shared: a client descheduled for a moment stamps late, so the 1 ms bound holds
    for the median and three requests in four; none may be more than 10 ms late.
    """
    gaps = np.array(gaps_ns) / MS
    print(f"{what}: client - server median {np.median(gaps):.3f} ms, worst {gaps.max():.3f} ms")
    assert gaps.min() >= 0  # the client cannot see a token before the server wrote it
    assert float(np.median(gaps)) < 1.0
    assert float(np.mean(gaps < 1.0)) >= 0.75
    assert gaps.max() < 10.0


STYLES = [
    StreamStyle(reasoning_share=0.6, reasoning_field="reasoning"),
    StreamStyle(reasoning_share=0.6, reasoning_field="reasoning_content"),
]


@pytest.mark.parametrize("sim", STYLES, indirect=True, ids=["reasoning", "reasoning_content"])
@pytest.mark.parametrize("include_usage", [True, False], ids=["usage", "counted"])
async def test_reasoning_ttft_and_ttfat_match_the_servers_record(
    sim: SimProcess, include_usage: bool
) -> None:
    records = await send_all(
        sim.url, 12, 50, concurrency=1, endpoint="chat", include_usage=include_usage
    )
    pairs = paired(records, server_truth(sim.url))
    first_gaps, answer_gaps = [], []
    for record, truth in pairs:
        assert record.ok, record.error_detail
        assert truth["reasoning_tokens"] == 30  # 60 % of 50
        # TTFT is the first thinking token, TTFAT the first answer token: as the server wrote them.
        assert record.first_token_ns is not None
        assert record.first_answer_ns is not None
        first_gaps.append(record.first_token_ns - truth["first_reasoning_ns"])
        answer_gaps.append(record.first_answer_ns - truth["first_answer_ns"])
        # As durations, the client's TTFT also holds the request's way to the server.
        server_ttft = truth["first_reasoning_ns"] - truth["arrival_ns"]
        assert 0 <= (record.first_token_ns - record.sent_ns) - server_ttft < 10 * MS
        assert record.reasoning_tokens == truth["reasoning_tokens"]
        assert record.reasoning_from_usage is include_usage
        assert record.output_tokens == truth["tokens"] == 50
        assert record.token_ns.size == 50
        assert itl_counts(record_columns([record])).tolist() == [49]
    assert_close_to_server(first_gaps, "first token")
    assert_close_to_server(answer_gaps, "first answer")
    # The answer starts after 30 tokens of thinking at 2 ms each.
    ttfat = np.mean([r.first_answer_ns - r.sent_ns for r in records if r.first_answer_ns]) / MS
    ttft = np.mean([r.first_token_ns - r.sent_ns for r in records if r.first_token_ns]) / MS
    assert ttfat - ttft == pytest.approx(60, abs=3)


def assert_per_token_itl(records: list[RequestRecord], url: str, tokens: int) -> float:
    for record in records:
        assert record.ok, record.error_detail
        assert record.output_tokens == tokens
    assert itl_counts(record_columns(records)).tolist() == [tokens - 1] * len(records)
    itl = request_metrics(records).itl_s
    assert itl.size == len(records) * (tokens - 1)
    truth = httpx.get(url + "/sim/stats", timeout=10).json()["itl_ms"]
    assert truth["n"] == itl.size
    error = abs(itl.mean() * 1e3 - truth["mean"]) / truth["mean"]
    print(
        f"ITL mean {itl.mean() * 1e3:.4f} ms vs server {truth['mean']:.4f} ms: {100 * error:.2f} %"
    )
    assert error < 0.02, (itl.mean() * 1e3, truth["mean"])
    return float(error)


FOUR = StreamStyle(tokens_per_event=4)


@pytest.mark.parametrize("sim", [FOUR], indirect=True, ids=["4-per-event"])
async def test_four_tokens_per_event_with_continuous_usage(sim: SimProcess) -> None:
    records = await send_all(sim.url, 12, 66, continuous_usage=True)
    assert {r.event_tokens_method for r in records} == {"continuous_usage"}
    assert all(r.token_ns.size == 17 for r in records)  # 16 events of 4 and one of 2
    assert_per_token_itl(records, sim.url, 66)


@pytest.mark.parametrize("sim", [FOUR], indirect=True, ids=["4-per-event"])
async def test_four_tokens_per_event_counted_with_tokenize(sim: SimProcess) -> None:
    counter = EventCounterSpec(kind="server", dialect="vllm")
    records = await send_all(sim.url, 12, 66, event_counter=counter)
    assert {r.event_tokens_method for r in records} == {"tokenizer"}
    assert_per_token_itl(records, sim.url, 66)


@pytest.mark.parametrize("sim", [FOUR], indirect=True, ids=["4-per-event"])
async def test_four_tokens_per_message_delta_counted_with_tokenize(sim: SimProcess) -> None:
    """The Messages stream has no per-event usage: its 4-token deltas are counted by /tokenize."""
    counter = EventCounterSpec(kind="server", dialect="vllm")
    records = await send_all(sim.url, 8, 66, endpoint="messages", event_counter=counter)
    assert {r.event_tokens_method for r in records} == {"tokenizer"}
    assert all(r.token_ns.size == 17 for r in records)  # 16 deltas of 4 and one of 2
    assert all(r.event_tokens is not None and r.event_tokens[-1] == 2 for r in records)
    truths = server_truth(sim.url)
    assert [t["events"] for t in truths] == [17] * 8
    assert_per_token_itl(records, sim.url, 66)


@pytest.mark.parametrize("sim", [FOUR], indirect=True, ids=["4-per-event"])
async def test_four_tokens_per_event_uncounted_spread_the_usage_and_say_so(sim: SimProcess) -> None:
    """No continuous usage, no /tokenize, no tokenizer: the usage total is spread over the events.

    66 tokens in 17 events (16 of 4, one of 2): the spread (3.9 each) is not the truth per event,
    but the mean ITL is the per-token mean (40 ms for 4 tokens at 10 ms would read 10 ms again).
    """
    records = await send_all(sim.url, 12, 66)
    assert {r.event_tokens_method for r in records} == {"usage_spread"}
    assert all(r.token_ns.size == 17 for r in records)
    for r in records:
        assert r.event_tokens is not None and int(r.event_tokens.sum()) == 66
        assert int(r.event_tokens.max()) - int(r.event_tokens.min()) <= 1  # even
    error = assert_per_token_itl(records, sim.url, 66)
    print(f"usage_spread: mean ITL within {100 * error:.2f} % of the per-token truth")
    spec = StepSpec(0, "concurrency", 4.0, records[0].sent_ns, records[0].sent_ns, 1 << 62)
    step = aggregate_step(spec, records, Sla())
    assert step.event_tokens_method == "usage_spread"
    assert any("spread evenly over its events" in line for line in step_warnings(step))


TOOLS = StreamStyle(reasoning_share=0.5, tool_calls=True, tokens_per_event=2)


@pytest.mark.parametrize("sim", [TOOLS], indirect=True, ids=["tool-calls"])
@pytest.mark.parametrize("continuous", [True, False], ids=["continuous", "tokenize"])
async def test_tool_call_streams_are_counted(sim: SimProcess, continuous: bool) -> None:
    counter = None if continuous else EventCounterSpec(kind="server")
    records = await send_all(
        sim.url,
        8,
        40,
        concurrency=1,
        endpoint="chat",
        continuous_usage=continuous,
        event_counter=counter,
    )
    pairs = paired(records, server_truth(sim.url))
    answer_gaps = []
    for record, truth in pairs:
        assert record.first_answer_ns is not None
        answer_gaps.append(record.first_answer_ns - truth["first_answer_ns"])
        assert record.reasoning_tokens == truth["reasoning_tokens"] == 20
        assert record.token_ns.size == truth["events"] == 20
    assert_close_to_server(answer_gaps, "first tool-call token")
    assert_per_token_itl(records, sim.url, 40)


SPEC = StreamStyle(spec_decode_k=4, spec_accept=0.7, seed=3)


@pytest.mark.parametrize("sim", [SPEC], indirect=True, ids=["spec-decode"])
async def test_speculative_decoding_per_token_itl_and_acceptance(sim: SimProcess) -> None:
    records = await send_all(sim.url, 12, 64, continuous_usage=True)
    assert_per_token_itl(records, sim.url, 64)
    events = sum(r.token_ns.size for r in records)
    assert events < 12 * 64 * 0.6  # several tokens per step
    sample = read_metrics(scrape(sim.url), 0).server
    assert sample is not None
    assert sample.spec_accept_rate is not None
    # 0.7 per draft token, stopped at the first rejection: 1.77 of 4 accepted on average (44 %).
    assert sample.spec_accept_rate == pytest.approx(0.443, abs=0.06)
    assert sample.spec_accept_length == pytest.approx(1 + 1.77, abs=0.25)


@pytest.mark.parametrize("sim", [FOUR], indirect=True, ids=["4-per-event"])
async def test_texts_kept_for_counting_do_not_leave_the_client(sim: SimProcess) -> None:
    """Only `keep_text` puts the answer on the record; the counter's texts stay in the client."""
    counter = EventCounterSpec(kind="server", dialect="vllm")
    records = await send_all(sim.url, 4, 66, event_counter=counter)
    assert {r.event_tokens_method for r in records} == {"tokenizer"}
    assert [r.output_text for r in records] == [None] * 4
    client = StreamingClient(
        ClientConfig(
            target=parse_target(sim.url),
            model="sim",
            extra_body={"ignore_eos": True},
            event_counter=counter,
        )
    )
    try:
        kept = await asyncio.wait_for(
            client.send("hello world", 6, request_id=9, step_index=0, keep_text=True), 30
        )
    finally:
        await client.aclose()
    assert kept.output_text == " tok000 tok001 tok002 tok003 tok004 tok005"


async def test_a_tokenize_that_never_answers_stops_counting_instead_of_hanging() -> None:
    """A silent /tokenize costs one bounded wait; the counter then says why it stopped."""
    held: list[asyncio.StreamWriter] = []

    async def silent(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # read the request, never answer

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = ConnectionPool("127.0.0.1", port, ssl_context=None, connect_timeout_s=2)
    counter = EventCounter(
        EventCounterSpec(kind="server"), pool, f"127.0.0.1:{port}", "sim", timeout_s=0.3
    )
    try:
        started = asyncio.get_running_loop().time()
        assert await asyncio.wait_for(counter.count(["a", "b"]), 10) is None
        assert asyncio.get_running_loop().time() - started < 3
        assert counter.broken == "/tokenize did not answer in 0.3 s"
        assert await counter.count(["c"]) is None  # broken: no second wait
    finally:
        counter.close()
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()
