"""The simulator's HTTP/1.1 server: an OpenAI-compatible API in front of a `Profile`.

Contract: one `asyncio.Protocol` per connection (`http_connection.HttpConnection`), parsed by
llhttp; keep-alive, one connection serving many sequential requests (pipelined ones wait their
turn). A request's arrival is stamped with `perf_counter_ns()` in `on_message_begin`, i.e. when its
first byte is parsed, and every later timing is measured from that stamp. Completion requests
become a `SimRequest` and a `TokenSink` (see `sinks.py`) handed to the profile, which decides when
tokens are written; everything else is answered at once. A client that disconnects mid-response is
counted as cancelled and its profile work is released.

Endpoints: `POST /v1/completions`, `POST /v1/chat/completions`, `POST /v1/responses` and
`POST /v1/messages` (each scheduled as a chat request, answered in the Responses API's events,
`responses_sink.py`, or Anthropic's Messages events, `messages_sink.py`), `GET /v1/models`,
`GET /health`, `GET /version`, `POST /tokenize` (vLLM's shape), `GET /metrics` (the profile's
Prometheus text), `GET /sim/stats`, `GET /sim/requests` (per-request truth) and
`POST /sim/reset` (see `truth.py`; the stats carry the fault tally under `faults`),
`GET /sim/latency` (the gpu profile's own per-request queue/prefill/decode record, `latency.py`).
A profile's optional `stream_style` attribute (`stream_style.py`) shapes every stream:
reasoning, tool calls, tokens per event. Errors are OpenAI-style JSON (400, 404, 405, 500). With
a `NetworkDelay` every connection's transport is wrapped so that all its responses leave late
(`netdelay.py`).

Faults (see `faults.py`): every valid completion request draws one from the server's
`FaultInjector`, in the order requests are handled; an HTTP fault is answered here, a mid-stream
fault wraps the request's sink in a `FaultySink`, and `slow_start` hands the request to the profile
late. Requests without a fault take exactly the path they take without `--faults`.

Request rules (`request_rules.py`): any model name is accepted and answered with the served
name; `prompt` may be a string, a list of strings (billed as one prompt: their tokens are summed)
or token ids; chat `messages` are billed as the tokens of their concatenated text contents (no
chat template); `max_tokens` (chat: also `max_completion_tokens`) defaults to 16;
`stream_options` present means usage is included unless `include_usage` is false (vLLM's
default), and `continuous_usage_stats: true` puts the running usage on every event.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Callable
from functools import partial
from typing import Final, cast

from gputui import __version__
from gputui.jsontypes import JsonObject, JsonOutObject
from gputui.sim.faults import (
    HTTP_FAULTS,
    SLOW_START,
    STREAM_FAULTS,
    FaultInjector,
    FaultSpec,
    FaultySink,
    http_fault_response,
)
from gputui.sim.http_connection import HttpConnection, ParsedRequest
from gputui.sim.http_responses import error_response, http_response, json_response
from gputui.sim.messages_sink import messages_as_chat, messages_sink
from gputui.sim.netdelay import DELAY_HEADER, DelayedTransport, NetworkDelay
from gputui.sim.prefix_cache import block_hashes
from gputui.sim.profile import Profile, SimRequest
from gputui.sim.request_rules import (
    RequestError,
    json_object,
    output_lengths,
    prompt_token_count,
)
from gputui.sim.responses_sink import responses_as_chat, responses_sink
from gputui.sim.sinks import BufferedSink, SinkCommon, StreamSink
from gputui.sim.stream_style import StreamStyle
from gputui.sim.styled_sink import StyledStreamSink
from gputui.sim.truth import TruthRecorder

DEFAULT_MODEL_NAME: Final = "sim-model"
DEFAULT_MAX_MODEL_LEN: Final = 32768
_COMPLETION_PATHS: Final = {
    "/v1/completions": "completions",
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
}
"""Request path -> its wire format (all but completions are scheduled as chat)."""


class SimServer:
    """Shared state of all connections: the profile, the truth recorder and the routes."""

    def __init__(
        self,
        profile: Profile,
        *,
        served_model_name: str = DEFAULT_MODEL_NAME,
        max_model_len: int = DEFAULT_MAX_MODEL_LEN,
        faults: FaultSpec | None = None,
        network: NetworkDelay | None = None,
    ) -> None:
        self.profile = profile
        self.network = network if network is not None and network.active else None
        """`--network-delay-ms`: every response leaves late (see netdelay.py)."""
        self.network_rng = random.Random(network.seed if network is not None else 0)
        self.served_model_name = served_model_name
        self.max_model_len = max_model_len
        self.truth = TruthRecorder()
        self.stream_style: StreamStyle = getattr(profile, "stream_style", None) or StreamStyle()
        self.faults = FaultInjector(faults or FaultSpec())
        self.on_first_completion: Callable[[], None] | None = None
        """Called once, when the first valid completion request arrives (`--die-after`)."""
        self.connections: set[HttpConnection] = set()
        self._next_request_id = 0
        self._created = int(time.time())  # noqa: TID251 - the wire format's `created` is wall clock
        self._simple: dict[str, tuple[str, Callable[[bytes, bool], bytes]]] = {
            "/v1/models": ("GET", self._models),
            "/health": ("GET", _no_body),  # answered by `_health`, which needs the connection
            "/version": ("GET", self._version),
            "/tokenize": ("POST", self._tokenize),
            "/metrics": ("GET", self._metrics),
            "/sim/stats": ("GET", self._stats),
            "/sim/requests": ("GET", self._requests),
            "/sim/reset": ("POST", self._reset),
            "/reset_prefix_cache": ("POST", self._reset_prefix_cache),
            "/sim/latency": ("GET", self._latency),
        }

    def protocol_factory(self) -> HttpConnection:
        """For `loop.create_server`."""
        return HttpConnection(self)

    def close_connections(self) -> None:
        """Drop every open connection (shutdown)."""
        for conn in list(self.connections):
            conn.close()

    def handle(self, conn: HttpConnection, request: ParsedRequest) -> None:
        """Answer `request` on `conn`; completion requests finish later, through their sink."""
        keep_alive = request.keep_alive
        path = request.path
        api = _COMPLETION_PATHS.get(path)
        if api is not None:
            if request.method != "POST":
                conn.respond(_not_allowed("POST", keep_alive))
                return
            try:
                self._start_completion(conn, request, api)
            except RequestError as exc:
                conn.respond(error_response(400, str(exc), keep_alive=keep_alive))
            return
        route = self._simple.get(path)
        if route is None:
            conn.respond(error_response(404, f"Not Found: {path}", keep_alive=keep_alive))
        elif request.method != route[0]:
            conn.respond(_not_allowed(route[0], keep_alive))
        elif path == "/health":
            conn.respond(_health(conn, keep_alive))
        else:
            try:
                conn.respond(route[1](request.body, keep_alive))
            except RequestError as exc:
                conn.respond(error_response(400, str(exc), keep_alive=keep_alive))

    def _start_completion(self, conn: HttpConnection, request: ParsedRequest, api: str) -> None:
        body = json_object(request.body)
        chat = api != "completions"
        if api == "responses":
            as_chat = responses_as_chat(body)
            if as_chat is None:
                raise RequestError("'input' must be a non-empty string or list of messages")
            body = as_chat
        elif api == "messages":
            as_chat = messages_as_chat(body)
            if as_chat is None:
                raise RequestError("'messages' must be a non-empty list of messages")
            body = as_chat
        prompt_tokens, prompt_ids = prompt_token_count(body, chat=chat)
        max_tokens, min_tokens = output_lengths(
            body, prompt_tokens, chat=chat, max_model_len=self.max_model_len
        )
        if self.on_first_completion is not None:
            first, self.on_first_completion = self.on_first_completion, None
            first()
        fault = self.faults.draw()
        if fault in HTTP_FAULTS:
            conn.respond(http_fault_response(fault, keep_alive=request.keep_alive))
            return
        self._next_request_id += 1
        sim_request = SimRequest(
            request_id=self._next_request_id,
            arrival_ns=request.arrival_ns,
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
            min_tokens=min(min_tokens, max_tokens),
            ignore_eos=bool(body.get("ignore_eos", False)),
            chat=chat,
            model=str(body.get("model") or self.served_model_name),
            block_hashes=block_hashes(prompt_ids),
        )
        common: SinkCommon = {
            "request_id": sim_request.request_id,
            "chat": chat,
            "model": self.served_model_name,
            "prompt_tokens": prompt_tokens,
            "max_tokens": max_tokens,
            "keep_alive": request.keep_alive,
        }
        sink: StreamSink | BufferedSink | FaultySink
        sink = self._sink(conn, request, body, common, api=api)
        if fault in STREAM_FAULTS:
            sink = FaultySink(sink, fault, max_tokens, self._release)
        conn.active = sink
        self.truth.requests_started += 1
        if fault == SLOW_START:
            delay_s = self.faults.spec.slow_start_ms / 1e3
            late = dataclasses.replace(
                sim_request, arrival_ns=request.arrival_ns + round(delay_s * 1e9)
            )
            asyncio.get_running_loop().call_later(delay_s, partial(self._start_late, late, sink))
        else:
            self.profile.start(sim_request, sink)

    def _sink(
        self,
        conn: HttpConnection,
        request: ParsedRequest,
        body: JsonObject,
        common: SinkCommon,
        *,
        api: str,
    ) -> StreamSink | BufferedSink:
        """Where the request's tokens go: an API's own stream, an SSE stream, or one JSON body."""
        stream_options = body.get("stream_options")
        include_usage = isinstance(stream_options, dict) and bool(
            stream_options.get("include_usage", True)
        )
        continuous_usage = include_usage and bool(
            cast(JsonObject, stream_options).get("continuous_usage_stats", False)
        )
        sink: StreamSink | BufferedSink
        if api == "messages":
            sink = messages_sink(
                conn.transport,
                self.truth,
                conn.response_done,
                stream=bool(body.get("stream")),
                arrival_ns=request.arrival_ns,
                common=common,
                tokens_per_event=self.stream_style.tokens_per_event,
            )
        elif api == "responses":
            sink = responses_sink(
                conn.transport,
                self.truth,
                conn.response_done,
                stream=bool(body.get("stream")),
                arrival_ns=request.arrival_ns,
                common=common,
            )
        elif body.get("stream"):
            if self.stream_style.plain:
                sink = StreamSink(
                    conn.transport,
                    self.truth,
                    conn.response_done,
                    arrival_ns=request.arrival_ns,
                    include_usage=include_usage,
                    continuous_usage=continuous_usage,
                    **common,
                )
            else:
                sink = StyledStreamSink(
                    conn.transport,
                    self.truth,
                    conn.response_done,
                    style=self.stream_style,
                    arrival_ns=request.arrival_ns,
                    include_usage=include_usage,
                    continuous_usage=continuous_usage,
                    **common,
                )
        else:
            sink = BufferedSink(conn.transport, self.truth, conn.response_done, **common)
        return sink

    def _start_late(
        self, request: SimRequest, sink: StreamSink | BufferedSink | FaultySink
    ) -> None:
        """A `slow_start` request reaches the profile (its arrival moved by the delay)."""
        if not sink.closed:
            self.profile.start(request, sink)

    def _release(self, request_id: int) -> None:
        """A fault struck: free the request's profile work, once the profile's callback is over."""
        asyncio.get_running_loop().call_soon(self.profile.cancel, request_id)

    def cancelled(self, sink: StreamSink | BufferedSink | FaultySink) -> None:
        """A client went away before its response was complete."""
        sink.abort()
        self.truth.requests_cancelled += 1
        self.profile.cancel(sink.request_id)

    def _models(self, _body: bytes, keep_alive: bool) -> bytes:
        name = self.served_model_name
        model: JsonObject = {
            "id": name,
            "object": "model",
            "created": self._created,
            "owned_by": "gputui-sim",
            "root": name,
            "parent": None,
            "max_model_len": self.max_model_len,
            "permission": [],
        }
        return json_response(200, {"object": "list", "data": [model]}, keep_alive=keep_alive)

    def _version(self, _body: bytes, keep_alive: bool) -> bytes:
        """VLLM's /version, with gputui's own (the simulator is part of it)."""
        return json_response(200, {"version": __version__}, keep_alive=keep_alive)

    def _tokenize(self, body: bytes, keep_alive: bool) -> bytes:
        parsed = json_object(body)
        _, ids = prompt_token_count(parsed, chat="messages" in parsed)
        reply: JsonOutObject = {
            "count": len(ids),
            "max_model_len": self.max_model_len,
            "tokens": ids,
        }
        return json_response(200, reply, keep_alive=keep_alive)

    def _metrics(self, _body: bytes, keep_alive: bool) -> bytes:
        text = self.profile.prometheus_text().encode()
        kind = b"text/plain; version=0.0.4"
        return http_response(200, text, kind, keep_alive=keep_alive)

    def _stats(self, _body: bytes, keep_alive: bool) -> bytes:
        stats = {**self.truth.snapshot(), "faults": self.faults.snapshot()}
        return json_response(200, stats, keep_alive=keep_alive)

    def _requests(self, _body: bytes, keep_alive: bool) -> bytes:
        return json_response(200, self.truth.requests_json(), keep_alive=keep_alive)

    def _latency(self, _body: bytes, keep_alive: bool) -> bytes:
        """The profile's own per-request phase record (gpu profile), for histogram tests."""
        records = getattr(self.profile, "latency_records", None)
        reply = {"requests": records() if records is not None else []}
        return json_response(200, reply, keep_alive=keep_alive)

    def _reset_prefix_cache(self, _body: bytes, keep_alive: bool) -> bytes:
        """VLLM's endpoint: 200 once the cache is empty; 404 without prefix caching."""
        reset = getattr(self.profile, "reset_prefix_cache", None)
        if reset is None:
            return error_response(404, "Not Found: /reset_prefix_cache", keep_alive=keep_alive)
        if not reset():
            return error_response(409, "blocks still in use", keep_alive=keep_alive)
        return json_response(200, {"reset": True}, keep_alive=keep_alive)

    def _reset(self, _body: bytes, keep_alive: bool) -> bytes:
        self.truth.reset()
        self.faults.reset()
        return json_response(200, {"reset": True}, keep_alive=keep_alive)


def _not_allowed(allowed: str, keep_alive: bool) -> bytes:
    return error_response(
        405,
        "Method Not Allowed",
        keep_alive=keep_alive,
        extra_headers=b"allow: %s\r\n" % allowed.encode(),
    )


def _no_body(_body: bytes, keep_alive: bool) -> bytes:
    return http_response(200, b"", b"application/json", keep_alive=keep_alive)


def _health(conn: HttpConnection, keep_alive: bool) -> bytes:
    """`GET /health`; a far-away client's answer says how long it is held (netdelay.py)."""
    transport = conn.transport
    if not isinstance(transport, DelayedTransport):
        return http_response(200, b"", b"application/json", keep_alive=keep_alive)
    held = b"%s: %.3f\r\n" % (DELAY_HEADER.encode(), transport.draw_ms())
    return http_response(200, b"", b"application/json", keep_alive=keep_alive, extra_headers=held)
