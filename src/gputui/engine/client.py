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
spread evenly over the events (`usage_spread`). None of these runs per event.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, TypedDict

import numpy as np
import numpy.typing as npt
import orjson

from gputui import __version__
from gputui.engine.event_tokens import (
    METHOD_CONTINUOUS,
    METHOD_EVENTS,
    METHOD_TOKENIZER,
    METHOD_USAGE_SPREAD,
    EventCounter,
    EventCounterSpec,
    counts_from_running,
    reconcile,
    spread_usage,
)
from gputui.engine.http import ConnectionPool, Exchange
from gputui.engine.records import (
    REASON_CANCELLED,
    REASON_CONNECT,
    REASON_EMPTY_BODY,
    REASON_STALL,
    REASON_TIMEOUT,
    REASON_TRUNCATED,
    RequestRecord,
    http_reason,
)
from gputui.engine.sse import StreamReader, error_message
from gputui.engine.target import Endpoint, Target

_WATCHDOG_PERIOD_S: Final = 0.25


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Client timeouts; defaults suit LLM serving, where a long queue is a finding, not an error."""

    connect_s: float = 10.0
    """TCP (and TLS) connection setup; a server that takes longer is down or drowning."""
    request_s: float = 600.0
    """Whole request, from sending to the last byte: room for a long queue and a long output."""
    stall_s: float = 60.0
    """Longest silence between body bytes once the body has started (not before the first)."""


class _RecordCommon(TypedDict):
    """The fields every `RequestRecord` of one `send` shares, whatever its outcome."""

    request_id: int
    step_index: int
    requested_output_tokens: int
    queued_ns: int | None
    requested_input_tokens: int | None


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Everything the client needs to build requests (picklable: it crosses into the engine)."""

    target: Target
    model: str
    endpoint: Endpoint = "completions"
    api_key: str | None = field(default=None, repr=False)
    """Never logged, never saved: `repr=False` keeps it out of tracebacks and reprs."""
    extra_body: dict[str, object] = field(default_factory=dict)
    timeouts: Timeouts = Timeouts()
    include_usage: bool = True
    continuous_usage: bool = False
    """Ask for `stream_options.continuous_usage_stats` (a running usage on every event)."""
    event_counter: EventCounterSpec | None = None
    """Counts event texts when a request's usage total disagrees with its number of events."""


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
        host = target.host if target.port in (80, 443) else f"{target.host}:{target.port}"
        head = (
            f"POST {target.endpoint_path(config.endpoint)} HTTP/1.1\r\n"
            f"Host: {host}\r\n"
            f"User-Agent: gputui/{__version__}\r\n"
            "Accept: text/event-stream\r\n"
            "Content-Type: application/json\r\n"
        )
        if config.api_key:
            head += f"Authorization: Bearer {config.api_key}\r\n"
        self._head = head.encode("latin-1")
        self._active: dict[Exchange, int] = {}
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
            self._counter = EventCounter(spec, counter_pool, host, config.model)

    def close_idle(self) -> None:
        """Close the idle pooled connections: the next requests connect afresh."""
        self._pool.close()

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
        config = self._config
        if config.endpoint == "responses":
            return responses_body(config, prompt, max_tokens, messages, extra_body)
        body: dict[str, object] = {"model": config.model, "max_tokens": max_tokens, "stream": True}
        if config.endpoint == "chat":
            body["messages"] = list(messages) if messages else [{"role": "user", "content": prompt}]
        elif messages:
            body["prompt"] = "\n\n".join(str(m.get("content", "")) for m in messages)
        else:
            body["prompt"] = prompt
        if config.include_usage:
            body["stream_options"] = (
                {"include_usage": True, "continuous_usage_stats": True}
                if config.continuous_usage
                else {"include_usage": True}
            )
        body.update(config.extra_body)
        if extra_body:
            body.update(extra_body)
        return orjson.dumps(body)

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
        """Send one request and measure it; never raises except on task cancellation.

        `keep_text` keeps the answer in `output_text` (a conversation re-sends it next turn).
        """
        self._ensure_watchdog()
        body = self.build_body(prompt, max_tokens, messages=messages, extra_body=extra_body)
        request = self._head + b"Content-Length: %d\r\n\r\n" % len(body) + body
        common: _RecordCommon = {
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
                )
            reader = StreamReader(keep_texts=self._counter is not None or keep_text)
            sent_ns = time.perf_counter_ns()
            exchange = connection.start(request, reader.feed)
            self._active[exchange] = sent_ns
            try:
                await exchange.done
            except asyncio.CancelledError:
                exchange.abort(REASON_CANCELLED, "the run stopped before the response ended")
                raise
            finally:
                del self._active[exchange]
            if (
                reused
                and attempt == 0
                and exchange.error == "stream_broken"
                and not exchange.got_bytes
            ):
                continue  # a kept-alive connection the server had closed: retry on a new one
            self._pool.release(connection, reusable=exchange.keep_alive and not exchange.error)
            record = _record(exchange, reader, sent_ns, connect_ns, common, keep_text=keep_text)
            if needs_counting(record):  # once per request: most streams need no counting
                if self._counter is not None:
                    record = await self._count_events(record, reader)
                if needs_counting(record):  # nothing could count the events: spread the total
                    spread = spread_usage(int(record.token_ns.size), record.output_tokens)
                    record = with_event_counts(record, spread, METHOD_USAGE_SPREAD, reader)
            key = self._config.api_key
            if key and record.error_detail and key in record.error_detail:
                # A server that echoes the key in its error text must not put it in our records.
                record = replace(record, error_detail=record.error_detail.replace(key, "[API key]"))
            return record
        raise AssertionError("unreachable: the second attempt always returns")

    async def _count_events(self, record: RequestRecord, reader: StreamReader) -> RequestRecord:
        """Count the event texts of a finished request (off the hot path: once, at its end)."""
        assert self._counter is not None
        assert reader.texts is not None
        counts = await self._counter.count(reader.texts)
        if counts is None:
            return record
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


