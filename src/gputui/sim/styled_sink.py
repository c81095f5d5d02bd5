"""The simulator's styled streams: reasoning, tool calls, several tokens per event, spec decoding.

Contract: a `StyledStreamSink` is a `StreamSink` (same headers, role chunk, finish, usage chunk,
`[DONE]` and truth) whose events follow a `stream_style.StreamStyle`, in vLLM's shape:
`delta.reasoning` or `delta.reasoning_content` for thinking, `delta.tool_calls[0].function` for
tool calls (the first names the call), and a running `usage` on every event with
`continuous_usage_stats`. Tokens the profile produces are held until an event is due (K per event,
or one event per `emit_tokens(..., one_event=True)`: a speculative-decoding step); each event is
its own socket write, stamped into the truth: one ITL gap for its first token and 0 for the others
(they were written together), so the server's mean ITL is the true per-token mean.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

from gputui.sim.sinks import FINISH_LENGTH, TOKEN_TEXTS, StreamSink, http_chunk
from gputui.sim.stream_style import StreamStyle
from gputui.sim.truth import TruthRecorder

TOOL_NAME: Final = "sim_lookup"


class StyledStreamSink(StreamSink):
    """Server-sent events shaped by a `StreamStyle` (see the module docstring)."""

    __slots__ = (
        "_events",
        "_generated",
        "_group",
        "_reasoning_key",
        "_style",
        "_tool_named",
    )

    def __init__(
        self,
        transport: asyncio.Transport,
        truth: TruthRecorder,
        on_done: Callable[[], None],
        *,
        style: StreamStyle,
        request_id: int,
        chat: bool,
        model: str,
        prompt_tokens: int,
        max_tokens: int,
        arrival_ns: int,
        include_usage: bool,
        keep_alive: bool,
        continuous_usage: bool = False,
    ) -> None:
        super().__init__(
            transport,
            truth,
            on_done,
            request_id=request_id,
            chat=chat,
            model=model,
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
            arrival_ns=arrival_ns,
            include_usage=include_usage,
            keep_alive=keep_alive,
            continuous_usage=continuous_usage,
        )
        self._style = style
        self._group = style.tokens_per_event
        self._reasoning_budget = style.reasoning_tokens(max_tokens) if chat else 0
        self._reasoning_key = style.reasoning_field.encode()
        self._generated = 0
        """Tokens the profile has produced, sent or held for the next event."""
        self._events = 0
        self._tool_named = False

    def emit_tokens(
        self,
        count: int = 1,
        finish_reason: str | None = None,
        *,
        one_write: bool = False,
        one_event: bool = False,
    ) -> None:
        """Hold `count` more tokens; write the events that are due (all, when the stream ends)."""
        if not self._closed:
            self._emit_styled(count, finish_reason, one_event=one_event, one_write=one_write)

    def finish(self, finish_reason: str) -> None:
        """End the response: held tokens go out first, the last event carrying the reason."""
        if self._closed:
            return
        if self._generated > self._emitted:
            self._emit_styled(0, finish_reason, one_event=False)
            return
        super().finish(finish_reason)

    def events_written(self) -> int:
        """Token events written so far (a split at the end of the thinking counts two)."""
        return self._events

    def _emit_styled(
        self, count: int, finish_reason: str | None, *, one_event: bool, one_write: bool = False
    ) -> None:
        """Hold tokens until an event is due, then write it (see the module docstring)."""
        generated = min(self._generated + count, self._max_tokens)
        self._generated = generated
        if generated >= self._max_tokens and finish_reason is None:
            finish_reason = FINISH_LENGTH
        held = generated - self._emitted
        sizes: list[int] = []
        if one_event or finish_reason is not None:
            full, rest = divmod(held, self._group) if not one_event else (0, held)
            sizes = [self._group] * full + ([rest] if rest else [])
        else:
            sizes = [self._group] * (held // self._group)
        if not sizes:
            return
        # One write per event, as vLLM does (`one_write`: all of them in one, for benchmarks).
        pending: list[bytes] = []
        write = self._transport.write
        for i, size in enumerate(sizes):
            parts = [self._role_chunk()] if self._emitted == 0 and self.chat else []
            parts.extend(self._events_of(size, finish_reason if i == len(sizes) - 1 else None))
            now = time.perf_counter_ns()
            if one_write:
                pending.extend(parts)
            else:
                write(parts[0] if len(parts) == 1 else b"".join(parts))
            self._stamp(now, size)
        if pending:
            write(b"".join(pending))
        if finish_reason is not None:
            self._end()

    def _events_of(self, size: int, finish_reason: str | None) -> list[bytes]:
        """`size` tokens as events, split where the reasoning ends (one event per kind)."""
        out: list[bytes] = []
        while size:
            thinking = self._reasoning_budget - self._reasoning_sent
            n = min(size, thinking) if thinking > 0 else size
            size -= n
            out.append(
                self._event(n, reasoning=thinking > 0, finish=None if size else finish_reason)
            )
        return out

    def _event(self, n: int, *, reasoning: bool, finish: str | None) -> bytes:
        """One event of `n` tokens, as bytes (the sim's token texts need no JSON escaping)."""
        k = self._emitted
        text = b"".join([TOKEN_TEXTS[(k + i) % 1000] for i in range(n)])
        self._emitted = emitted = k + n
        self._events += 1
        if reasoning:
            self._reasoning_sent += n
        if not self.chat:
            body = b'"text":"%s","logprobs":null' % text
        elif reasoning:
            body = b'"delta":{"%s":"%s"},"logprobs":null' % (self._reasoning_key, text)
        elif self._style.tool_calls:
            named = b""
            if not self._tool_named:
                self._tool_named = True
                named = b'"id":"call_%08x","type":"function",' % self.request_id
                text = b'"name":"%s","arguments":"%s"' % (TOOL_NAME.encode(), text)
            else:
                text = b'"arguments":"%s"' % text
            body = b'"delta":{"tool_calls":[{"index":0,%s"function":{%s}}]},"logprobs":null' % (
                named,
                text,
            )
        else:
            body = b'"delta":{"content":"%s"},"logprobs":null' % text
        reason = b"null" if finish is None else b'"%s"' % finish.encode()
        if self._continuous:
            usage = self._running_usage(emitted)
        else:
            usage = b"" if self.chat else b',"usage":null'
        # -1: "the write about to happen"; `_stamp` puts that write's time in.
        if reasoning and self._first_reasoning_ns is None:
            self._first_reasoning_ns = -1
        elif not reasoning and self._first_answer_ns is None:
            self._first_answer_ns = -1
        return http_chunk(
            b'%s%s,"finish_reason":%s}]%s}\n\n' % (self._event_head, body, reason, usage)
        )

    def _stamp(self, now: int, tokens: int) -> None:
        """Truth for one write of `tokens` tokens: one gap for its first token, 0 for the rest."""
        truth = self._truth
        if self._first_ns is None:
            self._first_ns = now
            truth.ttft_ns.append(now - self._arrival_ns)
        else:
            truth.itl_ns.append(now - self._last_ns)
        truth.itl_ns.extend([0] * (tokens - 1))
        truth.tokens += tokens
        self._last_ns = now
        if self._first_reasoning_ns == -1:
            self._first_reasoning_ns = now
        if self._first_answer_ns == -1:
            self._first_answer_ns = now
