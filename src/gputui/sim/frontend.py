"""vLLM's API server as one serial CPU, shared by request admission and token streaming.

Contract: a `FrontEnd` holds two FIFO queues of work for one CPU and never reads a clock: the caller
(`sim.open_loop` in virtual time, `GpuProfile` on the event loop) pushes an admission when a request
arrives and a delivery when an engine step ends, asks `pop()` for the next job whenever the CPU is
free, and runs it for the job's `cost_s`. Deliveries go first, admissions take the CPU left over,
and a job is never interrupted.

Why this shape (vLLM V1, `vllm/v1/engine/async_llm.py`, `output_processor.py`): the API server is
one Python process on one asyncio loop. It admits each request (HTTP body, validation, tokenising
the prompt, building the engine request, sending it to the engine core's process) and, for every
engine step, its `output_handler` task detokenises each sequence's new token and wakes the
request's stream, which writes one SSE event. The engine core runs in its own process and never
waits for it. While the loop keeps up, this costs latency only; when a burst arrives, the one CPU
is the limit: streaming the running requests' tokens leaves less CPU to admit new ones, so the
engine's batch grows only as fast as the API server lets it (issue 31: on a 0.6B model at request
rate inf, 95 requests/s, while the GPU could finish the 500 twice as fast).

Costs (both from kvcached PR 331's H100 / Qwen3-0.6B / vLLM 0.19 runs, benchmarks/sim_published.py
S2; the client, `vllm bench serve`, is one Python process too, so its share is in them):
- DELIVER_S_PER_TOKEN: the highest one-second output rate of the three rate-inf runs, 16751, 16656
  and 15611 tokens/s (mean 16339), taken as the loop streaming and nothing else: 61.2 us a token.
- ADMIT_S_PER_PROMPT_TOKEN: what the 94.91 requests/s of those runs leaves per request once its 128
  tokens are streamed, (1 / 94.91 - 128 x 61.2 us) / 512 prompt tokens = 5.28 us a prompt token
  (the body, the tokenizer and the token list all grow with the prompt).

Tokens are charged one by one; vLLM merges a request's outputs into one event when its stream falls
behind, which this does not, so past about 16k tokens/s it is pessimistic.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Final, Generic, Literal, TypeVar

ADMIT_S_PER_PROMPT_TOKEN: Final = 5.28e-6
"""API-server CPU to admit a request, per prompt token (see the module docstring)."""
DELIVER_S_PER_TOKEN: Final = 61.2e-6
"""API-server CPU to process and stream one output token (see the module docstring)."""

T = TypeVar("T")
Kind = Literal["admit", "deliver"]


@dataclass(frozen=True, slots=True)
class FrontEndCosts:
    """Seconds of the API server's CPU per prompt token admitted and per output token streamed."""

    admit_s_per_prompt_token: float = ADMIT_S_PER_PROMPT_TOKEN
    deliver_s_per_token: float = DELIVER_S_PER_TOKEN

    def admit_s(self, prompt_tokens: int) -> float:
        """CPU time to admit a request of `prompt_tokens`."""
        return self.admit_s_per_prompt_token * prompt_tokens

    def deliver_s(self, tokens: int) -> float:
        """CPU time to stream `tokens` output tokens."""
        return self.deliver_s_per_token * tokens


DEFAULT_FRONT_END: Final = FrontEndCosts()
"""The calibrated API server (the module docstring's costs)."""
NO_FRONT_END: Final = FrontEndCosts(0.0, 0.0)
"""An API server that costs nothing (the engine alone)."""


class FrontEnd(Generic[T]):
    """One CPU, two FIFO queues, deliveries first, non-preemptive (see the module docstring)."""

    __slots__ = ("_admissions", "_deliveries", "busy", "costs")

    def __init__(self, costs: FrontEndCosts) -> None:
        self.costs = costs
        self._admissions: deque[tuple[T, float]] = deque()
        self._deliveries: deque[tuple[T, float]] = deque()
        self.busy = False
        """True from `pop()` returning a job until `done()`."""

    def admit(self, item: T, prompt_tokens: int) -> None:
        """Queue a request's admission."""
        self._admissions.append((item, self.costs.admit_s(prompt_tokens)))

    def deliver(self, item: T, tokens: int) -> None:
        """Queue the streaming of one engine step's `tokens` output tokens."""
        self._deliveries.append((item, self.costs.deliver_s(tokens)))

    def pop(self) -> tuple[Kind, T, float] | None:
        """The next job (kind, item, cost in seconds) if the CPU is free and work waits."""
        if self.busy:
            return None
        if self._deliveries:
            item, cost = self._deliveries.popleft()
            kind: Kind = "deliver"
        elif self._admissions:
            item, cost = self._admissions.popleft()
            kind = "admit"
        else:
            return None
        self.busy = True
        return kind, item, cost

    def done(self) -> None:
        """The running job has ended: the CPU is free."""
        self.busy = False

    def __len__(self) -> int:
        return len(self._admissions) + len(self._deliveries)
