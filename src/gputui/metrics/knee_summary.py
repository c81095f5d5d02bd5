"""The knee, the capacity and what bounds the server: one function for every screen and file.

Why (issue 28): the live header, the saved snapshot, `compare` and the HTML report each computed
them their own way (a different mode, incomplete steps left out, a bound read from a step with no
data), and named different knees and causes for one session.

Contract of `knee_summary(steps, sla, diagnoses=None, mode=None)`:
- The steps a knee rests on: those of `mode` (None: the mode most steps with data have, closed
  loop on a tie) in which a request finished (`capacity.has_data`). A step that ended incomplete
  (quit, Ctrl-C, a crash) counts for what it measured (the Steps table marks it `~`); a step with
  no data is never the knee nor the bound. The knee is `knee.find_knee` over their output tok/s;
  `Knee.index` indexes `steps` itself.
- The capacity is `capacity_caveats.judged_capacity` over `steps` (its own contract says which
  steps qualify), with the diagnoses' verdicts for its caveats.
- The bound (`KneeBound`): the diagnosis verdict of the first step past the knee, by level, of
  the knee's mode, with data and a verdict (its diagnosis in `diagnoses` by step index, else
  the step's own `bottleneck`: a saved step); None without a knee or without such a step.
The TUI's view (`frontends.view`), `snapshot.assemble`, crash recovery and replays call this, and
`compare` and the report read what it saved (`compare_diagnosis` reads the bound by `knee_bound`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from gputui.metrics.capacity import Capacity, CapacityStep, has_data
from gputui.metrics.capacity_caveats import judged_capacity
from gputui.metrics.knee import Knee, find_knee
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepMode
from gputui.metrics.step_diagnosis import StepDiagnosis


class SummaryStep(CapacityStep, Protocol):
    """What the summary reads of a step (a `StepResult` or a snapshot's `Step`)."""

    @property
    def index(self) -> int: ...


@dataclass(frozen=True, slots=True)
class KneeBound:
    """What bound the first step past the knee: 'queue' at 64."""

    verdict: str
    level: float
    step_index: int
    low_confidence: bool = False
    """The most likely cause on thin evidence (shown with a '?')."""

    def text(self) -> str:
        """'queue at 64' ('queue? at 64' on thin evidence)."""
        return f"{self.verdict}{'?' if self.low_confidence else ''} at {self.level:g}"


@dataclass(frozen=True, slots=True)
class KneeSummary:
    """The knee, the capacity and the bound of one session's steps."""

    knee: Knee | None
    knee_reason: str
    capacity: Capacity | None
    capacity_reason: str
    bound: KneeBound | None


def knee_mode(steps: Sequence[SummaryStep]) -> StepMode:
    """The mode most steps with data have (closed loop on a tie, or with none)."""
    modes = [s.mode for s in steps if has_data(s)]
    return "rate" if modes.count("rate") > modes.count("concurrency") else "concurrency"


def knee_of(steps: Sequence[SummaryStep], mode: StepMode | None = None) -> tuple[Knee | None, str]:
    """The knee over the steps with data of `mode` (module contract), and why."""
    chosen = knee_mode(steps) if mode is None else mode
    picked = [i for i, s in enumerate(steps) if s.mode == chosen and has_data(s)]
    if not picked:
        return None, "no step with data yet"
    result = find_knee(
        [steps[i].level for i in picked],
        [steps[i].output_tokens_per_s for i in picked],
        mode=chosen,
    )
    knee = result.knee
    if knee is None:
        return None, result.reason
    return Knee(knee.level, knee.mode, knee.method, knee.reason, picked[knee.index]), result.reason


def knee_bound(
    knee_level: float,
    knee_mode: StepMode,
    steps: Sequence[SummaryStep],
    diagnoses: Mapping[int, StepDiagnosis] | None = None,
) -> KneeBound | None:
    """The bound of the first step past the knee with data and a verdict (module contract)."""
    past = sorted(
        (s for s in steps if s.mode == knee_mode and s.level > knee_level and has_data(s)),
        key=lambda s: (s.level, s.index),
    )
    for step in past:
        verdict = _bottleneck(step, diagnoses or {})
        if verdict.get("verdict") is not None:
            low = bool(verdict.get("low_confidence"))
            return KneeBound(str(verdict["verdict"]), step.level, step.index, low)
    return None


def _bottleneck(step: SummaryStep, diagnoses: Mapping[int, StepDiagnosis]) -> Mapping[str, object]:
    found = diagnoses.get(step.index)
    verdict = found.bottleneck if found is not None else getattr(step, "bottleneck", None)
    return verdict if isinstance(verdict, Mapping) else {}


def knee_summary(
    steps: Sequence[SummaryStep],
    sla: Sla,
    diagnoses: Mapping[int, StepDiagnosis] | None = None,
    mode: StepMode | None = None,
) -> KneeSummary:
    """The knee, the capacity and the bound (module contract)."""
    if not steps:
        return KneeSummary(None, "no finished step yet", None, "no finished step yet", None)
    knee, knee_reason = knee_of(steps, mode)
    capacity = judged_capacity(steps, sla, diagnoses=diagnoses)
    bound = None if knee is None else knee_bound(knee.level, knee.mode, steps, diagnoses)
    return KneeSummary(knee, knee_reason, capacity.capacity, capacity.reason, bound)
