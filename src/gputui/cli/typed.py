"""One parsed flag group into its typed options: the only place a Namespace meets a dataclass.

Light on purpose (no gputui module): `python -m gputui.node` uses it on a node with only PyTorch.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    T = TypeVar("T", bound=DataclassInstance)


def take(cls: type[T], args: argparse.Namespace, **given: object) -> T:
    """The dataclass `cls` with each field from the flag of its name (its default if absent)."""
    names = (f.name for f in dataclasses.fields(cls))
    found = {name: getattr(args, name) for name in names if hasattr(args, name)}
    return cls(**(found | given))
