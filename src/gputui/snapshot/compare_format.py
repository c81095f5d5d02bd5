"""Render a `Comparison` for people: the terminal table and Markdown (pure functions of it).

Contract: units in the headers or the cells, latencies in ms below 1 s, "n/a" for what is
unknown, ratios against the first snapshot as "1.85x". The terminal table and the HTML split the
one row per snapshot into five narrow blocks (identity, method, capacity, GPU, cost) that fit 120
columns, plus a sixth (uncertainty: 95 % intervals, and whether each difference from the first
snapshot is "significant" or "not significant") when any snapshot recorded intervals;
Markdown has every column in one `wide_table`. Warnings are left to the caller (the CLI
prints them to stderr). `compare_render.render` dispatches every format, HTML included.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from gputui.metrics.capacity import level_text
from gputui.metrics.confidence import Interval
from gputui.snapshot.comparable import run_state
from gputui.snapshot.compare import AtThroughputRow, CompareRow, Comparison, sla_text
from gputui.snapshot.compare_diagnosis import HEADERS as DIAGNOSIS_HEADERS
from gputui.snapshot.compare_diagnosis import TITLE as DIAGNOSIS_TITLE
from gputui.snapshot.compare_diagnosis import diagnosis_rows
from gputui.snapshot.compare_energy import TITLE as ENERGY_TITLE
from gputui.snapshot.compare_energy import energy_cells, energy_headers
from gputui.snapshot.hardware import GpuSummary

_GIB: Final = float(1 << 30)
FORMULA: Final = (
    "cost per M out tok = price per hour / (good out tok/s x 3600) x 1,000,000; good output:"
    " tokens of requests that succeeded, met every SLA bound and reached their length;"
    " all tok/s: every output token; latencies at the qualified level"
)
ENERGY_FORMULA: Final = (
    "energy per M out tok = J per good out tok x 1e6 / 3.6e6 x price per kWh x PUE (beside the "
    "hourly cost, not in it); total per M = the two added"
)


def formulas(cmp: Comparison) -> list[str]:
    """The cost formula, and the energy cost's when a row has one (issue 29)."""
    priced = any(r.energy is not None and r.energy_price_per_kwh is not None for r in cmp.rows)
    return [FORMULA, ENERGY_FORMULA] if priced else [FORMULA]


def duration(seconds: float | None) -> str:
    """A latency for people: "372.4 ms", "4.17 s" or "n/a"."""
    if seconds is None:
        return "n/a"
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def money(value: float | None) -> str:
    """A price or a cost, with as many decimals as a small amount needs."""
    if value is None:
        return "n/a"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def ratio(value: float | None) -> str:
    """A ratio against the first snapshot, e.g. "1.85x"."""
    return "n/a" if value is None else f"{value:.2f}x"


def gib(value: int | None) -> str:
    """Bytes in GiB (2^30), labelled."""
    return "n/a" if value is None else f"{value / _GIB:.1f} GiB"


def gpu_text(gpu: GpuSummary) -> str:
    """Name and memory, e.g. "NVIDIA A100 80GB PCIe 80.0 GiB"; "2x ..." for several cards."""
    name = gpu.name or "unknown"
    count = f"{gpu.count}x " if gpu.count > 1 else ""
    memory = f" {gib(gpu.memory_total_bytes)}" if gpu.memory_total_bytes is not None else ""
    return f"{count}{name}{memory}"


def throttled_text(gpu: GpuSummary) -> str:
    """Whether clocks were held down: "no", "yes (sw_power_cap)", or "n/a" without a trace."""
    if gpu.throttled is None:
        return "n/a"
    return f"yes ({', '.join(gpu.throttle_reasons)})" if gpu.throttled else "no"


def temperature(gpu: GpuSummary) -> str:
    """The run's highest GPU temperature."""
    return "n/a" if gpu.max_temperature_c is None else f"{gpu.max_temperature_c:.0f} C"


def workload_text(row: CompareRow) -> str:
    """Input and output lengths, e.g. "512 in / 128 out" or "1024 (normal) in / 128 out"."""
    given = f"{row.input_tokens}{f' ({row.input_kind})' if row.input_kind else ''} in / "
    given += f"{row.output_tokens}{f' ({row.output_kind})' if row.output_kind else ''} out"
    return f"{given} ({row.workload_name})" if row.workload_name else given


