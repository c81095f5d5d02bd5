"""Comparisons of two and of five saved sessions, for the HTML report's layout test and screenshots.

Two: the saved RTX 4090 and A100 sweeps (tests/fixtures/snapshots), with a demand and an
equal-throughput table. Five adds the diagnosed A100 demo (TTFT breakdowns and verdicts under
each bar), a dense sweep of 16 levels (1..16: neighbouring x labels that would merge, 16 bars)
and an interrupted RTX 4090 run with a long label whose step at 64 streams answered nothing.
"""

from __future__ import annotations

import math
from pathlib import Path

from gputui.snapshot.compare import Comparison, Demand, build_comparison, name_snapshots
from gputui.snapshot.models import Snapshot, Step
from gputui.snapshot.store import load_snapshot

ROOT = Path(__file__).resolve().parents[2]
SAVED = ROOT / "tests" / "fixtures" / "snapshots"
DIAGNOSED = ROOT / "tests" / "ui" / "fixtures" / "sweep-a100-diag.json"


def _between(lo: Step, hi: Step, t: float) -> dict[str, object]:
    """Throughput and P95 latencies a fraction `t` of the way from `lo` to `hi`."""

    def mix(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else a + (b - a) * t

    return {
        "output_tokens_per_s": mix(lo.output_tokens_per_s, hi.output_tokens_per_s),
        "ttft_s": lo.ttft_s.model_copy(update={"p95": mix(lo.ttft_s.p95, hi.ttft_s.p95)}),
        "tpot_s": lo.tpot_s.model_copy(update={"p95": mix(lo.tpot_s.p95, hi.tpot_s.p95)}),
    }


def _dense(snapshot: Snapshot) -> Snapshot:
    """The diagnosed run at every level from 1 to 16 streams (read between its powers of two)."""
    by_level = {s.level: s for s in snapshot.steps}
    steps = []
    for i, level in enumerate(range(1, 17)):
        lo = 2 ** math.floor(math.log2(level))
        hi = lo * 2 if level != lo else lo
        t = math.log2(level / lo)
        base = by_level[float(lo)]
        update = {"index": i, "level": float(level), **_between(base, by_level[float(hi)], t)}
        steps.append(base.model_copy(update=update))
    return snapshot.model_copy(
        update={
            "steps": tuple(steps),
            "label": "a100 dense 1..16",
            "knee": None,
            "capacity": None,
        }
    )


def _gap(snapshot: Snapshot) -> Snapshot:
    """An interrupted run whose step at 64 streams has no answered request (no data)."""
    steps = tuple(
        s.model_copy(
            update={
                "requests_ok": 0,
                "requests_failed": 12,
                "output_tokens_per_s": 0.0,
                "requests_per_s": 0.0,
                "ttft_s": s.ttft_s.model_copy(update={"p50": None, "p95": None, "p99": None}),
                "tpot_s": s.tpot_s.model_copy(update={"p50": None, "p95": None, "p99": None}),
            }
        )
        if s.level == 64
        else s
        for s in snapshot.steps
    )
    return snapshot.model_copy(
        update={
            "steps": steps,
            "label": "rtx4090-48gb power-limited to 350 W, node-17 rack B",
            "complete": False,
            "interrupted_by": "SIGINT",
        }
    )


def two_sessions() -> Comparison:
    """The two saved sweeps (the README's compare example)."""
    named = name_snapshots(
        [(load_snapshot(SAVED / f), Path(f)) for f in ("rtx4090-48gb.json", "a100-80gb-pcie.json")]
    )
    return build_comparison(
        named, currency="USD", demand=Demand(90, 240, 0.3), at_output_tokens_per_s=250.0
    )


def five_sessions() -> Comparison:
    """The two saved sweeps and three more (see the module docstring)."""
    rtx = load_snapshot(SAVED / "rtx4090-48gb.json")
    a100 = load_snapshot(SAVED / "a100-80gb-pcie.json")
    diagnosed = load_snapshot(DIAGNOSED)
    named = name_snapshots(
        [(rtx, None), (a100, None), (diagnosed, None), (_dense(diagnosed), None), (_gap(rtx), None)]
    )
    return build_comparison(named, currency="USD", at_output_tokens_per_s=250.0)
