"""Where a step's mean TTFT (and E2E) went: network, queue, prefill, the server's rest, client.

Contract: `ttft_breakdown(ttft_mean_s, rtt_mean_s, queue_mean_s, prefill_mean_s, connect_mean_s,
server_ttft_mean_s)` splits the client's mean TTFT (domain.md section 9; over the step's
requests the server's histogram window holds, where that is known: diagnosis.evidence) into

    network_s      = the RTT probe's mean over the step (a TCP handshake: engine/probe.py)
    queue_s        = the server's mean queue time (waiting before it was first scheduled)
    prefill_s      = the server's mean prefill time (scheduled to first token)
    server_other_s = the server's own TTFT - queue - prefill: what the server spent outside the
                     engine's queue and prefill (API, tokenization, scheduling, detokenization; a
                     real vLLM spends a few ms there). The server's TTFT is taken over the same
                     requests as queue and prefill (its E2E - decode means, all observed at each
                     request's end; diagnosis.evidence.same_requests_server_ttft), else its TTFT
                     histogram's mean
    client_s       = client TTFT - the server's TTFT - network: the client's overhead, HTTP parsing
                     and stream buffering on either side

each in seconds and as a share of the TTFT; the parts sum to the TTFT by construction. Where the
server reports no TTFT of its own (llama.cpp's `timings`, TGI, SGLang builds without it) the
server's rest cannot be told apart from the client's: `server_other_s` is None, `client_s` is TTFT
- network - queue - prefill, and `unsplit` says what it holds (None when everything was split). The
check that matters is `explained_share` = (network + queue + prefill + server_other) / TTFT: near 1
when the measured parts account for the TTFT. gputui stamps a request when its first byte is
written, after any new connection was set up, so connection setup is *not* inside TTFT: its mean
per request (`connect_s`) is reported beside the breakdown, not in it. `e2e_breakdown` does the
same for the mean E2E with queue, prefill and decode (no server-side E2E rest is split there).
Pure functions; None in, None out (a server without queue/prefill numbers gets no breakdown).

A part is a difference of means measured apart (the client's requests, the server's histogram
window, the probe), so it can come out below zero. `noise_s` says how far that is noise: the RTT
probe's spread and the client's mean TTFT's standard error, combined (root of the sum of
squares). `part_text` shows a negative part as "within noise (±x ms)" when it is within
NOISE_SPREADS of that, else as a negative in ms that says it is beyond the noise; never raw
microseconds, and a bar that draws it as zero says so in its text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from gputui.metrics.step_diagnosis import Flat

NOISE_SPREADS: Final = 2.0
"""A negative part within this many `noise_s` is noise (about 95 %)."""

UNSPLIT: Final = (
    "client_s includes the server's own overhead outside queue and prefill (API, tokenization, "
    "scheduling): the server reports no TTFT of its own to split it by"
)
"""`ttft_breakdown["unsplit"]` when the server has no TTFT histogram."""


def _parts(total_s: float, parts: dict[str, float]) -> Flat:
    rest = total_s - sum(parts.values())
    out: Flat = {k: round(v, 6) for k, v in parts.items()}
    out["client_s"] = round(rest, 6)
    shares = {f"{k[:-2]}_share": v / total_s for k, v in {**parts, "client_s": rest}.items()}
    out.update({k: round(v, 4) for k, v in shares.items()})
    out["explained_share"] = round(sum(parts.values()) / total_s, 4)
    return out


def ttft_breakdown(
    ttft_mean_s: float | None,
    rtt_mean_s: float | None,
    queue_mean_s: float | None,
    prefill_mean_s: float | None,
    connect_mean_s: float | None = None,
    server_ttft_mean_s: float | None = None,
    noise_s: float | None = None,
) -> Flat | None:
    """`steps[].ttft_breakdown` (see the module docstring); None when a part is unknown."""
    if not ttft_mean_s or ttft_mean_s <= 0 or queue_mean_s is None or prefill_mean_s is None:
        return None
    network = rtt_mean_s or 0.0
    parts = {"network_s": network, "queue_s": queue_mean_s, "prefill_s": prefill_mean_s}
    split = server_ttft_mean_s is not None
    if server_ttft_mean_s is not None:
        parts["server_other_s"] = server_ttft_mean_s - queue_mean_s - prefill_mean_s
    out: Flat = {"ttft_s": round(ttft_mean_s, 6)}
    out.update(_parts(ttft_mean_s, parts))
    if not split:
        out["server_other_s"] = None
        out["server_other_share"] = None
    out["server_ttft_s"] = None if server_ttft_mean_s is None else round(server_ttft_mean_s, 6)
    out["unsplit"] = None if split else UNSPLIT
    out["connect_s"] = None if connect_mean_s is None else round(connect_mean_s, 6)
    out["rtt_measured"] = rtt_mean_s is not None
    out["noise_s"] = None if noise_s is None else round(noise_s, 6)
    out["formula"] = (
        "TTFT(mean) = network (RTT probe mean) + server queue (mean) + server prefill (mean) + "
        "server other (server TTFT mean - queue - prefill, over the same requests) + client "
        "(TTFT - server TTFT - network); connection setup is outside TTFT"
        if split
        else "TTFT(mean) = network (RTT probe mean) + server queue (mean) + server prefill (mean) "
        "+ client (the rest, with the server's own overhead: no server TTFT to split it by); "
        "connection setup is outside TTFT"
    )
    return out


def noise(rtt_spread_s: float | None, ttft_std_s: float | None, n: int) -> float | None:
    """`noise_s`: the probe's spread and the mean TTFT's standard error combined (None: neither)."""
    error = ttft_std_s / math.sqrt(n) if ttft_std_s is not None and n > 0 else None
    known = [x for x in (rtt_spread_s, error) if x is not None]
    return math.sqrt(sum(x * x for x in known)) if known else None


def part_text(value_s: float | None, noise_s: float | None, *, unit: str = " ms") -> str:
    """A part in ms; a negative one 'within noise (±0.4 ms)' or '-13.4 ms (beyond noise ±0.4)'."""
    if value_s is None:
        return "-"
    if value_s >= 0.0:
        ms = value_s * 1e3
        return f"{ms:.0f}{unit}" if ms >= 9.5 else f"{ms:.1f}{unit}"
    spread = f"±{noise_s * 1e3:.1f}{unit}" if noise_s is not None else "noise unknown"
    if noise_s is not None and -value_s <= NOISE_SPREADS * noise_s:
        return f"within noise ({spread})"
    return f"{value_s * 1e3:.1f}{unit} (below zero beyond noise, {spread})"


def client_label(breakdown: Mapping[str, object]) -> str:
    """'client', or 'client+server' when the client's part holds the server's unsplit rest."""
    return "client+server" if breakdown.get("unsplit") else "client"


def e2e_breakdown(
    e2e_mean_s: float | None,
    rtt_mean_s: float | None,
    queue_mean_s: float | None,
    prefill_mean_s: float | None,
    decode_mean_s: float | None,
    server_e2e_mean_s: float | None = None,
) -> Flat | None:
    """The same split of the mean E2E, with the server's decode time added.

    With the server's own E2E histogram mean its rest (`server_other_s` = server E2E - queue -
    prefill - decode) is split from the client's as for TTFT; without it `unsplit` says so.
    """
    if not e2e_mean_s or e2e_mean_s <= 0:
        return None
    if queue_mean_s is None or prefill_mean_s is None or decode_mean_s is None:
        return None
    parts = {
        "network_s": rtt_mean_s or 0.0,
        "queue_s": queue_mean_s,
        "prefill_s": prefill_mean_s,
        "decode_s": decode_mean_s,
    }
    if server_e2e_mean_s is not None:
        parts["server_other_s"] = server_e2e_mean_s - queue_mean_s - prefill_mean_s - decode_mean_s
    out: Flat = {"e2e_s": round(e2e_mean_s, 6), **_parts(e2e_mean_s, parts)}
    if server_e2e_mean_s is None:
        out["server_other_s"] = None
        out["server_other_share"] = None
    out["unsplit"] = None if server_e2e_mean_s is not None else UNSPLIT.replace("TTFT", "E2E")
    return out
