"""The settings dialog's fields: units, bare numbers, percentages, and one-line errors."""

from __future__ import annotations

import pytest

from gputui.metrics.sla import Sla
from gputui.metrics.sla_terms import SessionTerms
from gputui.ui.terms_input import TermsError, field_texts, parse_terms


def test_units_and_bare_numbers() -> None:
    terms = parse_terms("800ms", "35 ms", "1%", "$7/h")
    assert terms == SessionTerms(Sla(0.8, 0.035, 0.01), 7.0)
    assert parse_terms("1", "0.035", "0.02", "4.5") == SessionTerms(Sla(1.0, 0.035, 0.02), 4.5)
    assert parse_terms("none", "", "-", "none") == SessionTerms(Sla(None, None, None), None)
    assert parse_terms("35s", "6s", "0", "0").sla == Sla(35.0, 6.0, 0.0)  # a unit insists


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            ("1s", "35", "1%", "7"),
            "TPOT p95: 35 s is implausible; did you mean 35ms? write 35s",
        ),
        (("1000", "35ms", "1%", "7"), "TTFT p95: 1000 s is implausible; did you mean 1000ms?"),
        (("fast", "35ms", "1%", "7"), "TTFT p95: not a duration: 'fast' (e.g. 35ms, 1.5s, 2m)"),
        (("0ms", "35ms", "1%", "7"), "TTFT p95: must be > 0, got 0ms"),
        (("1s", "35ms", "5", "7"), "error rate: must lie within 0-100 %, got 5 (write 5%"),
        (("1s", "35ms", "150%", "7"), "error rate: must lie within 0-100 %, got 150%"),
        (("1s", "35ms", "1%", "-3"), "price per hour: not a price: '-3' (e.g. 7 or 7/h)"),
        (("1s", "35ms", "1%", "seven"), "price per hour: not a price: 'seven'"),
    ],
)
def test_mistakes_are_one_line(fields: tuple[str, str, str, str], message: str) -> None:
    with pytest.raises(TermsError) as caught:
        parse_terms(*fields)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_the_fields_start_from_the_terms() -> None:
    terms = SessionTerms(Sla(1.0, 0.035, 0.01), 7.0)
    assert field_texts(terms) == ("1s", "35ms", "1%", "7", "none", "none")
    assert parse_terms(*field_texts(terms)) == terms
    assert field_texts(SessionTerms(Sla())) == ("none",) * 6
    full = SessionTerms(Sla(1.0, 0.035, 0.01, e2e_p95_s=20.0, ttfat_p95_s=5.0), 7.0)
    assert field_texts(full) == ("1s", "35ms", "1%", "7", "20s", "5s")
    assert parse_terms(*field_texts(full)) == full
