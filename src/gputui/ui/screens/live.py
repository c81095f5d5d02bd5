"""The live screen: every panel of the session, refreshed by pulling the source's view at 4 Hz."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import Resize
from textual.reactive import reactive
from textual.screen import Screen

from gputui.snapshot.sessions import default_sessions_dir
from gputui.ui.render.sweep import SweepOverlay
from gputui.ui.screens.detail import DetailKind, DetailScreen
from gputui.ui.screens.sessions import SessionsScreen
from gputui.ui.widgets.key_footer import KeyFooter
from gputui.ui.widgets.live_panels import (
    EventLog,
    GpuPanel,
    LatencyTable,
    SessionHeader,
    StepsTable,
    SweepChart,
    WorkloadPanel,
)
from gputui.ui.widgets.panel import LivePanel

if TYPE_CHECKING:
    from gputui.ui.host import AppHost

COMPACT_WIDTH = 120
COMPACT_HEIGHT = 36


class LiveScreen(Screen[None]):
    """Hunt the knee: header, sweep chart, latency, GPU, steps and events."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "up,plus",
            "step_up",
            "Load ×",
            id="step_up",
            key_display="+",
            tooltip="Multiply the load by the factor (a new step)",
        ),
        Binding(
            "down,minus",
            "step_down",
            "Load ÷",
            id="step_down",
            key_display="-",
            tooltip="Divide the load by the factor (a new step)",
        ),
        Binding(
            "left_square_bracket",
            "factor(-1)",
            "factor−",
            id="factor_down",
            tooltip="Smaller step factor",
        ),
        Binding(
            "right_square_bracket",
            "factor(1)",
            "factor+",
            id="factor_up",
            tooltip="Larger step factor",
        ),
        Binding(
            "r",
            "toggle_mode",
            "Mode",
            id="toggle_mode",
            tooltip="Concurrency <-> arrival rate, at about the same load",
        ),
        Binding(
            "space", "toggle_pause", "Pause", id="toggle_pause", tooltip="Pause or resume sending"
        ),
        Binding(
            "b", "burst", "Burst", id="burst", tooltip="Fire a burst of requests on top of the load"
        ),
        Binding("s", "save", "Save", id="save", tooltip="Save a snapshot (asks for a label)"),
        Binding(
            "question_mark", "help", "Help", id="help", tooltip="What every panel and metric means"
        ),
        Binding(
            "q", "quit_session", "Quit", id="quit", tooltip="Stop the load, save the snapshot, exit"
        ),
        Binding(
            "o,S",
            "sessions",
            "Sessions",
            id="sessions",
            tooltip="Saved sessions: overlay one on the sweep chart, or delete",
        ),
        Binding(
            "h",
            "hold",
            "Hold",
            id="hold_until_precise",
            tooltip="Keep this level until its step is precise and its SLA verdict decided "
            "(any load key takes control back)",
        ),
        Binding(
            "a",
            "auto",
            "Auto",
            id="start_auto",
            tooltip="Auto sweep from this level to the knee and the SLA bound (load keys stop it)",
        ),
        Binding(
            "e",
            "settings",
            "SLA/price",
            id="settings",
            tooltip="Change the SLA bounds, the error-rate bound and the price per hour; the "
            "finished steps are re-judged at once",
        ),
        Binding(
            "w",
            "export_report",
            "Report",
            id="export_report",
            tooltip="Write this session's HTML report beside the saved sessions",
        ),
        Binding(
            "l",
            "detail('events')",
            "Events",
            id="all_events",
            tooltip="Every event, whole (repeats folded), on a screen of its own",
        ),
        Binding(
            "t",
            "detail('steps')",
            "Steps",
            id="all_steps",
            tooltip="Every finished step, on a screen of its own",
        ),
        Binding(
            "x",
            "clear_overlays",
            "Clear overlays",
            show=False,
            id="clear_overlays_live",
            tooltip="Remove the saved sessions overlaid on the sweep chart",
        ),
        Binding(
            "pagedown,j",
            "scroll(1)",
            "Scroll",
            show=False,
            id="scroll_down",
            tooltip="Scroll the panels down",
        ),
        Binding(
            "pageup,k",
            "scroll(-1)",
            "Scroll up",
            show=False,
            id="scroll_up",
            tooltip="Scroll the panels up",
        ),
    ]

    overlays: reactive[tuple[SweepOverlay, ...]] = reactive(())
    """Saved sessions overlaid on the sweep chart (bound to `SweepChart.overlays`)."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: dict[str, object] = {}
        self._last_seq = -1
        self._hidden = False

    @property
    def gapp(self) -> AppHost:
        """The app, typed."""
        return cast("AppHost", self.app)

    def compose(self) -> ComposeResult:
        """The panels; `-compact` stacks them in one scrolling column."""
        ascii = self.gapp.options.ascii
        yield SessionHeader(id="header", ascii=ascii)
        with VerticalScroll(id="body", can_focus=False):
            with Horizontal(id="top"):
                yield SweepChart(id="sweep", ascii=ascii).data_bind(LiveScreen.overlays)
                with Vertical(id="side"):
                    yield LatencyTable(id="latency", ascii=ascii)
                    yield WorkloadPanel(id="workload", ascii=ascii)
                    yield EventLog(id="events", ascii=ascii)
            with Horizontal(id="bottom"):
                yield GpuPanel(id="gpu", ascii=ascii)
                yield StepsTable(id="steps", ascii=ascii)
        yield KeyFooter()

    def on_mount(self) -> None:
        """Titles, the layout for this size, and the 4 Hz pull."""
        titles = {
            "sweep": "Sweep · output tok/s and P95 latency vs load",
            "latency": "Latency · rolling window",
            "events": "Events",
            "gpu": "GPU · server KV cache",
            "steps": "Steps",
        }
        for widget_id, title in titles.items():
            self.query_one(f"#{widget_id}").border_title = title
        self._layout_for(self.app.size.width, self.app.size.height)
        self.set_interval(self.gapp.options.refresh_s, self.refresh_view)
        self.call_after_refresh(self.refresh_view)

    def on_resize(self, event: Resize) -> None:
        """Stack the panels when the terminal is small."""
        self._layout_for(event.size.width, event.size.height)

    def _layout_for(self, width: int, height: int) -> None:
        self.set_class(width < COMPACT_WIDTH or height < COMPACT_HEIGHT, "-compact")

    def refresh_view(self) -> None:
        """Hand the newest view to each visible panel not yet showing it (all, the first time)."""
        view = self.gapp.source.view()
        if view.seq == self._last_seq and not self._hidden:
            return
        self._last_seq = view.seq
        first = not self._seen
        stale: list[tuple[LivePanel, object]] = []
        self._hidden = False
        for panel in self.query(LivePanel):
            key = panel.data_key(view)
            if self._seen.get(panel.id or "", self) == key:
                continue
            if first or panel.is_on_screen:
                stale.append((panel, key))
            else:
                self._hidden = True  # drawn once it scrolls into view
        if not stale:
            return
        with self.app.batch_update():
            for panel, key in stale:
                panel.view = view
                self._seen[panel.id or ""] = key

    # actions: thin calls into the control API ------------------------------------------------
    def action_step_up(self) -> None:
        """Step the load up."""
        self.gapp.source.step_up()

    def action_step_down(self) -> None:
        """Step the load down."""
        self.gapp.source.step_down()

    def action_factor(self, direction: int) -> None:
        """Change the step factor."""
        factor = self.gapp.source.cycle_factor(direction)
        self.notify(f"step factor ×{factor:g}", timeout=2)

    def action_toggle_mode(self) -> None:
        """Switch the load mode."""
        self.gapp.source.toggle_mode()

    def action_toggle_pause(self) -> None:
        """Pause or resume."""
        paused = self.gapp.source.toggle_pause()
        self.notify("paused: no new requests" if paused else "resumed: a new step", timeout=2)

    def action_burst(self) -> None:
        """Fire a burst."""
        size = self.gapp.source.burst()
        self.notify(f"burst of {size} requests", timeout=2)

    def action_hold(self) -> None:
        """Hold the level until precise."""
        self.gapp.source.hold_until_precise()

    def action_auto(self) -> None:
        """Start the auto sweep from the current level."""
        self.gapp.source.start_auto()

    def action_settings(self) -> None:
        """Open the SLA and price dialog."""
        self.gapp.ask_terms()

    def action_export_report(self) -> None:
        """Write the HTML report (in a worker)."""
        self.gapp.export_report()

    def action_save(self) -> None:
        """Ask for a label, then save."""
        self.gapp.ask_and_save()

    def action_sessions(self) -> None:
        """Open the saved sessions of this session's snapshot folder."""
        folder = self.gapp.options.snapshot_dir or default_sessions_dir()
        self.app.push_screen(SessionsScreen(folder, self.overlays), self._overlays_chosen)

    def _overlays_chosen(self, overlays: tuple[SweepOverlay, ...] | None) -> None:
        self.overlays = overlays or ()

    def action_clear_overlays(self) -> None:
        """Remove the overlaid sessions."""
        if self.overlays:
            self.overlays = ()
            self.notify("overlays cleared", timeout=2)

    def action_detail(self, kind: DetailKind) -> None:
        """Every event or every step, on a screen of its own."""
        self.app.push_screen(DetailScreen(kind))

    def action_help(self) -> None:
        """Show the help screen."""
        self.gapp.show_help()

    def action_quit_session(self) -> None:
        """Stop, save and exit."""
        self.gapp.quit_and_save()

    def action_scroll(self, direction: int) -> None:
        """Scroll the stacked panels (compact layout)."""
        body = self.query_one("#body", VerticalScroll)
        if direction > 0:
            body.scroll_page_down()
        else:
            body.scroll_page_up()
