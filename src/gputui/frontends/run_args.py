"""`gputui run`'s arguments turned into its configuration: step limits, plan lines, paths.

Contract: pure functions of the run's load plan (`LoadPlanFlags`) and `SessionSettings`, used by
`gputui.frontends.run.run_command` before anything starts. `step_limits` decides how long each step
runs, `describe_steps` / `describe_plan` are the run's opening lines, and `parse_extra_body` /
`output_path` check `--extra-body` and `--out`: bad input is a `UsageError` (one line, exit 2),
never a traceback.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from gputui.control.rules import StepLimits
from gputui.control.rules import step_limits as limits_from_flags
from gputui.engine.load import LoadMode
from gputui.errors import UsageError
from gputui.settings import LoadPlanFlags, SessionSettings
from gputui.snapshot.assemble import session_file


def step_limits(load: LoadPlanFlags, settings: SessionSettings) -> StepLimits:
    """How long each step runs: to --target-precision (0.05 under --auto) within a maximum."""
    return limits_from_flags(
        settings.target_precision, settings.max_step_seconds, load.step_seconds, precise=load.auto
    )


def describe_steps(warmup_s: float | None, limits: StepLimits) -> str:
    warm = "steady-state warm-up" if warmup_s is None else f"{warmup_s:g} s warm-up"
    if limits.target_precision is None:
        return f"{warm} + {limits.step_s:g} s per step"
    return (
        f"{warm}, then each step until ±{limits.target_precision:.0%} "
        f"(at most {limits.max_s:g} s a step)"
    )


def describe_plan(load: LoadPlanFlags, mode: LoadMode, levels: list[float]) -> str:
    if load.auto:
        return f"auto sweep up to concurrency {load.max_level} within {load.max_minutes:g} min"
    if load.validate_rate:
        return f"validation hold at {load.validate_rate:g} req/s for {load.seconds:g} s"
    return f"{mode} {','.join(f'{x:g}' for x in levels)}"


def parse_extra_body(text: str | None) -> dict[str, object]:
    if not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"--extra-body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError("--extra-body must be a JSON object")
    return value


def output_path(text: str | None, settings: SessionSettings) -> Path:
    """--out, else a new file in the sessions folder (so `gputui sessions` lists it)."""
    if text is None:
        try:
            settings.snapshot_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--snapshot-dir {settings.snapshot_dir}: {exc}") from None
        return session_file(settings.snapshot_dir, settings.label)
    path = Path(text)
    folder = path.parent if str(path.parent) else Path()
    if not folder.is_dir():
        raise UsageError(f"--out: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"--out: folder {folder} is not writable")
    return path
