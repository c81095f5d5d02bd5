"""The machine forms of a comparison: CSV and JSON, one record per snapshot.

Contract: `row_record` is the one mapping of a row to snake_case keys with raw numbers in SI units
(seconds, bytes, tok/s) and None for unknown; CSV writes those keys as its header (numbers to 6
significant digits, empty cells for None, lists joined by ";"), JSON writes them as `rows`, with
each row's `capacity_reason`, the options (`currency`, `demand`, `at_output_tokens_per_s`) and the
comparability `warnings`. Keys are an interface: add, never rename. Intervals are [lo, hi] lists
(CSV: "lo;hi", an empty side for an open end).
"""

from __future__ import annotations

import csv
import io

import orjson

from gputui.snapshot.compare import CompareRow, Comparison


def row_record(row: CompareRow, cmp: Comparison) -> dict[str, object]:
    """The machine form of a row: snake_case keys, SI units, None for unknown."""
    gpu = row.gpu
    record: dict[str, object] = {
        "label": row.label,
        "file": str(row.path) if row.path is not None else None,
        "created_at": row.created_at,
        "gpu_name": gpu.name,
        "gpu_count": gpu.count,
        "gpu_memory_total_bytes": gpu.memory_total_bytes,
        "model": row.model,
        "precision": row.precision,
        "input_tokens": row.input_tokens,
        "output_tokens": row.output_tokens,
        "workload_name": row.workload_name,
        "input_distribution": row.input_kind,
        "output_distribution": row.output_kind,
        "sla_ttft_p95_s": row.sla.ttft_p95_s,
        "sla_tpot_p95_s": row.sla.tpot_p95_s,
        "sla_max_error_rate": row.sla.max_error_rate,
        "qualified_mode": row.qualified_mode,
        "qualified_level": row.qualified_level,
        "qualified_output_tokens_per_s": row.qualified_output_tokens_per_s,
        "all_output_tokens_per_s": row.all_output_tokens_per_s,
        "qualified_requests_per_s": row.qualified_requests_per_s,
        "ttft_p95_s": row.ttft_p95_s,
        "tpot_p95_s": row.tpot_p95_s,
        "e2e_p95_s": row.e2e_p95_s,
        "error_rate": row.error_rate,
        "peak_vram_used_bytes": gpu.peak_vram_used_bytes,
        "vram_free_bytes": gpu.vram_free_bytes,
        "max_temperature_c": gpu.max_temperature_c,
        "throttled": gpu.throttled,
        "throttle_reasons": list(gpu.throttle_reasons),
        "price_per_hour": row.price_per_hour,
        "currency": cmp.currency,
        "cost_per_million_output_tokens": row.cost_per_million_output_tokens,
        "servers_needed": row.servers_needed,
        "total_price_per_hour": row.total_price_per_hour,
        "output_tokens_per_s_vs_first": row.output_tokens_per_s_vs_first,
        "cost_vs_first": row.cost_vs_first,
        # Uncertainty (issue 16): [lo, hi] lists, null for unknown or an open end.
        "qualified_output_tokens_per_s_ci": _pair(row.qualified_output_tokens_per_s_ci),
        "ttft_p95_ci": _pair(row.ttft_p95_ci),
        "tpot_p95_ci": _pair(row.tpot_p95_ci),
        "cost_per_million_output_tokens_ci": _pair(row.cost_per_million_output_tokens_ci),
        "qualified_above_level": row.above_level,
        "qualified_above_verdict": row.above_verdict,
        "output_tokens_per_s_vs_first_significant": row.output_tokens_per_s_vs_first_significant,
        "ttft_p95_vs_first_significant": row.ttft_p95_vs_first_significant,
        "tpot_p95_vs_first_significant": row.tpot_p95_vs_first_significant,
    }
    at = row.at
    if at is not None:
        record |= {
            "at_output_tokens_per_s": at.output_tokens_per_s,
            "at_status": at.status,
            "at_level": at.level,
            "at_ttft_p95_s": at.ttft_p95_s,
            "at_tpot_p95_s": at.tpot_p95_s,
            "at_detail": at.detail or None,
        }
    # Issue 23: a capacity on point estimates, and what any capacity is worth.
    record["capacity_provisional"] = row.capacity_provisional
    record["capacity_provisional_reason"] = row.capacity_provisional_reason
    record["capacity_caveats"] = list(row.capacity_caveats)
    # Issue 29: energy over the good output at the qualified level, its cost beside the hourly.
    energy = row.energy
    record |= {
        "joules_per_output_token": energy.joules_per_output_token if energy else None,
        "output_tokens_per_joule": energy.output_tokens_per_joule if energy else None,
        "joules_per_token": energy.joules_per_token if energy else None,
        "mean_power_w": energy.mean_power_w if energy else None,
        "energy_gpus": energy.gpus if energy else None,
        "energy_method": energy.method if energy else None,
        "energy_sample_hz": energy.sample_hz if energy else None,
        "energy_price_per_kwh": row.energy_price_per_kwh,
        "pue": row.pue,
        "energy_cost_per_million_output_tokens": (
            energy.energy_cost_per_million_output_tokens if energy else None
        ),
        "total_cost_per_million_output_tokens": row.total_cost_per_million_output_tokens,
    }
    # Issue 28: the knee and what bound the first step past it, as the live view showed them.
    record |= {"knee_level": row.knee_level, "bound_by": row.bound_by, "bound_at": row.bound_at}
    return record


def _pair(interval: tuple[float | None, float | None] | None) -> list[float | None] | None:
    return None if interval is None else [interval[0], interval[1]]


def _csv_value(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        return ";".join(_csv_value(v) for v in value)
    return str(value)


def csv_text(cmp: Comparison) -> str:
    """A header line, then one line per snapshot (`row_record`'s keys, raw SI numbers)."""
    records = [row_record(r, cmp) for r in cmp.rows]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(list(records[0]))
    writer.writerows([_csv_value(v) for v in record.values()] for record in records)
    return out.getvalue()


def json_text(cmp: Comparison) -> str:
    """The rows, the warnings, and the options they were computed with."""
    d = cmp.demand
    document = {
        "currency": cmp.currency,
        "demand": None
        if d is None
        else {
            "requests_per_min": d.requests_per_min,
            "mean_output_tokens": d.mean_output_tokens,
            "headroom": d.headroom,
            "output_tokens_per_s": d.output_tokens_per_s,
            "target_output_tokens_per_s": d.target_output_tokens_per_s,
        },
        "at_output_tokens_per_s": cmp.at_output_tokens_per_s,
        "warnings": list(cmp.warnings),
        "rows": [row_record(r, cmp) | {"capacity_reason": r.capacity_reason} for r in cmp.rows],
    }
    return orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n"
