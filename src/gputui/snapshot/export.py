"""One session's HTML report, written beside its snapshots (the TUI's export key).

Contract: `write_html_report(snapshot, folder, label)` writes the page `gputui compare --format
html` makes of this one snapshot (`snapshot.report_html`), titled "gputui session: <label>", to
`<folder>/<UTC stamp>-<label>.html`, never over an existing file, and returns its path; OSError
when it cannot be written.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from gputui.snapshot.compare import build_comparison, name_snapshots
from gputui.snapshot.models import Snapshot
from gputui.snapshot.report_html import html_report


def report_file(folder: Path, label: str | None) -> Path:
    """A new report's path: `<UTC stamp>-<label>.html` (a counter when it exists)."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", label or "session").strip("-")[:40] or "session"
    path = folder / f"{stamp}-{slug}.html"
    copy = 2
    while path.exists():
        path = folder / f"{stamp}-{slug}-{copy}.html"
        copy += 1
    return path


def write_html_report(snapshot: Snapshot, folder: Path, label: str | None) -> Path:
    """Write the snapshot's HTML report into `folder` (module contract)."""
    page = html_report(build_comparison(name_snapshots([(snapshot, None)])), session=True)
    folder.mkdir(parents=True, exist_ok=True)
    path = report_file(folder, label)
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    return path
