"""Multi-turn conversations: each simulated user re-sends the whole history every turn.

Contract (engine.driven): `ConversationWorkload` is picklable; its source drives the load itself.
Closed loop (`concurrency` N): N users, each holding one conversation at a time and starting a new
one when it ends. Open loop (`rate` R): R new conversations a second start on the run's arrival
process, each running all its turns; `max_active` (`--sessions N`) caps how many are under way:
an arrival that finds N talking waits for one to end, as the engine's open loop waits at
`max_in_flight`, and keeps its scheduled time (turn 1's `queued_ns`), so the client-side queue
shows in the record instead of silently lowering the rate.
A conversation has `turns` turns; turn t sends the history (every earlier user message
and every answer exactly as the server streamed it) plus a new user message, waits for the whole
answer, thinks for a draw of `think_ms` and sends turn t + 1. A failed turn ends its conversation.

Token accounting: user message t is written by the run's `PromptPlan` (unique prefix, calibrated
one-token words), so its length is exact; turn t's `input_tokens` is the server's count of turn
t - 1 (usage, else what was asked) + the answer's tokens + the new message's tokens. Each added
message may cost chat-template tokens the plan cannot know: usage in the record is the truth.
Lengths come from (seed, conversation id, turn), so two runs with one seed send the same talks.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Final

from gputui.engine.driven import LoadControl, LoadMode
from gputui.engine.workload import ChatMessage, RequestSource, RequestSpec
from gputui.workloads.distributions import LengthDist, LengthStream
from gputui.workloads.prompts import LEAD, BodyText
from gputui.workloads.source import PreparedWorkload, WorkloadSource

_THINK_STREAM: Final = 7
_TURN_KEYS: Final = 1 << 8
"""Lengths of turn t of conversation c are draw c * 256 + t of their stream."""


@dataclass(frozen=True, slots=True)
class ConversationWorkload:
    """Conversations of `turns` turns over a prepared workload (see the module docstring)."""

    base: PreparedWorkload
    turns: int
    think_ms: LengthDist | None = None
    """Think time between a turn's answer and the next turn, in ms; None: none."""
    max_active: int | None = None
    """Open loop: at most this many conversations under way (None: no cap)."""

    def __post_init__(self) -> None:
        if not 1 <= self.turns < _TURN_KEYS:
            raise ValueError(f"turns must be 1..{_TURN_KEYS - 1}, got {self.turns}")
        if self.base.input is None:
            raise ValueError("conversations need synthetic user messages (an input length)")

    def build(self) -> ConversationSource:
        """The driving source, built in the engine process."""
        return ConversationSource(self)


@dataclass(slots=True)
class _Talk:
    """One conversation's state between turns."""

    cid: int
    history: list[ChatMessage] = field(default_factory=list)
    tokens: int = 0
    """The server's count of the history so far (prompt of the last turn + its answer)."""


