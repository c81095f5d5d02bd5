"""Diagnose each finished step: server latency, TTFT/E2E breakdown, roofline use, bottleneck.

Contract: `StepDiagnoser(model=...)` is made before the Session (its `on_frame` goes with the
session's frame callback), bound with `start(session, sampler, metrics_url)` (which starts a
`HistogramRecorder` on the server's /metrics when there is one, on the sampler's scraper) and
`stop()`ped after the session. It is called with each
finished `StepResult` (`diagnose(result)`, from the step callback: every request of the step is
back by then) and returns, and keeps, `{"server_latency", "ttft_breakdown", "e2e_breakdown",
"roofline", "bottleneck", "prefix_cache_warning"}` (each None when its inputs are missing; the
last only when `expect_cold`, see `metrics.prefix_cache.cold_warning`). It reads the step's window
[measure start, end) from the session, the server/GPU samples of the telemetry sampler in that
window, the latency histograms' change from the `HistogramRecorder`, the RTT samples that arrived
in the window, the client's frames (`on_frame`) and the step's records. A server records TTFT and
ITL at the first token and the rest at the request's end, so the histograms are cut in two
windows, the step's shifted by the step's mean TTFT and by its mean E2E: the server then counts
about the requests the client measured. A window starts no earlier than the last first token (or
end) of the requests sent before the step's measurement began (at most half-way in), so the
transition's queue does not count as the step's, and, when a next step follows, ends before its
requests could have got there (the quickest measured TTFT or E2E after the step's end, less the
round trip). `attach(snapshot)` writes the kept diagnoses into
the snapshot's steps, and the knee's (`knee_explanation`) into `knee.explanation`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np

from gputui.catalog.specs import GpuSpec
from gputui.diagnosis.evidence import (
    gpu_in_window,
    histogram_count_line,
    latency_breakdowns,
    step_evidence,
    with_step_telemetry,
)
from gputui.diagnosis.window import (
    ClientFrame,
    ServerWindow,
    client_window,
    server_latency_from_histograms,
    server_latency_from_timings,
    server_percentiles_line,
    server_window,
)
from gputui.engine.records import RequestRecord
from gputui.engine.schedstat import steal_ticks
from gputui.metrics.bottleneck import bottleneck, verdict_line
from gputui.metrics.json_read import number
from gputui.metrics.prefix_cache import cold_warning, step_meter
from gputui.metrics.roofline_use import catalog_model, precision_of, roofline_use
from gputui.metrics.saturation import SATURATION_VERDICTS
from gputui.metrics.step import StepResult, StepSpec
from gputui.metrics.step_diagnosis import (
    DIAGNOSIS_KEYS,
    Flat,
    StepDiagnosis,
    bottleneck_verdict,
    flat,
)
from gputui.metrics.ttft_breakdown import client_label, part_text
from gputui.snapshot.models import Snapshot
from gputui.telemetry.histogram_recorder import HistogramRecorder, recorder_for
from gputui.telemetry.sampler import TelemetrySampler, Traces

KEYS = DIAGNOSIS_KEYS


class DiagnosedSession(Protocol):
    """What the diagnoser reads of a Session."""

    started_ns: int

    def step_specs(self) -> list[StepSpec]:
        """Every step so far."""
        ...

    def all_records(self) -> list[RequestRecord]:
        """Every record so far."""
        ...

    def rtt_between(self, lo_ns: int, hi_ns: int) -> list[int]:
        """RTT samples that arrived in the window."""
        ...


class StepDiagnoser:
    """Per-step diagnosis for `gputui run` (see the module docstring)."""

    def __init__(
        self,
        session: DiagnosedSession | None = None,
        *,
        sampler: TelemetrySampler | None = None,
        recorder: HistogramRecorder | None = None,
        model: str | None = None,
        measured_bandwidth_gbps: float | None = None,
    ) -> None:
        self._session = session
        self._sampler = sampler
        self._recorder = recorder
        self._own_recorder = False
        self._model_name = model
        self._model = catalog_model(model)
        self._measured_bw = measured_bandwidth_gbps
        self._frames: list[ClientFrame] = []
        self._lock = threading.Lock()
        self.diagnoses: dict[int, StepDiagnosis] = {}
        self._previous: StepResult | None = None
        self.expect_cold = False
        """The prompts were salted to miss every cache: a step that hits is warned about."""

    def start(
        self,
        session: DiagnosedSession,
        sampler: TelemetrySampler | None,
        metrics_url: str | None,
    ) -> None:
        """Bind the session and telemetry; scrape the server's histograms from now on."""
        self._session = session
        self._sampler = sampler
        if metrics_url is not None and self._recorder is None:
            self._recorder = recorder_for(metrics_url, sampler).start()
            self._own_recorder = True

    def stop(self) -> None:
        """Stop the histogram scrapes this diagnoser started."""
        if self._recorder is not None and self._own_recorder:
            self._recorder.stop()

    def also(self, other: Callable[[object], None]) -> Callable[[object], None]:
        """A frame callback that feeds this diagnoser and then `other`."""

        def both(frame: object) -> None:
            self.on_frame(frame)
            other(frame)

        return both

    def on_frame(self, frame: object) -> None:
        """Session frame callback: keep what the client rule reads."""
        item = ClientFrame(
            time.perf_counter_ns(),
            float(getattr(frame, "busiest_worker_cpu_percent", 0.0)),
            float(getattr(frame, "loop_lag_max_ms", 0.0)),
            getattr(frame, "client_run_wait_percent", None),
            float(getattr(frame, "gc_pause_max_ms", 0.0)),
            steal_ticks(),
        )
        with self._lock:
            self._frames.append(item)

    def diagnose(self, result: StepResult) -> StepDiagnosis:
        """The step's diagnosis (kept for `attach`)."""
        if self._session is None:
            return StepDiagnosis()
        session = self._session
        specs = session.step_specs()
        spec = next((s for s in specs if s.index == result.index), None)
        if spec is None or spec.end_ns < 0:
            return StepDiagnosis()
        every = session.all_records()
        records = [r for r in every if r.step_index == result.index]
        lo, hi = spec.measure_start_ns, spec.end_ns
        rtt = session.rtt_between(lo, hi) or session.rtt_between(spec.start_ns, hi)
        rtt_mean = float(np.mean(rtt)) / 1e9 if rtt else None
        rtt_spread = float(np.std(rtt)) / 1e9 if len(rtt) > 1 else None
        traces = self._sampler.traces(downsample_to=None) if self._sampler is not None else None
        server = (
            server_window(traces.server, lo, hi, **_request_tokens(records))
            if traces is not None
            else ServerWindow()
        )
        gpu, gpu_spec = gpu_in_window(traces.gpu if traces is not None else (), lo, hi)
        gpu = with_step_telemetry(gpu, result.telemetry)
        with self._lock:
            frames = list(self._frames)
        client = client_window(frames, records, lo, hi)
        measured_ok = [r for r in records if r.ok and r.sent_ns >= lo]
        latency = self._server_latency(
            result,
            every,
            measured_ok,
            (lo, hi),
            rtt_ns=round((rtt_mean or 0.0) * 1e9),
            next_step=any(s.index > result.index for s in specs),
        )
        origin = self._session.started_ns
        breakdown, e2e = latency_breakdowns(
            result, latency, measured_ok, rtt_mean, rtt_spread, origin_ns=origin
        )
        roofline = self._roofline(result, measured_ok or records, server, gpu_spec)
        evidence = step_evidence(
            result,
            self._previous,
            records,
            breakdown=breakdown,
            roofline=roofline,
            server=server,
            gpu=gpu,
            client=client,
        )
        verdict = bottleneck(evidence)
        percentiles = server_percentiles_line(latency)
        if percentiles:
            verdict["evidence"].append(percentiles)
        counted = histogram_count_line(latency, result.ttft_s.n, result.duration_s)
        if counted:
            verdict["evidence"].append(counted)
        diagnosis = StepDiagnosis(
            server_latency=latency,
            ttft_breakdown=breakdown,
            e2e_breakdown=e2e,
            roofline=roofline,
            bottleneck=verdict,
            prefix_cache_warning=self._cold_warning(result, every, traces),
        )
        self._previous = result
        self.diagnoses[result.index] = diagnosis
        return diagnosis

    def line(self, result: StepResult) -> str:
        """The step's one verdict line (diagnosing it first if needed)."""
        try:
            diagnosis = self.diagnoses.get(result.index) or self.diagnose(result)
        except Exception as exc:  # noqa: BLE001 - runs on the engine's reader thread: never kill it
            return f"bound by: not diagnosed ({type(exc).__name__}: {exc})"
        if diagnosis.bottleneck is None:
            return "bound by: not diagnosed (the step has no window)"
        return verdict_line(diagnosis.bottleneck)

    def warnings(self, result: StepResult) -> list[str]:
        """The step's diagnosis warnings (a cold step served from cache) for `gputui run`."""
        diagnosis = self.diagnoses.get(result.index)
        warning = diagnosis.prefix_cache_warning if diagnosis is not None else None
        return [warning] if warning else []

    def _cold_warning(
        self, result: StepResult, every: Sequence[RequestRecord], traces: Traces | None
    ) -> str | None:
        if not self.expect_cold:
            return None
        meter = step_meter(result.index, every, traces.server if traces is not None else ())
        mine = [r for r in every if r.step_index == result.index]
        return cold_warning(result.index, result.level, mine, meter)

    def attach(self, snapshot: Snapshot) -> Snapshot:
        """The snapshot with each step's diagnosis and the knee's explanation."""
        steps = tuple(
            step.model_copy(update=d.fields())
            if (d := self.diagnoses.get(step.index)) is not None
            else step
            for step in snapshot.steps
        )
        update: dict[str, object] = {"steps": steps}
        capacity = snapshot.capacity
        if capacity is not None:
            at = next((s for s in steps if s.level == capacity.level and s.bottleneck), None)
            if at is not None and at.bottleneck is not None:
                throttled = bool(at.bottleneck.get("throttled"))
                update["capacity"] = capacity.model_copy(
                    update={"measured_while_throttled": throttled}
                )
        if snapshot.knee is not None:
            mine = [s.model_dump() for s in steps if s.mode == snapshot.knee.mode]
            text = knee_explanation(snapshot.knee.level, mine)
            if text is not None:
                update["knee"] = snapshot.knee.model_copy(update={"explanation": text})
        return snapshot.model_copy(update=update)

    def _server_latency(
        self,
        result: StepResult,
        records: Sequence[RequestRecord],
        measured: Sequence[RequestRecord],
        window: tuple[int, int],
        *,
        rtt_ns: int,
        next_step: bool,
    ) -> dict[str, object] | None:
        """`records`: the run's; `measured`: this step's ok ones sent in its window."""
        lo, hi = window
        timed = server_latency_from_timings(measured)
        if timed is not None or self._recorder is None:
            return timed
        # Requests sent before the window (warm-up, earlier steps) that the server was still
        # serving after the shifted start would count as this step's: start after their last.
        # Those seen before the shifted start but after the scrape before it would too: the
        # window then starts at a scrape after them (`floor_ns`). A first wave's long queue,
        # taken in by one window and not the other, read 2 ms of the sim's 8 ms server other.
        # Requests of a next step, sent from `hi` on, would too once they got there: end before
        # the earliest they could (the quickest measured TTFT or E2E less the round trip, or
        # the first of them seen), when there is a next step.
        earlier = [r for r in records if r.sent_ns < lo and r.step_index <= result.index]
        later = [r for r in records if r.sent_ns >= hi]
        last_first = max((r.first_token_ns or 0 for r in earlier), default=0)
        last_end = max((r.end_ns for r in earlier), default=0)
        ttft_shift = round((result.ttft_s.mean or 0.0) * 1e9)
        e2e_shift = round((result.e2e_s.mean or 0.0) * 1e9)
        first_cap, end_cap = hi + ttft_shift, hi + e2e_shift
        if measured and next_step:
            quickest = min(
                (f - r.sent_ns for r in measured if (f := r.first_token_ns) is not None),
                default=None,
            )
            if quickest is not None:  # ok requests can all be empty answers (no first token)
                first_cap = min(first_cap, hi + max(quickest - rtt_ns, 0))
            end_cap = min(
                end_cap, hi + max(min(r.end_ns - r.sent_ns for r in measured) - rtt_ns, 0)
            )
        first_lo = _start(lo + ttft_shift, last_first, hi - lo)
        first_hi = _end(first_lo, first_cap, [r.first_token_ns for r in later])
        end_lo = _start(lo + e2e_shift, last_end, hi - lo)
        end_hi = _end(end_lo, end_cap, [r.end_ns for r in later])
        first = self._recorder.between(
            first_lo,
            first_hi,
            inner_lo=first_lo > lo + ttft_shift,
            inner_hi=first_hi < hi + ttft_shift,
            floor_ns=min(last_first, first_lo),
        )
        finish = self._recorder.between(
            end_lo,
            end_hi,
            inner_lo=end_lo > lo + e2e_shift,
            inner_hi=end_hi < hi + e2e_shift,
            floor_ns=min(last_end, end_lo),
        )
        origin = self._session.started_ns if self._session is not None else 0
        return server_latency_from_histograms(first, finish, origin)

    def _roofline(
        self,
        result: StepResult,
        measured_ok: Sequence[RequestRecord],
        server: ServerWindow,
        gpu_spec: GpuSpec | None,
    ) -> Flat | None:
        # Ok requests' usage counts; failed ones (timeouts) only say what they asked for.
        asked = [r.input_tokens or r.requested_input_tokens for r in measured_ok]
        inputs = [n for n in asked if n is not None]
        outputs = [r.output_tokens if r.ok else r.requested_output_tokens for r in measured_ok]
        context = (float(np.mean(inputs)) if inputs else 0.0) + (
            float(np.mean(outputs)) / 2 if outputs else 0.0
        )
        batch = server.get("running_mean")
        if not batch and result.mode == "concurrency":
            batch = result.level
        if not batch and result.e2e_s.mean:
            batch = result.requests_per_s * result.e2e_s.mean  # Little's law
        bw = self._measured_bw * 1e9 if self._measured_bw else None
        return roofline_use(
            gpu_spec,
            self._model,
            output_tokens_per_s=result.output_tokens_per_s,
            input_tokens_per_s=result.input_tokens_per_s,
            mean_batch=batch,
            mean_context_tokens=context,
            precision=precision_of(self._model_name),
            measured_bandwidth_bytes_per_s=bw,
        )


