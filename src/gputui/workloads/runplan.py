"""`gputui run --scenario`: a scenario's values under the flags, and the run's workload.

Contract: `apply_scenario(args)` fills every run flag the user left unset (None) from the scenario
and then from the defaults, so the rest of `gputui run` reads `args` as before: flags win over the
scenario, field by field, and a load flag (--concurrency, --rate, --auto, --validate-rate) replaces
the scenario's whole load plan. `workload_config(args, scenario)` merges the workload the same way
and raises UsageError (one line) when neither gives an input or an output length.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeVar

from gputui.errors import UsageError
from gputui.workloads.config import DatasetConfig, WorkloadConfig
from gputui.workloads.distributions import EmpiricalDist, FixedDist, LengthDist, parse_dist
from gputui.workloads.scenario import Scenario, load_scenario

_T = TypeVar("_T")


def apply_scenario(args: argparse.Namespace) -> Scenario | None:
    """Load --scenario (if any) and fill the unset run flags from it, then from the defaults."""
    scenario = load_scenario(args.scenario) if args.scenario else None
    if scenario is not None:
        plan = scenario.load
        if not (args.concurrency or args.rate or args.auto or args.validate_rate):
            if plan.mode == "concurrency":
                args.concurrency = [int(x) for x in plan.levels]
            elif plan.mode == "rate":
                args.rate = list(plan.levels)
            else:
                args.auto = True
        sla = scenario.sla
        work = scenario.workload
        for name, value in (
            ("step_seconds", plan.step_seconds),
            ("warmup_seconds", plan.warmup_seconds),
            ("arrival", plan.arrival),
            ("burstiness", plan.burstiness),
            ("sla_ttft_p95", sla.ttft_p95_s),
            ("sla_tpot_p95", sla.tpot_p95_s),
            ("max_error_rate", sla.max_error_rate),
            ("endpoint", scenario.endpoint),
            ("ignore_eos", work.ignore_eos),
            ("seed", work.seed),
        ):
            if getattr(args, name, None) is None:
                setattr(args, name, value)
    for name, default in (("endpoint", "completions"), ("ignore_eos", True), ("seed", 0)):
        if getattr(args, name, None) is None:
            setattr(args, name, default)
    return scenario


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


def workload_config(args: argparse.Namespace, scenario: Scenario | None) -> WorkloadConfig:
    """The run's workload: the flags over the scenario's (see the module docstring).

    Relative dataset paths from flags are made absolute here; the scenario's stay relative to its
    folder (pass `scenario.folder` as `base_dir` to `prepare_workload`).
    """
    given_in = _flag_dist(args.input_tokens, args.input_dist, "input")
    given_out = _flag_dist(args.output_tokens, args.output_dist, "output")
    base = scenario.workload if scenario is not None else WorkloadConfig.model_construct()
    inp: LengthDist | None = base.input
    dataset: DatasetConfig | None = base.dataset
    if args.dataset is not None:
        if given_in is not None:
            raise UsageError(
                "--dataset sends the dataset's prompts: drop --input-tokens/--input-dist, or "
                "use --input-dist empirical:FILE to draw lengths only"
            )
        inp, dataset = None, DatasetConfig(path=str(Path(args.dataset).resolve()))
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
        shared_prefix_tokens=_first(args.shared_prefix_tokens, base.shared_prefix_tokens),
        unique_prefix=_first(args.unique_prefix, base.unique_prefix),
        seed=args.seed,
        ignore_eos=args.ignore_eos,
        min_tokens=_first(args.min_tokens, base.min_tokens),
    )


def _first(flag: _T | None, fallback: _T) -> _T:
    return fallback if flag is None else flag
