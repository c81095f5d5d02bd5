"""Compare saved runs: the qualified capacity table, cost, capacity planning (docs/domain.md §4).

Contract: `build_comparison(snapshots, ...)` turns named snapshots into one `CompareRow` per
snapshot (the first is the reference of the ratio columns) plus the warnings a reader must see:
runs of a different model, precision, workload or SLA are *not comparable*, and the comparison
says so instead of silently ranking them. Every number comes from the snapshot as saved (its
qualified capacity was judged against its own SLA); the cost, planning and equal-throughput
figures use `metrics.cost`, never a formula of their own. Sections added by newer minors
(`hardware`, `telemetry`, `price_per_hour`) are read defensively: absent or malformed means
"unknown"/None, never an error. Pure functions; naming, loading and pricing the runs live in
`snapshot.compare_inputs` (its `load_named` is the one I/O) and the sweep curve, shared with the
HTML charts and the TUI's overlay, in `snapshot.sweep_curves`; this module re-exports their names.
Uncertainty (issue 16): rows carry the intervals at the qualified level, the cost range and the
significance of differences from the first row (`snapshot.compare_uncertainty`). Energy
(issue 29): the qualified step's saved energy per good output token and its cost at a price per
kWh, beside the hourly cost (`snapshot.compare_energy`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from gputui.errors import UsageError
from gputui.metrics.confidence import Interval
from gputui.metrics.cost import (
    cost_per_million_output_tokens,
    cost_per_million_output_tokens_ci,
    demand_output_tokens_per_s,
    servers_needed,
)
from gputui.metrics.knee_summary import KneeBound, knee_bound
from gputui.metrics.sla import error_rate
from gputui.metrics.step import StepMode
from gputui.snapshot.comparable import (
    comparability_warnings,
    length_kind,
    sla_text,
    workload_name,
)
from gputui.snapshot.compare_energy import EnergyAtCapacity, energy_at, energy_terms, total_cost
from gputui.snapshot.compare_inputs import (
    NamedSnapshot,
    load_named,
    name_snapshots,
    parse_prices,
    stored_price,
)
from gputui.snapshot.compare_uncertainty import capacity_intervals, significance
from gputui.snapshot.hardware import GpuSummary, gpu_summary, precision_of
from gputui.snapshot.models import (
    CapacityModel,
    SlaBounds,
    Snapshot,
    Step,
    step_reasoning_share,
    step_ttfat,
)
from gputui.snapshot.sweep_curves import AtThroughputRow, SweepCurve, at_throughput, sweep_curve

__all__ = [
    "AtThroughputRow",
    "CompareRow",
    "Comparison",
    "Demand",
    "GpuSummary",
    "NamedSnapshot",
    "SweepCurve",
    "at_throughput",
    "build_comparison",
    "load_named",
    "name_snapshots",
    "parse_prices",
    "sla_text",
    "stored_price",
    "sweep_curve",
]


@dataclass(frozen=True, slots=True)
class Demand:
    """A demand to plan for: requests per minute x mean output tokens, plus headroom."""

    requests_per_min: float
    mean_output_tokens: float
    headroom: float = 0.3

    @property
    def output_tokens_per_s(self) -> float:
        """The demand itself, in output tok/s."""
        return demand_output_tokens_per_s(self.requests_per_min, self.mean_output_tokens)

    @property
    def target_output_tokens_per_s(self) -> float:
        """The demand plus headroom: what the fleet must carry."""
        return self.output_tokens_per_s * (1.0 + self.headroom)


@dataclass(frozen=True, slots=True)
class CompareRow:
    """One snapshot's line of the qualified capacity table."""

    label: str
    path: Path | None
    created_at: str
    gpu: GpuSummary
    model: str
    precision: str | None
    engine: str | None
    """The serving engine (target.engine, else the detected backend)."""
    engine_version: str | None
    """Its version as it reported it (target.version)."""
    input_tokens: int
    output_tokens: int
    workload_name: str | None
    """The scenario's name or the dataset's file name, when the run used one."""
    input_kind: str | None
    """The input-length distribution ("normal", "empirical", ...); None when fixed."""
    output_kind: str | None
    sla: SlaBounds
    complete: bool
    """False for an interrupted run."""
    tested_mode: StepMode | None
    tested_levels: tuple[float, ...]
    """The levels of the sweep curve (complete steps of its mode), ascending."""
    qualified_mode: StepMode | None
    qualified_level: float | None
    qualified_output_tokens_per_s: float | None
    """Good output tok/s at the capacity: what the cost and the servers needed rest on."""
    all_output_tokens_per_s: float | None
    """Every output token at the capacity's level (failed, over-SLA and short requests too)."""
    qualified_requests_per_s: float | None
    ttft_p95_s: float | None
    tpot_p95_s: float | None
    e2e_p95_s: float | None
    error_rate: float | None
    capacity_reason: str | None
    price_per_hour: float | None
    cost_per_million_output_tokens: float | None
    output_tokens_per_s_vs_first: float | None
    cost_vs_first: float | None
    servers_needed: int | None
    total_price_per_hour: float | None
    at: AtThroughputRow | None
    qualified_output_tokens_per_s_ci: Interval | None = None
    """95 % intervals at the qualified level (None: not recorded in the snapshot)."""
    ttft_p95_ci: Interval | None = None
    tpot_p95_ci: Interval | None = None
    cost_per_million_output_tokens_ci: Interval | None = None
    """The cost range the throughput interval implies (upper end None: unbounded)."""
    above_level: float | None = None
    """The next tested level above the capacity, and its verdict."""
    above_verdict: str | None = None
    output_tokens_per_s_vs_first_significant: bool | None = None
    """Qualified tok/s differs from the first row's beyond the uncertainty (None: cannot tell)."""
    ttft_p95_vs_first_significant: bool | None = None
    tpot_p95_vs_first_significant: bool | None = None
    ttfat_p95_s: float | None = None
    """P95 time to the first answer token at the qualified level (reasoning models only)."""
    reasoning_share: float | None = None
    """Thinking tokens / output tokens at the qualified level (reasoning models only)."""
    capacity_provisional: bool = False
    """No step was decisive: the level and its cost rest on point estimates (issue 23)."""
    capacity_provisional_reason: str | None = None
    capacity_caveats: tuple[str, ...] = ()
    energy: EnergyAtCapacity | None = None
    """Energy per good output token at the qualified level, and its cost (issue 29)."""
    energy_price_per_kwh: float | None = None
    pue: float = 1.0
    total_cost_per_million_output_tokens: float | None = None
    """Hourly cost + energy cost per M output tokens, shown beside both (never in either)."""
    knee_level: float | None = None
    """The saved knee (`metrics.knee_summary`, as the live view showed it)."""
    bound_by: str | None = None
    """What bound the first step past the knee with data (`knee_bound_of`)."""
    bound_at: float | None = None


