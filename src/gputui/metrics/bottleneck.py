"""What bound a step, with its evidence: the rules, all of them here (domain.md section 9).

Contract: `bottleneck(evidence)` is a pure function of one step's numbers (`StepEvidence`: the
client's latencies and rates, the TTFT breakdown, the roofline use, the server, GPU and client
telemetry inside the step's window, and the previous step for trends) and returns
`{"verdict", "evidence": [one-line strings], "suspect", "throttled"}` for `steps[].bottleneck`.
The rules run in this order and the first that holds is the verdict:

0. `errors`: at least ERRORS_SHARE of the step's requests (warm-up included) were rejected
   (HTTP 4xx but 408 and 429: what was sent, not the load), or the step ended early, flooded with
   rejections (`metrics.error_log`); also, in place of `none`, when as many failed for any
   reason (timeouts, 5xx: load, which the rules below may explain first). The evidence names the
   errors with the server's first message ("http_400 x 976: 'This model's maximum ...'").
1. `client` or `host-contended`: the load generator's busiest process >= CLIENT_CPU_PCT, or its
   event loop was late by >= CLIENT_LAG_MS, or requests left >= CLIENT_DISPATCH_LATE_MS (p95)
   after their scheduled time (connection setup excluded: new connections are their own line;
   in a step where `--max-in-flight` bound, the lateness is the cap's, its own line too).
   `metrics.client_state` says why: `client` (client-bound) only when its CPU is near a core
   (>= CLIENT_BOUND_CPU_PCT on average: add workers), `host-contended` when the engine waited in
   the run queue more than it ran (other processes hold the CPUs: more workers will not help);
   either sets `suspect` (its timings include its own queueing) and decides unless the server's
   own gauges show it queueing (rule 4's KV, preemption or backlog evidence, or running held at
   the sequence limit while requests waited with KV room, does not depend on the client's clock:
   a server that queues is the bound however late the client was; the step stays suspect). A
   lag with low CPU and low wait is `stalled`: a pause (a GC, steal time, a blocking call), said
   in the evidence; it decides nothing and is not suspect, so the rules below name the bound.
   `client_state` says which of the three, whatever the verdict.
2. `throttled`: the GPU ran under THROTTLE_CLOCK_RATIO of its maximum clock with a power or
   thermal reason (NVML bits 0x04, 0x08, 0x20, 0x40, 0x80) active in >= THROTTLE_SHARE of the
   window's samples. The step is "measured while throttled", and so is a capacity taken from it.
3. `network`: the RTT is >= NETWORK_SHARE of the mean TTFT.
4. `queue`: the server's queue time is >= QUEUE_SHARE of TTFT, or requests were waiting and the
   KV cache could not admit them (judged by admission: free blocks against a prompt's need,
   `metrics.saturation.kv_full`; where the block count is not exposed, usage >= KV_FULL or no
   room for one more request of the step's mean context), preemptions occurred or more requests
   waited than ran. (Shares of TTFT count only when network + queue + prefill (+ the server's
   other time, when split) explain CONSISTENT_LOW..CONSISTENT_HIGH of it.)
5. `prefill-compute`: prefill is >= PREFILL_SHARE of TTFT and prefill used >= COMPUTE_HIGH of
   the card's dense peak.
6. `decode-bandwidth`: decode used >= BANDWIDTH_HIGH of the card's bandwidth and TPOT grew by
   less than TPOT_SLOW_GROWTH per doubling of load since the previous step (or there is none).
7. `server-overhead`: the GPU was busy < GPU_IDLE_UTIL_PCT on average while TTFT or TPOT rose
   by >= LATENCY_RISE against the previous step.
8. `metrics.saturation`'s causes past the knee: a `queue` verdict is refined into `kv-capacity`
   or `scheduler-limit` when the server's gauges say which, a failing step's `decode-bandwidth`
   into `prefill-interference` when its ITL tail is prefill stalls; a step no rule named may be
   `scheduler-limit`, `prefill-interference` or `decode-compute`; a step that failed its SLA or
   saturated gets its most likely cause, with `low_confidence` set when the evidence is thin.
9. `none`: nothing bounds the step yet (it neither failed nor saturated).

Every rule that has its numbers adds evidence lines, so a verdict comes with the figures that
decided it and with those of the runners-up. `VERDICTS` holds each verdict's one-line meaning
for the help screen.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from gputui.metrics.client_state import (
    CLIENT_BOUND,
    CLIENT_BOUND_CPU_PCT,
    HOST_CONTENDED,
    STALLED,
    client_state,
    stall_evidence,
    state_evidence,
)
from gputui.metrics.error_log import errors_text
from gputui.metrics.json_read import number
from gputui.metrics.saturation import (
    SATURATION_VERDICTS,
    admission_text,
    explain_saturation,
    refine_bandwidth,
    refine_queue,
    sequence_limited,
)
from gputui.metrics.saturation import (
    kv_full as kv_is_full,
)
from gputui.metrics.step_diagnosis import BottleneckVerdict, Flat
from gputui.metrics.step_evidence import StepEvidence
from gputui.metrics.ttft_breakdown import client_label, part_text

ERRORS_SHARE: Final = 0.5
CLIENT_CPU_PCT: Final = 90.0
CLIENT_LAG_MS: Final = 20.0
CLIENT_DISPATCH_LATE_MS: Final = 10.0
THROTTLE_CLOCK_RATIO: Final = 0.95
THROTTLE_SHARE: Final = 0.5
THROTTLE_REASON_MASK: Final = 0x04 | 0x08 | 0x20 | 0x40 | 0x80
NETWORK_SHARE: Final = 0.5
QUEUE_SHARE: Final = 0.5
KV_FULL: Final = 0.9
PREFILL_SHARE: Final = 0.5
COMPUTE_HIGH: Final = 0.4
BANDWIDTH_HIGH: Final = 0.5
TPOT_SLOW_GROWTH: Final = 0.3
GPU_IDLE_UTIL_PCT: Final = 50.0
CONSISTENT_LOW: Final = 0.7
CONSISTENT_HIGH: Final = 1.3
"""Network + queue + prefill must explain this share of TTFT for the shares to be trusted."""
LATENCY_RISE: Final = 0.2

VERDICTS: Final[dict[str, str]] = {
    "errors": "most requests failed (e.g. rejected with HTTP 4xx): the step measures no load",
    "client": "the load generator's own CPU near a core (its loop lags): numbers suspect",
    "host-contended": "other processes hold the client's CPUs: it waits to run, numbers suspect",
    "network": "the round trip to the server is most of TTFT",
    "queue": "requests wait: queue time dominates TTFT, KV cache near full, preemptions",
    "decode-bandwidth": "decode reads weights and KV at a high share of the memory bandwidth",
    "prefill-compute": "prefill dominates TTFT and uses a high share of the card's FLOP/s",
    "throttled": "clocks under their maximum with power or thermal reasons: measured throttled",
    "server-overhead": "the GPU sits idle while latency rises: the server's own overhead",
    **SATURATION_VERDICTS,
    "none": "nothing bounds the step yet: more load would still be served",
}
"""Each verdict in one line (the help screen shows these)."""


def _ms(value_s: float | None) -> str:
    value_s = value_s or 0.0
    return f"{value_s * 1e3:.0f} ms" if value_s >= 0.0095 else f"{value_s * 1e3:.1f} ms"


def _pct(x: float) -> str:
    return f"{x:.0%}"


def _growth_per_doubling(e: StepEvidence) -> float | None:
    if (
        e.previous_level is None
        or e.previous_tpot_p50_s is None
        or e.tpot_p50_s is None
        or e.previous_tpot_p50_s <= 0
        or e.previous_level <= 0
        or e.level <= e.previous_level
    ):
        return None
    doublings = math.log2(e.level / e.previous_level)
    return float((e.tpot_p50_s / e.previous_tpot_p50_s) ** (1.0 / doublings) - 1.0)


def _rise(now: float | None, before: float | None) -> float | None:
    if now is None or before is None or before <= 0:
        return None
    return now / before - 1.0


def breakdown_text(b: Flat) -> str:
    """'TTFT 49 ms = queue 0.0 ms + prefill 25 ms + server other 9.0 ms + network ... + client ...'.

    Without the server's own TTFT the last part reads 'client+server' (see
    metrics.ttft_breakdown: the server's rest could not be split from the client's). A part
    below zero reads 'within noise (±x ms)' or says it is beyond the noise (`part_text`).
    """
    noise_s = number(b, "noise_s")

    def part(key: str) -> str:
        return part_text(number(b, key), noise_s)

    server = (
        "" if number(b, "server_other_s") is None else f" + server other {part('server_other_s')}"
    )
    client = client_label(b)
    return (
        f"TTFT {_ms(number(b, 'ttft_s'))} = queue {part('queue_s')} + prefill {part('prefill_s')}"
        f"{server} + network {part('network_s')} + {client} {part('client_s')}"
    )


def _unexplained_hint(b: Flat) -> str | None:
    """Why the measured parts do not add up to the TTFT, when they do not (None when they do).

    Over CONSISTENT_HIGH the server's histogram window caught other requests (a load change inside
    it). Under CONSISTENT_LOW with the server's own TTFT split off, the rest lies outside the
    server and the network: the client's. Without it, the server's own overhead is in the rest.
    """
    share = number(b, "explained_share") or 0.0
    if CONSISTENT_LOW <= share <= CONSISTENT_HIGH:
        return None
    if share > CONSISTENT_HIGH:
        return (
            f"server parts add up to {share:.0%} of TTFT: the server's window caught other "
            "requests (longer steps help)"
        )
    if b.get("server_other_s") is not None:
        return (
            f"server and network explain {share:.0%} of TTFT: the rest "
            f"({_ms(number(b, 'client_s'))}) is the client's"
        )
    return (
        f"queue, prefill and network explain {share:.0%} of TTFT: the rest holds the server's "
        "own overhead, which it reports no TTFT to split by, and the client's"
    )


class _Findings:
    """The evidence lines gathered so far, and the first rule that decided (rule order wins)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.verdict: str | None = None

    def decide(self, name: str) -> None:
        """Take `name` as the verdict unless an earlier rule already decided."""
        if self.verdict is None:
            self.verdict = name


