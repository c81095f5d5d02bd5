"""The simulator's answer to `stream: false`: one JSON response, written when the profile finishes.

Contract (see `profile.TokenSink`): `emit_tokens` only counts (capped at `max_tokens`, which
finishes with "length"); `finish` writes the whole completion or chat body, as vLLM shapes it,
with the same token texts a stream would have sent and its usage, in one write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gputui.jsontypes import JsonObject
from gputui.sim.http_responses import json_response
from gputui.sim.sink_base import FINISH_LENGTH, SinkBase, output_text, usage_counts
from gputui.sim.truth import TruthRecorder


class BufferedSink(SinkBase):
    """One JSON response for `stream: false`, written when the profile finishes."""

    __slots__ = ("_keep_alive",)

    def __init__(
        self,
        transport: asyncio.Transport,
        truth: TruthRecorder,
        on_done: Callable[[], None],
        *,
        request_id: int,
        chat: bool,
        model: str,
        prompt_tokens: int,
        max_tokens: int,
        keep_alive: bool,
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
        )
        self._keep_alive = keep_alive

    def emit_tokens(
        self,
        count: int = 1,
        finish_reason: str | None = None,
        *,
        one_write: bool = False,  # noqa: ARG002 (the whole response is one write anyway)
        one_event: bool = False,  # noqa: ARG002 (idem)
    ) -> None:
        """Count `count` more tokens; the text is generated at the end."""
        if self._closed:
            return
        emitted = min(self._emitted + count, self._max_tokens)
        self._truth.tokens += emitted - self._emitted
        self._emitted = emitted
        if finish_reason is not None:
            self.finish(finish_reason)
        elif emitted >= self._max_tokens:
            self.finish(FINISH_LENGTH)

    def finish(self, finish_reason: str) -> None:
        """Write the whole response."""
        if self._closed:
            return
        text = output_text(self._emitted)
        choice: JsonObject
        if self.chat:
            message: JsonObject = {"role": "assistant", "content": text, "tool_calls": []}
            choice = {"index": 0, "message": message, "logprobs": None}
        else:
            choice = {"index": 0, "text": text, "logprobs": None}
        choice.update(finish_reason=finish_reason, stop_reason=None)
        body = {
            "id": self._id,
            "object": "chat.completion" if self.chat else "text_completion",
            "created": self._created,
            "model": self._model,
            "choices": [choice],
            "usage": usage_counts(self._prompt_tokens, self._emitted, self.cached_tokens),
        }
        self._transport.write(json_response(200, body, keep_alive=self._keep_alive))
        self._complete()
