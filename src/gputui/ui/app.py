"""The Textual app: one factory (`make_app`) for the CLI and the tests.

The app reads a `LiveSource` (the live controller, or a replay) and never touches a socket or
computes a statistic. Blocking calls into the source (save, stop) run in thread workers, so the
event loop keeps drawing. `q`, SIGHUP (a dropped SSH session), SIGTERM and SIGINT all take the same
path: stop the load, save the snapshot, exit with the saved path as the app's return value (and,
after a signal, the CLI's exit status is 128 + its number, as `gputui run`'s).
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType

from gputui.errors import GputuiError
from gputui.metrics.sla_terms import SessionTerms, sla_text
from gputui.snapshot.recovery import discard, recover
from gputui.ui.host import AppOptions as AppOptions  # re-exported: callers build the app
from gputui.ui.screens.dialogs import RecoverJournalScreen, RecoveryChoice, SaveSnapshotScreen
from gputui.ui.screens.help import HelpScreen
from gputui.ui.screens.live import LiveScreen
from gputui.ui.screens.settings import SessionSettingsScreen
from gputui.ui.source import LiveSource

_SIGNALS = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)


class GputuiApp(App[Path | None]):
    """gputui's live TUI."""

    CSS_PATH = ["styles/global.tcss", "styles/app.tcss"]  # noqa: RUF012 - Textual's own type
    TITLE = "gputui"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "ctrl+q",
            "quit",
            "Quit",
            show=False,
            priority=True,
            id="app_quit",
            tooltip="Stop the load, save the snapshot, exit",
        ),
    ]

    def __init__(self, source: LiveSource, options: AppOptions) -> None:
        super().__init__()
        self.source = source
        """Where every number on screen comes from, and where every command goes."""
        self.options = options
        self.quitting = False
        """True once the stop-and-save path has started (keys then do nothing more)."""
        self.recovered: list[Path] = []
        """Snapshots rebuilt from leftover journals in this run."""
        self.signalled: signal.Signals | None = None
        """The signal that ended the app, if one did (the CLI exits with 128 + its number)."""
        if options.ascii:
            self.add_class("-ascii")

    def on_mount(self) -> None:
        """The live screen, the signal handlers, and the recovery offer."""
        self.push_screen(LiveScreen())
        if self.options.handle_signals:
            loop = asyncio.get_running_loop()
            for sig in _SIGNALS:
                loop.add_signal_handler(sig, self.quit_and_save, sig.name)
        if self.options.leftovers:
            self.push_screen(RecoverJournalScreen(self.options.leftovers), self._recovery_chosen)

    def on_unmount(self) -> None:
        """Give the signals back."""
        if self.options.handle_signals:
            loop = asyncio.get_running_loop()
            for sig in _SIGNALS:
                loop.remove_signal_handler(sig)

    # the paths the screens call ------------------------------------------------------------------
    def show_help(self) -> None:
        """Push the help screen."""
        self.push_screen(HelpScreen())

    def ask_and_save(self) -> None:
        """Ask for a label, then save in a worker."""
        if not self.quitting:
            self.push_screen(SaveSnapshotScreen(self.options.label or "session"), self._save_as)

    def _save_as(self, label: str | None) -> None:
        if label is not None:
            self._save_worker(label)

    def ask_terms(self) -> None:
        """The settings dialog over the current SLA and price; applied in a worker."""
        if not self.quitting:
            view = self.source.view()
            terms = SessionTerms(view.sla, view.price_per_hour)
            self.push_screen(SessionSettingsScreen(terms), self._terms_chosen)

    def _terms_chosen(self, terms: SessionTerms | None) -> None:
        if terms is not None:
            self._terms_worker(terms)

    @work(thread=True, exclusive=True, group="terms", exit_on_error=False)
    def _terms_worker(self, terms: SessionTerms) -> None:
        try:
            self.source.change_terms(terms)
        except GputuiError as exc:
            self.call_from_thread(self.notify, str(exc), severity="error")
            return
        self.call_from_thread(self.notify, f"SLA {sla_text(terms.sla)}: steps re-judged", timeout=4)

    def export_report(self) -> None:
        """Write the session's HTML report in a worker; where it went is an event."""
        if not self.quitting:
            self._export_worker()

    @work(thread=True, exclusive=True, group="export", exit_on_error=False)
    def _export_worker(self) -> None:
        try:
            path = self.source.export_report()
        except GputuiError as exc:
            self.call_from_thread(self.notify, str(exc), severity="error")
            return
        if path is None:
            self.call_from_thread(
                self.notify, "no report yet: no step has finished", severity="warning"
            )
        else:
            self.call_from_thread(self.notify, f"report written: {path}", timeout=8)

    @work(thread=True, exclusive=True, group="save", exit_on_error=False)
    def _save_worker(self, label: str) -> None:
        try:
            path = self.source.save(label)
        except GputuiError as exc:
            self.call_from_thread(self.notify, str(exc), severity="error")
            return
        if path is None:
            self.call_from_thread(
                self.notify, "nothing to save yet: no step has finished", severity="warning"
            )
        else:
            self.call_from_thread(self.notify, f"saved {path}", timeout=6)

    async def action_quit(self) -> None:
        """ctrl+q: the same path as q."""
        self.quit_and_save()

    def quit_and_save(self, reason: str | None = None) -> None:
        """Stop the load, save, exit (once, however many times it is asked)."""
        if self.quitting:
            return
        self.quitting = True
        if reason is not None and reason in signal.Signals.__members__:
            self.signalled = signal.Signals[reason]
        self.notify("stopping the load and saving the snapshot…", timeout=30)
        self._stop_worker(reason)

    @work(thread=True, exclusive=True, group="quit", exit_on_error=False)
    def _stop_worker(self, reason: str | None) -> None:
        path: Path | None = None
        try:
            path = self.source.stop(save=True, label=self.options.label, reason=reason)
        except GputuiError as exc:
            self.call_from_thread(self.notify, str(exc), severity="error")
        finally:
            if reason == "SIGHUP":
                # The terminal is gone: restoring it would block for ever on writes nobody
                # reads (Textual's writer queue). The snapshot is saved: leave at once.
                os._exit(128 + signal.SIGHUP)
            self.call_from_thread(self.exit, path)

    # recovery ------------------------------------------------------------------------------------
    def _recovery_chosen(self, choice: RecoveryChoice | None) -> None:
        if choice in ("recover", "discard"):
            self._recovery_worker(choice)

    @work(thread=True, exclusive=True, group="recover", exit_on_error=False)
    def _recovery_worker(self, choice: RecoveryChoice) -> None:
        folder = self.options.snapshot_dir or Path()
        for leftover in self.options.leftovers:
            try:
                if choice == "discard":
                    discard(leftover.path)
                    continue
                path = recover(leftover.path, folder)
            except (OSError, ValueError, GputuiError) as exc:
                self.call_from_thread(self.notify, f"{leftover.path.name}: {exc}", severity="error")
                continue
            if path is not None:
                self.recovered.append(path)
                self.call_from_thread(self.notify, f"recovered {path}", timeout=8)
        if choice == "discard":
            self.call_from_thread(self.notify, "discarded the unsaved session", timeout=4)


def make_app(source: LiveSource, options: AppOptions | None = None) -> GputuiApp:
    """The app over a source (the one factory for the CLI, the tests and the screenshots)."""
    return GputuiApp(source, options or AppOptions())
