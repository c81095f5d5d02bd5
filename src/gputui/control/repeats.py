"""`--repeats N`: the whole plan again on fresh connections, and the spread across the runs.

Contract:
- `fresh_start(session, stop, base_url)` readies the next repeat: it stops sending, waits for the
  requests in flight (bounded), closes the engine's kept-alive connections (`Reconnect`), asks
  the server to drop its prefix cache where it offers it (vLLM and `gputui sim`:
  `POST /reset_prefix_cache` at the server's root) and sends again; it returns what the reset did.
- `repeat_spread(runs, capacities, knees)` is the run-to-run spread (docs/domain.md §8: a separate
  thing from within-step precision): per level, min/median/max over the repeats of output tok/s
  and P95 TTFT (each repeat's last complete step at that level), and the same of the capacity
  and knee levels. It is the snapshot's optional `repeats` key.
"""

from __future__ import annotations

import statistics
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from gputui.metrics.step import StepResult
from gputui.session import Session

_DRAIN_TIMEOUT_S = 120.0
_POLL_S = 0.1


def reset_prefix_cache(base_url: str, timeout_s: float = 10.0) -> str:
    """POST /reset_prefix_cache; "reset", "not offered" or why it failed."""
    url = base_url.rstrip("/") + "/reset_prefix_cache"
    request = urllib.request.Request(url, data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return "reset" if 200 <= response.status < 300 else f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        return "not offered" if exc.code in (404, 405) else f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        return f"failed: {exc}"


def fresh_start(session: Session, stop: threading.Event, base_url: str) -> str:
    """Drain, reconnect and reset the prefix cache before the next repeat (module contract)."""
    session.pause()
    deadline = time.perf_counter() + _DRAIN_TIMEOUT_S
    while not stop.is_set() and time.perf_counter() < deadline:
        status = session.status
        if status is not None and status.in_flight == 0:
            break
        stop.wait(_POLL_S)
    session.reconnect()
    outcome = reset_prefix_cache(base_url)
    session.resume()
    return outcome


def _spread(values: Sequence[float | None]) -> dict[str, float | int] | None:
    known = [v for v in values if v is not None]
    if not known:
        return None
    return {
        "min": min(known),
        "median": statistics.median(known),
        "max": max(known),
        "n": len(known),
    }


def repeat_spread(
    runs: Sequence[Sequence[StepResult]],
    capacities: Sequence[float | None],
    knees: Sequence[float | None],
) -> dict[str, Any]:
    """The spread across repeats (module contract)."""
    by_level: dict[tuple[str, float], list[StepResult]] = {}
    for steps in runs:
        last: dict[tuple[str, float], StepResult] = {}
        for step in steps:
            if not step.incomplete:
                last[(step.mode, step.level)] = step
        for key, step in last.items():
            by_level.setdefault(key, []).append(step)
    levels = []
    for (mode, level), steps in sorted(by_level.items()):
        levels.append(
            {
                "mode": mode,
                "level": level,
                "runs": len(steps),
                "output_tokens_per_s": _spread([s.output_tokens_per_s for s in steps]),
                "ttft_p95_s": _spread([s.ttft_s.p95 for s in steps]),
            }
        )
    return {
        "count": len(runs),
        "capacity_levels": list(capacities),
        "capacity": _spread(capacities),
        "knee_levels": list(knees),
        "knee": _spread(knees),
        "levels": levels,
    }


def spread_lines(spread: dict[str, Any]) -> list[str]:
    """The spread as `gputui run` prints it, beside the within-step intervals."""
    lines = [f"repeats: {spread['count']} runs of the whole plan"]
    for name in ("capacity", "knee"):
        s = spread.get(name)
        found = spread[f"{name}_levels"]
        if s is None:
            lines.append(f"  {name}: none found ({found})")
        else:
            lines.append(
                f"  {name}: min {s['min']:g} / median {s['median']:g} / max {s['max']:g} "
                f"(each run: {', '.join('-' if v is None else f'{v:g}' for v in found)})"
            )
    for row in spread["levels"]:
        if row["runs"] < 2:
            continue
        tok, ttft = row["output_tokens_per_s"], row["ttft_p95_s"]
        text = f"  {row['mode']} {row['level']:g} ({row['runs']} runs): out tok/s "
        text += f"{tok['min']:,.0f}/{tok['median']:,.0f}/{tok['max']:,.0f}" if tok else "n/a"
        if ttft:
            text += (
                f", P95 TTFT {ttft['min'] * 1e3:.0f}/{ttft['median'] * 1e3:.0f}/"
                f"{ttft['max'] * 1e3:.0f} ms"
            )
        lines.append(text + " (min/median/max)")
    return lines
