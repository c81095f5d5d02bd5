"""A fake `DrivenSession` (`control.driven`): steps open and end when told, figures set here."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace

from gputui.engine.load import LoadMode
from gputui.engine.records import RequestRecord
from gputui.metrics.error_log import ErrorLog
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepResult, StepSpec
from gputui.session.step_end import StepEnded, StepLimits
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
    """Closing a step (`open_step`, a finished watch) finishes it with `result_for`'s figures.

    A watched step ends at once when flooded, else after its `step_s` (a timer), or when
    `end_watch` says; `on_open` runs as each step opens (a test stops its run there).
    """

    def __init__(self, sla: Sla | None = None) -> None:
        self.sla = sla if sla is not None else Sla(0.5, 0.05, None)
        self.error_log = ErrorLog()
        self.specs: list[StepSpec] = []
        self.finished: list[StepResult] = []
        self.hidden: set[int] = set()
        self.holds = 0
        self.result_for: Callable[[StepSpec], StepResult] = self._plain
        self.on_open: Callable[[StepSpec], None] = lambda _spec: None
        self._lock = threading.RLock()
        self._watch: tuple[int, StepLimits | None, bool, Future[StepEnded | None]] | None = None
        self._timer: threading.Timer | None = None

    @property
    def current_step(self) -> StepSpec | None:
        return self.specs[-1] if self.specs and self.specs[-1].end_ns < 0 else None

    def finished_steps(self) -> list[StepResult]:
        return list(self.finished)

    def set_load(self, mode: LoadMode, level: float) -> StepSpec:
        now = time.perf_counter_ns()
        with self._lock:
            current = self.current_step
            if current is not None:
                closed = replace(current, end_ns=now)
                self.specs[-1] = closed
                if closed.index not in self.hidden:
                    self.finished.append(self.result_for(closed))
            spec = StepSpec(len(self.specs), mode, float(level), now, now, -1)
            self.specs.append(spec)
        return spec

    def open_step(
        self, mode: LoadMode, level: float, limits: StepLimits, *, finish: bool, job: int = 0
    ) -> Future[StepEnded | None]:
        spec = self.set_load(mode, level)
        self.on_open(spec)
        return self._begin(spec.index, limits, finish)

    def keep_step(
        self, index: int | None, limits: StepLimits | None, *, finish: bool, job: int = 0
    ) -> Future[StepEnded | None]:
        current = self.current_step
        if index is None and current is None:
            reply: Future[StepEnded | None] = Future()
            reply.set_result(None)
            return reply
        return self._begin(index if index is not None else current.index, limits, finish)  # type: ignore[union-attr]

    def end_watch(self, job: int = 0) -> None:
        self._end("interrupted", finish=False)

    def _begin(
        self, index: int, limits: StepLimits | None, finish: bool
    ) -> Future[StepEnded | None]:
        reply: Future[StepEnded | None] = Future()
        with self._lock:
            self._watch = (index, limits, finish, reply)
        flooded = self.error_log.flooded(index)
        if limits is None:
            self._end("ended by its plan", finish=finish)
        elif flooded is not None:
            self._end(f"flooded with rejections: {flooded}", finish=finish)
        else:
            self._timer = threading.Timer(
                limits.step_s, self._end, (f"measured {limits.step_s:g} s",), {"finish": finish}
            )
            self._timer.start()
        return reply

    def _end(self, reason: str, *, finish: bool) -> None:
        now = time.perf_counter_ns()
        with self._lock:
            watch, self._watch = self._watch, None
            if self._timer is not None:
                self._timer.cancel()
            if watch is None:
                return
            index, _limits, _finish, reply = watch
            result = None
            if finish:
                current = self.current_step
                if current is not None and current.index == index:
                    self.holds += 1
                    self.hidden.add(len(self.specs))
                    self.set_load(current.mode, current.level)  # its load runs on, hidden
                result = next((r for r in self.finished if r.index == index), None)
            flooded = self.error_log.flooded(index) is not None
        reply.set_result(StepEnded(self.specs[index], reason, now, flooded, result))

    def _plain(self, spec: StepSpec) -> StepResult:
        return make_step(spec.level, mode=spec.mode, index=spec.index, sla=self.sla)
