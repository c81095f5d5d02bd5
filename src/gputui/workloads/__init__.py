"""Realistic workloads: scenario files, length distributions, datasets and token-exact prompts.

The seam is `engine.workload`: a scenario (or the run's flags) becomes a `WorkloadConfig`;
`prepare_workload` calibrates prompts against the target and returns a `PreparedRun` whose `spec`
goes into `EngineConfig.workload`. For the TUI:

    scenario = load_scenario("scenarios/chat.toml")          # or load_scenario("chat")
    prepared = scenario.prepare(target, model, api_key=key)   # blocking: run it off the UI loop
    EngineConfig(client=..., shape=RequestShape(prepared.nominal_input, prepared.nominal_output),
                 workload=prepared.spec)
    # scenario.sla.to_sla(), scenario.load, scenario.endpoint; RunInfo(workload_details=
    # prepared.details) records it all in the snapshot.

Importing this package loads pydantic and numpy, never httpx (that comes with `prepare`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputui.workloads.config import WorkloadConfig
from gputui.workloads.errors import WorkloadFileError
from gputui.workloads.scenario import Scenario, find_scenarios, load_scenario

if TYPE_CHECKING:
    from gputui.workloads.prepare import PreparedRun, prepare_workload

__all__ = [
    "PreparedRun",
    "Scenario",
    "WorkloadConfig",
    "WorkloadFileError",
    "find_scenarios",
    "load_scenario",
    "prepare_workload",
]


def __getattr__(name: str) -> object:
    if name in ("PreparedRun", "prepare_workload"):
        from gputui.workloads import prepare

        return getattr(prepare, name)
    raise AttributeError(name)