@dataclass(frozen=True, slots=True)
class Comparison:
    """The rows, what makes them hard to compare, and the options they were computed with."""

    rows: tuple[CompareRow, ...]
    warnings: tuple[str, ...]
    snapshots: tuple[NamedSnapshot, ...]
    currency: str | None = None
    demand: Demand | None = None
    at_output_tokens_per_s: float | None = None


def knee_bound_of(snapshot: Snapshot) -> KneeBound | None:
    """The bound past the saved knee, by the live view's rule (`metrics.knee_summary`)."""
    knee = snapshot.knee
    return None if knee is None else knee_bound(knee.level, knee.mode, snapshot.steps)


def _capacity_step(snapshot: Snapshot) -> Step | None:
    cap = snapshot.capacity
    if cap is None:
        return None
    for step in reversed(snapshot.steps):
        if step.mode == cap.mode and step.level == cap.level and not step.incomplete:
            return step
    return None


def _all_output(cap: CapacityModel | None, step: Step | None) -> float | None:
    """Every output token at the capacity (its own key, else its step's)."""
    if cap is None:
        return None
    if cap.all_output_tokens_per_s is not None:
        return cap.all_output_tokens_per_s
    return step.output_tokens_per_s if step is not None else None


def _ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None or reference == 0:
        return None
    return value / reference