def tested_text(row: CompareRow) -> str:
    """The sweep's range, e.g. "concurrency 1-128 (8 levels)"."""
    levels = row.tested_levels
    if not levels or row.tested_mode is None:
        return "none"
    unit = "concurrency" if row.tested_mode == "concurrency" else "rate"
    span = f"{levels[0]:g}" if len(levels) == 1 else f"{levels[0]:g}-{levels[-1]:g}"
    plural = "s" if len(levels) != 1 else ""
    return f"{unit} {span}{' req/s' if unit == 'rate' else ''} ({len(levels)} level{plural})"


def qualified_text(row: CompareRow) -> str:
    """The qualified level with its unit and its marks (provisional, caveats), or "none"."""
    if row.qualified_mode is None or row.qualified_level is None:
        return "none"
    marks = " (provisional)" if row.capacity_provisional else ""
    count = len(row.capacity_caveats)
    if count:
        marks += f" ({count} caveat{'s' if count > 1 else ''})"
    return level_text(row.qualified_mode, row.qualified_level) + marks


def capacity_notes(cmp: Comparison) -> list[str]:
    """One line per provisional capacity and per caveat: what each marked capacity is worth."""
    lines = []
    for r in cmp.rows:
        if r.capacity_provisional:
            why = r.capacity_provisional_reason
            lines.append(f"{r.label}: provisional capacity, on point estimates ({why})")
        lines += [f"{r.label}: caveat: {c}" for c in r.capacity_caveats]
    return lines


def _num(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f} %"


def _price_header(cmp: Comparison, text: str) -> str:
    return f"{text} ({cmp.currency})" if cmp.currency else text


def at_text(at: AtThroughputRow) -> tuple[str, str, str]:
    """(load level, P95 TTFT, P95 TPOT) at the target throughput, or the reason in the first."""
    if at.status != "ok" or at.level is None:
        return f"{at.status} ({at.detail})", "", ""
    return (
        level_text(at.mode or "concurrency", round(at.level, 1)),
        duration(at.ttft_p95_s),
        duration(at.tpot_p95_s),
    )


