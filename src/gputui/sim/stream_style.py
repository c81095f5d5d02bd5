"""How the simulator shapes a stream the way today's engines do (docs/domain.md section 7).

Contract: a `StreamStyle` is a picklable recipe that the serving process hands to every streamed
response (`sinks.StreamSink`). The default style is vLLM without a reasoning parser: one token per
event, all of it `content` (or `text`). Otherwise:

- `reasoning_share`: the first round(share x max_tokens) output tokens of a chat stream are
  thinking, sent in `delta.<reasoning_field>` (`reasoning`, vLLM's name today, or
  `reasoning_content`, the older one); the final usage then carries
  `completion_tokens_details.reasoning_tokens`.
- `tool_calls`: the answer tokens of a chat stream go out as
  `delta.tool_calls[0].function.arguments` fragments (the first one names the call), not content.
- `tokens_per_event` K: tokens are generated at the profile's pace but sent K to an event (what
  `--stream-interval K` does), the last event carrying the rest; an event never mixes reasoning
  and answer tokens (it is split at the boundary, both parts in the same write).
- `spec_decode_k` / `spec_accept`: speculative decoding (the fixed profile): each decode step
  drafts K tokens and emits 1 + the number accepted before the first rejection (each accepted with
  probability `spec_accept`), as one event; /metrics then carries vLLM's `spec_decode_*` counters.

`continuous_usage_stats` is not part of the style: a request asks for it (`stream_options`), and
the sink then puts the running usage on every event, as vLLM does.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final, Literal

ReasoningField = Literal["reasoning", "reasoning_content"]
REASONING_FIELDS: Final = ("reasoning", "reasoning_content")


@dataclass(frozen=True, slots=True)
class StreamStyle:
    """The stream shape (see the module docstring); the default is plain vLLM."""

    reasoning_share: float = 0.0
    reasoning_field: ReasoningField = "reasoning"
    tool_calls: bool = False
    tokens_per_event: int = 1
    spec_decode_k: int = 0
    """Draft tokens per decode step; 0 = no speculative decoding."""
    spec_accept: float = 0.7
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.reasoning_share <= 1.0:
            raise ValueError(f"reasoning share must be in [0, 1], got {self.reasoning_share}")
        if self.reasoning_field not in REASONING_FIELDS:
            raise ValueError(f"reasoning field must be one of {', '.join(REASONING_FIELDS)}")
        if self.tokens_per_event < 1:
            raise ValueError(f"tokens per event must be >= 1, got {self.tokens_per_event}")
        if self.spec_decode_k < 0:
            raise ValueError(f"spec-decode k must be >= 0, got {self.spec_decode_k}")
        if not 0.0 <= self.spec_accept <= 1.0:
            raise ValueError(f"spec-decode acceptance must be in [0, 1], got {self.spec_accept}")

    @property
    def plain(self) -> bool:
        """One content token per event: the sink's fast path applies."""
        return (
            self.reasoning_share == 0.0
            and not self.tool_calls
            and self.tokens_per_event == 1
            and self.spec_decode_k == 0
        )

    def reasoning_tokens(self, max_tokens: int) -> int:
        """How many of a chat stream's first tokens are thinking."""
        return round(self.reasoning_share * max_tokens)


class SpecDecoder:
    """Draws accepted draft tokens per decode step and keeps vLLM's spec-decode counters."""

    __slots__ = (
        "_rng",
        "accept",
        "accepted_per_pos",
        "accepted_tokens",
        "draft_tokens",
        "drafts",
        "k",
    )

    def __init__(self, k: int, accept: float, seed: int = 0) -> None:
        self.k = k
        self.accept = accept
        self._rng = random.Random(seed)
        self.drafts = 0
        self.draft_tokens = 0
        self.accepted_tokens = 0
        self.accepted_per_pos = [0] * k

    def step(self, left: int) -> int:
        """Tokens one decode step emits (1 + accepted drafts), at most `left`; counts the step."""
        accepted = 0
        random_ = self._rng.random
        while accepted < self.k and random_() < self.accept:
            accepted += 1
        accepted = min(accepted, max(left - 1, 0))
        self.drafts += 1
        self.draft_tokens += self.k
        self.accepted_tokens += accepted
        for pos in range(accepted):
            self.accepted_per_pos[pos] += 1
        return 1 + accepted

    def prometheus_lines(self, label: str) -> list[str]:
        """The `vllm:spec_decode_*` counters (docs/reference.md section 4.1)."""
        lines = [
            "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.",
            "# TYPE vllm:spec_decode_num_drafts_total counter",
            f"vllm:spec_decode_num_drafts_total{{{label}}} {float(self.drafts)}",
            "# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.",
            "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
            f"vllm:spec_decode_num_draft_tokens_total{{{label}}} {float(self.draft_tokens)}",
            "# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.",
            "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
            f"vllm:spec_decode_num_accepted_tokens_total{{{label}}} {float(self.accepted_tokens)}",
            "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted per position.",
            "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
        ]
        lines.extend(
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{label},position="{pos}"}} '
            f"{float(n)}"
            for pos, n in enumerate(self.accepted_per_pos)
        )
        return lines
