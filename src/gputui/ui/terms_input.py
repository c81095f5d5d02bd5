"""The settings dialog's fields as text: read with units and checked, one line per mistake.

Contract of `parse_terms(ttft, tpot, errors, price, e2e="", ttfat="")`:
- Latency bounds are durations (`gputui.durations`): `1s`, `350ms`, `35 ms`; a bare number is in
  seconds, as on the command line, and a bare number implausible for its bound (a TPOT over
  `TPOT_IMPLAUSIBLE_S`, a TTFT, E2E or TTFAT over `TTFT_IMPLAUSIBLE_S`) is refused with a hint,
  as the flags refuse it. They must be > 0.
- The error-rate bound is a fraction (`0.01`) or a percentage (`1%`), within [0, 1].
- The price per hour is a number >= 0, optionally with a currency sign and `/h` (`$7/h`).
- An empty field, `none` or `-` means no bound (no price).
- A bad field raises `TermsError` whose message is one line naming the field.
`field_texts(terms)` gives the fields' current values in the same notation, in `parse_terms`'s
order.
"""

from __future__ import annotations

import math
import re

from gputui.durations import TPOT_IMPLAUSIBLE_S, TTFT_IMPLAUSIBLE_S, UNITS, split_duration
from gputui.metrics.sla import Sla
from gputui.metrics.sla_terms import SessionTerms, seconds_text

_NONE = {"", "none", "-", "off"}
_PRICE = re.compile(r"\s*[$€£¥]?\s*([0-9]*\.?[0-9]+(?:e[+-]?\d+)?)\s*(?:/\s*h(?:our)?)?\s*", re.I)


class TermsError(ValueError):
    """A field of the settings dialog that cannot be taken (one-line message)."""


def _bound(name: str, text: str, implausible_s: float) -> float | None:
    if text.strip().lower() in _NONE:
        return None
    try:
        number, unit = split_duration(text)
    except ValueError as exc:
        raise TermsError(f"{name}: {exc}") from None
    seconds = float(number * UNITS[unit or "s"])
    if not math.isfinite(seconds) or seconds <= 0:
        raise TermsError(f"{name}: must be > 0, got {text.strip()}")
    if unit is None and seconds > implausible_s:
        bare = text.strip()
        raise TermsError(f"{name}: {bare} s is implausible; did you mean {bare}ms? write {bare}s")
    return seconds


def _error_rate(text: str) -> float | None:
    raw = text.strip().lower()
    if raw in _NONE:
        return None
    percent = raw.endswith("%")
    try:
        value = float(raw.rstrip("%").strip())
    except ValueError:
        raise TermsError(f"error rate: not a number: {text.strip()!r} (e.g. 1% or 0.01)") from None
    rate = value / 100 if percent else value
    if not math.isfinite(rate) or not 0 <= rate <= 1:
        hint = f" (write {value:g}% for a percentage)" if not percent and 1 < value <= 100 else ""
        raise TermsError(f"error rate: must lie within 0-100 %, got {text.strip()}{hint}")
    return rate


def _price(text: str) -> float | None:
    if text.strip().lower() in _NONE:
        return None
    match = _PRICE.fullmatch(text)
    if match is None:
        raise TermsError(f"price per hour: not a price: {text.strip()!r} (e.g. 7 or 7/h)")
    price = float(match.group(1))
    if not math.isfinite(price):
        raise TermsError(f"price per hour: must be a finite number, got {text.strip()}")
    return price


def parse_terms(
    ttft: str, tpot: str, errors: str, price: str, e2e: str = "", ttfat: str = ""
) -> SessionTerms:
    """The terms the fields give (module contract); TermsError on the first bad one."""
    sla = Sla(
        ttft_p95_s=_bound("TTFT p95", ttft, TTFT_IMPLAUSIBLE_S),
        tpot_p95_s=_bound("TPOT p95", tpot, TPOT_IMPLAUSIBLE_S),
        max_error_rate=_error_rate(errors),
        e2e_p95_s=_bound("E2E p95", e2e, TTFT_IMPLAUSIBLE_S),
        ttfat_p95_s=_bound("TTFAT p95", ttfat, TTFT_IMPLAUSIBLE_S),
    )
    return SessionTerms(sla, _price(price))


def field_texts(terms: SessionTerms) -> tuple[str, str, str, str, str, str]:
    """The fields' texts for these terms (what the dialog starts with), in `parse_terms` order."""
    sla = terms.sla

    def bound(seconds: float | None) -> str:
        return "none" if seconds is None else seconds_text(seconds).replace(" ", "")

    rate = "none" if sla.max_error_rate is None else f"{sla.max_error_rate * 100:.4g}%"
    price = "none" if terms.price_per_hour is None else f"{terms.price_per_hour:g}"
    return (
        bound(sla.ttft_p95_s),
        bound(sla.tpot_p95_s),
        rate,
        price,
        bound(sla.e2e_p95_s),
        bound(sla.ttfat_p95_s),
    )
