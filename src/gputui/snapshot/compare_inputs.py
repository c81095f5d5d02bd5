"""Which runs a comparison reads, by which name, at which price.

Contract: `load_named` loads snapshot files (SnapshotError on the first bad one) and
`name_snapshots` gives each run a unique name: its label, else its file stem, then its file name
and a counter where names collide. `parse_prices` turns `--price LABEL=PER_HOUR` into prices by
those names (a label, file name, stem or path all match), a bad or unknown one a UsageError; a run
without a given price uses `stored_price`, the `--price-per-hour` it saved. Re-exported by
`snapshot.compare`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gputui.errors import UsageError
from gputui.snapshot.models import Snapshot
from gputui.snapshot.store import load_snapshot


@dataclass(frozen=True, slots=True)
class NamedSnapshot:
    """A snapshot and the name it goes by in a comparison (its label, else its file name)."""

    name: str
    snapshot: Snapshot
    path: Path | None = None


def load_named(paths: Sequence[str | os.PathLike[str]]) -> list[NamedSnapshot]:
    """Load each file (SnapshotError on the first bad one) and give each a unique name."""
    loaded = [(Path(p), load_snapshot(p)) for p in paths]
    return name_snapshots([(snap, path) for path, snap in loaded])


def name_snapshots(items: Sequence[tuple[Snapshot, Path | None]]) -> list[NamedSnapshot]:
    """Label (else file stem); a name used twice gets its file name, then a counter."""
    base = [snap.label or (path.stem if path else "snapshot") for snap, path in items]
    names: list[str] = []
    for i, (name, (_, path)) in enumerate(zip(base, items, strict=True)):
        candidate = name
        if base.count(name) > 1 and path is not None and path.stem != name:
            candidate = f"{name} ({path.name})"
        n = 2
        unique = candidate
        while unique in names or (unique != base[i] and unique in base):
            unique = f"{candidate} #{n}"
            n += 1
        names.append(unique)
    return [
        NamedSnapshot(name, snap, path) for name, (snap, path) in zip(names, items, strict=True)
    ]


def parse_prices(specs: Sequence[str], named: Sequence[NamedSnapshot]) -> dict[str, float]:
    """`--price LABEL=PER_HOUR` values by snapshot name; UsageError for a bad or unknown one."""
    prices: dict[str, float] = {}
    for spec in specs:
        key, sep, value = spec.rpartition("=")
        if not sep or not key:
            raise UsageError(f"--price {spec!r}: expected LABEL=PER_HOUR, e.g. a100=7")
        try:
            price = float(value)
        except ValueError:
            raise UsageError(f"--price {spec!r}: {value!r} is not a number") from None
        if not price >= 0 or price == float("inf"):
            raise UsageError(f"--price {spec!r}: the price must be a finite number >= 0")
        matches = [n.name for n in named if key in _aliases(n)]
        if not matches:
            known = ", ".join(n.name for n in named)
            raise UsageError(f"--price {spec!r}: no snapshot is named {key!r} (names: {known})")
        for name in matches:
            prices[name] = price
    return prices


def _aliases(named: NamedSnapshot) -> set[str]:
    names = {named.name}
    if named.snapshot.label:
        names.add(named.snapshot.label)
    if named.path is not None:
        names |= {named.path.name, named.path.stem, str(named.path)}
    return names


def stored_price(snapshot: Snapshot) -> float | None:
    """The `price_per_hour` that `gputui run --price-per-hour` saved, if it is a usable number."""
    value = getattr(snapshot, "price_per_hour", None)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    price = float(value)
    return price if 0 <= price < float("inf") else None
