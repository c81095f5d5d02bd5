"""The prepared workload: a picklable `WorkloadSpec` and the `RequestSource` it builds.

Contract (engine.workload): `PreparedWorkload` crosses into the engine process; `build()` makes
the body text once; `next(k)` is a few lookups and one string slice, deterministic in (seed, k):
- synthetic prompts: input length from the input distribution (raised to `plan.base_tokens`, the
  shortest prompt the plan can write), `plan.body_words(length)` body words;
- dataset prompts: entry from a seeded draw (`order` "sample", with replacement), or request k
  gets entry k in file order ("sequential") or of a seeded permutation ("shuffle"), each entry
  exactly once: past the last one `next` raises `SourceExhausted`; its text is the body, input =
  base + its tokens;
- output length from the output distribution, else the entry's; sent as `max_tokens`, and as
  `min_tokens` too when `min_tokens` is on (ignore_eos is in the run's extra body).
`RequestSpec.input_tokens` is the length asked for; the usage report says what the server counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

import numpy as np

from gputui.engine.workload import RequestSource, RequestSpec, SourceExhausted
from gputui.workloads.distributions import LengthDist, LengthStream, UniformDist
from gputui.workloads.prompts import BodyText, PromptPlan

Entry = tuple[str, int, int]
"""A dataset prompt: (text, its tokens after a space, its output tokens)."""

_INPUT_STREAM, _OUTPUT_STREAM, _ENTRY_STREAM = 1, 2, 3
DatasetOrder = Literal["sample", "sequential", "shuffle"]
DATASET_ORDERS: Final = ("sequential", "shuffle", "sample")


@dataclass(frozen=True, slots=True)
class PreparedWorkload:
    """Everything `next()` needs, measured in the parent (see the module docstring)."""

    plan: PromptPlan
    input: LengthDist | None
    """None: the dataset's prompts."""
    output: LengthDist | None
    """None: the dataset's output lengths."""
    entries: tuple[Entry, ...] = ()
    seed: int = 0
    min_tokens: bool = False
    order: DatasetOrder = "sample"
    """How dataset entries are picked (see the module docstring)."""

    def build(self) -> RequestSource:
        """The source, built in the process that sends."""
        return WorkloadSource(self)

    def input_bounds(self) -> tuple[int, int]:
        """Shortest and longest input length this workload asks for."""
        base = self.plan.base_tokens
        if self.input is None:
            sizes = [t for _, t, _ in self.entries] or [0]
            return base + min(sizes), base + max(sizes)
        lo, hi = self.input.bounds()
        return max(lo, base), max(hi, base)


class WorkloadSource:
    """Request k's prompt and lengths (cheap: called on the engine loop)."""

    def __init__(self, spec: PreparedWorkload) -> None:
        self._spec = spec
        self._plan = spec.plan
        self._base = spec.plan.base_tokens
        self._input = LengthStream(spec.input, spec.seed, _INPUT_STREAM) if spec.input else None
        self._output = LengthStream(spec.output, spec.seed, _OUTPUT_STREAM) if spec.output else None
        self._entry = (
            LengthStream(UniformDist(min=1, max=len(spec.entries)), spec.seed, _ENTRY_STREAM)
            if spec.entries
            else None
        )
        self._order: list[int] | None = None
        if spec.entries and spec.order != "sample":
            n = len(spec.entries)
            perm = np.random.default_rng([spec.seed % (1 << 64), 0x5F0F]).permutation(n)
            self._order = list(range(n)) if spec.order == "sequential" else perm.tolist()
        hi = spec.input_bounds()[1] if spec.input is not None else self._base
        self._body = BodyText(spec.plan.words, spec.seed, spec.plan.body_words(hi))

    def next(self, request_id: int) -> RequestSpec:
        """The request with this id."""
        if self._order is not None:
            if request_id >= len(self._order):
                raise SourceExhausted
            text, tokens, entry_output = self._spec.entries[self._order[request_id]]
            n_in = self._base + tokens
        elif self._entry is not None:
            text, tokens, entry_output = self._spec.entries[self._entry.value(request_id) - 1]
            n_in = self._base + tokens
        else:
            assert self._input is not None
            n_in = max(self._input.value(request_id), self._base)
            text = self._body.slice(request_id, self._plan.body_words(n_in))
            entry_output = 0
        n_out = self._output.value(request_id) if self._output is not None else entry_output
        prompt, messages = self._plan.render(request_id, text)
        return RequestSpec(
            prompt=prompt,
            max_tokens=n_out,
            input_tokens=n_in,
            messages=messages,
            extra_body={"min_tokens": n_out} if self._spec.min_tokens else None,
        )
