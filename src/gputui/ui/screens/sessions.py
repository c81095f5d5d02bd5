"""The sessions screen: the snapshots saved in the live session's folder, to overlay or delete.

Listing, loading and deleting touch files, so they run in thread workers. A file that does not load
is listed under the table, skipped, with its one-line reason: never an error. The screen's result
is the overlays the live sweep chart should show (oldest first): enter / o adds the selected
session's sweep curve (`snapshot.compare.sweep_curve`) and goes back to the chart, x clears them,
d deletes the selected file once a dialog has confirmed it.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Static

from gputui.errors import SnapshotError
from gputui.snapshot.compare import sweep_curve
from gputui.snapshot.sessions import SessionInfo, delete_session, list_sessions
from gputui.snapshot.store import load_snapshot
from gputui.ui.render import format as fmt
from gputui.ui.render.sweep import MAX_OVERLAYS, SweepOverlay, overlay_marker
from gputui.ui.screens.dialogs import ConfirmScreen
from gputui.ui.widgets.key_footer import KeyFooter

COLUMNS = ("", "label", "capacity good tok/s", "knee", "J/out tok", "GPU", "date", "target")
"""The answers first: at 80 columns capacity and knee show without scrolling sideways."""


def _shown(folder: Path) -> str:
    """The folder as the title shows it (under the home folder: from ~)."""
    try:
        return f"~/{folder.relative_to(Path.home())}"
    except ValueError:
        return str(folder)


def _level(text: str | None) -> str:
    return (text or "none").replace("concurrency ", "conc. ")


_LABEL_W = 24
"""A longer label is cut (with …) so the answers after it stay on an 80-column screen."""


def _row(info: SessionInfo, marker: str) -> tuple[str, ...]:
    """One table row (display text only: the row's key is the file's path)."""
    host = info.url.split("://", 1)[-1].removesuffix("/v1")
    capacity = (
        f"{fmt.rate(info.capacity_output_tokens_per_s)} at {_level(info.capacity_level)}"
        if info.capacity_output_tokens_per_s is not None
        else "none"
    )
    return (
        marker,
        info.name if len(info.name) <= _LABEL_W else info.name[: _LABEL_W - 1] + "…",
        capacity + ("" if info.complete else " (partial)"),
        _level(info.knee_level),
        "-" if (j := info.capacity_joules_per_output_token) is None else f"{j:.3g}",
        (info.gpu or "unknown").removeprefix("NVIDIA "),
        info.created_at[:16].replace("T", " "),
        f"{info.model} @ {host}",
    )


class SessionsScreen(Screen[tuple[SweepOverlay, ...]]):
    """Saved sessions: label, capacity, knee, GPU, date, target; overlay, clear or delete."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "o",
            "overlay",
            "Overlay",
            id="overlay_session",
            tooltip="Draw its sweep under the live one and go back to the chart",
        ),
        Binding("x", "clear", "Clear overlays", id="clear_overlays", tooltip="Remove all overlays"),
        Binding("d", "delete", "Delete", id="delete_session", tooltip="Delete the file (asks)"),
        Binding(
            "escape,q,S", "close", "Back", id="close_sessions", tooltip="Back to the live screen"
        ),
    ]

    def __init__(self, folder: Path, overlays: tuple[SweepOverlay, ...] = ()) -> None:
        super().__init__()
        self.folder = folder
        self.overlays = overlays
        """The overlays the chart will show when this screen closes."""
        self.sessions: list[SessionInfo] = []
        """The listed sessions, in table order (newest first)."""
        self.skipped: list[tuple[str, str]] = []
        """(file name, reason) of each file that did not load."""
        self.listings = 0
        """How many times the folder has been listed (tests wait on it)."""

    def compose(self) -> ComposeResult:
        """Title, the table, the skipped files, the keys."""
        yield Static(f"Saved sessions · {_shown(self.folder)}", id="sessions-title", markup=False)
        yield DataTable(id="sessions-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="sessions-skipped", markup=False)
        yield KeyFooter()

    def on_mount(self) -> None:
        """Columns, then list the folder."""
        self.query_one(DataTable).add_columns(*COLUMNS)
        self._list()

    @work(thread=True, exclusive=True, group="sessions-list", exit_on_error=False)
    def _list(self) -> None:
        skipped: list[tuple[str, str]] = []

        def skip(path: Path, reason: str) -> None:
            skipped.append((path.name, reason.removeprefix(f"{path}: ")))

        try:
            sessions = list_sessions(self.folder, on_skip=skip)
        except OSError as exc:  # the folder itself cannot be read
            sessions, skipped = [], [(_shown(self.folder), exc.strerror or str(exc))]
        self.app.call_from_thread(self._show, sessions, skipped)

    def _show(self, sessions: list[SessionInfo], skipped: list[tuple[str, str]]) -> None:
        self.sessions, self.skipped = sessions, skipped
        self._fill()
        notes = [f"skipped {name}: {reason}" for name, reason in skipped]
        if not sessions and not skipped:
            notes.insert(0, f"no saved sessions in {_shown(self.folder)} yet: s saves one")
        self.query_one("#sessions-skipped", Static).update("\n".join(notes))
        self.listings += 1

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        row = table.cursor_row
        table.clear()
        overlaid = {o.path: i for i, o in enumerate(self.overlays)}
        for info in self.sessions:
            i = overlaid.get(info.path)
            marker = overlay_marker(i, ascii=self.app.has_class("-ascii")) if i is not None else ""
            table.add_row(*_row(info, marker), key=str(info.path))
        if self.sessions:
            table.move_cursor(row=min(row, len(self.sessions) - 1))

    def _selected(self) -> SessionInfo | None:
        table = self.query_one(DataTable)
        if not self.sessions or table.cursor_row < 0:
            return None
        return self.sessions[min(table.cursor_row, len(self.sessions) - 1)]

    # actions ---------------------------------------------------------------------------------
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a row: overlay it."""
        event.stop()
        self.action_overlay()

    def action_overlay(self) -> None:
        """Load the selected session's sweep curve (in a worker), overlay it, go back."""
        info = self._selected()
        if info is None:
            return
        if any(o.path == info.path for o in self.overlays):
            self.notify(f"{info.name} is already overlaid", timeout=3)
            self.dismiss(self.overlays)
            return
        self._load_curve(info)

    @work(thread=True, exclusive=True, group="sessions-overlay", exit_on_error=False)
    def _load_curve(self, info: SessionInfo) -> None:
        try:
            curve = sweep_curve(load_snapshot(info.path))
        except SnapshotError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error")
            return
        self.app.call_from_thread(self._overlaid, SweepOverlay(info.name, curve, info.path))

    def _overlaid(self, overlay: SweepOverlay) -> None:
        if not overlay.curve.levels:
            self.notify(f"{overlay.label}: no complete step to draw", severity="warning")
            return
        self.overlays = (*self.overlays, overlay)[-MAX_OVERLAYS:]
        self.notify(f"overlaid {overlay.label} (x clears)", timeout=3)
        self.dismiss(self.overlays)

    def action_clear(self) -> None:
        """Remove every overlay (the chart redraws when this screen closes)."""
        self.overlays = ()
        self._fill()

    def action_delete(self) -> None:
        """Ask, then delete the selected snapshot file."""
        info = self._selected()
        if info is None:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._delete(info.path)

        self.app.push_screen(
            ConfirmScreen(f"Delete the saved session {info.name!r}?", str(info.path)), answered
        )

    @work(thread=True, exclusive=True, group="sessions-delete", exit_on_error=False)
    def _delete(self, path: Path) -> None:
        try:
            delete_session(path)
        except SnapshotError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error")
        else:
            self.app.call_from_thread(self.notify, f"deleted {path.name}", timeout=3)
        self.app.call_from_thread(self._list)

    def action_close(self) -> None:
        """Back to the live screen, with the overlays as they are now."""
        self.dismiss(self.overlays)
