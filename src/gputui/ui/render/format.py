"""Numbers as the screen shows them: short, with units, "-" when there is no value."""

from __future__ import annotations

NONE = "-"


def duration(seconds: float | None) -> str:
    """A latency: "850us", "42.1ms", "312ms", "1.25s", "12.5s"."""
    if seconds is None:
        return NONE
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f}us"
    if seconds < 0.1:
        return f"{seconds * 1e3:.1f}ms"
    if seconds < 1.0:
        return f"{seconds * 1e3:.0f}ms"
    if seconds < 10.0:
        return f"{seconds:.2f}s"
    return f"{seconds:.1f}s"


def rate(value: float | None) -> str:
    """A rate: "0.67", "12.3", "897", "12.4k"."""
    if value is None:
        return NONE
    if value < 10:
        return f"{value:.2f}"
    if value < 100:
        return f"{value:.1f}"
    if value < 10_000:
        return f"{value:.0f}"
    return f"{value / 1000:.1f}k"


def percent(fraction: float | None, decimals: int = 1) -> str:
    """A fraction 0..1 as "12.5%"."""
    return NONE if fraction is None else f"{fraction * 100:.{decimals}f}%"


def level(mode: str, value: float) -> str:
    """A load level with its unit: "16 concurrent" or "2.5 req/s"."""
    return f"{value:g} concurrent" if mode == "concurrency" else f"{value:g} req/s"


def clock(seconds: float) -> str:
    """Session time as H:MM:SS."""
    total = max(int(seconds), 0)
    return f"{total // 3600}:{total % 3600 // 60:02d}:{total % 60:02d}"


def gib(n_bytes: int | None) -> str:
    """Bytes in GiB, one decimal."""
    return NONE if n_bytes is None else f"{n_bytes / 2**30:.1f}"


def scaled(value: float) -> str:
    """An axis tick: "0", "850", "1.2k", "12k"."""
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    if value >= 10:
        return f"{value:.0f}"
    return f"{value:.2g}"