def bottleneck(e: StepEvidence) -> BottleneckVerdict:
    """The verdict and its evidence (rules and order in the module docstring)."""
    found = _Findings()
    kv_full = kv_is_full(e, KV_FULL)
    backlog = bool(e.waiting_max and e.running_mean and e.waiting_max >= e.running_mean)
    server_queued = bool(e.waiting_max) and (
        kv_full or bool(e.preemptions) or backlog or sequence_limited(e)
    )
    mostly_failed = _errors_rule(e, found)
    client, state = _client_rule(e, found, server_queued=server_queued)
    throttled = _throttle_rule(e, found)
    _ttft_rules(e, found, kv_full=kv_full, server_queued=server_queued)
    _bandwidth_rule(e, found)
    _overhead_rule(e, found)
    if found.verdict is None and mostly_failed:
        found.verdict = "errors"
    finding = None
    if found.verdict == "queue":
        finding = refine_queue(e, KV_FULL)
    elif found.verdict == "decode-bandwidth":
        finding = refine_bandwidth(e)
    elif found.verdict is None:
        finding = explain_saturation(e, BANDWIDTH_HIGH)
    lines = found.lines
    if finding is not None:
        found.verdict = finding.verdict
        lines = [*finding.evidence, *lines]
    return BottleneckVerdict(
        verdict=found.verdict or "none",
        evidence=lines,
        suspect=bool(client),
        throttled=throttled,
        low_confidence=bool(finding and finding.low_confidence),
        client_state=state,
    )


