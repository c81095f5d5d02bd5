"""Where a step's mean TTFT (and E2E) went: network, server queue, server prefill, the client.

Contract: `ttft_breakdown(ttft_mean_s, rtt_mean_s, queue_mean_s, prefill_mean_s, connect_mean_s)`
splits the client's mean TTFT (domain.md section 9) into

    network_s = the RTT probe's mean over the step (round trip: the request out, the answer back)
    queue_s   = the server's mean queue time (waiting before it was first scheduled)
    prefill_s = the server's mean prefill time (scheduled to first token)
    client_s  = TTFT - network - queue - prefill: client overhead, HTTP parsing and stream
                buffering on either side; the part nobody measured directly

each in seconds and as a share of the TTFT. The parts sum to the TTFT by construction, so the
check that matters is `explained_share` = (network + queue + prefill) / TTFT: near 1 when the
measured parts account for the TTFT, and `client_s` small. gputui stamps a request when its
first byte is written, after any new connection was set up, so connection setup is *not* inside
TTFT: its mean per request (`connect_s`) is reported beside the breakdown, not in it.
`e2e_breakdown` does the same for the mean E2E with queue, prefill and decode.
Pure functions; None in, None out (a server without the histograms gets no breakdown).
"""

from __future__ import annotations

from typing import Any


def _parts(total_s: float, parts: dict[str, float]) -> dict[str, Any]:
    rest = total_s - sum(parts.values())
    out: dict[str, Any] = {k: round(v, 6) for k, v in parts.items()}
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
) -> dict[str, Any] | None:
    """`steps[].ttft_breakdown` (see the module docstring); None when a part is unknown."""
    if not ttft_mean_s or ttft_mean_s <= 0 or queue_mean_s is None or prefill_mean_s is None:
        return None
    network = rtt_mean_s or 0.0
    out: dict[str, Any] = {"ttft_s": round(ttft_mean_s, 6)}
    out.update(
        _parts(
            ttft_mean_s,
            {"network_s": network, "queue_s": queue_mean_s, "prefill_s": prefill_mean_s},
        )
    )
    out["connect_s"] = None if connect_mean_s is None else round(connect_mean_s, 6)
    out["rtt_measured"] = rtt_mean_s is not None
    out["formula"] = (
        "TTFT(mean) = network (RTT probe mean) + server queue (mean) + server prefill (mean) + "
        "client (the rest: client overhead, stream buffering); connection setup is outside TTFT"
    )
    return out


def e2e_breakdown(
    e2e_mean_s: float | None,
    rtt_mean_s: float | None,
    queue_mean_s: float | None,
    prefill_mean_s: float | None,
    decode_mean_s: float | None,
) -> dict[str, Any] | None:
    """The same split of the mean E2E, with the server's decode time added."""
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
    return {"e2e_s": round(e2e_mean_s, 6), **_parts(e2e_mean_s, parts)}
