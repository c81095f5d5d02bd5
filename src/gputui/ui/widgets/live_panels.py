"""The panels of the live screen; each draws one part of the `LiveView` with a render function."""

from __future__ import annotations

from textual.reactive import reactive

from gputui.frontends.view import LiveView
from gputui.ui.render.events import events_lines
from gputui.ui.render.gpu import gpu_lines
from gputui.ui.render.spans import Line
from gputui.ui.render.status import header_lines
from gputui.ui.render.steps import steps_lines
from gputui.ui.render.sweep import SweepOverlay, sweep_lines
from gputui.ui.render.tables import latency_lines
from gputui.ui.render.workload import workload_lines
from gputui.ui.widgets.panel import LivePanel


class SessionHeader(LivePanel):
    """Target, model, backend, GPUs, load, step clock, in flight, session clock and client CPU."""

    def draw(self, view: LiveView, width: int, height: int) -> list[Line]:
        """The status, in the lines the header has (three: load, target, terms)."""
        return header_lines(view, width, height)


class SweepChart(LivePanel):
    """Output tok/s against load, P95 TTFT/TPOT on a log axis, SLA lines, the knee, live step."""

    overlays: reactive[tuple[SweepOverlay, ...]] = reactive((), init=False)
    """Saved sessions drawn under the live sweep, oldest first (bound to the live screen's)."""

    def watch_overlays(self) -> None:
        """Redraw with the new overlays."""
        self._strips = None

    def draw(self, view: LiveView, width: int, height: int) -> list[Line]:
        """The sweep chart."""
        return sweep_lines(view, width, height, ascii=self.ascii, overlays=self.overlays)


class LatencyTable(LivePanel):
    """Rolling-window TTFT/TPOT/ITL/E2E percentiles against the SLA, with rate sparklines."""

    def watch_view(self, view: LiveView | None) -> None:
        """Name the window's length in the title."""
        if view is not None and view.frame is not None:
            self.border_title = f"Latency · rolling {view.frame.window.window_s:g} s"

    def draw(self, view: LiveView, width: int, height: int) -> list[Line]:
        """The latency table."""
        return latency_lines(view, width, height, ascii=self.ascii)


class GpuPanel(LivePanel):
    """Per-GPU traces, throttling and VRAM; the server's KV cache and queue."""

    def data_key(self, view: LiveView) -> object:
        """Only new telemetry changes it."""
        return view.telemetry.seq if view.telemetry is not None else None

    def draw(self, view: LiveView, width: int, height: int) -> list[Line]:
        """The GPU panel."""
        return gpu_lines(view, width, height, ascii=self.ascii)


class StepsTable(LivePanel):
    """One row per finished step; the SLA-qualified best step highlighted."""

    def data_key(self, view: LiveView) -> object:
        """Only a finished step (or its diagnosis, or a changed SLA) changes it."""
        return (len(view.steps), len(view.diagnoses), view.best_step_index, view.knee, view.sla)

    def draw(self, view: LiveView, width: int, height: int) -> list[Line]:
        """The steps table."""
        return steps_lines(view, width, height, ascii=self.ascii)


class EventLog(LivePanel):
    """Errors by reason, throttling, preemption bursts, SLA breaches, with session times."""

    def data_key(self, view: LiveView) -> object:
        """Only a new event changes it."""
        return (len(view.events), view.events[-1] if view.events else None)

    def draw(self, view: LiveView, width: int, height: int) -> list[Line]:
        """The newest events."""
        return events_lines(view.events, width, height)


class WorkloadPanel(LivePanel):
    """Conversations by turn (TTFT, prefix-cache hit rate) or a trace replay's clock and lateness.

    Shown only when the session drives conversations or a replay.
    """

    def data_key(self, view: LiveView) -> object:
        """Only a new live account changes it."""
        return view.workload

    def watch_view(self, view: LiveView | None) -> None:
        """Show the panel only for conversations or a replay, titled after which."""
        progress = view.workload if view is not None else None
        self.display = progress is not None
        if progress is not None:
            self.border_title = (
                "Trace replay" if progress.kind == "trace" else "Conversations · by turn"
            )

    def draw(self, view: LiveView, width: int, height: int) -> list[Line]:
        """The workload panel."""
        return workload_lines(view, width, height, ascii=self.ascii)