def _errors_rule(e: StepEvidence, found: _Findings) -> bool:
    """0. errors: rejections decide now; whether most requests failed (decided last) is returned."""
    failed = sum((e.step_errors or {}).values())
    mostly_failed = bool(e.step_requests) and failed >= ERRORS_SHARE * e.step_requests
    if e.ended_early or (e.step_requests and e.step_rejections >= ERRORS_SHARE * e.step_requests):
        found.decide("errors")
    if mostly_failed or e.ended_early:
        found.lines.append(
            f"{failed} of {e.step_requests} requests failed: "
            + errors_text(e.step_errors or {}, e.error_messages or {})
        )
        if e.ended_early:
            found.lines.append(f"ended early: {e.ended_early}")
    return mostly_failed


def _client_rule(
    e: StepEvidence, found: _Findings, *, server_queued: bool
) -> tuple[list[str], str | None]:
    """1. client: the load generator's own limits; returns the suspect signs and the state."""
    client = []
    cpu_mean = e.client_cpu_max_pct if e.client_cpu_mean_pct is None else e.client_cpu_mean_pct
    if e.client_cpu_max_pct is not None and e.client_cpu_max_pct >= CLIENT_CPU_PCT:
        client.append(f"client CPU {e.client_cpu_max_pct:.0f} % (bound {CLIENT_CPU_PCT:.0f} %)")
    late_signs = []
    if e.loop_lag_max_ms is not None and e.loop_lag_max_ms >= CLIENT_LAG_MS:
        late_signs.append(
            f"client loop lag {e.loop_lag_max_ms:.0f} ms (bound {CLIENT_LAG_MS:.0f} ms)"
        )
    late = e.dispatch_late_p95_ms
    if late is not None and late >= CLIENT_DISPATCH_LATE_MS:
        late_signs.append(
            f"dispatch late p95 {late:.0f} ms (bound {CLIENT_DISPATCH_LATE_MS:.0f} ms, "
            "connection setup excluded)"
        )
    client += late_signs
    # A CPU peak alone, with the mean under a core's worth, delayed nothing worth a state.
    busy = bool(client) and (bool(late_signs) or (cpu_mean or 0.0) >= CLIENT_BOUND_CPU_PCT)
    state = client_state(cpu_mean, e.client_run_wait_pct, lagging=busy)
    if state in (CLIENT_BOUND, HOST_CONTENDED) and not server_queued:
        found.decide("host-contended" if state == HOST_CONTENDED else "client")
    if state is not None:
        found.lines += client
        if state == STALLED:
            found.lines.append(
                stall_evidence(
                    e.loop_lag_max_ms,
                    cpu_mean,
                    e.client_run_wait_pct,
                    gc_pause_ms=e.gc_pause_max_ms,
                    steal_pct=e.steal_pct,
                )
            )
        else:
            found.lines.append(state_evidence(state, cpu_mean, e.client_run_wait_pct))
        if e.host_cpu_pressure_pct is not None:
            found.lines.append(
                f"host CPU pressure {e.host_cpu_pressure_pct:.0f} % (PSI some avg10)"
            )
    connections = _connections_text(e, noted=state is not None)
    if connections:
        found.lines.append(connections)
    if e.slot_waits:
        schedule = e.ttft_schedule_p95_s
        found.lines.append(
            f"{e.slot_waits} requests waited for a --max-in-flight slot: the cap, not the "
            "client, sent them late"
            + ("" if schedule is None else f" (TTFT from the schedule p95 {_ms(schedule)})")
        )
    suspect = client if state in (CLIENT_BOUND, HOST_CONTENDED) else []
    return suspect, state


