"""vLLM's API server as one serial CPU, shared by request admission and token streaming.

Contract: a `FrontEnd` holds two FIFO queues of work for one CPU and never reads a clock: the caller
(`sim.open_loop` in virtual time, `GpuProfile` on the event loop) hands each arriving request to
`tokenize()` and a delivery to `deliver()` when an engine step's tokens are out, calls
`close_batch()` when the tokenizer's batch window ends, asks `pop()` for the next job whenever the
CPU is free, and runs it for the job's `cost_s`. Deliveries go first, admissions take the CPU left
over, and a job is never interrupted. An admission job is one tokenizer micro-batch: its requests
reach the engine together when it ends.

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

Tokenizer micro-batches (vLLM 0.19 `vllm/utils/async_utils.py`, `AsyncMicrobatchTokenizer`, which
`renderers/base.py` `get_async_tokenizer()` builds with its defaults for every completion): the
prompts of concurrent requests are tokenized together, up to TOKENIZER_BATCH of them, in a batch
that waits TOKENIZER_WAIT_S for company after its first prompt (a lone prompt always waits it out);
the batch's futures resolve at once and its requests then go through the rest of the admission
back to back, so they reach the engine core in one burst. That is why the real server's prefill
steps carry several prompts at a time (kvcached PR 331's nsys trace at rate inf: 3 to 17 prompts
in each prefill step, decode-only steps between), where requests admitted one by one would put a
prefill, and so a step too large for a CUDA graph (sim.roofline), into nearly every step.

Tokens are charged one by one; vLLM merges a request's outputs into one event when its stream falls
behind, which this does not, so past about 16k tokens/s it is pessimistic.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

ADMIT_S_PER_PROMPT_TOKEN: Final = 5.28e-6
"""API-server CPU to admit a request, per prompt token (see the module docstring)."""
DELIVER_S_PER_TOKEN: Final = 61.2e-6
"""API-server CPU to process and stream one output token (see the module docstring)."""
TOKENIZER_WAIT_S: Final = 0.002
"""vLLM's tokenizer micro-batch window (`batch_wait_timeout_s` default; module docstring)."""
TOKENIZER_BATCH: Final = 32
"""vLLM's largest tokenizer micro-batch (`max_batch_size` default; module docstring)."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class FrontEndCosts:
    """The API server's CPU per prompt token admitted and per token streamed; tokenizer batches."""

    admit_s_per_prompt_token: float = ADMIT_S_PER_PROMPT_TOKEN
    deliver_s_per_token: float = DELIVER_S_PER_TOKEN
    tokenizer_wait_s: float = TOKENIZER_WAIT_S
    tokenizer_batch: int = TOKENIZER_BATCH

    def admit_s(self, prompt_tokens: int) -> float:
        """CPU time to admit a request of `prompt_tokens`."""
        return self.admit_s_per_prompt_token * prompt_tokens

    def deliver_s(self, tokens: int) -> float:
        """CPU time to stream `tokens` output tokens."""
        return self.deliver_s_per_token * tokens


DEFAULT_FRONT_END: Final = FrontEndCosts()
"""The calibrated API server (the module docstring's costs)."""
NO_FRONT_END: Final = FrontEndCosts(0.0, 0.0, 0.0, 1)
"""An API server that costs nothing and never waits (the engine alone)."""


class FrontEnd(Generic[T]):
    """One CPU, two FIFO queues, deliveries first, non-preemptive (see the module docstring)."""

    __slots__ = (
        "_admissions",
        "_batch",
        "_batch_tokens",
        "_deliveries",
        "batch_id",
        "busy",
        "costs",
    )

    def __init__(self, costs: FrontEndCosts) -> None:
        self.costs = costs
        self._admissions: deque[tuple[tuple[T, ...], float]] = deque()
        self._deliveries: deque[tuple[T, float]] = deque()
        self._batch: list[T] = []
        self._batch_tokens = 0
        self.batch_id = 0
        """Counts tokenizer batches opened: `close_batch(batch_id)` closes that one only."""
        self.busy = False
        """True from `pop()` returning a job until `done()`."""

    def tokenize(self, item: T, prompt_tokens: int, now_s: float) -> float | None:
        """Add an arriving request to the tokenizer's open micro-batch.

        Returns the time the batch's window ends (call `close_batch(self.batch_id)` then) when this
        request opened it, else None; a full batch, or a window of zero, closes at once.
        """
        opened = not self._batch
        if opened:
            self.batch_id += 1
        self._batch.append(item)
        self._batch_tokens += prompt_tokens
        if len(self._batch) >= self.costs.tokenizer_batch or self.costs.tokenizer_wait_s <= 0.0:
            self.close_batch(self.batch_id)
            return None
        return now_s + self.costs.tokenizer_wait_s if opened else None

    def close_batch(self, batch_id: int) -> None:
        """The window of batch `batch_id` ended: its admission joins the queue (if still open)."""
        if batch_id == self.batch_id and self._batch:
            batch = tuple(self._batch)
            self._admissions.append((batch, self.costs.admit_s(self._batch_tokens)))
            self._batch = []
            self._batch_tokens = 0

    def deliver(self, item: T, tokens: int) -> None:
        """Queue the streaming of one engine step's `tokens` output tokens."""
        self._deliveries.append((item, self.costs.deliver_s(tokens)))

    def pop(self) -> tuple[tuple[T, ...], T | None, float] | None:
        """The next job if the CPU is free and work waits: (admitted, delivered, cost in s).

        An admission job has its batch's requests and no step; a delivery job has no requests.
        """
        if self.busy:
            return None
        if self._deliveries:
            item, cost = self._deliveries.popleft()
            self.busy = True
            return (), item, cost
        if self._admissions:
            batch, cost = self._admissions.popleft()
            self.busy = True
            return batch, None, cost
        return None

    def done(self) -> None:
        """The running job has ended: the CPU is free."""
        self.busy = False

    def __len__(self) -> int:
        return len(self._admissions) + len(self._deliveries) + len(self._batch)
