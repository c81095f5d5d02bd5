"""`gputui scenarios`: list the scenario files, what each asks for, and any that are invalid.

Contract: one line per scenario (name, endpoint, input and output lengths, SLA, load plan, file)
or, with `--json`, one JSON object per scenario; an invalid file is listed with its one-line error
and the exit code is 1, so the command doubles as a validator for CI.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import orjson

from gputui.jsontypes import JsonOutObject
from gputui.workloads.errors import WorkloadFileError
from gputui.workloads.scenario import (
    Scenario,
    default_scenario_dir,
    find_scenarios,
    load_scenario,
)


def _lengths(scenario: Scenario) -> tuple[str, str]:
    work = scenario.workload
    data = f"dataset {Path(work.dataset.path).name}" if work.dataset else "dataset"
    inp = work.input.describe() if work.input else data
    out = work.output.describe() if work.output else data
    if work.shared_prefix_tokens:
        inp += f" (shared prefix {work.shared_prefix_tokens})"
    return inp, out


def _sla(scenario: Scenario) -> str:
    sla = scenario.sla
    ttft = f"{sla.ttft_p95_s * 1e3:g} ms" if sla.ttft_p95_s else "-"
    tpot = f"{sla.tpot_p95_s * 1e3:g} ms" if sla.tpot_p95_s else "-"
    return f"{ttft}/{tpot}"


def _load(scenario: Scenario) -> str:
    load = scenario.load
    if load.mode == "auto":
        return f"auto x {load.step_seconds:g} s"
    levels = ",".join(f"{x:g}" for x in load.levels)
    return f"{load.mode} {levels} x {load.step_seconds:g} s"


def describe(scenario: Scenario) -> JsonOutObject:
    """What `--json` prints for one scenario."""
    inp, out = _lengths(scenario)
    return {
        "name": scenario.name,
        "file": scenario.path,
        "endpoint": scenario.endpoint,
        "input": inp,
        "output": out,
        "sla": scenario.sla.model_dump(mode="json"),
        "load": scenario.load.model_dump(mode="json"),
        "description": scenario.description,
    }


@dataclass(frozen=True, slots=True)
class ScenariosOptions:
    """`gputui scenarios`' flags."""

    places: tuple[Path, ...] = ()
    json: bool = False


def run_scenarios(options: ScenariosOptions) -> int:
    """List the scenarios; exit 1 when one is invalid."""
    files = find_scenarios(list(options.places) or None)
    rows: list[tuple[str, ...]] = []
    bad = 0
    for path in files:
        try:
            scenario = load_scenario(path)
        except WorkloadFileError as exc:
            bad += 1
            if options.json:
                sys.stdout.write(orjson.dumps({"file": str(path), "error": str(exc)}).decode())
                sys.stdout.write("\n")
            else:
                rows.append((path.stem, "INVALID", str(exc), "", "", "", ""))
            continue
        if options.json:
            sys.stdout.write(orjson.dumps(describe(scenario)).decode() + "\n")
            continue
        inp, out = _lengths(scenario)
        rows.append(
            (scenario.name, scenario.endpoint, inp, out, _sla(scenario), _load(scenario), str(path))
        )
    if not options.json:
        _table(rows)
    if not files:
        places = ", ".join(map(str, options.places or [default_scenario_dir()]))
        sys.stderr.write(f"gputui: no scenario files in {places}\n")
        return 1
    return 1 if bad else 0


def _table(rows: list[tuple[str, ...]]) -> None:
    header = (
        "name",
        "endpoint",
        "input tokens",
        "output tokens",
        "SLA p95 TTFT/TPOT",
        "load",
        "file",
    )
    valid = [r for r in rows if r[1] != "INVALID"]
    widths = [max(len(r[i]) for r in [header, *valid]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        if row[1] == "INVALID":
            lines.append(f"{row[0]:<{widths[0]}}  INVALID: {row[2]}")
        else:
            lines.append(
                "  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths, strict=True)).rstrip()
            )
    sys.stdout.write("\n".join(lines) + "\n")
