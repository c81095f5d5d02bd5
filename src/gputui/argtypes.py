"""argparse value types shared by every subcommand: one wording for every bad number.

Each returns a parser that turns a flag's text into a number or raises ArgumentTypeError, which
argparse prints as one usage line with exit 2. Floats must be finite (no nan, no inf).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

N = TypeVar("N", int, float)


def bounded(
    kind: type[N],
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
) -> Callable[[str], N]:
    """A parser for `kind` within [low, high] ((low, high] with `low_open`)."""
    noun = "an integer" if kind is int else "a number"
    left = "(" if low_open else "["
    span = f"{left}{low:g}, {high:g}]" if low is not None and high is not None else ""

    def parse(text: str) -> N:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {noun}: {text!r}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        too_low = low is not None and (value <= low if low_open else value < low)
        too_high = high is not None and value > high
        if too_low or too_high:
            if span:
                raise argparse.ArgumentTypeError(f"must be in {span}, got {text}")
            sign = ">" if low_open else ">="
            raise argparse.ArgumentTypeError(f"must be {sign} {low:g}, got {text}")
        return value

    return parse


positive_float = bounded(float, low=0, low_open=True)
non_negative_float = bounded(float, low=0)
positive_int = bounded(int, low=1)
non_negative_int = bounded(int, low=0)
fraction = bounded(float, low=0, high=1)
"""A share in [0, 1] (an error rate, say)."""
open_fraction = bounded(float, low=0, high=1, low_open=True)
"""A share in (0, 1] (memory utilisation, say)."""
port = bounded(int, low=0, high=65535)
