"""One step's diagnosis as it crosses packages (issue 18): made, kept, saved and drawn.

`diagnosis` makes it, the Session keeps it, the snapshot's steps save it, the UI draws it.
Contract: `StepDiagnosis` holds the five parts a snapshot step carries (`DIAGNOSIS_KEYS`) and the
cold-cache warning. Each part keeps its JSON shape (the snapshot's keys, in their saved order):
`server_latency` nests the server's own summaries (read by narrowing), the breakdowns and the
roofline are flat objects of numbers and words (`Flat`), the bottleneck is a `BottleneckVerdict`.
`fields()` is the parts by key, as `Step.model_copy(update=...)` and the journal take them;
`from_fields(values)` reads them back from a saved step (None when it was not diagnosed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, NotRequired, TypedDict

Scalar = float | str | bool | None
"""A JSON value that is not an object or an array (an int is a float to the type checker)."""

Flat = dict[str, Scalar]
"""A JSON object of numbers and words: the TTFT and E2E breakdowns, the roofline use."""

DIAGNOSIS_KEYS: Final = (
    "server_latency",
    "ttft_breakdown",
    "e2e_breakdown",
    "roofline",
    "bottleneck",
)
"""The parts a diagnosed snapshot step carries."""


class BottleneckVerdict(TypedDict):
    """What bound a step, with its evidence (`metrics.bottleneck.bottleneck`)."""

    verdict: str
    evidence: list[str]
    suspect: bool
    throttled: bool
    low_confidence: NotRequired[bool]
    """Absent in files from before `metrics.saturation`."""
    client_state: NotRequired[str | None]


@dataclass(frozen=True, slots=True)
class StepDiagnosis:
    """One step's diagnosis (module contract); every part None when it could not be made."""

    server_latency: dict[str, object] | None = None
    ttft_breakdown: Flat | None = None
    e2e_breakdown: Flat | None = None
    roofline: Flat | None = None
    bottleneck: BottleneckVerdict | None = None
    prefix_cache_warning: str | None = None

    def fields(self) -> dict[str, object]:
        """The snapshot step's keys and values, in their saved order."""
        return {
            "server_latency": self.server_latency,
            "ttft_breakdown": self.ttft_breakdown,
            "e2e_breakdown": self.e2e_breakdown,
            "roofline": self.roofline,
            "bottleneck": self.bottleneck,
            "prefix_cache_warning": self.prefix_cache_warning,
        }

    @classmethod
    def from_fields(cls, values: Mapping[str, object]) -> StepDiagnosis | None:
        """The diagnosis a saved step carries; None when it has none of the parts."""
        if all(values.get(key) is None for key in DIAGNOSIS_KEYS):
            return None
        latency = values.get("server_latency")
        return cls(
            server_latency=_object(latency),
            ttft_breakdown=flat(values.get("ttft_breakdown")),
            e2e_breakdown=flat(values.get("e2e_breakdown")),
            roofline=flat(values.get("roofline")),
            bottleneck=bottleneck_verdict(values.get("bottleneck")),
        )


def _object(value: object) -> dict[str, object] | None:
    if not isinstance(value, Mapping):
        return None
    return {str(k): v for k, v in value.items()}


def flat(value: object) -> Flat | None:
    """A saved breakdown or roofline: its numbers and words (anything nested is left out)."""
    if not isinstance(value, Mapping):
        return None
    return {
        str(k): v for k, v in value.items() if v is None or isinstance(v, int | float | str | bool)
    }


def bottleneck_verdict(value: object) -> BottleneckVerdict | None:
    """A saved `bottleneck` object as a verdict (None when it is not one)."""
    if not isinstance(value, Mapping):
        return None
    evidence = value.get("evidence")
    verdict = BottleneckVerdict(
        verdict=str(value.get("verdict", "none")),
        evidence=[str(e) for e in evidence] if isinstance(evidence, list) else [],
        suspect=bool(value.get("suspect")),
        throttled=bool(value.get("throttled")),
    )
    if "low_confidence" in value:
        verdict["low_confidence"] = bool(value["low_confidence"])
    if "client_state" in value:
        state = value["client_state"]
        verdict["client_state"] = None if state is None else str(state)
    return verdict
