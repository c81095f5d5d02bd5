"""The shared argparse value types: bounds, open ends, non-finite floats."""

from __future__ import annotations

import argparse

import pytest

from gputui.cli.argtypes import fraction, open_fraction, port, positive_float, positive_int


@pytest.mark.parametrize(
    ("parse", "text", "value"),
    [
        (positive_float, "0.5", 0.5),
        (positive_int, "3", 3),
        (fraction, "0", 0.0),
        (fraction, "1", 1.0),
        (open_fraction, "1", 1.0),
        (port, "0", 0),
        (port, "65535", 65535),
    ],
)
def test_accepts(parse: object, text: str, value: float) -> None:
    assert parse(text) == value  # type: ignore[operator]


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (positive_float, "0", "must be > 0, got 0"),
        (positive_float, "inf", "must be a finite number, got 'inf'"),
        (positive_float, "nan", "must be a finite number, got 'nan'"),
        (positive_float, "x", "not a number: 'x'"),
        (positive_int, "0", "must be >= 1, got 0"),
        (positive_int, "1.5", "not an integer: '1.5'"),
        (fraction, "1.01", "must be in [0, 1], got 1.01"),
        (open_fraction, "0", "must be in (0, 1], got 0"),
        (port, "70000", "must be in [0, 65535], got 70000"),
    ],
)
def test_rejects_with_one_clear_line(parse: object, text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as info:
        parse(text)  # type: ignore[operator]
    assert str(info.value) == message
