"""Shared pieces of the fault suite: run `gputui run` for real, read the server's own tally, and
check that every request is accounted for."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from gputui.sim.faults import EXPECTED_REASON, FaultSpec
from gputui.snapshot.models import Snapshot
from gputui.snapshot.records import table_rows
from gputui.snapshot.store import load_snapshot

GPUTUI = [sys.executable, "-m", "gputui"]
STALL_TIMEOUT_S = 0.5
"""The client's stall timeout in these runs: short, so a stalled request costs well under 1 s."""
SIGMAS = 4.0

ALL_AT_ONCE = FaultSpec(
    {
        "reset": 0.05,
        "stall": 0.03,
        "http503": 0.05,
        "http429": 0.05,
        "error_event": 0.05,
        "garbage": 0.05,
        "slow_start": 0.05,
    },
    seed=5,
    slow_start_ms=300.0,
)
"""Every fault at once, at rates that still leave most requests ok."""


def run_args(
    url: str,
    out: Path,
    *extra: str,
    model: str = "sim",
    input_tokens: int = 16,
    output_tokens: int = 16,
) -> list[str]:
    """`gputui run` as a user types it, with no warm-up (every request is measured)."""
    return [
        *GPUTUI,
        "run",
        "--url",
        url,
        "--model",
        model,
        "--input-tokens",
        str(input_tokens),
        "--output-tokens",
        str(output_tokens),
        "--warmup-seconds",
        "0",
        "--stall-timeout",
        str(STALL_TIMEOUT_S),
        "--out",
        str(out),
        *extra,
    ]


def gputui_run(
    url: str,
    out: Path,
    *extra: str,
    input_tokens: int = 16,
    env: dict[str, str] | None = None,
    timeout_s: float = 90.0,
) -> subprocess.CompletedProcess[str]:
    """Run `gputui run` to its end."""
    return subprocess.run(
        run_args(url, out, *extra, input_tokens=input_tokens),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, **(env or {})},
        check=False,
    )


def sim_stats(url: str) -> dict[str, Any]:
    """The simulator's `/sim/stats`, fault tally included."""
    response = httpx.get(f"{url}/sim/stats", timeout=10)
    response.raise_for_status()
    stats: dict[str, Any] = response.json()
    return stats


@dataclass(frozen=True, slots=True)
class Tally:
    """What one run counted, summed over its steps."""

    ok: int
    failed: int
    reasons: Counter[str]
    cancelled: int


def tally(snap: Snapshot) -> Tally:
    """Totals over every request the snapshot records, each step checked to be self-consistent.

    From the per-request `records` table, not the steps' sums: the requests a step's load sends
    after it closed (the hand-over, issue 28) are in no step's figures, but recorded all the same,
    and counted in the next step's `requests_warmup` (or, at a run's end, the last step's): the
    steps' counts, warm-up and bursts included, still add up to every recorded request.
    """
    in_steps: Counter[str] = Counter()
    for step in snap.steps:
        assert sum(step.errors.values()) == step.requests_failed, step.errors
        # Failed requests never enter the latency statistics: one sample per ok request.
        for stats in (step.ttft_s, step.e2e_s):
            assert stats.n == step.requests_ok, (stats.n, step.requests_ok)
        in_steps.update(step.errors)
    rows = list(table_rows((snap.model_extra or {})["records"]))
    reasons = Counter(str(r["reason"]) for r in rows if not r["ok"])
    ok = sum(1 for r in rows if r["ok"])
    assert in_steps <= reasons and sum(s.requests_ok for s in snap.steps) <= ok, (in_steps, reasons)
    counted = sum(
        s.requests_ok
        + s.requests_failed
        + s.requests_warmup
        + (s.requests_burst or 0)
        + (s.requests_under_burst or 0)
        for s in snap.steps
    )
    assert counted == len(rows), (counted, len(rows))
    return Tally(ok=ok, failed=len(rows) - ok, reasons=reasons, cancelled=snap.requests_cancelled)


def within_binomial(count: int, n: int, p: float, sigmas: float = SIGMAS) -> bool:
    """`count` of `n` draws at probability `p` lies within `sigmas` standard deviations."""
    return abs(count - n * p) <= sigmas * math.sqrt(n * p * (1 - p)) + 1


def check_run(
    result: subprocess.CompletedProcess[str], out: Path, stats: dict[str, Any], spec: FaultSpec
) -> tuple[Snapshot, Tally]:
    """The run finished, wrote its snapshot, and counted exactly what the server injected."""
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert f"snapshot written to {out}" in result.stdout
    snap = load_snapshot(out)
    assert snap.complete
    counted = tally(snap)
    faults = stats["faults"]
    drawn, injected = faults["drawn"], faults["injected"]
    # Every request sent is accounted for: the server saw each once, and gputui judged each once.
    assert counted.cancelled == 0
    assert counted.ok + counted.failed == drawn, (counted, drawn)
    expected: Counter[str] = Counter()
    for name, count in injected.items():
        reason = EXPECTED_REASON[name]
        if reason is not None:
            expected[reason] += count
    assert counted.reasons == expected, (counted.reasons, injected)
    assert counted.ok == drawn - sum(expected.values())
    for name, p in spec.probabilities.items():
        assert within_binomial(injected[name], drawn, p), (name, injected[name], drawn, p)
    # The server's side of the same story.
    assert stats["requests_cancelled"] == 0
    assert stats["requests_started"] == drawn - injected["http503"] - injected["http429"]
    return snap, counted
