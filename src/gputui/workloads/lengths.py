"""Requested against measured lengths: did the server get the prompt and give the output asked?

Contract: `length_report(records)` looks at the ok records only (a failed request has no usage
report) and returns, overall and per step, for input and output: the requested lengths' and the
measured (usage-reported) lengths' mean/p50/p95/min/max, with how many requests matched exactly,
came back shorter or longer, and how many could not be compared (no usage report, or no requested
input length). Plain dicts, ready for the snapshot's `LengthCheck` model.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Required, TypedDict

import numpy as np

from gputui.engine.records import RequestRecord


class LengthStats(TypedDict, total=False):
    """Requested or measured lengths: only `n` when there are none."""

    n: Required[int]
    mean: float
    p50: float
    p95: float
    min: int
    max: int


class LengthCheckJson(TypedDict):
    """Requested against measured lengths (the snapshot's `LengthCheck`, as a dict)."""

    requested: LengthStats
    measured: LengthStats
    exact: int
    shorter: int
    longer: int
    unknown: int


class StepLengths(TypedDict):
    """One step's input and output checks."""

    step: int
    input: LengthCheckJson
    output: LengthCheckJson


class LengthReport(TypedDict):
    """`length_report`: the whole run's checks and each step's."""

    input: LengthCheckJson
    output: LengthCheckJson
    by_step: list[StepLengths]


def _stats(values: Sequence[int]) -> LengthStats:
    if not values:
        return {"n": 0}
    arr = np.asarray(values, dtype=np.float64)
    return {
        "mean": float(arr.mean()),
        "p50": float(np.percentile(arr, 50)),
        "p95": float(np.percentile(arr, 95)),
        "min": int(arr.min()),
        "max": int(arr.max()),
        "n": len(values),
    }


def _check(pairs: Sequence[tuple[int | None, int | None]]) -> LengthCheckJson:
    requested = [r for r, _ in pairs if r is not None]
    measured = [m for _, m in pairs if m is not None]
    both = [(r, m) for r, m in pairs if r is not None and m is not None]
    return {
        "requested": _stats(requested),
        "measured": _stats(measured),
        "exact": sum(1 for r, m in both if m == r),
        "shorter": sum(1 for r, m in both if m < r),
        "longer": sum(1 for r, m in both if m > r),
        "unknown": len(pairs) - len(both),
    }


def _pairs(
    records: Iterable[RequestRecord],
) -> tuple[list[tuple[int | None, int | None]], list[tuple[int | None, int | None]]]:
    inputs: list[tuple[int | None, int | None]] = []
    outputs: list[tuple[int | None, int | None]] = []
    for r in records:
        inputs.append((r.requested_input_tokens, r.input_tokens))
        outputs.append((r.requested_output_tokens or None, r.output_tokens))
    return inputs, outputs


def length_report(records: Iterable[RequestRecord]) -> LengthReport:
    """{"input": check, "output": check, "by_step": [{"step", "input", "output"}, ...]}."""
    ok = [r for r in records if r.ok]
    by_step: dict[int, list[RequestRecord]] = defaultdict(list)
    for record in ok:
        by_step[record.step_index].append(record)
    inputs, outputs = _pairs(ok)
    steps: list[StepLengths] = []
    for index in sorted(by_step):
        step_in, step_out = _pairs(by_step[index])
        steps.append({"step": index, "input": _check(step_in), "output": _check(step_out)})
    return {"input": _check(inputs), "output": _check(outputs), "by_step": steps}


def describe_check(name: str, check: LengthCheckJson) -> str:
    """One line: `input tokens: requested mean 1024.0 (p50 1024, p95 1024), measured ...`."""

    def part(stats: LengthStats) -> str:
        if not stats.get("n"):
            return "-"
        return f"mean {stats['mean']:.1f} (p50 {stats['p50']:g}, p95 {stats['p95']:g})"

    compared = check["exact"] + check["shorter"] + check["longer"]
    verdict = f"exact {check['exact']}/{compared}"
    if check["shorter"]:
        verdict += f", shorter {check['shorter']}"
    if check["longer"]:
        verdict += f", longer {check['longer']}"
    if check["unknown"]:
        verdict += f", not comparable {check['unknown']}"
    return (
        f"{name} tokens: requested {part(check['requested'])}, "
        f"measured {part(check['measured'])}; {verdict}"
    )