def _connections_text(e: StepEvidence, *, noted: bool) -> str | None:
    """'12 new connections (setup mean 41 ms, not counted as dispatch lateness)' or None.

    Said beside a client finding, or when opening them took as long as the dispatch bound.
    """
    opened, setup = e.new_connections, e.connect_mean_ms
    if not opened or setup is None:
        return None
    if not noted and setup < CLIENT_DISPATCH_LATE_MS:
        return None
    return (
        f"{opened} new connection{'s' if opened != 1 else ''} (setup mean {setup:.1f} ms, "
        "not counted as dispatch lateness)"
    )


def _throttle_rule(e: StepEvidence, found: _Findings) -> bool:
    """2. throttled: clocks held down by power or thermal reasons in most GPU samples."""
    throttled = e.throttled_share is not None and e.throttled_share >= THROTTLE_SHARE
    if throttled:
        found.decide("throttled")
        reasons = ", ".join(e.throttle_reasons) or "power/thermal"
        ratio = f" down to {_pct(e.clock_ratio_min)} of max" if e.clock_ratio_min else ""
        found.lines.append(
            f"throttled in {_pct(e.throttled_share or 0.0)} of GPU samples ({reasons}), "
            f"clock{ratio}"
        )
    return throttled


def _ttft_rules(e: StepEvidence, found: _Findings, *, kv_full: bool, server_queued: bool) -> None:
    """3.-5. network, queue and prefill compute, from the shares of TTFT and the server's queue."""
    b = e.breakdown
    ttft = number(b, "ttft_s")
    if b is not None and ttft:
        if (number(b, "network_share") or 0.0) >= NETWORK_SHARE:
            found.decide("network")
        hint = _unexplained_hint(b)
        if hint:
            found.lines.append(hint)
        found.lines.append(breakdown_text(b))
    # A breakdown whose measured parts overshoot the TTFT came from a window that caught another
    # load level's requests (a step shorter than a few request lifetimes): its shares mislead.
    explained = number(b, "explained_share")
    consistent = explained is not None and CONSISTENT_LOW <= explained <= CONSISTENT_HIGH
    queue_share = number(b, "queue_share") if consistent else None
    if (queue_share is not None and queue_share >= QUEUE_SHARE) or server_queued:
        found.decide("queue")
    queue_bits = _queue_bits(e, kv_full=kv_full)
    if queue_bits:
        found.lines.append(", ".join(queue_bits))
    compute = e.prefill_compute_utilization
    if b is not None and compute is not None:
        prefill_share = number(b, "prefill_share") or 0.0
        if consistent and prefill_share >= PREFILL_SHARE and compute >= COMPUTE_HIGH:
            found.decide("prefill-compute")
        found.lines.append(f"prefill at {_pct(compute)} of peak FLOP/s")


