"""Errors for workload files: one line that names the file, the field path and what was expected.

A bad scenario or dataset file is the user's to fix, so the message must point at it precisely
(`scenarios/chat.toml: workload.input.std: expected a number >= 0, got 'wide'`) and never be a
traceback. pydantic's own messages are rewritten into that shape by `describe_validation_error`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gputui.errors import GputuiError

if TYPE_CHECKING:
    from pydantic import ValidationError
    from pydantic_core import ErrorDetails


class WorkloadFileError(GputuiError):
    """A scenario or dataset file that cannot be used (exit code 2, like a bad flag)."""

    exit_code = 2

    def __init__(self, path: Path | str, where: str, expected: str) -> None:
        self.path = str(path)
        self.where = where
        self.expected = expected
        super().__init__(f"{self.path}: {where}: {expected}" if where else f"{path}: {expected}")


def field_path(loc: tuple[int | str, ...], *, drop: frozenset[str] = frozenset()) -> str:
    """`("workload", "levels", 2)` -> `workload.levels[2]`; names in `drop` (union tags) vanish."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part not in drop:
            out += f".{part}" if out else part
    return out


def _expected(error: ErrorDetails) -> str:
    kind = str(error.get("type", ""))
    message = str(error.get("msg", "invalid"))
    if kind == "missing":
        return "missing (required)"
    if kind == "extra_forbidden":
        return "unknown field"
    message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if message.startswith("Input should be "):
        message = "expected " + message.removeprefix("Input should be ")
    got = error.get("input")
    if kind not in ("union_tag_invalid", "union_tag_not_found") and not isinstance(got, dict):
        message += f", got {got!r}"
    return message


def describe_validation_error(
    path: Path | str, exc: ValidationError, *, drop: frozenset[str] = frozenset()
) -> WorkloadFileError:
    """The first validation error of a file, as a one-line WorkloadFileError."""
    errors = exc.errors()
    first = errors[0]
    where = field_path(tuple(first.get("loc", ())), drop=drop)
    context = first.get("ctx") or {}
    if first.get("type") in ("union_tag_invalid", "union_tag_not_found"):
        tag = str(context.get("discriminator", "kind")).strip("'")
        where = f"{where}.{tag}" if where else tag
        kinds = ", ".join(sorted(drop)) if drop else str(context.get("expected_tags", ""))
        got = f", got {context['tag']!r}" if "tag" in context else ""
        expected = f"expected one of {kinds}{got}"
    else:
        expected = _expected(first)
    if len(errors) > 1:
        expected += f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})"
    return WorkloadFileError(path, where or "(top level)", expected)