def _grid(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> list[str]:
    """Columns two spaces apart; the first `left` columns left-aligned, the rest right-aligned."""
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        out = [
            c.ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    return [line(headers), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def demand_line(cmp: Comparison) -> str | None:
    """The capacity-planning arithmetic in one line, when a demand was given."""
    d = cmp.demand
    if d is None:
        return None
    return (
        f"demand: {d.requests_per_min:g} req/min x {d.mean_output_tokens:g} out tokens / 60 = "
        f"{d.output_tokens_per_s:.1f} out tok/s; +{d.headroom * 100:g} % headroom = "
        f"{d.target_output_tokens_per_s:.1f} out tok/s"
    )


@dataclass(frozen=True, slots=True)
class Block:
    """A narrow slice of the table: a title, headers and one row of cells per snapshot."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    left: int = 1
    """How many leading columns are text (left-aligned)."""


def engine_text(row: CompareRow) -> str:
    """The engine and its version ("vllm 0.32.0"), or what is known of them."""
    if row.engine and row.engine_version:
        return f"{row.engine} {row.engine_version}"
    return row.engine or "unknown"


def blocks(cmp: Comparison) -> list[Block]:
    """The table in five slices (identity, method, capacity, GPU, cost), each led by the label."""
    rows = cmp.rows
    identity = Block(
        "What was measured",
        ["snapshot", "GPU", "model", "precision", "engine"],
        [
            [r.label, gpu_text(r.gpu), r.model, r.precision or "unknown", engine_text(r)]
            for r in rows
        ],
        left=5,
    )
    method = Block(
        "How it was measured",
        ["snapshot", "workload", "SLA (P95)", "levels tested", "run"],
        [
            [
                r.label,
                workload_text(r),
                sla_text(r.sla),
                tested_text(r),
                run_state(n.snapshot),
            ]
            for r, n in zip(rows, cmp.snapshots, strict=True)
        ],
        left=5,
    )
    # Reasoning models: TTFAT and the thinking share beside TTFT (only when a run had thinking).
    thinking = any(r.ttfat_p95_s is not None for r in rows)
    capacity = Block(
        "SLA-qualified capacity (latencies and errors at that level)",
        [
            "snapshot",
            "qualified at",
            "good out tok/s",
            "all tok/s",
            "req/s",
            "P95 TTFT",
            *(["P95 TTFAT", "reasoning"] if thinking else []),
            "P95 TPOT",
            "P95 E2E",
            "errors",
            "tok/s vs first",
        ],
        [
            [
                r.label,
                qualified_text(r),
                _num(r.qualified_output_tokens_per_s, ".1f"),
                _num(r.all_output_tokens_per_s, ".1f"),
                _num(r.qualified_requests_per_s, ".2f"),
                duration(r.ttft_p95_s),
                *([duration(r.ttfat_p95_s), _percent(r.reasoning_share)] if thinking else []),
                duration(r.tpot_p95_s),
                duration(r.e2e_p95_s),
                _percent(r.error_rate),
                ratio(r.output_tokens_per_s_vs_first),
            ]
            for r in rows
        ],
        left=2,
    )
    gpu = Block(
        "GPU over the run",
        ["snapshot", "peak VRAM used", "VRAM free", "max temp", "throttled"],
        [
            [
                r.label,
                gib(r.gpu.peak_vram_used_bytes),
                gib(r.gpu.vram_free_bytes),
                temperature(r.gpu),
                throttled_text(r.gpu),
            ]
            for r in rows
        ],
    )
    parts = [identity, method, capacity, gpu]
    if any(r.energy is not None for r in rows):  # runs that saved an energy figure (issue 29)
        energy = [[r.label, *energy_cells(r.energy, r.energy_price_per_kwh, r.pue)] for r in rows]
        parts.append(Block(ENERGY_TITLE, ["snapshot", *energy_headers()], energy))
    parts.append(_cost_block(cmp))
    extra = uncertainty_block(cmp)
    if extra is not None:
        parts.append(extra)
    diagnosis = diagnosis_rows(cmp)
    if diagnosis is not None:  # only for runs diagnosed (issue 18)
        parts.append(Block(DIAGNOSIS_TITLE, list(DIAGNOSIS_HEADERS), diagnosis, left=2))
    return parts


def _cost_block(cmp: Comparison) -> Block:
    """Hourly cost per M out tok, the energy cost beside it (issue 29) and their total."""
    rows = cmp.rows
    energy = any(r.energy_price_per_kwh is not None for r in rows)
    headers = ["snapshot", _price_header(cmp, "price/h")]
    headers += [_price_header(cmp, "cost per M out tok"), "cost vs first"]
    if energy:
        headers += [_price_header(cmp, "energy per M out tok"), _price_header(cmp, "total per M")]
    if cmp.demand is not None:
        headers += ["servers needed", _price_header(cmp, "total/h")]
    cost_rows = []
    for r in rows:
        cells = [r.label, money(r.price_per_hour), money(r.cost_per_million_output_tokens)]
        cells.append(ratio(r.cost_vs_first))
        if energy:
            e = r.energy.energy_cost_per_million_output_tokens if r.energy else None
            cells += [money(e), money(r.total_cost_per_million_output_tokens)]
        if cmp.demand is not None:
            servers = "n/a" if r.servers_needed is None else str(r.servers_needed)
            cells += [servers, money(r.total_price_per_hour)]
        cost_rows.append(cells)
    return Block("Cost", headers, cost_rows)


def interval_text(interval: Interval | None, cell: Callable[[float | None], str]) -> str:
    """A 95 % interval as "lo-hi" ("lo-open" for an open upper end), or "n/a"."""
    if interval is None:
        return "n/a"
    lo, hi = interval
    return f"{cell(lo) if lo is not None else 'open'}-{cell(hi) if hi is not None else 'open'}"


def duration_interval(interval: Interval | None) -> str:
    """A latency interval in one unit where it can be: "475.0-525.0 ms", "1.02-1.31 s"."""
    if interval is None:
        return "n/a"
    lo, hi = interval
    if lo is not None and hi is not None and hi < 1:
        return f"{lo * 1e3:.1f}-{hi * 1e3:.1f} ms"
    if lo is not None and hi is not None and lo >= 1:
        return f"{lo:.2f}-{hi:.2f} s"
    return interval_text(interval, duration)


def significance_text(value: bool | None, first: bool) -> str:
    """How a difference from the first snapshot compares with the uncertainty."""
    if first:
        return "reference"
    return "n/a" if value is None else "significant" if value else "not significant"


def uncertainty_block(cmp: Comparison) -> Block | None:
    """Intervals at the qualified level, and the significance of differences from the first.

    None when no snapshot recorded intervals (files saved before issue 16).
    """
    rows = cmp.rows
    if all(r.qualified_output_tokens_per_s_ci is None and r.ttft_p95_ci is None for r in rows):
        return None
    headers = ["snapshot", "out tok/s CI", "P95 TTFT CI", "P95 TPOT CI"]
    headers += [_price_header(cmp, "cost/M CI"), "tok/s vs first", "TTFT vs first"]
    headers.append("TPOT vs first")
    body = [
        [
            r.label,
            interval_text(r.qualified_output_tokens_per_s_ci, lambda v: _num(v, ".1f")),
            duration_interval(r.ttft_p95_ci),
            duration_interval(r.tpot_p95_ci),
            interval_text(r.cost_per_million_output_tokens_ci, money),
            significance_text(r.output_tokens_per_s_vs_first_significant, i == 0),
            significance_text(r.ttft_p95_vs_first_significant, i == 0),
            significance_text(r.tpot_p95_vs_first_significant, i == 0),
        ]
        for i, r in enumerate(rows)
    ]
    title = "Uncertainty: 95 % intervals at the qualified level, differences against the first"
    return Block(title, headers, body)


def at_block(cmp: Comparison) -> Block | None:
    """The equal-throughput slice, when `--at-output-tokens-per-s` was given."""
    if cmp.at_output_tokens_per_s is None:
        return None
    return Block(
        f"At {cmp.at_output_tokens_per_s:g} out tok/s (interpolated along each sweep)",
        ["snapshot", "load level", "P95 TTFT", "P95 TPOT"],
        [[r.label, *at_text(r.at)] for r in cmp.rows if r.at is not None],
        left=2,
    )


def table(cmp: Comparison) -> str:
    """The terminal form: one row per snapshot in five narrow blocks (and the equal-throughput)."""
    count = len(cmp.rows)
    lines = [f"Qualified capacity table ({count} snapshot{'s' if count != 1 else ''})"]
    for block in blocks(cmp):
        lines += ["", *_grid(block.headers, block.rows, block.left)]
    notes = capacity_notes(cmp)
    if notes:
        lines += ["", *notes]
    demand = demand_line(cmp)
    if demand is not None:
        lines.append(demand)
    extra = at_block(cmp)
    if extra is not None:
        lines += ["", extra.title, *_grid(extra.headers, extra.rows, extra.left)]
    lines += ["", *formulas(cmp)]
    return "\n".join(lines) + "\n"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def wide_table(cmp: Comparison) -> tuple[list[str], list[list[str]]]:
    """Every column of the qualified capacity table, one row per snapshot (Markdown)."""
    parts = blocks(cmp)
    headers = parts[0].headers + [h for b in parts[1:] for h in b.headers[1:]]
    rows = [
        parts[0].rows[i] + [c for b in parts[1:] for c in b.rows[i][1:]]
        for i in range(len(cmp.rows))
    ]
    return headers, rows


def markdown(cmp: Comparison) -> str:
    """One Markdown table, one row per snapshot (plus the equal-throughput table)."""
    headers, body = wide_table(cmp)
    lines = [_md_row(headers), _md_row(["---"] * len(headers)), *(_md_row(c) for c in body)]
    demand = demand_line(cmp)
    if demand is not None:
        lines += ["", demand]
    extra = at_block(cmp)
    if extra is not None:
        lines += ["", extra.title + ":", "", _md_row(extra.headers)]
        lines += [_md_row(["---"] * len(extra.headers)), *(_md_row(r) for r in extra.rows)]
    lines += ["", *formulas(cmp)]
    return "\n".join(lines) + "\n"


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_md_cell(c) for c in cells) + " |"
