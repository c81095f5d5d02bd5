"""Speculative decoding, from the server's /metrics: how many drafted tokens the target accepted.

Why: with EAGLE or MTP drafts, output speed depends on the acceptance rate more than on the GPU;
and the same counters explain why the stream carries several tokens per event (domain.md section 7).

Names (reference.md section 4): vLLM counts `vllm:spec_decode_num_drafts_total` (decode steps
that drafted), `vllm:spec_decode_num_draft_tokens_total` and
`vllm:spec_decode_num_accepted_tokens_total`;
llama.cpp's newer builds expose `llamacpp:spec_decode_num_*_total`, read here under the same
suffixes; SGLang gives gauges, `sglang:spec_accept_rate` and `sglang:spec_accept_length`.
Acceptance rate = accepted / draft tokens; mean accepted length = 1 + accepted / drafts (the tokens
one step emits: the target's own token plus the accepted drafts). Over a run both come from the
counters' growth between its first and last scrape, so the server's history before the run is
left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

from gputui.telemetry.prom import PromIndex
from gputui.telemetry.samples import ServerSample


class SpecFields(TypedDict, total=False):
    """The `ServerSample` fields one scrape gives about speculative decoding (none without it)."""

    spec_drafts_total: int | None
    spec_draft_tokens_total: int
    spec_accepted_tokens_total: int
    spec_accept_rate: float | None
    spec_accept_length: float | None


def spec_fields(index: PromIndex, prefix: str) -> SpecFields:
    """The ServerSample spec-decode fields of one scrape (`prefix` is `vllm:` or `llamacpp:`)."""
    drafts = index.total(f"{prefix}spec_decode_num_drafts_total")
    draft_tokens = index.total(f"{prefix}spec_decode_num_draft_tokens_total")
    accepted = index.total(f"{prefix}spec_decode_num_accepted_tokens_total")
    if draft_tokens is None or accepted is None:
        return {}
    return {
        "spec_drafts_total": None if drafts is None else round(drafts),
        "spec_draft_tokens_total": round(draft_tokens),
        "spec_accepted_tokens_total": round(accepted),
        "spec_accept_rate": accepted / draft_tokens if draft_tokens else None,
        "spec_accept_length": 1 + accepted / drafts if drafts else None,
    }


def sglang_spec_fields(index: PromIndex) -> SpecFields:
    """SGLang's gauges (no counters: the run figure is then the last scrape's)."""
    rate = index.highest("sglang:spec_accept_rate")
    length = index.highest("sglang:spec_accept_length")
    if rate is None and length is None:
        return {}
    return {"spec_accept_rate": rate, "spec_accept_length": length}


def run_spec_decode(samples: Sequence[ServerSample]) -> dict[str, Any] | None:
    """Acceptance over a run from its server samples (the snapshot's `telemetry.spec_decode`)."""
    counted = [s for s in samples if s.spec_draft_tokens_total is not None]
    if len(counted) >= 2:
        first, last = counted[0], counted[-1]
        assert first.spec_draft_tokens_total is not None
        assert last.spec_draft_tokens_total is not None
        drafted = last.spec_draft_tokens_total - first.spec_draft_tokens_total
        accepted = (last.spec_accepted_tokens_total or 0) - (first.spec_accepted_tokens_total or 0)
        steps = (
            last.spec_drafts_total - first.spec_drafts_total
            if last.spec_drafts_total is not None and first.spec_drafts_total is not None
            else None
        )
        if drafted > 0:
            return {
                "acceptance_rate": accepted / drafted,
                "mean_accepted_length": 1 + accepted / steps if steps else None,
                "draft_tokens": drafted,
                "accepted_tokens": accepted,
                "source": "counters",
            }
    gauges = [s for s in samples if s.spec_accept_rate is not None]
    if gauges:
        last_gauge = gauges[-1]
        return {
            "acceptance_rate": last_gauge.spec_accept_rate,
            "mean_accepted_length": last_gauge.spec_accept_length,
            "source": "gauge" if last_gauge.spec_draft_tokens_total is None else "counters",
        }
    return None


def spec_decode_line(spec: dict[str, Any] | None) -> str | None:
    """One line for a run's output, or None without speculative decoding."""
    if not spec or spec.get("acceptance_rate") is None:
        return None
    line = f"speculative decoding (server): acceptance {100 * spec['acceptance_rate']:.1f} %"
    if spec.get("mean_accepted_length") is not None:
        line += f", {spec['mean_accepted_length']:.2f} tokens per step"
    if spec.get("draft_tokens") is not None:
        line += f" ({spec['accepted_tokens']} of {spec['draft_tokens']} draft tokens)"
    return line
