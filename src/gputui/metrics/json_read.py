"""Reading JSON-shaped values (a saved snapshot's sections, a journal's lines) by narrowing.

Contract: each reader takes any value and never raises: `member(value, key)` is an object's
member (None when `value` is not an object or lacks it), `elements(value)` an array's elements
(empty when it is not one), `number(value, key)` a member that is a number (a bool is not).
"""

from __future__ import annotations

from collections.abc import Mapping


def member(value: object, key: str) -> object:
    """`value[key]` when `value` is an object that has it, else None."""
    return value.get(key) if isinstance(value, Mapping) else None


def elements(value: object) -> list[object]:
    """The elements of an array (a list), else none."""
    return list(value) if isinstance(value, list) else []


def as_number(value: object) -> float | None:
    """The value as a float when it is a number (a bool is not), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def number(part: object, key: str) -> float | None:
    """An object's number at `key` (None when absent or not a number)."""
    return as_number(member(part, key))
