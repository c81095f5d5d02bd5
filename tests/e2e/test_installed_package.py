"""The scenarios ship as package data: a non-editable install lists and runs them anywhere.

The wheel is built offline from this checkout (`--no-build-isolation`) and installed, not
editable, into a fresh virtual environment; that environment borrows the test environment's
third-party packages through a .pth file so nothing is downloaded. Every command runs in an empty
folder outside the clone, so no `./scenarios` can stand in for the installed ones.
"""

from __future__ import annotations

import importlib.util
import site
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.sim.runner import SimProcess
from gputui.snapshot.store import load_snapshot

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = {
    "chat",
    "decode-heavy",
    "long-context",
    "mixed",
    "multiturn-chat",
    "prefill-heavy",
    "reasoning",
    "shared-prefix",
}

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _pip(*args: str, cwd: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=cwd,
    )
    assert result.returncode == 0, result.stderr


def _fresh_install(tmp: Path) -> Path:
    """A new virtualenv holding gputui installed from its wheel; returns its bin folder."""
    wheels = tmp / "wheels"
    isolation = [] if importlib.util.find_spec("hatchling") is None else ["--no-build-isolation"]
    _pip("wheel", "--no-deps", *isolation, "-w", str(wheels), str(ROOT), cwd=tmp)
    (wheel,) = wheels.glob("gputui-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    _pip("--python", str(python), "install", "--no-deps", str(wheel), cwd=tmp)
    (purelib,) = (venv / "lib").glob("python3*/site-packages")
    # Only now, so that pip saw no other gputui: the dependencies come from the test environment.
    (purelib / "zz_test_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return venv / "bin"


def test_a_non_editable_install_lists_and_runs_its_scenarios(
    fixed_sim: SimProcess, tmp_path: Path
) -> None:
    bin_dir = _fresh_install(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()

    def gputui(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(bin_dir / "gputui"), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=empty,
        )

    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import gputui; print(gputui.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=empty,
        check=True,
    )
    installed = Path(where.stdout.strip())
    assert installed.is_relative_to(tmp_path / "venv"), installed  # not the clone's source
    assert (installed.parent / "scenarios" / "chat.toml").is_file()

    listed = gputui("scenarios")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()[1:]]
    assert {row[0] for row in rows} == SHIPPED
    assert all(row[-1].startswith(str(installed.parent / "scenarios")) for row in rows)

    out = empty / "chat.json"
    run = gputui(
        "run",
        "--url",
        fixed_sim.url,
        "--scenario",
        "chat",
        "--concurrency",
        "1",
        "--step-seconds",
        "2s",
        "--warmup-seconds",
        "500ms",
        "--output-tokens",
        "16",
        "--out",
        str(out),
        "--snapshot-dir",
        str(tmp_path / "sessions"),
        timeout=90,
    )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    snap = load_snapshot(out)
    assert snap.complete
    assert snap.workload.scenario == "chat"
    assert snap.workload.scenario_file == str(installed.parent / "scenarios" / "chat.toml")
    (step,) = snap.steps
    # Each request takes 20 ms + 15 x 5 ms = 95 ms on the fixed simulator: ~15 in 1.5 s measured.
    assert step.requests_failed == 0
    assert step.requests_ok >= 8
    assert step.sla_ok