def _request_tokens(records: Sequence[RequestRecord]) -> dict[str, float | None]:
    """The step's mean prompt (a waiting request's need) and prompt + output (what one holds)."""
    prompts = [n for r in records if (n := r.input_tokens or r.requested_input_tokens)]
    outputs = [max(r.output_tokens, r.requested_output_tokens) for r in records]
    if not prompts:
        return {"need_tokens": None, "hold_tokens": None}
    need = float(np.mean(prompts))
    return {
        "need_tokens": need,
        "hold_tokens": need + (float(np.mean(outputs)) if outputs else 0.0),
    }


def _start(shifted_ns: int, last_earlier_ns: int, span_ns: int) -> int:
    """The later of the shifted start and the earlier requests' last event, at most mid-window."""
    return max(shifted_ns, min(last_earlier_ns, shifted_ns + span_ns // 2))


def _end(start_ns: int, shifted_ns: int, later_ns: Sequence[int | None]) -> int:
    """The shifted end, or the later requests' first event before it (if after the start)."""
    seen = [t for t in later_ns if t is not None and start_ns < t < shifted_ns]
    return min(seen, default=shifted_ns)


def _ms(part: Flat, key: str) -> str:
    value = number(part, key) or 0.0
    return f"{value * 1e3:.0f}" if value >= 0.0 else part_text(value, number(part, "noise_s"))


def _has_data(step: Mapping[str, object]) -> bool:
    """A request finished in it (a row without the counts is taken to have data)."""
    if "requests_ok" not in step:
        return True
    return (number(step, "requests_ok") or 0) + (number(step, "requests_failed") or 0) > 0


def knee_explanation(knee_level: float, steps: Sequence[Mapping[str, object]]) -> str | None:
    """'knee at 32: <evidence of the first step past it>; TTFT 620 ms = queue 410 + ...'.

    `steps`: each step's `level` with its diagnosis's parts (`StepDiagnosis.fields`).
    """
    past = sorted(
        (
            (level, step, verdict)
            for step in steps
            if (level := number(step, "level") or 0.0) > knee_level
            and _has_data(step)
            and step.get("bottleneck")
            and (verdict := bottleneck_verdict(step.get("bottleneck"))) is not None
        ),
        key=lambda found: found[0],
    )
    if not past:
        return None
    level, step, verdict = past[0]
    evidence = verdict["evidence"]
    queue_bits = [e for e in evidence if "waiting" in e or "KV" in e]
    if verdict["verdict"] in SATURATION_VERDICTS or verdict.get("low_confidence"):
        queue_bits = evidence[:1]  # the cause's own evidence leads (metrics.saturation)
    parts = [f"knee at {knee_level:g}: bound by {verdict['verdict']} at {level:g}"]
    if queue_bits:
        parts.append(queue_bits[0])
    b = flat(step.get("ttft_breakdown"))
    if b:
        server = (
            "" if b.get("server_other_s") is None else f" + server other {_ms(b, 'server_other_s')}"
        )
        parts.append(
            f"TTFT {_ms(b, 'ttft_s')} ms = queue {_ms(b, 'queue_s')} + prefill "
            f"{_ms(b, 'prefill_s')}{server} + network {_ms(b, 'network_s')} + "
            f"{client_label(b)} {_ms(b, 'client_s')}"
        )
    return "; ".join(parts)
