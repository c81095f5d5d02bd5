"""Where gputui keeps its files by default: one definition for the CLI's help and the code."""

from __future__ import annotations

from pathlib import Path


def default_sessions_dir() -> Path:
    """Where sessions are saved unless the user says otherwise (the user data dir's `sessions`)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("gputui")) / "sessions"
