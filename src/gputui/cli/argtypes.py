"""argparse value types shared by every subcommand: one wording for every bad number.

Each returns a parser that turns a flag's text into a number or raises ArgumentTypeError, which
`OneLineParser` prints as one line with exit 2. Floats must be finite (no nan, no inf). Durations
take a unit (`35ms`, `1s`, `2m`); a bare number is in the flag's own unit, and one implausible for
the flag (a 35 s TPOT bound) is refused with the hint it most likely meant.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from typing import NoReturn, TypeVar

from gputui.durations import UNITS, split_duration

N = TypeVar("N", int, float)


class OneLineParser(argparse.ArgumentParser):
    """A bad flag is one line under the (sub)command's own name, not a screen of usage."""

    def error(self, message: str) -> NoReturn:
        """Print `PROG: error: MESSAGE (see PROG --help)` and exit 2."""
        line = " ".join(message.split())
        self.exit(2, f"{self.prog}: error: {line} (see {self.prog} --help)\n")

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """As argparse's, but a subcommand's unknown flag is reported under its name."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            owner = self.subcommand(getattr(parsed, "command", None)) or self
            owner.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def subcommand(self, name: str | None) -> argparse.ArgumentParser | None:
        """The parser of subcommand `name`, if there is one."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and name in action.choices:
                found: argparse.ArgumentParser = action.choices[name]
                return found
        return None


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
pue_float = bounded(float, low=1, high=10)
"""A power usage effectiveness: facility power / IT power, 1.0 and up."""
positive_int = bounded(int, low=1)
non_negative_int = bounded(int, low=0)
fraction = bounded(float, low=0, high=1)
"""A share in [0, 1] (an error rate, say)."""
open_fraction = bounded(float, low=0, high=1, low_open=True)
"""A share in (0, 1] (memory utilisation, say)."""
port = bounded(int, low=0, high=65535)


def level_list(text: str) -> list[int]:
    """Concurrency levels like 1,2,4,8."""
    try:
        return [positive_int(part) for part in text.split(",") if part.strip()] or _empty(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"expected levels like 1,2,4,8: {exc}") from None


def rate_list(text: str) -> list[float]:
    """Arrival rates like 0.5,1,2 (requests/s)."""
    try:
        return [positive_float(part) for part in text.split(",") if part.strip()] or _empty(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"expected rates like 0.5,1,2: {exc}") from None


def _empty(text: str) -> NoReturn:
    raise argparse.ArgumentTypeError(f"no levels in {text!r}")


def duration(
    unit: str = "s",
    *,
    low_open: bool = True,
    implausible_above_s: float | None = None,
    what: str = "",
) -> Callable[[str], float]:
    """A parser for a duration flag whose bare numbers are in `unit`; returns a value in `unit`.

    Above zero (at least zero without `low_open`). A bare number over `implausible_above_s`
    seconds (a flag in seconds) is refused with a hint; an explicit unit (`35s`) is taken at its
    word.
    """
    sign = ">" if low_open else ">="

    def parse(text: str) -> float:
        try:
            number, given = split_duration(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        value = float(number * UNITS[given or unit] / UNITS[unit])
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if value < 0 or (low_open and value == 0):
            raise argparse.ArgumentTypeError(f"must be {sign} 0, got {text}")
        seconds = float(number * UNITS[unit])
        if given is None and implausible_above_s is not None and seconds > implausible_above_s:
            bare = text.strip()
            raise argparse.ArgumentTypeError(
                " ".join(f"{bare} s {what} is implausible;".split())
                + f" did you mean {bare}ms? Write {bare}s to insist"
            )
        return value

    return parse


seconds = duration()
"""A positive duration; bare numbers in seconds."""
non_negative_seconds = duration(low_open=False)
"""A duration that may be zero (a warm-up); bare numbers in seconds."""
minutes = duration("min")
"""A positive duration; bare numbers in minutes (--max-minutes)."""
milliseconds = duration("ms", low_open=False)
"""A duration that may be zero; bare numbers in milliseconds (the simulator's latencies)."""


def host_port(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[IPv6]:PORT` or a bare `PORT` (then on 127.0.0.1, never every interface)."""
    host, sep, port = text.strip().rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text.strip()
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 < number < 65536:
        raise argparse.ArgumentTypeError(f"not HOST:PORT or PORT (1-65535): {text!r}")
    return host, number
