"""The open step a plan waits on, owned by the session loop: its rules, its close, its `StepEnded`.

Contract: a `WatchRequest` arrives with the message that opens the step (`StepOpened.watch`) or
keeps one (`WatchStep`). `StepWatch` (on the loop's thread alone) then keeps the step's frozen
`session.step_end.OpenStepState`, advances it on every `tick` with what the ledger, the settling
and the error log say, and asks `step_end.end_reason`. When a reason comes, with `finish` the
loop closes the step keeping its load (`close_step`: `session.loads.LoadChanges.close`) and waits
for its figures (all its requests back: the tail is the ledger's); it then resolves the request's
future with a `StepEnded` the runner waits on. A hold's looks and a target reach the ledger here
(`verdicts`, `targets`): no rule calls back into the Session. One watch at a time: a new one ends
the one before ("closed elsewhere"); `cancel(job)` (a job cancelled, a run stopped) ends it at
once, "interrupted", without closing anything; `finish_all` (the run's end) ends whatever is left.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from gputui.metrics.error_log import ErrorLog
from gputui.metrics.precision import step_precision
from gputui.metrics.sla import Sla
from gputui.metrics.step import StepSpec
from gputui.session.ledger import StepLedger
from gputui.session.messages import WatchRequest
from gputui.session.steady import StepProgress
from gputui.session.step_end import (
    OpenStepState,
    StepEnded,
    end_reason,
    hold_basis,
    look_at,
    no_look_yet,
    precision_due,
)

WATCH_EVERY_S = 0.1
"""How often the loop asks the open step's rules (the runner's old poll, now on the loop)."""


@dataclass(slots=True)
class _Watching:
    request: WatchRequest
    index: int
    state: OpenStepState | None
    ended: tuple[str, int, bool] | None = None
    """(reason, when, flooded) once its rules ended it; with `finish` it waits for figures."""


class StepWatch:
    """The loop's watched step (module contract)."""

    def __init__(self, ledger: StepLedger, progress: StepProgress, error_log: ErrorLog) -> None:
        self._ledger = ledger
        self._progress = progress
        self._error_log = error_log
        self._active: _Watching | None = None
        self._answers: list[tuple[WatchRequest, StepEnded]] = []
        """Ended watches, answered once the loop has published what they saw (`answer`)."""
        self.close_step: Callable[[int, int], StepSpec | None] | None = None
        """Closes step `index` for job `job` keeping its load (`LoadChanges.close`)."""

    @property
    def ticking(self) -> bool:
        """A watched step's rules are still to be asked."""
        return self._active is not None and self._active.ended is None

    def begin(self, request: WatchRequest, now_ns: int, sla: Sla) -> None:
        """Watch `request.index` (or the open step) from `now_ns`."""
        self.cancel(None, now_ns, reason="closed elsewhere")
        index = request.index
        if index is None:
            current = self._ledger.current
            if current is None:
                request.reply.set_result(None)  # nothing open to keep
                return
            index = current.index
        watching = _Watching(request, index, None)
        self._active = watching
        limits = request.limits
        if limits is None:
            self._end(watching, "ended by its plan", now_ns)
            return
        spec = self._ledger.specs[index]
        watching.state = OpenStepState(
            index=index,
            limits=limits,
            opened_ns=max(now_ns, spec.start_ns),
            now_ns=now_ns,
            settle_bound_s=self._progress.settle_bound_s,
        )
        if limits.target_precision is not None:
            self._ledger.targets[index] = limits.target_precision
        if limits.until_decided:
            self._ledger.verdicts[index] = ("inconclusive", no_look_yet())
        self.tick(now_ns, sla)

    def tick(self, now_ns: int, sla: Sla) -> None:
        """Advance the watched step's state to `now_ns` and end it if its rules say so."""
        watching = self._active
        if watching is None or watching.ended is not None or watching.state is None:
            return
        state = self._advance(watching.state, now_ns, sla)
        watching.state = state
        reason = end_reason(state)
        if reason is not None:
            basis = hold_basis(state)
            if basis is not None and state.look is not None:  # which rule ended the hold
                self._ledger.verdicts[state.index] = (state.look.verdict, basis)
            self._end(watching, reason, now_ns)

    def _advance(self, state: OpenStepState, now_ns: int, sla: Sla) -> OpenStepState:
        """What the loop reads of the step at `now_ns`, into a new frozen state."""
        index, ledger = state.index, self._ledger
        spec = ledger.specs[index]
        current = ledger.current
        settled_ns = state.settled_ns
        if settled_ns is None and self._progress.settled(index, now_ns):
            settled_ns = now_ns
        opened_ns = max(state.opened_ns, spec.start_ns)  # a hand-over starts its level later
        if ledger.pending == index:
            opened_ns = now_ns  # its level has not started: its limits count from when it does
        state = replace(
            state,
            now_ns=now_ns,
            opened_ns=opened_ns,
            settled_ns=settled_ns,
            closed=current is None or current.index != index,
            flooded=self._error_log.flooded(index),
        )
        if state.closed:
            return state
        state = look_at(state, ledger.records.get(index, []), spec, sla)
        if state.look is not None and state.looked_ns == now_ns:
            ledger.verdicts[index] = (state.look.verdict, state.look.text())
        target = state.limits.target_precision
        if target is not None and precision_due(state):
            so_far = self._progress.so_far(now_ns, sla)
            reached = step_precision(so_far, target) if so_far is not None else None
            measured = so_far.requests_ok + so_far.requests_failed if so_far is not None else 0
            state = replace(state, precision=reached, measured_n=measured, checked_ns=now_ns)
        return state

    def _end(self, watching: _Watching, reason: str, now_ns: int) -> None:
        index = watching.index
        flooded = self._error_log.flooded(index) is not None
        watching.ended = (reason, now_ns, flooded)
        request = watching.request
        if not request.finish:
            self._resolve(watching, with_result=False)
            return
        current = self._ledger.current
        close = self.close_step
        running = current is not None and current.index == index and close is not None
        # It closes keeping its load (a hidden step runs on); refused, no figures would come.
        if running and close is not None and close(index, request.job) is None:
            self._resolve(watching, with_result=False)
            return
        self.after_delivery()

    def after_delivery(self) -> None:
        """A watched step that ended and waits for its figures: done once they are in."""
        watching = self._active
        if watching is None or watching.ended is None:
            return
        ledger = self._ledger
        if watching.index in ledger.finished or watching.index in ledger.hidden:
            self._resolve(watching, with_result=True)

    def cancel(self, job: int | None, now_ns: int, *, reason: str = "interrupted") -> None:
        """End job `job`'s watch (None: any) at once, closing nothing (module contract)."""
        watching = self._active
        if watching is None or (job is not None and watching.request.job != job):
            return
        if watching.ended is None:
            watching.ended = (reason, now_ns, self._error_log.flooded(watching.index) is not None)
        self._resolve(watching, with_result=False)

    def finish_all(self, now_ns: int) -> None:
        """The run is over: every step is finished, so a watch waiting for figures has them."""
        self.after_delivery()
        self.cancel(None, now_ns)

    def _resolve(self, watching: _Watching, *, with_result: bool) -> None:
        self._active = None
        assert watching.ended is not None
        reason, ended_ns, flooded = watching.ended
        ledger, index = self._ledger, watching.index
        result = None
        if with_result and index not in ledger.hidden:
            result = ledger.finished.get(index)
        spec = ledger.specs[index]
        self._answers.append((watching.request, StepEnded(spec, reason, ended_ns, flooded, result)))

    def answer(self) -> None:
        """Tell every plan whose step ended (after the loop published: it reads that state)."""
        answers, self._answers = self._answers, []
        for request, ended in answers:
            if not request.reply.done():
                request.reply.set_result(ended)
