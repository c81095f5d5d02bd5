"""The OpenAI-compatible streaming client: one coroutine per request, one RequestRecord out.

Contract: `StreamingClient.send` never raises for anything the server or the network does; every
outcome becomes a record with a failure reason. `sent_ns` is stamped after a connection is in hand
and just before the request is written, so connection setup is reported apart (`connect_ns`) and
never hidden in TTFT. A watchdog (one task for all requests) enforces the request and stall
timeouts, so the hot path arms no timer per request or per token.

Timeouts (`Timeouts`, the `gputui run` flags of the same names): `connect_s` bounds opening a
connection (reason `connect`); `request_s` bounds a whole request from sending to its last byte
(`timeout`), and is the only bound before the first body byte, because a long wait for the first
token is queueing, which a load test must measure rather than cut short; `stall_s` bounds the
silence between body bytes once the body has started (`stall`). The watchdog looks every 0.25 s, so
a timeout fires up to that much late.

Tokens per event (see engine.event_tokens): with `continuous_usage` the request asks for
`stream_options.continuous_usage_stats` (servers that honour it: vLLM, the simulator); with an
`event_counter` the texts of a finished request's events are counted when its usage total says
that some event carried more than one token; without one (or when it fails) that usage total is
spread evenly over the events (`usage_spread`). None of these runs per event. `send` waits for
that counting; `send_uncounted` hands it back as a coroutine, which the load controller runs on
its own task, so a closed-loop user's next request never waits for /tokenize.

The request's bytes are built in `engine.client_config` (`ClientConfig` and `Timeouts` are
re-exported here), and a finished exchange is judged into its record in `engine.request_outcome`.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import replace
from typing import Final

from gputui.engine.client_config import (
    ClientConfig,
    Timeouts,
    host_header,
    request_body,
    request_head,
)
from gputui.engine.event_tokens import (
    METHOD_TOKENIZER,
    METHOD_USAGE_SPREAD,
    EventCounter,
    reconcile,
    spread_usage,
)
from gputui.engine.http import ConnectionPool, Exchange
from gputui.engine.records import (
    REASON_CANCELLED,
    REASON_CONNECT,
    REASON_STALL,
    REASON_TIMEOUT,
    RequestRecord,
)
from gputui.engine.request_outcome import (
    RecordCommon,
    judge_exchange,
    needs_counting,
    with_event_counts,
)
from gputui.engine.sse import StreamReader

__all__ = ["ClientConfig", "StreamingClient", "Timeouts"]

_WATCHDOG_PERIOD_S: Final = 0.25


class StreamingClient:
    """Sends streaming completion requests over a pool of kept-alive connections."""

    def __init__(self, config: ClientConfig) -> None:
        self._config = config
        target = config.target
        ssl_context = ssl.create_default_context() if target.scheme == "https" else None
        self._pool = ConnectionPool(
            target.host,
            target.port,
            ssl_context=ssl_context,
            connect_timeout_s=config.timeouts.connect_s,
        )
        self._head = request_head(config)
        self._active: dict[Exchange, int] = {}
        self._streaming: dict[Exchange, StreamReader] = {}
        """The readers of the requests in flight, whose tokens `tokens_streamed` counts live."""
        self._tokens_done = 0
        """Tokens of the requests that ended (their usage total where it exceeds their events)."""
        self._watchdog: asyncio.Task[None] | None = None
        self._counter: EventCounter | None = None
        if config.event_counter is not None:
            counter_pool = (
                ConnectionPool(
                    target.host,
                    target.port,
                    ssl_context=ssl_context,
                    connect_timeout_s=config.timeouts.connect_s,
                )
                if config.event_counter.kind == "server"
                else None
            )
            path = target.root_prefix + config.event_counter.tokenize_path
            spec = replace(config.event_counter, tokenize_path=path)
            self._counter = EventCounter(spec, counter_pool, host_header(target), config.model)

    def close_idle(self) -> None:
        """Close the idle pooled connections: the next requests connect afresh."""
        self._pool.close()

    @property
    def tokens_streamed(self) -> int:
        """Tokens received so far by every request, those still streaming included (issue 31).

        A request in flight counts its token events; one that ended, its usage total when that
        is more (several tokens per event), so the count only rises and a live tok/s read from
        it needs no request to finish.
        """
        return self._tokens_done + sum(len(r.token_ns) for r in self._streaming.values())

    @property
    def connections_opened(self) -> int:
        """How many TCP connections the pool has opened so far."""
        return self._pool.opened

    def build_body(
        self,
        prompt: str,
        max_tokens: int,
        *,
        messages: Sequence[Mapping[str, object]] | None = None,
        extra_body: Mapping[str, object] | None = None,
    ) -> bytes:
        """The JSON request body (the run's extra body, then the request's, override defaults)."""
        return request_body(self._config, prompt, max_tokens, messages, extra_body)

    async def send(
        self,
        prompt: str,
        max_tokens: int,
        *,
        request_id: int,
        step_index: int,
        queued_ns: int | None = None,
        messages: Sequence[Mapping[str, object]] | None = None,
        extra_body: Mapping[str, object] | None = None,
        requested_input_tokens: int | None = None,
        keep_text: bool = False,
    ) -> RequestRecord:
        """Send one request and measure it, its events counted; never raises except on cancel.

        `keep_text` keeps the answer in `output_text` (a conversation re-sends it next turn).
        """
        record, counting = await self.send_uncounted(
            prompt,
            max_tokens,
            request_id=request_id,
            step_index=step_index,
            queued_ns=queued_ns,
            messages=messages,
            extra_body=extra_body,
            requested_input_tokens=requested_input_tokens,
            keep_text=keep_text,
        )
        return record if counting is None else await counting

    async def send_uncounted(
        self,
        prompt: str,
        max_tokens: int,
        *,
        request_id: int,
        step_index: int,
        queued_ns: int | None = None,
        messages: Sequence[Mapping[str, object]] | None = None,
        extra_body: Mapping[str, object] | None = None,
        requested_input_tokens: int | None = None,
        keep_text: bool = False,
    ) -> tuple[RequestRecord, Coroutine[None, None, RequestRecord] | None]:
        """`send`, with the counting of its events (if any) left to the caller.

        Returns the record as the stream ended and, when its events still need counting by the
        server's /tokenize (or a tokenizer), the coroutine that counts them and returns the final
        record. The load controller awaits it on its own task, so a closed-loop user sends its
        next request at once instead of waiting for /tokenize (issue 30); the record is handed
        on, and its step's figures computed, only once it is final.
        """
        self._ensure_watchdog()
        body = request_body(self._config, prompt, max_tokens, messages, extra_body)
        request = self._head + b"Content-Length: %d\r\n\r\n" % len(body) + body
        common: RecordCommon = {
            "request_id": request_id,
            "step_index": step_index,
            "requested_output_tokens": max_tokens,
            "queued_ns": queued_ns,
            "requested_input_tokens": requested_input_tokens,
        }
        for attempt in range(2):
            try:
                if attempt == 0:
                    connection, connect_ns, reused = await self._pool.acquire()
                else:
                    # Never a second pooled one: it may be stale too (llama-server closes every
                    # connection after a streamed response, yet announces keep-alive).
                    connection, connect_ns = await self._pool.open()
                    reused = False
            except (OSError, TimeoutError) as exc:
                now = time.perf_counter_ns()
                detail = str(exc) or type(exc).__name__
                return RequestRecord(
                    sent_ns=now,
                    end_ns=now,
                    ok=False,
                    error=REASON_CONNECT,
                    error_detail=f"cannot connect to {self._config.target.base_url}: {detail}",
                    **common,
                ), None
            reader = StreamReader(keep_texts=self._counter is not None or keep_text)
            sent_ns = time.perf_counter_ns()
            exchange = connection.start(request, reader.feed)
            self._active[exchange] = sent_ns
            self._streaming[exchange] = reader
            try:
                await exchange.done
            except asyncio.CancelledError:
                exchange.abort(REASON_CANCELLED, "the run stopped before the response ended")
                raise
            finally:
                del self._active[exchange]
                del self._streaming[exchange]
                self._tokens_done += len(reader.token_ns)
            if (
                reused
                and attempt == 0
                and exchange.error == "stream_broken"
                and not exchange.got_bytes
            ):
                continue  # a kept-alive connection the server had closed: retry on a new one
            self._pool.release(connection, reusable=exchange.keep_alive and not exchange.error)
            record = judge_exchange(
                exchange, reader, sent_ns, connect_ns, common, keep_text=keep_text
            )
            if record.tokens_from_usage and record.output_tokens > len(reader.token_ns):
                self._tokens_done += record.output_tokens - len(reader.token_ns)
            key = self._config.api_key
            if key and record.error_detail and key in record.error_detail:
                # A server that echoes the key in its error text must not put it in our records.
                record = replace(record, error_detail=record.error_detail.replace(key, "[API key]"))
            if not needs_counting(record):  # once per request: most streams need no counting
                return record, None
            if self._counter is None:
                return _spread(record, reader), None
            return record, self._count_events(record, reader)
        raise AssertionError("unreachable: the second attempt always returns")

    async def _count_events(self, record: RequestRecord, reader: StreamReader) -> RequestRecord:
        """Count the event texts of a finished request (once, at its end); else spread the usage.

        Never raises but on cancellation: a counter that fails leaves the usage spread.
        """
        assert self._counter is not None
        assert reader.texts is not None
        counts = await self._counter.count(reader.texts)
        if counts is None:
            return _spread(record, reader)
        return with_event_counts(
            record, reconcile(counts, record.output_tokens), METHOD_TOKENIZER, reader
        )

    def _ensure_watchdog(self) -> None:
        if self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        timeouts = self._config.timeouts
        request_ns = int(timeouts.request_s * 1e9)
        stall_ns = int(timeouts.stall_s * 1e9)
        while True:
            await asyncio.sleep(_WATCHDOG_PERIOD_S)
            now = time.perf_counter_ns()
            for exchange, sent_ns in list(self._active.items()):
                if now - sent_ns > request_ns:
                    exchange.abort(
                        REASON_TIMEOUT, f"no complete response in {timeouts.request_s:g} s"
                    )
                elif exchange.body_started and now - exchange.last_activity_ns > stall_ns:
                    exchange.abort(REASON_STALL, f"no bytes for {timeouts.stall_s:g} s mid-stream")

    def abort_all(self) -> None:
        """Abort every request in flight; each still yields a record (reason `cancelled`)."""
        for exchange in list(self._active):
            exchange.abort(REASON_CANCELLED, "the run stopped before the response ended")

    async def aclose(self) -> None:
        """Stop the watchdog and close idle connections."""
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        self._pool.close()
        if self._counter is not None:
            self._counter.close()


def _spread(record: RequestRecord, reader: StreamReader) -> RequestRecord:
    """Nothing could count the events: the usage total spread evenly over them."""
    spread = spread_usage(int(record.token_ns.size), record.output_tokens)
    return with_event_counts(record, spread, METHOD_USAGE_SPREAD, reader)
