"""The engine side never imports the UI toolkit, and `import gputui` stays light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "gputui"
CORE = ["engine", "metrics", "telemetry", "sim", "snapshot"]
BANNED = ("textual", "rich")


@pytest.mark.parametrize("package", CORE)
def test_core_packages_do_not_import_the_ui(package: str) -> None:
    offenders = []
    for path in (SRC / package).rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{path.name}: {n}" for n in names if n.split(".")[0] in (*BANNED, "gputui.ui")
            ]
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("gputui.ui")]
    assert offenders == []


@pytest.mark.parametrize("module", [f"gputui.{p}" for p in CORE] + ["gputui.session"])
def test_importing_core_loads_no_ui_toolkit(module: str) -> None:
    code = (
        f"import sys, importlib; importlib.import_module({module!r}); "
        "bad = [m for m in ('textual', 'rich') if m in sys.modules]; print(bad); "
        "sys.exit(1 if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_gputui_is_light() -> None:
    code = (
        "import sys, gputui; "
        "heavy = [m for m in ('textual', 'rich', 'httpx', 'numpy') if m in sys.modules]; "
        "sys.exit(1 if heavy else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
