"""What the screens ask of the app that hosts them, so that they need not import the app.

`AppOptions` is how the app looks and behaves; `AppHost` is the part of `ui.app.GputuiApp` the
live and detail screens call (its options, its source, and the paths that push dialogs or save).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gputui.snapshot.recovery import LeftoverJournal
from gputui.ui.source import LiveSource


@dataclass(frozen=True, slots=True)
class AppOptions:
    """How the app looks and behaves (from the CLI flags, or set by a test)."""

    ascii: bool = False
    """Charts, bars and borders in plain ASCII (--ascii)."""
    refresh_s: float = 0.25
    """How often the live screen pulls the source's view."""
    handle_signals: bool = False
    """Install SIGHUP/SIGTERM/SIGINT handlers that save and exit (the CLI does; tests do not)."""
    label: str | None = None
    """Default snapshot label."""
    snapshot_dir: Path | None = None
    """Where recovered snapshots go."""
    leftovers: tuple[LeftoverJournal, ...] = ()
    """Journals of sessions that died unsaved, offered for recovery at start."""


class AppHost(Protocol):
    """The app as its screens see it (`ui.app.GputuiApp` satisfies this)."""

    @property
    def source(self) -> LiveSource:
        """Where every number on screen comes from, and where every command goes."""
        ...

    @property
    def options(self) -> AppOptions:
        """How the app looks and behaves."""
        ...

    def show_help(self) -> None:
        """Push the help screen."""
        ...

    def ask_and_save(self) -> None:
        """Ask for a label, then save."""
        ...

    def ask_terms(self) -> None:
        """Open the session settings dialog."""
        ...

    def export_report(self) -> None:
        """Write the HTML report."""
        ...

    def quit_and_save(self, reason: str | None = None) -> None:
        """Stop the load, save the snapshot, exit."""
        ...
