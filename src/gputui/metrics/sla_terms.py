"""The session's terms (SLA bounds and hourly price): their text, their changes, their cost.

Contract:
- `SessionTerms` is what the TUI's settings dialog edits mid-session: the `Sla` and the price
  per hour (None: not given).
- `terms_change(t_s, old, new)` is the snapshot's record of one edit: `{"t_s": ..., "old":
  {...}, "new": {...}}` with only the keys that changed (`ttft_p95_s`, `tpot_p95_s`,
  `max_error_rate`, `e2e_p95_s`, `ttfat_p95_s`, `price_per_hour`), or None when nothing changed.
- `cost_range(capacity, price)` is the cost per million output tokens at the capacity
  (domain.md §4) and, when its throughput interval is known, the range that interval gives
  (the low cost from the high throughput); `wide` when the range spans more than 10 % either side.
- `bound_text` and `sla_text` write bounds as the screen labels them: "TTFT p95 1 s",
  "TPOT p95 35 ms", "E2E p95 20 s", "TTFAT p95 5 s", "errors ≤ 1 %".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Final, TypedDict

from gputui.metrics.capacity import Capacity
from gputui.metrics.cost import cost_per_million_output_tokens
from gputui.metrics.sla import Sla

WIDE_RELATIVE: Final = 0.10
"""A cost range this far (relative) either side of the point is shown as a range."""


@dataclass(frozen=True, slots=True)
class SessionTerms:
    """The SLA and the hourly price, as the settings dialog edits them."""

    sla: Sla
    price_per_hour: float | None = None

    def as_dict(self) -> dict[str, float | None]:
        """Flat keys, as the snapshot records them."""
        return {**asdict(self.sla), "price_per_hour": self.price_per_hour}


class TermsChange(TypedDict):
    """One edit of the terms: when, and the changed keys' values before and after."""

    t_s: float
    old: dict[str, float | None]
    new: dict[str, float | None]


def terms_change(t_s: float, old: SessionTerms, new: SessionTerms) -> TermsChange | None:
    """The record of one edit (only the changed keys), or None when nothing changed."""
    before, after = old.as_dict(), new.as_dict()
    changed = [key for key in after if before[key] != after[key]]
    if not changed:
        return None
    return TermsChange(
        t_s=round(t_s, 3),
        old={key: before[key] for key in changed},
        new={key: after[key] for key in changed},
    )


@dataclass(frozen=True, slots=True)
class CostRange:
    """Cost per million output tokens at the capacity: the point and its interval's ends."""

    point: float
    low: float | None = None
    high: float | None = None
    """None when the throughput interval is unknown or open at that end."""

    @property
    def wide(self) -> bool:
        """The range spans more than `WIDE_RELATIVE` either side of the point (or is open)."""
        if self.low is None or self.high is None:
            return False
        return self.high - self.low > 2 * WIDE_RELATIVE * self.point


def cost_range(capacity: Capacity | None, price_per_hour: float | None) -> CostRange | None:
    """The cost at the capacity's throughput (None without a price or a capacity)."""
    if capacity is None or price_per_hour is None or capacity.output_tokens_per_s <= 0:
        return None
    point = cost_per_million_output_tokens(price_per_hour, capacity.output_tokens_per_s)
    ci = capacity.output_tokens_per_s_ci
    if ci is None:
        return CostRange(point)
    lo_tok, hi_tok = ci
    low = (
        cost_per_million_output_tokens(price_per_hour, hi_tok)
        if hi_tok is not None and hi_tok > 0
        else None
    )
    high = (
        cost_per_million_output_tokens(price_per_hour, lo_tok)
        if lo_tok is not None and lo_tok > 0
        else None
    )
    return CostRange(point, low, high)


def seconds_text(seconds: float) -> str:
    """A bound as people write it: "1 s", "35 ms", "1.5 s", "250 us"."""
    if seconds >= 1:
        return f"{seconds:.4g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.4g} ms"
    return f"{seconds * 1e6:.4g} us"


def bound_text(name: str, seconds: float) -> str:
    """One latency bound's label: "TTFT p95 1 s"."""
    return f"{name} p95 {seconds_text(seconds)}"


def error_rate_text(rate: float) -> str:
    """The error-rate bound: "errors ≤ 1 %" ("no errors" for 0)."""
    return "no errors" if rate <= 0 else f"errors ≤ {rate * 100:.4g} %"


def sla_text(sla: Sla) -> str:
    """Every bound: "TTFT p95 1 s · TPOT p95 35 ms · errors ≤ 1 %" ("none" without bounds)."""
    parts = []
    if sla.ttft_p95_s is not None:
        parts.append(bound_text("TTFT", sla.ttft_p95_s))
    if sla.tpot_p95_s is not None:
        parts.append(bound_text("TPOT", sla.tpot_p95_s))
    if sla.e2e_p95_s is not None:
        parts.append(bound_text("E2E", sla.e2e_p95_s))
    if sla.ttfat_p95_s is not None:
        parts.append(bound_text("TTFAT", sla.ttfat_p95_s))
    if sla.max_error_rate is not None:
        parts.append(error_rate_text(sla.max_error_rate))
    return " · ".join(parts) or "none"


class TermsHistory:
    """The session's current terms and every change made to them (the snapshot's record)."""

    def __init__(self, terms: SessionTerms) -> None:
        self.terms = terms
        self.changes: list[TermsChange] = []
        """`terms_change` records, oldest first."""

    def change(self, t_s: float, new: SessionTerms) -> TermsChange | None:
        """Take `new` as the terms from `t_s` on; the record, or None when nothing changed."""
        record = terms_change(t_s, self.terms, new)
        if record is not None:
            self.changes.append(record)
            self.terms = new
        return record


def _value_text(key: str, value: float | None) -> str:
    if value is None:
        return "none"
    if key == "max_error_rate":
        return f"{value * 100:.4g} %"
    if key == "price_per_hour":
        return f"{value:g}/h"
    return seconds_text(value)


_KEY_NAMES = {
    "ttft_p95_s": "TTFT p95",
    "tpot_p95_s": "TPOT p95",
    "max_error_rate": "error rate",
    "e2e_p95_s": "E2E p95",
    "ttfat_p95_s": "TTFAT p95",
    "price_per_hour": "price",
}


def change_text(record: TermsChange) -> str:
    """A change record in words: "TTFT p95 1 s -> 200 ms, price none -> 7/h"."""
    return ", ".join(
        f"{_KEY_NAMES[key]} {_value_text(key, old)} -> {_value_text(key, record['new'][key])}"
        for key, old in record["old"].items()
    )
