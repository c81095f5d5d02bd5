"""`gputui run`'s output: one line per finished step (with its warnings), a summary, a table."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TextIO

from gputui.engine.records import RequestRecord
from gputui.metrics.capacity_caveats import capacity_notes_lines
from gputui.metrics.energy import energy_line, joules_cell
from gputui.metrics.outcome import step_outcome
from gputui.metrics.step import StepResult
from gputui.metrics.step_quality import step_warnings
from gputui.metrics.streams_text import stream_text
from gputui.snapshot.models import Snapshot


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.1f}"


class StepPrinter:
    """Writes one line per finished step and a final table."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._printed = 0
        self.explain: Callable[[StepResult], str] | None = None
        """The step's verdict line (diagnosis), printed under its numbers."""
        self.diagnosis_warnings: Callable[[StepResult], list[str]] | None = None
        """The diagnosis's warnings (a cold step served from cache), printed with the others."""
        self.cache_line: Callable[[StepResult], str | None] | None = None
        """The step's prefix-cache hit rate and its source, printed under the verdict."""
        self.energy_price: float | None = None
        """Per kWh (`--energy-price`): each step's energy line adds its cost."""
        self.pue = 1.0

    def step(self, result: StepResult) -> None:
        """One line for a finished step (called from the engine's reader thread)."""
        left_out = f", {result.requests_failed} failed left out" if result.requests_failed else ""
        sla = f"SLA {step_outcome(result)} (n={result.ttft_s.n}{left_out})"
        flag = " INCOMPLETE" if result.incomplete else ""
        errors = ", ".join(f"{k} {v}" for k, v in sorted(result.errors.items()))
        burst = ""
        if result.requests_under_burst or result.burst_window_s:  # `run --burst`: cut, not hidden
            burst = (
                f", under a burst {result.requests_under_burst} "
                f"({result.burst_window_s:.1f} s) left out"
            )
        body = (
            f"{result.mode} {result.level:g}: "
            f"ok {result.requests_ok} failed {result.requests_failed}"
            f"{f' ({errors})' if errors else ''}{burst}, {result.requests_per_s:.2f} req/s, "
            f"{result.output_tokens_per_s:.1f} out tok/s "
            f"(good {result.goodput_output_tokens_per_s:.1f}), "
            f"TTFT p50/p95 {_ms(result.ttft_s.p50)}/{_ms(result.ttft_s.p95)} ms, "
            f"{stream_text(result)}"
            f"TPOT p95 {_ms(result.tpot_s.p95)} ms, ITL p95 {_ms(result.itl_s.p95)} ms, "
            f"{sla}{flag}\n"
        )
        if result.slot_waits and result.ttft_schedule_s is not None:
            body += (
                f"  {result.slot_waits} requests waited for a slot (--max-in-flight): TTFT from "
                f"their schedule p95 {_ms(result.ttft_schedule_s.p95)} ms\n"
            )
        verdict = self.explain(result) if self.explain is not None else None
        with self._lock:
            self._printed += 1
            self._stream.write(f"step {self._printed} {body}")
            if verdict:
                self._stream.write(f"  {verdict}\n")
            cache = self.cache_line(result) if self.cache_line is not None else None
            if cache:
                self._stream.write(f"  {cache}\n")
            energy = result.energy
            if energy is not None:
                self._stream.write(f"  {energy_line(energy, self.energy_price, self.pue)}\n")
            more = self.diagnosis_warnings(result) if self.diagnosis_warnings else []
            warnings = [*step_warnings(result), *more]
            self._stream.write("".join(f"  warning: {line}\n" for line in warnings))
            self._stream.flush()

    def response_models(self, asked: str, records: Sequence[RequestRecord]) -> None:
        """A note when the server answered with another `model` name than the one asked for."""
        names = Counter(r.response_model for r in records if r.response_model is not None)
        for name, count in names.most_common():
            if name != asked:
                self.note(
                    f"the server answered with model {name!r} (asked for {asked!r}) "
                    f"in {count} of {len(records)} requests"
                )

    def note(self, text: str) -> None:
        """A line of progress."""
        with self._lock:
            self._stream.write(f"gputui run: {text}\n")
            self._stream.flush()

    def summary(self, snapshot: Snapshot) -> None:
        """Knee, capacity, validation and bursts, one line each."""
        lines = []
        if snapshot.knee is not None:
            lines.append(
                f"knee: {snapshot.knee.mode} {snapshot.knee.level:g} ({snapshot.knee.reason})"
            )
            if snapshot.knee.explanation:
                lines.append(f"  {snapshot.knee.explanation}")
        else:
            lines.append(f"knee: none ({snapshot.knee_reason})")
        capacity = snapshot.capacity
        if capacity is not None:
            lines.append(
                f"capacity: {capacity.mode} {capacity.level:g}: "
                f"{capacity.output_tokens_per_s:.1f} good out tok/s"
                + (
                    f" (all {capacity.all_output_tokens_per_s:.1f})"
                    if capacity.all_output_tokens_per_s is not None
                    else ""
                )
                + ", "
                f"{capacity.requests_per_s:.2f} req/s, "
                f"P95 TTFT {_ms(capacity.ttft_p95_s)} ms, P95 TPOT {_ms(capacity.tpot_p95_s)} ms"
                + (
                    " (measured while throttled)"
                    if getattr(capacity, "measured_while_throttled", False)
                    else ""
                )
            )
            lines += capacity_notes_lines(capacity)
        else:
            lines.append(f"capacity: none ({snapshot.capacity_reason})")
        dropped = snapshot.client.arrivals_dropped if snapshot.client is not None else None
        if dropped:
            per_step = [
                f"step {step.index + 1}: {n}"
                for step in snapshot.steps
                if (n := getattr(step, "dropped_arrivals", 0) or 0)
            ]
            where = f" ({', '.join(per_step)})" if per_step else ""
            lines.append(
                f"dropped: {dropped} open-loop arrivals were due but unsent at a level change, "
                f"waiting for a slot (--max-in-flight binds: raise it){where}"
            )
        if snapshot.validation is not None:
            v = snapshot.validation
            verdict = "holds" if v.holds else "does NOT hold"
            sla_text = "ok" if v.sla_ok else "missed"
            lines.append(
                f"validation at {v.rate or 0:g} req/s: {verdict} (SLA {sla_text}, {v.queue_reason})"
            )
        for burst in snapshot.bursts:
            rec = burst.recovery_s
            lines.append(
                f"burst of {burst.count} at {burst.at_s or 0:.1f} s: "
                + (f"recovered in {rec:.2f} s" if rec is not None else "did not recover")
            )
        with self._lock:
            self._stream.write("\n".join(lines) + "\n")
            self._stream.flush()

    def table(self, results: list[StepResult]) -> None:
        """The final table, one row per step."""
        header = (
            f"{'step':>4} {'mode':<11} {'level':>6} {'ok':>6} {'fail':>5} {'req/s':>7} "
            f"{'out tok/s':>9} {'TTFT p50':>8} {'TTFT p95':>8} {'TPOT p95':>8} "
            f"{'ITL p95':>8} {'E2E p95':>8} {'goodput':>8} {'J/out tok':>9} SLA"
        )
        rows = [header, "-" * len(header)]
        rows.extend(
            (
                f"{number:>4} {r.mode:<11} {r.level:>6g} {r.requests_ok:>6} "
                f"{r.requests_failed:>5} {r.requests_per_s:>7.2f} {r.output_tokens_per_s:>9.1f} "
                f"{_ms(r.ttft_s.p50):>8} {_ms(r.ttft_s.p95):>8} {_ms(r.tpot_s.p95):>8} "
                f"{_ms(r.itl_s.p95):>8} {_ms(r.e2e_s.p95):>8} "
                f"{r.goodput_requests_per_s:>8.2f} {joules_cell(r.energy):>9} {step_outcome(r)}"
                + (" incomplete" if r.incomplete else "")
            )
            for number, r in enumerate(results, start=1)
        )
        rows.append(
            "latencies in ms; goodput in req/s meeting the SLA; J/out tok: energy of the "
            "measured window per output token"
        )
        with self._lock:
            self._stream.write("\n".join(rows) + "\n")
            self._stream.flush()
