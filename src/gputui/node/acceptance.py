"""The snapshot's `hardware.acceptance` section, from a vram-check and/or a burn result.

Contract: `acceptance_section(vram, burn)` returns a JSON-ready dict with the same documents as
`--json` (the burn trace downsampled to `max_trace_points`), an overall verdict and one-line
findings an operator reads first. Either result may be None (not run). Snapshot models accept
unknown keys, so the dict slots in as `hardware["acceptance"]`.
"""

from __future__ import annotations

from typing import Any

from gputui.node.burn import BurnResult, burn_json
from gputui.node.vram_check import VramCheckResult, vram_json

_RANK = {"pass": 0, "not run": 0, "warn": 1, "fail": 2}


def acceptance_section(
    vram_result: VramCheckResult | None,
    burn_result: BurnResult | None,
    *,
    max_trace_points: int = 300,
) -> dict[str, Any]:
    """{"verdict", "findings", "vram_check", "burn"} for a snapshot's hardware section."""
    findings: list[str] = []
    verdicts: list[str] = []
    if vram_result is not None:
        verdicts.append(vram_result.verdict)
        findings += _vram_findings(vram_result)
    if burn_result is not None:
        verdicts.append(burn_result.verdict)
        findings += _burn_findings(burn_result)
    verdict = max(verdicts, key=lambda v: _RANK[v]) if verdicts else "not run"
    return {
        "verdict": verdict,
        "findings": findings,
        "vram_check": None if vram_result is None else vram_json(vram_result),
        "burn": None if burn_result is None else burn_json(burn_result, max_trace_points),
    }


def _vram_findings(r: VramCheckResult) -> list[str]:
    out = [r.device_note]
    if r.mismatch_count:
        out.append(
            f"memory errors: {r.mismatch_count} words, first at {r.usable_bytes / 2**30:.2f} GiB"
        )
    else:
        out.append(f"{r.checked_bytes / 2**30:.1f} GiB written and verified")
    if r.bandwidth_ratio is not None:
        flag = " (flagged: slower memory than the catalog card)" if r.bandwidth_flag else ""
        out.append(f"bandwidth {r.bandwidth_ratio:.2f} of catalog{flag}")
    return out


def _burn_findings(r: BurnResult) -> list[str]:
    s = r.summary
    out: list[str] = []
    if r.compute_mismatches:
        out.append(f"wrong GEMM results in {r.compute_mismatches} of {r.compute_checks} checks")
    if s.first_throttle_s is None:
        out.append(f"no throttling in {r.seconds:.0f} s")
    else:
        kind = "thermal" if s.thermal else "power"
        out.append(
            f"{kind} throttling from {s.first_throttle_s:.0f} s "
            f"({', '.join(s.first_throttle_reasons)})"
        )
    if s.steady_clock_fraction is not None:
        out.append(f"steady SM clock {s.steady_clock_fraction:.2f} of max")
    return out
