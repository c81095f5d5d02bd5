"""What each request of a workload asks for: the `[workload]` table of a scenario file.

Its own module so that `workloads.prepare` reads these configs without importing the scenario
module, whose `Scenario.prepare` calls it. Durations are seconds, or a string with a unit.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from gputui.durations import parse_duration
from gputui.workloads.distributions import LengthDist


def _seconds(value: object) -> object:
    """A duration string ("35ms", "2m") in seconds; anything else is left to the field's type."""
    if not isinstance(value, str):
        return value
    try:
        return parse_duration(value)
    except ValueError:
        raise ValueError("expected a duration like 35ms, 1.5s or a number of seconds") from None


Seconds = Annotated[PositiveFloat, BeforeValidator(_seconds)]
"""A positive duration in seconds (a number, or a string with a unit)."""
NonNegativeSeconds = Annotated[NonNegativeFloat, BeforeValidator(_seconds)]


class StrictModel(BaseModel):
    """Frozen, and unknown fields are errors (a typo in a scenario file is reported)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class DatasetConfig(StrictModel):
    """A local dataset whose prompts are sent (with a unique prefix each)."""

    path: str
    """ShareGPT JSON or JSONL; relative to the scenario's folder (or, from a flag, the cwd)."""
    format: Literal["auto", "sharegpt", "jsonl"] = "auto"
    max_entries: PositiveInt = 1000
    """A seeded sample of at most this many entries is used (and counted)."""
    max_input_tokens: PositiveInt | None = None
    """Entries with longer prompts are skipped."""
    max_output_tokens: PositiveInt | None = None
    """Entries with longer reference outputs are skipped."""


class WorkloadConfig(StrictModel):
    """What each request asks for."""

    input: LengthDist | None = None
    """Input length in tokens (the whole prompt as the server counts it); or a dataset's prompts."""
    output: LengthDist | None = None
    """Output length, forced with max_tokens + ignore_eos (+ min_tokens); or a dataset's."""
    dataset: DatasetConfig | None = None
    shared_prefix_tokens: NonNegativeInt = 0
    """A system prompt of this many tokens shared by every request (prefix caching on purpose)."""
    unique_prefix: bool = True
    """A per-request unique prefix, so that no prefix cache serves a prompt for free."""
    seed: int = 0
    ignore_eos: bool = True
    min_tokens: bool | Literal["auto"] = "auto"
    """Also send min_tokens = max_tokens; "auto": only to servers known to honour it (vLLM,
    SGLang, the simulator), as others may reject an unknown field."""
    sessions: PositiveInt | None = None
    """Multi-turn: simulated users, each holding one conversation (the closed loop's level)."""
    turns: PositiveInt | None = None
    """Multi-turn: turns per conversation; each re-sends the whole history."""
    think_time: LengthDist | None = None
    """Multi-turn: pause between an answer and the next turn, in milliseconds."""

    @model_validator(mode="after")
    def _complete(self) -> WorkloadConfig:
        if self.dataset is not None and self.input is not None:
            raise ValueError("give either input (synthetic prompts) or dataset (its prompts)")
        if self.dataset is None and self.input is None:
            raise ValueError("expected input (a length or distribution) or a dataset")
        if self.dataset is None and self.output is None:
            raise ValueError("expected output (a length or distribution) or a dataset")
        return self
