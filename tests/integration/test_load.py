"""Load controllers on a real event loop against a loopback server: rates, shapes, levels."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from gputui.engine.arrivals import Arrival, ArrivalProcess
from gputui.engine.client import ClientConfig, StreamingClient
from gputui.engine.event_tokens import EventCounterSpec
from gputui.engine.load import LoadController, RequestShape
from gputui.engine.records import RequestRecord
from gputui.engine.target import parse_target
from tests.support.replay import ReplayServer, chunked, fixed

SSE = [("Content-Type", "text/event-stream")]
QUICK = chunked(
    200,
    SSE,
    [b'data: {"choices":[{"text":"a","finish_reason":"length"}]}\n\n', b"data: [DONE]\n\n"],
)


def slow(delay_s: float) -> list[tuple[float, bytes]]:
    head, *rest = QUICK
    return [head, (delay_s, b""), *rest]


async def drive(
    server: ReplayServer,
    kind: Arrival,
    *,
    seconds: float,
    mode: str,
    level: float,
    burstiness: float = 1.0,
) -> list[RequestRecord]:
    records: list[RequestRecord] = []
    client = StreamingClient(ClientConfig(target=parse_target(server.url), model="m"))
    load = LoadController(
        client,
        RequestShape(8, 1),
        ArrivalProcess(kind, burstiness=burstiness, seed=7),
        records.append,
        seed=7,
    )
    load.set_load(mode, level, 0)  # type: ignore[arg-type]
    await asyncio.sleep(seconds)
    await load.stop(cancel=False, drain_timeout_s=5)
    await client.aclose()
    return records


@pytest.mark.slow
async def test_open_loop_rate_over_20_seconds() -> None:
    async with ReplayServer([QUICK]) as server:
        records = await drive(server, "poisson", seconds=20.0, mode="rate", level=40.0)
    sent = np.sort(np.array([r.sent_ns for r in records]))
    achieved = (len(sent) - 1) / ((sent[-1] - sent[0]) / 1e9)
    assert all(r.ok for r in records)
    assert abs(achieved - 40.0) / 40.0 < 0.03, achieved
    gaps = np.diff(sent) / 1e9
    cv = gaps.std() / gaps.mean()
    assert 0.9 < cv < 1.1, cv  # exponential gaps have a coefficient of variation of 1


@pytest.mark.alone  # inter-arrival spread in ms
@pytest.mark.parametrize(
    ("kind", "burstiness", "rate", "seconds", "cv_range"),
    # The gamma's ~280 seeded draws at 100/s over 3 s are those it drew at 50/s over 6 s (CV
    # 1.90), their gaps halved. The constant keeps its 300 gaps of 20 ms: their spread is
    # dispatch jitter alone, and one 100 ms hiccup among fewer gaps would move it further.
    [
        ("constant", 1.0, 50.0, 6.0, (0.0, 0.15)),
        ("gamma", 0.25, 100.0, 3.0, (1.6, 2.4)),
    ],
)
async def test_arrival_shapes(
    kind: Arrival,
    burstiness: float,
    rate: float,
    seconds: float,
    cv_range: tuple[float, float],
) -> None:
    async with ReplayServer([QUICK]) as server:
        records = await drive(
            server, kind, seconds=seconds, mode="rate", level=rate, burstiness=burstiness
        )
    sent = np.sort(np.array([r.sent_ns for r in records]))
    gaps = np.diff(sent) / 1e9
    cv = gaps.std() / gaps.mean()
    assert cv_range[0] <= cv <= cv_range[1], cv
    # The schedule is absolute: the achieved span equals the sum of the seeded draws.
    twin = ArrivalProcess(kind, burstiness=burstiness, seed=7)
    drawn_s = sum(twin.gap_ns(rate) for _ in range(len(sent))) / 1e9
    first_gap_s = ArrivalProcess(kind, burstiness=burstiness, seed=7).gap_ns(rate) / 1e9
    span_s = (sent[-1] - sent[0]) / 1e9
    assert span_s == pytest.approx(drawn_s - first_gap_s, rel=0.02, abs=0.01)


def test_gamma_draws_have_the_asked_mean_and_shape() -> None:
    arrivals = ArrivalProcess("gamma", burstiness=0.5, seed=1)
    gaps = np.array([arrivals.gap_ns(10.0) for _ in range(20000)]) / 1e9
    assert gaps.mean() == pytest.approx(0.1, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(2**0.5, rel=0.05)


async def test_closed_loop_keeps_n_in_flight_and_changes_level_without_dropping() -> None:
    async with ReplayServer([slow(0.2)]) as server:
        records: list[RequestRecord] = []
        client = StreamingClient(ClientConfig(target=parse_target(server.url), model="m"))
        load = LoadController(client, RequestShape(8, 1), ArrivalProcess("poisson"), records.append)
        load.set_load("concurrency", 4, 0)
        await asyncio.sleep(0.1)
        assert load.in_flight == 4
        await asyncio.sleep(0.5)
        load.set_load("concurrency", 8, 1)
        await asyncio.sleep(0.25)  # the new users start spread over one lifetime (0.2 s)
        assert load.in_flight == 8
        await asyncio.sleep(0.5)
        load.set_load("concurrency", 2, 2)
        await asyncio.sleep(0.35)  # surplus workers finish their request, then retire
        assert load.in_flight == 2
        await load.stop(cancel=False, drain_timeout_s=5)
        await client.aclose()
    assert all(r.ok for r in records)
    assert load.in_flight == 0
    assert sum(load.sent_by_step.values()) == len(records)  # nothing dropped
    by_step = {s: sum(1 for r in records if r.step_index == s) for s in (0, 1, 2)}
    assert by_step[0] >= 8 and by_step[1] >= 16 and by_step[2] >= 2


async def test_new_closed_loop_users_start_spread_over_one_lifetime() -> None:
    """Raising the level does not send the new users' first requests together (issue 28).

    Started together they would prefill and finish together, and that wave keeps a fixed-length
    loop below its settled tok/s for minutes; spread over one lifetime (0.4 s here) they do not.
    """
    async with ReplayServer([slow(0.4)]) as server:
        records: list[RequestRecord] = []
        client = StreamingClient(ClientConfig(target=parse_target(server.url), model="m"))
        load = LoadController(client, RequestShape(8, 1), ArrivalProcess("poisson"), records.append)
        load.set_load("concurrency", 1, 0)
        await asyncio.sleep(0.9)  # two requests back: the lifetime is known
        raised_ns = time.perf_counter_ns()
        load.set_load("concurrency", 5, 1)
        await asyncio.sleep(0.45)
        assert load.in_flight == 5
        await load.stop(cancel=False, drain_timeout_s=5)
        await client.aclose()
    lifetime_s = np.mean([(r.end_ns - r.sent_ns) / 1e9 for r in records if r.step_index == 0])
    sent_s = np.sort([(r.sent_ns - raised_ns) / 1e9 for r in records if r.step_index == 1])
    # Four new users over 0.4 s: one at once, then one every ~0.1 s; the old user's next request
    # goes whenever its own ends. Together, at most two of them would be sent at the raise.
    assert 0.4 <= lifetime_s < 0.5, lifetime_s
    assert int((sent_s < 0.05).sum()) <= 2, sent_s
    assert int((sent_s < lifetime_s).sum()) >= 4, sent_s
    new_users = sent_s[sent_s < lifetime_s]
    assert new_users[-1] - new_users[0] >= 0.25, sent_s


async def test_burst_and_pause() -> None:
    async with ReplayServer([slow(0.3)]) as server:
        records: list[RequestRecord] = []
        client = StreamingClient(ClientConfig(target=parse_target(server.url), model="m"))
        load = LoadController(client, RequestShape(8, 1), ArrivalProcess("poisson"), records.append)
        load.set_load("concurrency", 1, 0)
        load.burst(10)
        await asyncio.sleep(0.1)
        assert load.in_flight == 11
        load.pause()
        await asyncio.sleep(0.5)
        assert load.in_flight == 0
        started = time.perf_counter()
        load.resume()
        await asyncio.sleep(0.1)
        assert load.in_flight == 1
        await load.stop(cancel=True, drain_timeout_s=5)
        assert time.perf_counter() - started < 1.0  # cancel does not wait for the response
        await client.aclose()
    assert sum(1 for r in records if r.ok) == 11
    assert [r.error for r in records if not r.ok] == ["cancelled"]


TEXTS = (b" a b", b" c d", b" e f")
TWO_PER_EVENT = chunked(
    200,
    SSE,
    [
        *(b'data: {"choices":[{"text":"%s","finish_reason":null}]}\n\n' % t for t in TEXTS[:2]),
        b'data: {"choices":[{"text":"%s","finish_reason":"length"}]}\n\n' % TEXTS[2],
        b'data: {"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":6}}\n\n',
        b"data: [DONE]\n\n",
    ],
    gap_s=0.01,
)
TOKENIZE_S = 1.0


async def test_tokenize_counting_leaves_the_users_path_and_the_stop_waits_for_it() -> None:
    """Events counted by a slow /tokenize: the closed-loop users send on at once (issue 30).

    Three events of two tokens each (usage 6); /tokenize answers after 1 s. Counted inline, the
    two users would send 2 requests in the first 0.4 s; off their path they send on, every record
    waiting for the texts already on their way to /tokenize. The stop, 0.4 s in, waits for that
    counting, so every record comes back counted, each text sent to /tokenize once.
    """
    answer = fixed(200, [("Content-Type", "application/json")], b'{"count":2}')
    tokenize = [(TOKENIZE_S, answer[0][1])]
    records: list[RequestRecord] = []
    handed_ns: list[int] = []

    def hand_on(record: RequestRecord) -> None:
        records.append(record)
        handed_ns.append(time.perf_counter_ns())

    async with ReplayServer([TWO_PER_EVENT], by_path={"/tokenize": tokenize}) as server:
        counter = EventCounterSpec(kind="server", dialect="vllm")
        config = ClientConfig(target=parse_target(server.url), model="m", event_counter=counter)
        client = StreamingClient(config)
        load = LoadController(client, RequestShape(8, 6), ArrivalProcess("poisson"), hand_on)
        started = time.perf_counter_ns()
        load.set_load("concurrency", 2, 0)
        await asyncio.sleep(0.4)
        await load.stop(cancel=False, drain_timeout_s=5)
        await client.aclose()
        calls = [r for r in server.requests if r.startswith(b"POST /tokenize ")]
    assert len(records) == load.sent_by_step[0] >= 6
    for record in records:
        assert record.ok, record.error_detail
        assert record.event_tokens_method == "tokenizer"
        assert record.event_tokens is not None and record.event_tokens.tolist() == [2, 2, 2]
    assert len(calls) == 3  # each text once: the later requests wait for it
    assert (min(handed_ns) - started) / 1e9 >= TOKENIZE_S  # no record before its counts ...
    assert (max(r.sent_ns for r in records) - started) / 1e9 < 0.5  # ... nor user waited
