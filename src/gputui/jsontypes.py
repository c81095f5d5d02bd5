"""JSON as the standard library's `json` module reads and writes it, as types.

Contract: `JsonValue` is what `json.loads` can return, so a value parsed from a server, a scenario
file or a snapshot has a real type: code narrows it (`isinstance`) where the shape is not
known. `JsonObject` is a parsed or built object. `JsonOut` is what `json.dumps` accepts from our
own builders: read-only (`Mapping`, `Sequence`), so a `dict[str, float]` or a tuple fits without
copying. No imports beyond `typing`: every package may use it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

JsonValue: TypeAlias = "dict[str, JsonValue] | list[JsonValue] | str | int | float | bool | None"
JsonObject: TypeAlias = "dict[str, JsonValue]"
JsonOut: TypeAlias = "Mapping[str, JsonOut] | Sequence[JsonOut] | str | int | float | bool | None"
JsonOutObject: TypeAlias = "Mapping[str, JsonOut]"
