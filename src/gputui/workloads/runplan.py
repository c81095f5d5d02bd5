"""`gputui run --scenario`: the run's workload, the flags' over the scenario's.

Contract: `gputui.settings.run_with_scenario` fills every run flag the user left unset from the
scenario and then from the defaults: flags win over the scenario, field by field, and a load flag
(--concurrency, --rate, --auto, --validate-rate) replaces the scenario's whole load plan.
`workload_config(shape, scenario, ...)` merges the workload the same way and raises UsageError
(one line) when neither gives an input or an output length.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from gputui.errors import UsageError
from gputui.workloads.config import DatasetConfig, WorkloadConfig
from gputui.workloads.distributions import EmpiricalDist, FixedDist, LengthDist, parse_dist
from gputui.workloads.scenario import Scenario

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class ShapeFlags:
    """`gputui run`'s request-shape flags beyond the shared lengths, as given (None: not given)."""

    input_dist: str | None = None
    output_dist: str | None = None
    dataset: str | None = None
    shared_prefix_tokens: int | None = None
    unique_prefix: bool | None = None
    min_tokens: bool | None = None


def _flag_dist(tokens: int | None, spec: str | None, flag: str) -> LengthDist | None:
    if tokens is not None and spec is not None:
        raise UsageError(f"give --{flag}-tokens or --{flag}-dist, not both")
    if spec is not None:
        dist = parse_dist(spec, f"--{flag}-dist")
        if isinstance(dist, EmpiricalDist):  # a flag's path is the cwd's, not the scenario's
            return dist.model_copy(update={"dataset": str(Path(dist.dataset).resolve())})
        return dist
    if tokens is not None:
        return FixedDist(tokens=tokens)
    return None


def workload_config(
    shape: ShapeFlags,
    scenario: Scenario | None,
    *,
    input_tokens: int | None,
    output_tokens: int | None,
    seed: int,
    ignore_eos: bool,
) -> WorkloadConfig:
    """The run's workload: the flags over the scenario's (see the module docstring).

    Relative dataset paths from flags are made absolute here; the scenario's stay relative to its
    folder (pass `scenario.folder` as `base_dir` to `prepare_workload`).
    """
    given_in = _flag_dist(input_tokens, shape.input_dist, "input")
    given_out = _flag_dist(output_tokens, shape.output_dist, "output")
    base = scenario.workload if scenario is not None else WorkloadConfig.model_construct()
    inp: LengthDist | None = base.input
    dataset: DatasetConfig | None = base.dataset
    if shape.dataset is not None:
        if given_in is not None:
            raise UsageError(
                "--dataset sends the dataset's prompts: drop --input-tokens/--input-dist, or "
                "use --input-dist empirical:FILE to draw lengths only"
            )
        inp, dataset = None, DatasetConfig(path=str(Path(shape.dataset).resolve()))
    elif given_in is not None:
        inp, dataset = given_in, None
    out = given_out if given_out is not None else base.output
    if inp is None and dataset is None:
        raise UsageError("--input-tokens is required (or --input-dist, --dataset or --scenario)")
    if out is None and dataset is None:
        raise UsageError("--output-tokens is required (or --output-dist, --dataset or --scenario)")
    return WorkloadConfig(
        input=inp,
        output=out,
        dataset=dataset,
        shared_prefix_tokens=_first(shape.shared_prefix_tokens, base.shared_prefix_tokens),
        unique_prefix=_first(shape.unique_prefix, base.unique_prefix),
        seed=seed,
        ignore_eos=ignore_eos,
        min_tokens=_first(shape.min_tokens, base.min_tokens),
    )


def _first(flag: _T | None, fallback: _T) -> _T:
    return fallback if flag is None else flag
