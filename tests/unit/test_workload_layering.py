"""The workloads package stays on the engine side: no UI toolkit, and no httpx until prepare."""

from __future__ import annotations

import subprocess
import sys


def test_importing_workloads_loads_no_ui_and_no_httpx() -> None:
    code = (
        "import sys, gputui.workloads, gputui.workloads.source; "
        "bad = [m for m in ('textual', 'rich', 'httpx') if m in sys.modules]; print(bad); "
        "sys.exit(1 if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
