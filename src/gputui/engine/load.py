"""Load controllers: closed loop at concurrency N, open loop at R requests/s, and bursts.

Contract: `LoadController` runs on the engine's event loop. `set_load` switches mode or level at
once without dropping in-flight requests: they finish and are attributed to the step in which they
were sent. Concurrency N means N worker coroutines, each sending its next request as soon as its
last one ended; lowering N lets surplus workers finish their request and retire. Raising N
starts the new workers spread evenly over one recent request lifetime (send to last byte,
smoothed; at once before any request came back): started together they would send, prefill and
finish together, and with fixed lengths such a wave persists for minutes, reading a lower tok/s
and a higher TTFT than the same level reached any other way (issue 28: the same answer at any
pace). Spread, the new users take the phases a settled loop has from their first request.

The open loop keeps an absolute schedule (arrival k at t0 + sum of gaps), so late wake-ups do
not lower the rate; when `max_in_flight` requests are out, arrivals wait for a slot and the wait
is kept in the record (`queued_ns`), so a client-side queue is visible rather than hidden in TTFT.

A closed-loop worker whose request could not connect waits before its next one (50 ms, doubling
to 1 s, reset by the first request that reaches the server): when the server is down, the run goes
on and counts `connect` failures at a few per second per worker rather than spinning a core on
thousands of them. The open loop needs no such brake: its arrivals keep their schedule.

A request whose events must be counted by the server's /tokenize (engine.event_tokens) is counted
on a task of its own: its worker (or conversation) goes on at once, and its record is handed on
when counted. Its step meanwhile stays open (sent but not yet come back), so no step's figures
are computed from uncounted stamps.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Final

from gputui.engine.arrivals import ArrivalProcess
from gputui.engine.client import StreamingClient
from gputui.engine.driven import DrivenSource
from gputui.engine.driven import LoadMode as LoadMode
from gputui.engine.event_tokens import TOKENIZE_TIMEOUT_S
from gputui.engine.records import REASON_CLIENT_ERROR, REASON_CONNECT, RequestRecord
from gputui.engine.workload import FixedShape, RequestSource, RequestSpec, SourceExhausted

CONNECT_BACKOFF_S: Final = (0.05, 1.0)
"""First and longest wait of a closed-loop worker after a failed connection."""
COUNTING_DRAIN_S: Final = 2 * TOKENIZE_TIMEOUT_S
"""How long a stop waits for the event counting of the last requests (each /tokenize is bounded)."""


@dataclass(frozen=True, slots=True)
class RequestShape:
    """Fixed input and output lengths (the simple workload; see engine.workload for others)."""

    input_tokens: int
    output_tokens: int


class LoadController:
    """Keeps the requested load on the server and hands every finished record to `on_record`."""

    def __init__(
        self,
        client: StreamingClient,
        source: RequestShape | RequestSource,
        arrivals: ArrivalProcess,
        on_record: Callable[[RequestRecord], None],
        *,
        max_in_flight: int = 1024,
        seed: int = 0,
        id_start: int = 0,
        id_step: int = 1,
    ) -> None:
        self._client = client
        if isinstance(source, RequestShape):
            source = FixedShape(source.input_tokens, source.output_tokens, seed).build()
        self._source = source
        self._arrivals = arrivals
        self._on_record = on_record
        self._max_in_flight = max_in_flight
        self.mode: LoadMode = "concurrency"
        self.level = 0.0
        self.step_index = -1
        self.paused = False
        self.stopping = False
        self.exhausted = False
        """The source has nothing more to send (a dataset sent once each): the loops end."""
        self.in_flight = 0
        self.arrivals_dropped = 0
        """Open-loop arrivals due but never sent: the level changed while they waited for a slot
        under `max_in_flight` (issue 31: counted, never silently lost)."""
        self.arrivals_dropped_by_step: Counter[int] = Counter()
        """The same, by the step index they were scheduled under (a hand-over's carry-on load
        runs under the next step's index, as its sent requests do)."""
        self.sent_by_step: Counter[int] = Counter()
        self._next_id = id_start
        self._id_step = id_step
        """Workers sharing a load number their requests id_start, id_start + id_step, ..."""
        self._workers: dict[int, asyncio.Task[None]] = {}
        self._lifetime_ns = 0
        """Recent request lifetime (send to last byte, smoothed): what new users spread over."""
        self._requests: set[asyncio.Task[str | None]] = set()
        self._generator: asyncio.Task[None] | None = None
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._slot_freed = asyncio.Event()
        self._stopped = asyncio.Event()

    # control ---------------------------------------------------------------------------------
    def set_load(self, mode: LoadMode, level: float, step_index: int) -> None:
        """Switch to a new level (a new step); in-flight requests carry on."""
        self.step_index = step_index
        self.mode = mode
        self.level = level
        if self._generator is not None:
            self._generator.cancel()
            self._generator = None
        if isinstance(self._source, DrivenSource):
            self._generator = asyncio.create_task(self._source.drive(self, mode, level))
        elif mode == "concurrency":
            new = [slot for slot in range(round(level)) if slot not in self._workers]
            for k, slot in enumerate(new):
                delay_ns = int(k * self._lifetime_ns / len(new))
                self._workers[slot] = asyncio.create_task(self._closed_worker(slot, delay_ns))
        elif level > 0:
            self._generator = asyncio.create_task(self._open_loop(level))

    def pause(self) -> None:
        """Stop sending new requests; in-flight ones finish."""
        self.paused = True
        self._resumed.clear()

    def resume(self) -> None:
        """Send again at the current level."""
        self.paused = False
        self._resumed.set()

    def burst(self, count: int) -> None:
        """Send `count` requests at once, on top of the current load."""
        for _ in range(count):
            self._spawn_request(None, burst=True)

    async def stop(self, *, cancel: bool, drain_timeout_s: float) -> None:
        """Send nothing more; abort in-flight requests (`cancel`) or wait for them to finish."""
        self.stopping = True
        self._stopped.set()
        self._resumed.set()
        if self._generator is not None:
            self._generator.cancel()
        if cancel:
            self._client.abort_all()
        pending = [*self._workers.values(), *self._requests]
        if pending:
            _, late = await asyncio.wait(pending, timeout=drain_timeout_s)
            if late:
                self._client.abort_all()
                await asyncio.wait(late, timeout=5.0)
        if self._requests:  # the counting of requests that ended meanwhile (their records)
            await asyncio.wait(set(self._requests), timeout=COUNTING_DRAIN_S)

    # the loops -------------------------------------------------------------------------------
    async def _closed_worker(self, slot: int, delay_ns: int = 0) -> None:
        backoff_s = 0.0
        try:
            await self.wait(delay_ns)  # its place in the spread of new users (`set_load`)
            while (
                not self.stopping
                and not self.exhausted
                and self.mode == "concurrency"
                and slot < round(self.level)
            ):
                if self.paused:
                    await self._resumed.wait()
                    continue
                if await self._one_request(None) != REASON_CONNECT:
                    backoff_s = 0.0
                    continue
                first_s, longest_s = CONNECT_BACKOFF_S
                backoff_s = min(backoff_s * 2, longest_s) if backoff_s else first_s
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopped.wait(), backoff_s)
        finally:
            del self._workers[slot]

    async def _open_loop(self, rate_per_s: float) -> None:
        step = self.step_index  # the step this schedule is for (set_load set it first)
        next_ns = time.perf_counter_ns()
        due = False
        """An arrival is scheduled at next_ns and not sent yet."""
        try:
            while not self.stopping and not self.exhausted:
                if self.paused:
                    await self._resumed.wait()
                    next_ns = time.perf_counter_ns()
                    continue
                next_ns += self._arrivals.gap_ns(rate_per_s)
                due = True
                delay_ns = next_ns - time.perf_counter_ns()
                if delay_ns > 0:
                    await asyncio.sleep(delay_ns / 1e9)
                while self.in_flight >= self._max_in_flight and not self.stopping:
                    self._slot_freed.clear()
                    await self._slot_freed.wait()
                if not self.stopping:
                    self._spawn_request(next_ns)
                due = False
                # Let the request take its slot (`in_flight` counts it once it runs): behind
                # schedule, arrivals come with no wait between them and would overrun the cap.
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            if due and not self.stopping:
                dropped = self._overdue(next_ns, rate_per_s)
                self.arrivals_dropped += dropped
                if dropped:
                    self.arrivals_dropped_by_step[step] += dropped
            raise

    def _overdue(self, next_ns: int, rate_per_s: float) -> int:
        """Arrivals of the schedule from `next_ns` due by now (a level change drops them)."""
        now, count = time.perf_counter_ns(), 0
        while next_ns <= now and count < 1_000_000:
            count += 1
            next_ns += self._arrivals.gap_ns(rate_per_s)
        return count

    def _spawn_request(self, queued_ns: int | None, *, burst: bool = False) -> None:
        task = asyncio.create_task(self._one_request(queued_ns, burst=burst))
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    # for driven sources (engine.driven) -----------------------------------------------------
    def spawn(self, work: Coroutine[object, None, None]) -> None:
        """Run a driver's long-lived work (a conversation); `stop` waits for it."""
        task: asyncio.Task[None] = asyncio.create_task(work)
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    async def wait(self, delay_ns: int) -> bool:
        """Sleep (a think time, a trace gap) unless the run stops first; a pause waits too."""
        if delay_ns > 0 and not self.stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), delay_ns / 1e9)
        if self.paused and not self.stopping:
            await self._resumed.wait()
        return not self.stopping

    def gap_ns(self, rate_per_s: float) -> int:
        """The next gap of the run's arrival process (a driver's open loop)."""
        return self._arrivals.gap_ns(rate_per_s)

    def reserve_id(self) -> int:
        """An id no request will get (unique across the engines that share a load)."""
        reserved = self._next_id
        self._next_id += self._id_step
        return reserved

    async def send(
        self,
        spec: RequestSpec,
        queued_ns: int | None = None,
        *,
        conversation_id: int | None = None,
        turn: int | None = None,
        keep_text: bool = False,
    ) -> RequestRecord:
        """Send a driver's request through the controller's own path; its record comes back.

        The record handed on is the final one (events counted); the driver gets it as the
        stream ended, so its next turn never waits for the counting.
        """
        sent = await self._send(spec, queued_ns, keep_text=keep_text)
        assert sent is not None  # a given spec is always sent
        record, counting = sent
        if conversation_id is not None:
            record = replace(record, conversation_id=conversation_id, turn=turn)
        self._hand_on(record, counting, conversation=(conversation_id, turn))
        return record

    async def _one_request(self, queued_ns: int | None, *, burst: bool = False) -> str | None:
        """Send one request and hand its record on; returns its failure reason."""
        sent = await self._send(None, queued_ns)
        if sent is None:
            return None
        record, counting = sent
        if record.ok and not burst:
            self._lifetime_ns = _smoothed(self._lifetime_ns, record.end_ns - record.sent_ns)
        self._hand_on(record, counting, burst=burst)
        return record.error

    def _hand_on(
        self,
        record: RequestRecord,
        counting: Coroutine[None, None, RequestRecord] | None,
        *,
        burst: bool = False,
        conversation: tuple[int | None, int | None] = (None, None),
    ) -> None:
        """Hand the record on now, or once its events are counted (on a task of its own).

        The step stays open meanwhile: the session finishes a step only when every request sent
        in it has come back, so its figures always hold the counted stamps.
        """
        if counting is None:
            self._on_record(_handed(record, burst, conversation))
            return

        async def count() -> None:
            self._on_record(_handed(await counting, burst, conversation))

        task = asyncio.create_task(count())
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    async def _send(
        self, given: RequestSpec | None, queued_ns: int | None, *, keep_text: bool = False
    ) -> tuple[RequestRecord, Coroutine[None, None, RequestRecord] | None] | None:
        """Send one request (the source's next one unless given) and measure it.

        Returns the record and, when its events still need counting, the coroutine that counts
        them (see `StreamingClient.send_uncounted`). None: the source is exhausted, and nothing
        was sent.
        """
        request_id = self._next_id
        self._next_id += self._id_step
        step_index = self.step_index
        self.sent_by_step[step_index] += 1
        self.in_flight += 1
        requested = 0
        try:
            spec = given if given is not None else self._source.next(request_id)
            requested = spec.max_tokens
            return await self._client.send_uncounted(
                spec.prompt,
                spec.max_tokens,
                request_id=request_id,
                step_index=step_index,
                queued_ns=queued_ns,
                messages=spec.messages,
                extra_body=spec.extra_body,
                requested_input_tokens=spec.input_tokens,
                keep_text=keep_text,
            )
        except SourceExhausted:
            self.exhausted = True
            self.sent_by_step[step_index] -= 1
            return None
        except Exception as exc:  # noqa: BLE001 (a client bug must cost one record, not the run)
            now = time.perf_counter_ns()
            record = RequestRecord(
                request_id=request_id,
                step_index=step_index,
                sent_ns=now,
                end_ns=now,
                ok=False,
                requested_output_tokens=requested,
                error=REASON_CLIENT_ERROR,
                error_detail=f"{type(exc).__name__}: {exc}",
            )
            return record, None
        finally:
            self.in_flight -= 1
            self._slot_freed.set()


def _handed(
    record: RequestRecord, burst: bool, conversation: tuple[int | None, int | None]
) -> RequestRecord:
    """The record as it is handed on: marked a burst's or a conversation's, without its text."""
    conversation_id, turn = conversation
    if burst:
        record = replace(record, burst=True)
    if conversation_id is not None:
        record = replace(record, conversation_id=conversation_id, turn=turn)
    if record.output_text is not None:
        record = replace(record, output_text=None)
    return record


_LIFETIME_WEIGHT = 0.25
"""Weight of the newest request in the smoothed lifetime (about the last 4-8 requests count)."""


def _smoothed(previous_ns: int, sample_ns: int) -> int:
    """The lifetime after one more request (the first sets it)."""
    if previous_ns <= 0:
        return max(sample_ns, 0)
    return int(previous_ns + _LIFETIME_WEIGHT * (sample_ns - previous_ns))