def _queue_bits(e: StepEvidence, *, kv_full: bool) -> list[str]:
    """The server's queue in words: KV cache use, room, waiting requests, preemptions."""
    queue_bits = []
    if e.kv_usage_max is not None:
        queue_bits.append(("KV cache full" if kv_full else "KV cache") + f" {_pct(e.kv_usage_max)}")
    admission = admission_text(e)
    if admission is not None:
        queue_bits.append(admission)
    elif e.kv_room_requests is not None and e.kv_room_requests < 1.0:
        queue_bits.append("no room for another request")
    if e.waiting_max is not None:
        grow = f" (+{e.waiting_growth})" if e.waiting_growth and e.waiting_growth > 0 else ""
        running = f" for {e.running_mean:.0f} running" if e.running_mean else ""
        queue_bits.append(f"{e.waiting_max} waiting{grow}{running}")
    if e.preemptions is not None:
        queue_bits.append(f"{e.preemptions} preemptions")
    return queue_bits


def _bandwidth_rule(e: StepEvidence, found: _Findings) -> None:
    """6. decode bandwidth: a high share of memory bandwidth while TPOT grows slowly."""
    bandwidth = e.decode_bandwidth_utilization
    growth = _growth_per_doubling(e)
    if bandwidth is not None:
        slow = growth is None or growth < TPOT_SLOW_GROWTH
        if bandwidth >= BANDWIDTH_HIGH and slow:
            found.decide("decode-bandwidth")
        trend = "" if growth is None else f", TPOT {growth:+.0%} per doubling"
        found.lines.append(f"decode at {_pct(bandwidth)} of memory bandwidth{trend}")


def _overhead_rule(e: StepEvidence, found: _Findings) -> None:
    """7. server overhead: the GPU mostly idle while latency rose since the previous step."""
    rise = max(
        (
            r
            for r in (
                _rise(e.ttft_mean_s, e.previous_ttft_mean_s),
                _rise(e.tpot_p50_s, e.previous_tpot_p50_s),
            )
            if r is not None
        ),
        default=None,
    )
    util = e.gpu_util_mean_pct
    if util is not None and util < GPU_IDLE_UTIL_PCT and rise is not None and rise >= LATENCY_RISE:
        found.decide("server-overhead")
        found.lines.append(f"GPU busy {util:.0f} % while latency rose {rise:.0%}")


def verdict_line(diagnosis: Mapping[str, object]) -> str:
    """'bound by queue: KV cache full 97 %, 41 waiting, 24 preemptions; TTFT ...' for one step."""
    found = diagnosis.get("evidence")
    evidence = "; ".join(str(e) for e in found) if isinstance(found, list) else ""
    flags = []
    if diagnosis.get("suspect"):
        flags.append(f"SUSPECT: {diagnosis.get('client_state') or 'client-bound'}")
    if diagnosis.get("throttled"):
        flags.append("measured while throttled")
    if diagnosis.get("low_confidence"):
        flags.append("likely: the evidence is thin")
    tail = f" [{', '.join(flags)}]" if flags else ""
    return f"bound by {diagnosis.get('verdict')}{': ' + evidence if evidence else ''}{tail}"