class ConversationSource:
    """Drives conversations on the load controller (engine.driven.DrivenSource)."""

    def __init__(self, spec: ConversationWorkload) -> None:
        base = spec.base
        assert base.input is not None
        assert base.output is not None
        self._spec = spec
        self._plan = base.plan
        self._single: RequestSource = WorkloadSource(base)
        self._input = LengthStream(base.input, base.seed, 1)
        self._output = LengthStream(base.output, base.seed, 2)
        self._think = (
            LengthStream(spec.think_ms, base.seed, _THINK_STREAM) if spec.think_ms else None
        )
        hi = base.input_bounds()[1]
        self._body = BodyText(base.plan.words, base.seed, base.plan.body_words(hi))
        self._users: set[int] = set()
        self._active = 0
        self._ended = asyncio.Event()

    def next(self, request_id: int) -> RequestSpec:
        """A one-turn request (a burst on top of the conversations)."""
        return self._single.next(request_id)

    async def drive(self, load: LoadControl, mode: LoadMode, level: float) -> None:
        """Closed loop: keep `level` users talking; open loop: start conversations at `level`/s."""
        if mode == "concurrency":
            for slot in range(round(level)):
                if slot not in self._users:
                    self._users.add(slot)
                    load.spawn(self._user(load, slot))
            return
        if level <= 0:
            return
        cap = self._spec.max_active
        next_ns = time.perf_counter_ns()
        while not load.stopping:
            next_ns += load.gap_ns(level)
            if not await load.wait(next_ns - time.perf_counter_ns()):
                return
            if cap is not None and not await self._free_slot(load, cap):
                return
            self._active += 1
            load.spawn(self._one_conversation(load, next_ns))

    async def _free_slot(self, load: LoadControl, cap: int) -> bool:
        """Wait until fewer than `cap` conversations are under way; False once stopping."""
        while self._active >= cap and not load.stopping:
            self._ended.clear()
            await self._ended.wait()
        return not load.stopping

    async def _user(self, load: LoadControl, slot: int) -> None:
        try:
            while not load.stopping and load.mode == "concurrency" and slot < round(load.level):
                if not await load.wait(0):  # paused: hold the next conversation
                    break
                if not await self._conversation(load, None):
                    await load.wait(50_000_000)  # a failed first turn: no hot retry loop
        finally:
            self._users.discard(slot)

    async def _one_conversation(self, load: LoadControl, queued_ns: int) -> None:
        try:
            await self._conversation(load, queued_ns)
        finally:
            self._active -= 1
            self._ended.set()

    async def _conversation(self, load: LoadControl, queued_ns: int | None) -> bool:
        """Talk for every turn; False when the first turn failed."""
        talk = _Talk(load.reserve_id())
        turns = self._spec.turns
        for turn in range(1, turns + 1):
            spec = self.turn_request(talk, turn)
            record = await load.send(
                spec,
                queued_ns if turn == 1 else None,
                conversation_id=talk.cid,
                turn=turn,
                keep_text=turn < turns,
            )
            if not record.ok:
                return turn > 1
            if turn == turns:
                break
            prompt = record.input_tokens if record.input_tokens is not None else spec.input_tokens
            talk.tokens = (prompt or 0) + record.output_tokens
            talk.history = [
                *(spec.messages or ()),
                {"role": "assistant", "content": record.output_text or ""},
            ]
            if not await load.wait(self.think_ns(talk.cid, turn)):
                break
        return True

    def turn_request(self, talk: _Talk, turn: int) -> RequestSpec:
        """Turn `turn` of a conversation: its history plus a new user message."""
        key = talk.cid * _TURN_KEYS + turn
        plan = self._plan
        n_in = max(self._input.value(key), plan.base_tokens)
        body = self._body.slice(key, plan.body_words(n_in))
        n_out = self._output.value(key)
        user, messages = plan.render(key, body)
        if turn == 1:
            sent: tuple[ChatMessage, ...] = (
                messages if messages is not None else ({"role": "user", "content": user},)
            )
            tokens = n_in
        else:
            sent = (*talk.history, {"role": "user", "content": user})
            tokens = talk.tokens + n_in - self._history_overhead()
        return RequestSpec(
            prompt=user,
            max_tokens=n_out,
            input_tokens=tokens,
            messages=tuple(sent),
            extra_body={"min_tokens": n_out} if self._spec.base.min_tokens else None,
        )

    def _history_overhead(self) -> int:
        """Tokens of a first prompt that a later message does not repeat (the system prompt)."""
        plan = self._plan
        if not plan.system:
            return 0
        return round(plan.system_words * plan.tokens_per_word) + len(LEAD.split())

    def think_ns(self, cid: int, turn: int) -> int:
        """The pause after turn `turn` of conversation `cid`."""
        if self._think is None:
            return 0
        return self._think.value(cid * _TURN_KEYS + turn) * 1_000_000
