"""What the app reads and commands: a live controller or a replayed sequence of views.

Screens cannot tell the two apart (style.md: sources are ports). `LiveController` is the live
source; `ReplaySource` serves a fixed sequence of `LiveView`s, for snapshot tests and screenshots,
and records the commands it receives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from gputui.frontends.view import LiveView, best_step_index
from gputui.metrics.knee_summary import knee_summary
from gputui.metrics.rejudge import rejudge_by_intervals
from gputui.metrics.sla_terms import SessionTerms


class LiveSource(Protocol):
    """The live screen's data and control API (implemented by `frontends.live.LiveController`)."""

    def view(self) -> LiveView:
        """The current view (the same object while nothing changed)."""
        ...

    def step_up(self) -> None:
        """Multiply the load by the factor."""
        ...

    def step_down(self) -> None:
        """Divide the load by the factor."""
        ...

    def cycle_factor(self, direction: int) -> float:
        """Raise (+1) or lower (-1) the step factor."""
        ...

    def toggle_mode(self) -> None:
        """Switch between concurrency and arrival-rate mode."""
        ...

    def toggle_pause(self) -> bool:
        """Pause or resume sending; True when now paused."""
        ...

    def burst(self) -> int:
        """Fire a burst; returns its size."""
        ...

    def hold_until_precise(self) -> None:
        """Keep the current level until its step is precise."""
        ...

    def start_auto(self) -> None:
        """Start the auto sweep from the current level."""
        ...

    def cancel_auto(self) -> None:
        """End the auto sweep or the hold (the load stays where it is)."""
        ...

    def change_terms(self, terms: SessionTerms) -> None:
        """New SLA bounds and price from now on; finished steps re-judged (blocking: a worker)."""
        ...

    def export_report(self) -> Path | None:
        """Write the session's HTML report beside the snapshots (blocking: a worker)."""
        ...

    def save(self, label: str | None = None) -> Path | None:
        """Save a snapshot now (blocking: call from a worker thread)."""
        ...

    def stop(
        self, *, save: bool = True, label: str | None = None, reason: str | None = None
    ) -> Path | None:
        """Stop the load and save (blocking, idempotent)."""
        ...


class ReplaySource:
    """Serves `views` in order, one more each `advance()`; commands are recorded, not applied."""

    def __init__(self, views: Sequence[LiveView]) -> None:
        if not views:
            raise ValueError("a replay needs at least one view")
        self._views = list(views)
        self._index = 0
        self.calls: list[str] = []
        """Every command received, by name, e.g. ["step_up", "save:knee"]."""
        self.saved: list[str | None] = []
        self.terms: list[SessionTerms] = []
        """Every change of terms received, in order."""

    def view(self) -> LiveView:
        """The current view."""
        return self._views[self._index]

    def advance(self) -> bool:
        """Move to the next view; False at the end."""
        if self._index + 1 >= len(self._views):
            return False
        self._index += 1
        return True

    def step_up(self) -> None:
        """Recorded."""
        self.calls.append("step_up")
        self._operator()

    def step_down(self) -> None:
        """Recorded."""
        self.calls.append("step_down")
        self._operator()

    def cycle_factor(self, direction: int) -> float:
        """Recorded; the factor stays."""
        self.calls.append(f"factor:{direction:+d}")
        return self.view().factor

    def toggle_mode(self) -> None:
        """Recorded."""
        self.calls.append("toggle_mode")
        self._operator()

    def toggle_pause(self) -> bool:
        """Recorded."""
        self.calls.append("toggle_pause")
        self._operator()
        return not self.view().paused

    def burst(self) -> int:
        """Recorded."""
        self.calls.append("burst")
        self._operator()
        return 16

    def hold_until_precise(self) -> None:
        """Recorded; the view shows the hold."""
        self.calls.append("hold_until_precise")
        self._control("holding")

    def start_auto(self) -> None:
        """Recorded; the view shows the auto sweep."""
        self.calls.append("start_auto")
        self._control("auto")

    def cancel_auto(self) -> None:
        """Recorded; the operator has control again."""
        self.calls.append("cancel_auto")
        self._control("operator")

    def _operator(self) -> None:
        """A load command takes control back, as the live controller's do."""
        if self.view().control != "operator":
            self._control("operator")

    def _control(self, control: str) -> None:
        self._views[self._index] = replace(
            self.view(), control=control, seq=self.view().seq + 100_000
        )

    def change_terms(self, terms: SessionTerms) -> None:
        """Recorded; every view is re-judged by its steps' own figures (no records here)."""
        self.calls.append("change_terms")
        self.terms.append(terms)
        self._views = [rejudged_view(v, terms) for v in self._views]

    def export_report(self) -> Path | None:
        """Recorded; nothing is written."""
        self.calls.append("export_report")
        return None

    def save(self, label: str | None = None) -> Path | None:
        """Recorded; nothing is written."""
        self.calls.append(f"save:{label}")
        self.saved.append(label)
        return None

    def stop(
        self, *, save: bool = True, label: str | None = None, reason: str | None = None
    ) -> Path | None:
        """Recorded; the last view is marked stopped."""
        self.calls.append(f"stop:{reason or ''}:{label}:{save}")
        self._views[self._index] = replace(self.view(), stopped=True)
        return None


def rejudged_view(view: LiveView, terms: SessionTerms) -> LiveView:
    """The view under other terms: its steps' verdicts, the capacity and the price."""
    steps = tuple(rejudge_by_intervals(s, terms.sla) for s in view.steps)
    # The same function as the live view and the snapshot (`metrics.knee_summary`).
    summary = knee_summary(steps, terms.sla, view.diagnoses, mode=view.mode) if steps else None
    capacity = summary if summary is not None and summary.capacity else None
    return replace(
        view,
        seq=view.seq + 100_000,
        sla=terms.sla,
        price_per_hour=terms.price_per_hour,
        steps=steps,
        capacity=capacity.capacity if capacity else None,
        capacity_reason=summary.capacity_reason if summary else view.capacity_reason,
        best_step_index=best_step_index(steps, capacity.capacity if capacity else None),
    )
