"""The saved sessions in a folder: what the TUI's sessions screen and `gputui sessions` list.

Contract: `list_sessions(folder)` reads every `*.json` file directly in `folder` (journals, temp
files and dotfiles are not snapshots) and returns one `SessionInfo` per valid snapshot, newest
first (by `created_at`, then file name). A file that does not load is skipped, and `on_skip`
(when given) is called with its path and the one-line `SnapshotError` message, so a corrupt file
never hides the others. A missing folder is an empty list. `default_sessions_dir()` is
`platformdirs.user_data_dir("gputui")/sessions`, the TUI's default snapshot folder.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from gputui.errors import SnapshotError
from gputui.folders import default_sessions_dir as default_sessions_dir
from gputui.metrics.capacity import level_text
from gputui.snapshot.hardware import gpu_summary
from gputui.snapshot.models import Snapshot
from gputui.snapshot.store import load_snapshot


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One saved session, as a row of the sessions list."""

    path: Path
    label: str | None
    created_at: str
    url: str
    model: str
    gpu: str | None
    """The first GPU's name from the snapshot's `hardware`; None when it has none."""
    complete: bool
    steps: int
    capacity_output_tokens_per_s: float | None
    capacity_level: str | None
    """e.g. "concurrency 8"; None when no level met the SLA."""
    knee_level: str | None
    capacity_joules_per_output_token: float | None = None
    """J per good output token at the capacity level (issue 29); None without energy."""

    @property
    def name(self) -> str:
        """What the session goes by: its label, else its file name."""
        return self.label or self.path.stem

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (`gputui sessions --json`)."""
        return {
            "file": str(self.path),
            "label": self.label,
            "created_at": self.created_at,
            "url": self.url,
            "model": self.model,
            "gpu": self.gpu,
            "complete": self.complete,
            "steps": self.steps,
            "capacity_output_tokens_per_s": self.capacity_output_tokens_per_s,
            "capacity_level": self.capacity_level,
            "knee_level": self.knee_level,
            "capacity_joules_per_output_token": self.capacity_joules_per_output_token,
        }


def session_info(path: Path, snapshot: Snapshot) -> SessionInfo:
    """The list row of one loaded snapshot."""
    cap = snapshot.capacity
    knee = snapshot.knee
    return SessionInfo(
        path=path,
        label=snapshot.label,
        created_at=snapshot.created_at,
        url=snapshot.target.url,
        model=snapshot.target.model,
        gpu=gpu_summary(snapshot).name,
        complete=snapshot.complete,
        steps=len(snapshot.steps),
        capacity_output_tokens_per_s=cap.output_tokens_per_s if cap is not None else None,
        capacity_level=level_text(cap.mode, cap.level) if cap is not None else None,
        knee_level=level_text(knee.mode, knee.level) if knee is not None else None,
        capacity_joules_per_output_token=_joules_at_capacity(snapshot),
    )


def _joules_at_capacity(snapshot: Snapshot) -> float | None:
    """The capacity step's J per good output token, from its saved `energy` object."""
    cap = snapshot.capacity
    if cap is None:
        return None
    for step in reversed(snapshot.steps):
        if step.mode == cap.mode and step.level == cap.level and step.energy is not None:
            energy = step.energy
            return energy.joules_per_good_output_token or energy.joules_per_output_token
    return None


def _sort_key(info: SessionInfo) -> tuple[float, str]:
    try:
        stamp = datetime.fromisoformat(info.created_at).timestamp()
    except ValueError:
        stamp = 0.0
    return (-stamp, info.path.name)


def list_sessions(
    folder: str | Path, on_skip: Callable[[Path, str], None] | None = None
) -> list[SessionInfo]:
    """The valid snapshots in `folder`, newest first; unreadable files go to `on_skip`."""
    directory = Path(folder)
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("*.json")):
        if path.name.startswith(".") or not path.is_file():
            continue
        try:
            found.append(session_info(path, load_snapshot(path)))
        except SnapshotError as exc:
            if on_skip is not None:
                on_skip(path, str(exc))
    return sorted(found, key=_sort_key)


def delete_session(path: str | Path) -> None:
    """Delete a saved snapshot (the sessions screen's `delete`); SnapshotError if it cannot."""
    target = Path(path)
    if target.suffix != ".json":
        raise SnapshotError(f"{target}: not a snapshot file (expected .json)")
    try:
        target.unlink()
    except FileNotFoundError:
        raise SnapshotError(f"{target}: no such file") from None
    except OSError as exc:
        raise SnapshotError(f"{target}: cannot delete: {exc.strerror or exc}") from exc


def sessions_table(sessions: Sequence[SessionInfo]) -> str:
    """The plain-text list `gputui sessions` prints."""
    headers = ["date", "label", "target", "GPU", "capacity", "knee", "file"]
    rows = [
        [
            s.created_at[:19].replace("T", " "),
            s.label or "-",
            f"{s.model} @ {s.url}",
            s.gpu or "unknown",
            (
                f"{s.capacity_output_tokens_per_s:.1f} good out tok/s at {s.capacity_level}"
                if s.capacity_output_tokens_per_s is not None
                else "none"
            )
            + (
                f", {s.capacity_joules_per_output_token:.3g} J/out tok"
                if s.capacity_joules_per_output_token is not None
                else ""
            )
            + ("" if s.complete else " (incomplete)"),
            s.knee_level or "none",
            str(s.path),  # the whole path: `gputui compare` takes it as it is
        ]
        for s in sessions
    ]
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [headers, ["-" * w for w in widths], *rows]
    ]
    return "\n".join(lines) + "\n"