def _row(
    named: NamedSnapshot,
    price: float | None,
    demand: Demand | None,
    at: float | None,
    energy_terms_given: tuple[float | None, float | None] = (None, None),
) -> CompareRow:
    snap = named.snapshot
    cap = snap.capacity
    tok_s = cap.output_tokens_per_s if cap is not None and cap.output_tokens_per_s > 0 else None
    cost = (
        cost_per_million_output_tokens(price, tok_s)
        if price is not None and tok_s is not None
        else None
    )
    servers = (
        servers_needed(demand.requests_per_min, demand.mean_output_tokens, tok_s, demand.headroom)
        if demand is not None and tok_s is not None
        else None
    )
    step = _capacity_step(snap)
    kwh_price, pue = energy_terms(snap, *energy_terms_given)
    energy = energy_at(step, kwh_price, pue)
    bound = knee_bound_of(snap)
    tok_ci, ttft_ci, tpot_ci = capacity_intervals(snap, step)
    curve = sweep_curve(snap)
    rate = cap.error_rate if cap is not None else None
    if rate is None and step is not None:
        rate = error_rate(step.requests_ok, step.requests_failed)
    return CompareRow(
        label=named.name,
        path=named.path,
        created_at=snap.created_at,
        gpu=gpu_summary(snap),
        model=snap.target.model,
        precision=precision_of(snap),
        engine=snap.target.engine or snap.target.backend,
        engine_version=snap.target.version,
        input_tokens=snap.workload.input_tokens,
        output_tokens=snap.workload.output_tokens,
        workload_name=workload_name(snap.workload),
        input_kind=length_kind(snap.workload, "input"),
        output_kind=length_kind(snap.workload, "output"),
        sla=snap.sla,
        complete=snap.complete,
        tested_mode=curve.mode,
        tested_levels=curve.levels,
        qualified_mode=cap.mode if cap is not None else None,
        qualified_level=cap.level if cap is not None else None,
        qualified_output_tokens_per_s=cap.output_tokens_per_s if cap is not None else None,
        all_output_tokens_per_s=_all_output(cap, step),
        qualified_requests_per_s=cap.requests_per_s if cap is not None else None,
        ttft_p95_s=cap.ttft_p95_s if cap is not None else None,
        tpot_p95_s=cap.tpot_p95_s if cap is not None else None,
        e2e_p95_s=step.e2e_s.p95 if step is not None else None,
        error_rate=rate,
        capacity_reason=snap.capacity_reason,
        price_per_hour=price,
        cost_per_million_output_tokens=cost,
        output_tokens_per_s_vs_first=None,
        cost_vs_first=None,
        servers_needed=servers,
        total_price_per_hour=servers * price if servers is not None and price is not None else None,
        at=at_throughput(curve, at) if at is not None else None,
        qualified_output_tokens_per_s_ci=tok_ci,
        ttft_p95_ci=ttft_ci,
        tpot_p95_ci=tpot_ci,
        cost_per_million_output_tokens_ci=(
            cost_per_million_output_tokens_ci(price, tok_ci) if price is not None else None
        ),
        above_level=cap.above_level if cap is not None else None,
        above_verdict=cap.above_verdict if cap is not None else None,
        ttfat_p95_s=ttfat.p95 if (ttfat := step_ttfat(step) if step else None) else None,
        reasoning_share=step_reasoning_share(step) if step is not None else None,
        capacity_provisional=bool(cap is not None and cap.provisional),
        capacity_provisional_reason=cap.provisional_reason if cap is not None else None,
        capacity_caveats=tuple(cap.caveats) if cap is not None else (),
        energy=energy,
        energy_price_per_kwh=kwh_price,
        pue=pue,
        total_cost_per_million_output_tokens=total_cost(cost, energy),
        knee_level=snap.knee.level if snap.knee is not None else None,
        bound_by=bound.verdict if bound is not None else None,
        bound_at=bound.level if bound is not None else None,
    )


def build_comparison(
    snapshots: Sequence[NamedSnapshot],
    *,
    prices: Mapping[str, float] | None = None,
    currency: str | None = None,
    demand: Demand | None = None,
    at_output_tokens_per_s: float | None = None,
    energy_price_per_kwh: float | None = None,
    pue: float | None = None,
) -> Comparison:
    """The qualified capacity table of these runs; `prices` (by name) override stored prices.

    `energy_price_per_kwh` and `pue` override those saved with each run (issue 29).
    """
    if not snapshots:
        raise UsageError("nothing to compare: give at least one snapshot file")
    given = prices or {}
    rows = [
        _row(
            n,
            given.get(n.name, stored_price(n.snapshot)),
            demand,
            at_output_tokens_per_s,
            (energy_price_per_kwh, pue),
        )
        for n in snapshots
    ]
    first = rows[0]
    rows = [
        _with_ratios(
            row,
            _ratio(row.qualified_output_tokens_per_s, first.qualified_output_tokens_per_s),
            _ratio(row.cost_per_million_output_tokens, first.cost_per_million_output_tokens),
            first,
        )
        for row in rows
    ]
    return Comparison(
        rows=tuple(rows),
        warnings=tuple(comparability_warnings([(n.name, n.snapshot) for n in snapshots])),
        snapshots=tuple(snapshots),
        currency=currency,
        demand=demand,
        at_output_tokens_per_s=at_output_tokens_per_s,
    )


def _with_ratios(
    row: CompareRow, tok_s: float | None, cost: float | None, first: CompareRow
) -> CompareRow:
    rated = replace(row, output_tokens_per_s_vs_first=tok_s, cost_vs_first=cost)
    if row is first:
        return rated
    tok_s_differs, ttft_differs, tpot_differs = significance(rated, first)
    return replace(
        rated,
        output_tokens_per_s_vs_first_significant=tok_s_differs,
        ttft_p95_vs_first_significant=ttft_differs,
        tpot_p95_vs_first_significant=tpot_differs,
    )
