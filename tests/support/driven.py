"""A fake `DrivenSession` (`control.driven`): steps open and finish when told, figures set here."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from gputui.engine.load import LoadMode
from gputui.engine.records import RequestRecord
from gputui.metrics.error_log import ErrorLog
from gputui.metrics.precision import StepPrecision
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult, StepSpec
from gputui.metrics.verdict import Verdict
from tests.support.steps import make_step


def rejections(step: int, count: int) -> list[RequestRecord]:
    """`count` requests of `step` the server refused (HTTP 400), 10 ms apart."""
    return [
        RequestRecord(
            request_id=i,
            step_index=step,
            sent_ns=i * 10_000_000,
            end_ns=i * 10_000_000 + 1_000_000,
            ok=False,
            error="http_400",
            status_code=400,
        )
        for i in range(count)
    ]


class FakeSession:
    """Closing a step (`set_load`, `hold`) finishes it at once with `result_for`'s figures."""

    def __init__(self, sla: Sla | None = None, warmup_s: float | None = 0.0) -> None:
        self.warmup_s = warmup_s
        self.max_warmup_s = 30.0
        self.sla = sla if sla is not None else Sla(0.5, 0.05, None)
        self.error_log = ErrorLog()
        self.specs: list[StepSpec] = []
        self.finished: list[StepResult] = []
        self.hidden: set[int] = set()
        self.holds = 0
        self.targets: dict[int, float] = {}
        self.is_settled = True
        self.precision: tuple[StepPrecision | None, int] = (None, 0)
        self.precision_asks = 0
        self.so_far: StepResult | None = None
        self.records: list[RequestRecord] = []
        """The open step's records so far (`open_step_records`)."""
        self.verdicts: dict[int, tuple[Verdict, str]] = {}
        self.result_for: Callable[[StepSpec], StepResult] = self._plain

    @property
    def current_step(self) -> StepSpec | None:
        return self.specs[-1] if self.specs and self.specs[-1].end_ns < 0 else None

    def step_specs(self) -> list[StepSpec]:
        return list(self.specs)

    def finished_steps(self) -> list[StepResult]:
        return list(self.finished)

    def unreported_steps(self) -> frozenset[int]:
        return frozenset()

    def set_load(self, mode: LoadMode, level: float) -> StepSpec:
        now = time.perf_counter_ns()
        current = self.current_step
        if current is not None:
            closed = replace(current, end_ns=now)
            self.specs[-1] = closed
            if closed.index not in self.hidden:
                self.finished.append(self.result_for(closed))
        spec = StepSpec(len(self.specs), mode, float(level), now, now, -1)
        self.specs.append(spec)
        return spec

    def hold(self) -> StepSpec | None:
        current = self.current_step
        if current is None:
            return None
        self.holds += 1
        self.hidden.add(len(self.specs))
        return self.set_load(current.mode, current.level)

    def set_step_target(self, index: int, target_precision: float) -> None:
        self.targets[index] = target_precision

    def set_step_verdict(self, index: int, verdict: Verdict, basis: str) -> None:
        self.verdicts[index] = (verdict, basis)

    def open_step_records(self) -> tuple[StepSpec | None, list[RequestRecord]]:
        return self.current_step, list(self.records)

    def settled(self, index: int) -> bool:
        return self.is_settled

    def current_precision(self, target_precision: float) -> tuple[StepPrecision | None, int]:
        self.precision_asks += 1
        return self.precision

    def step_so_far(self) -> StepResult | None:
        return self.so_far

    def _plain(self, spec: StepSpec) -> StepResult:
        return make_step(spec.level, mode=spec.mode, index=spec.index, sla=self.sla)
