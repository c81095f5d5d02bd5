"""Lines for `gputui run`: what the workload is before the run, and how exact it was after.

Contract: pure functions from a PreparedRun / a snapshot's Workload to lines of text (no prefix,
no newline); the caller prints them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from gputui.workloads.lengths import LengthCheckJson, describe_check

if TYPE_CHECKING:
    from gputui.snapshot.models import LengthCheck, Workload
    from gputui.workloads.prepare import PreparedRun
    from gputui.workloads.scenario import Scenario


def workload_lines(prepared: PreparedRun, scenario: Scenario | None) -> list[str]:
    """The workload header: scenario, lengths, how prompts are sized, and any notes."""
    spec = prepared.spec
    head = f"scenario {scenario.name} ({scenario.path}): " if scenario is not None else ""
    extras = []
    if spec.plan.system:
        extras.append(f"shared system prompt of {prepared.details['shared_prefix_tokens']} tokens")
    if not spec.plan.prefix_words:
        extras.append("no unique prefix (prefix caching can hit)")
    if spec.min_tokens:
        extras.append("min_tokens sent")
    salt = prepared.details.get("prompt_salt")
    isolation = prepared.details.get("prompt_isolation")
    extras.append(f"run salt {salt!r}" if salt else f"prompt isolation {isolation}")
    check = prepared.details.get("input_tokens_check")
    verified = f", {check['matched']}/{check['total']} calibration prompts exact" if check else ""
    lines = [
        f"{head}{prepared.describe()}{verified}" + (f" ({', '.join(extras)})" if extras else "")
    ]
    lines.extend(f"note: {note}" for note in prepared.notes)
    return lines


def prompt_notices(prepared: PreparedRun | None) -> tuple[str, ...]:
    """Short marks for the TUI's header: approximate lengths, prompts not isolated by a salt."""
    if prepared is None:
        return ("prompts approximate",)
    out = []
    if not prepared.exact:
        out.append("prompts approximate")
    isolation = str(prepared.details.get("prompt_isolation") or "")
    if isolation and not prepared.details.get("prompt_salt"):
        out.append("prompts reused" if "reuse" in isolation else "prompts share prefixes")
    return tuple(out)


def length_lines(workload: Workload) -> list[str]:
    """Requested vs measured input and output lengths, and a warning when they differ."""
    lines = []
    checks: tuple[tuple[str, LengthCheck | None], ...] = (
        ("input", workload.input_lengths),
        ("output", workload.output_lengths),
    )
    for name, check in checks:
        if check is None or not check.requested.n:
            continue
        lines.append(describe_check(name, cast(LengthCheckJson, check.model_dump())))
    inp = workload.input_lengths
    if (
        inp is not None
        and (inp.shorter or inp.longer)
        and "exact" in (workload.input_tokens_method or "")
    ):
        lines.append(
            f"warning: {inp.shorter + inp.longer} prompts were not billed the input length "
            "asked for, although calibration said exact: see input_lengths in the snapshot"
        )
    return lines