def responses_body(
    config: ClientConfig,
    prompt: str,
    max_tokens: int,
    messages: Sequence[Mapping[str, object]] | None,
    extra_body: Mapping[str, object] | None,
) -> bytes:
    """A /v1/responses request: `input` and `max_output_tokens`; usage always comes at the end.

    No `stream_options`: the Responses API has none (its final `response.completed` event carries
    the usage), so its tokens per event are counted from the event texts (`event_counter`).
    """
    body: dict[str, object] = {
        "model": config.model,
        "input": list(messages) if messages else prompt,
        "max_output_tokens": max_tokens,
        "stream": True,
    }
    body.update(config.extra_body)
    if extra_body:
        body.update(extra_body)
    return orjson.dumps(body)


def _record(
    exchange: Exchange,
    reader: StreamReader,
    sent_ns: int,
    connect_ns: int | None,
    common: _RecordCommon,
    *,
    keep_text: bool = False,
) -> RequestRecord:
    """Judge a finished exchange: ok, or failed with exactly one reason.

    The answer goes in `output_text` only with `keep_text`: texts kept for counting stay here.
    """
    end_ns = exchange.now_ns if exchange.error is None else time.perf_counter_ns()
    status = exchange.status_code
    error, detail = exchange.error, exchange.error_detail
    if error is None and status is not None and status >= 300:
        error, detail = http_reason(status), _http_error_detail(status, bytes(exchange.body))
    if error is None:
        reader.end_of_body(end_ns)
        if reader.error is not None:
            error, detail = reader.error, reader.error_detail
        elif reader.events == 0:
            error, detail = REASON_EMPTY_BODY, "200 with an empty body"
        elif reader.finish_reason is None:
            error = REASON_TRUNCATED
            detail = "[DONE] without a finish_reason" if reader.done else "stream ended unfinished"
    stamps = np.array(reader.token_ns, dtype=np.int64)
    from_usage = reader.output_tokens is not None
    record = RequestRecord(
        sent_ns=sent_ns,
        end_ns=end_ns,
        ok=error is None,
        first_token_ns=reader.first_token_ns,
        token_ns=stamps,
        output_tokens=reader.output_tokens if reader.output_tokens is not None else len(stamps),
        input_tokens=reader.input_tokens,
        tokens_from_usage=from_usage,
        connect_ns=connect_ns,
        status_code=status,
        error=error,
        error_detail=detail,
        finish_reason=reader.finish_reason,
        response_model=reader.model,
        cached_input_tokens=reader.cached_input_tokens,
        server_timings=reader.timings,
        first_answer_ns=reader.first_answer_ns,
        reasoning_tokens=len(reader.reasoning_events)
        if reader.reasoning_tokens is None
        else reader.reasoning_tokens,
        reasoning_from_usage=reader.reasoning_tokens is not None,
        output_text="".join(reader.texts) if keep_text and reader.texts is not None else None,
        **common,
    )
    counts = counts_from_running(reader.running, len(reader.token_ns))
    if counts is not None:
        return with_event_counts(record, counts, METHOD_CONTINUOUS, reader)
    return record


def needs_counting(record: RequestRecord) -> bool:
    """An ok request whose usage total says some event carried several tokens, not yet counted.

    One token more than events after a natural stop is the EOS token the server counted.
    """
    if not (
        record.ok
        and record.event_tokens_method == METHOD_EVENTS
        and record.tokens_from_usage
        and record.token_ns.size > 0
    ):
        return False
    extra = record.output_tokens - int(record.token_ns.size)
    return extra > 1 or (extra == 1 and record.finish_reason != "stop")


def with_event_counts(
    record: RequestRecord, counts: npt.NDArray[np.int32], method: str, reader: StreamReader
) -> RequestRecord:
    """The record with per-event token counts; events that carried no token are merged away.

    Thinking tokens are counted from the events (unless the usage gave them); all counts of 1 are
    kept as None, the same meaning at no cost.
    """
    stamps = record.token_ns
    reasoning = record.reasoning_tokens
    if not record.reasoning_from_usage and reader.reasoning_events:
        reasoning = int(counts[reader.reasoning_events].sum())
    empty = counts == 0
    if empty.any():
        stamps, counts = stamps[~empty], counts[~empty]
    event_tokens = None if (counts == 1).all() else counts
    return replace(
        record,
        token_ns=stamps,
        event_tokens=event_tokens,
        event_tokens_method=method,
        reasoning_tokens=reasoning,
    )


def _http_error_detail(status: int, body: bytes) -> str:
    """The server's own words for an HTTP error, on one line."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = " ".join(body.decode("utf-8", errors="replace").split())[:200]
        return f"HTTP {status}: {text}" if text else f"HTTP {status}"
    if isinstance(obj, dict):
        return f"HTTP {status}: {error_message(obj, limit=400)}"  # vLLM's run to ~340 chars
    return f"HTTP {status}"
