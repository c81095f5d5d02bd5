"""The flags of `gputui run`: the shared groups, and its load plan, steps, shape and output."""

from __future__ import annotations

import argparse

from gputui.cli.argtypes import (
    level_list,
    minutes,
    non_negative_int,
    non_negative_seconds,
    positive_float,
    positive_int,
    rate_list,
    seconds,
)
from gputui.cli.shared_flags import (
    add_client_arguments,
    add_precision_arguments,
    add_record_arguments,
    add_sla_arguments,
    add_target_arguments,
    add_telemetry_arguments,
    add_workload_arguments,
    add_workload_source_arguments,
)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `gputui run`."""
    add_target_arguments(parser)
    load = parser.add_argument_group("load")
    _add_plan_arguments(load)
    _add_step_arguments(load)
    add_precision_arguments(parser)
    load.add_argument(
        "--seed", type=int, default=None, help="same seed, same requests (default: scenario's, 0)"
    )
    add_workload_arguments(parser)
    _add_shape_arguments(parser.add_argument_group("workload"))
    add_sla_arguments(parser)
    add_client_arguments(parser)
    client = parser.add_argument_group("client")
    client.add_argument("--no-uvloop", action="store_true", help="use asyncio's default loop")
    add_workload_source_arguments(parser)
    add_telemetry_arguments(parser)
    add_record_arguments(parser)
    _add_output_arguments(parser.add_argument_group("output"))


def _add_plan_arguments(load: argparse._ArgumentGroup) -> None:
    """What to sweep: fixed levels, the auto sweep or a validation hold, and their bounds."""
    levels = load.add_mutually_exclusive_group()
    levels.add_argument("--concurrency", type=level_list, help="closed-loop levels, e.g. 1,2,4,8")
    levels.add_argument("--rate", type=rate_list, help="open-loop requests/s, e.g. 0.5,1,2")
    levels.add_argument(
        "--auto",
        action="store_true",
        help="find the capacity: concurrency ramp x2 until the SLA breaks or throughput stalls, "
        "then bisect; then hold 90%% of its req/s to validate it",
    )
    levels.add_argument(
        "--validate-rate",
        type=positive_float,
        metavar="R",
        help="hold R requests/s (Poisson) for --seconds: does the SLA hold, is the queue bounded?",
    )
    load.add_argument("--max-level", type=positive_int, default=256, help="--auto's ceiling")
    load.add_argument("--max-minutes", type=minutes, default=30.0, help="--auto's budget")
    load.add_argument("--seconds", type=seconds, default=60.0, help="length of the validation hold")
    load.add_argument("--no-validate", action="store_true", help="skip the hold after --auto")


def _add_step_arguments(load: argparse._ArgumentGroup) -> None:
    """Bursts, arrivals, and how long each step runs and warms up; repeats of the plan."""
    load.add_argument(
        "--burst",
        type=positive_int,
        default=None,
        metavar="K",
        help="fire K extra requests at once every --burst-every seconds",
    )
    load.add_argument("--burst-every", type=seconds, default=30.0, metavar="S")
    load.add_argument("--arrival", choices=("poisson", "constant", "gamma"), default=None)
    load.add_argument(
        "--burstiness", type=positive_float, default=None, help="gamma shape (1 = Poisson)"
    )
    load.add_argument("--max-in-flight", type=positive_int, default=1024)
    load.add_argument(
        "--step-seconds",
        type=seconds,
        default=None,
        help="length of each step (required unless the --scenario gives it)",
    )
    load.add_argument(
        "--warmup-seconds",
        type=non_negative_seconds,
        default=None,
        help="a fixed warm-up excluded from each step's statistics (default: each step starts "
        "measuring once the load has settled, at most 30 s)",
    )
    load.add_argument(
        "--repeats",
        type=positive_int,
        default=1,
        metavar="N",
        help="run the whole plan N times on fresh connections (the server's prefix cache reset "
        "where it offers it) and report the spread across runs",
    )


def _add_shape_arguments(work: argparse._ArgumentGroup) -> None:
    """The lengths, dataset and prompt shape of each request, beyond the shared workload flags."""
    work.add_argument(
        "--input-dist",
        default=None,
        metavar="DIST",
        help="input lengths: N, uniform:MIN,MAX, normal:MEAN,STD[,MIN,MAX], "
        "lognormal:mean=M,std=S[,min=..,max=..] or empirical:FILE (a dataset's lengths)",
    )
    work.add_argument("--output-dist", default=None, metavar="DIST", help="as --input-dist")
    work.add_argument(
        "--dataset",
        default=None,
        metavar="FILE",
        help="send a local dataset's prompts: ShareGPT JSON or JSONL of "
        '{"prompt": ..., "output_tokens": N}',
    )
    work.add_argument(
        "--shared-prefix-tokens",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="a system prompt of N tokens shared by every request (prefix caching on purpose)",
    )
    work.add_argument(
        "--unique-prefix",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="begin each prompt with words unique to it, so no prefix cache hits (default on)",
    )
    work.add_argument(
        "--min-tokens",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also send min_tokens = max_tokens (default: to vLLM, SGLang and the simulator)",
    )
    work.add_argument(
        "--extra-body", default=None, metavar="JSON", help="fields to add to requests"
    )


def _add_output_arguments(output: argparse._ArgumentGroup) -> None:
    """Where the snapshot goes, and a measured bandwidth for the roofline."""
    output.add_argument(
        "--out",
        default=None,
        metavar="FILE.json",
        help="the snapshot (default: a new file in --snapshot-dir, named like the TUI's)",
    )
    output.add_argument(
        "--vram-check",
        default=None,
        metavar="FILE.json",
        help="`gputui vram-check --json` output: its measured bandwidth is the roofline's peak "
        "for a card missing from the catalog",
    )
