"""The flags of the tool subcommands: kv, gpu, metrics, compare, sessions, records, scenarios.

Declaring them imports nothing heavy (httpx, prometheus-client, pynvml, numpy), so `gputui --help`
stays fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gputui.cli.argtypes import (
    non_negative_float,
    open_fraction,
    positive_float,
    positive_int,
    seconds,
)
from gputui.cli.shared_flags import add_energy_price_arguments
from gputui.folders import default_sessions_dir


def _add_model_arguments(parser: argparse.ArgumentParser, *, required: bool) -> None:
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("--model", metavar="NAME", help="a model from the built-in catalog")
    group.add_argument(
        "--model-config",
        type=Path,
        metavar="PATH",
        help="a local Hugging Face config.json (or its directory)",
    )


def add_kv_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare `gputui kv`'s flags."""
    from gputui.catalog.specs import KV_DTYPES, PRECISIONS

    _add_model_arguments(parser, required=True)
    parser.add_argument(
        "--gpu",
        default="all",
        metavar="NAME",
        help="a catalog GPU, 'all' (a table over the catalog) or 'local' (this machine's GPUs, "
        "memory as NVML reports it); default all",
    )
    parser.add_argument(
        "--context",
        type=positive_int,
        default=8192,
        metavar="TOKENS",
        help="tokens per request, input + output (default 8192)",
    )
    parser.add_argument("--precision", choices=PRECISIONS, default="bf16", help="weights")
    parser.add_argument("--kv-dtype", choices=KV_DTYPES, default="bf16", help="KV-cache elements")
    parser.add_argument(
        "--gpu-memory-utilization",
        type=open_fraction,
        default=0.9,
        metavar="F",
        help="vLLM's budget",
    )
    parser.add_argument("--max-num-seqs", type=positive_int, default=None, metavar="N")
    parser.add_argument("--max-batched-tokens", type=positive_int, default=None, metavar="N")
    parser.add_argument("--json", action="store_true", help="JSON (a list with all/local)")


def add_gpu_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare `gputui gpu`'s flags."""
    parser.add_argument(
        "--source",
        choices=("auto", "nvml", "smi"),
        default="auto",
        help="NVML, nvidia-smi, or NVML falling back to nvidia-smi (default)",
    )
    parser.add_argument("--json", action="store_true", help="JSON output")


def add_metrics_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare `gputui metrics`'s flags."""
    parser.add_argument(
        "--url", required=True, help="the Prometheus endpoint (a URL with no path gets /metrics)"
    )
    parser.add_argument("--dcgm-url", default=None, help="a dcgm-exporter endpoint for the GPUs")
    parser.add_argument(
        "--local-gpu",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="read this machine's GPUs when the scrape has no DCGM series (default on)",
    )
    parser.add_argument("--timeout", type=seconds, default=2.0, metavar="S")
    _add_model_arguments(parser, required=False)
    parser.add_argument(
        "--context",
        type=positive_int,
        default=None,
        metavar="TOKENS",
        help="request length for the headroom estimate",
    )
    parser.add_argument("--json", action="store_true", help="JSON output")


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare `gputui compare`'s flags."""
    from gputui.snapshot.compare_render import FORMATS

    parser.add_argument("snapshots", nargs="+", metavar="SNAP", help="snapshot JSON files")
    parser.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="LABEL=PER_HOUR",
        help="hourly price of a snapshot's node (repeatable; overrides the price saved by "
        "`gputui run --price-per-hour`)",
    )
    parser.add_argument("--currency", default=None, metavar="TEXT", help="e.g. USD or EUR")
    add_energy_price_arguments(parser)  # overrides the price and PUE saved by `run`
    plan = parser.add_argument_group("capacity planning")
    plan.add_argument(
        "--demand-rpm", type=positive_float, default=None, metavar="N", help="requests per minute"
    )
    plan.add_argument(
        "--mean-output-tokens",
        type=positive_float,
        default=None,
        metavar="N",
        help="mean output tokens per request of that demand",
    )
    plan.add_argument(
        "--headroom", type=non_negative_float, default=0.3, metavar="F", help="default 0.3 (30 %%)"
    )
    parser.add_argument(
        "--at-output-tokens-per-s",
        type=positive_float,
        default=None,
        metavar="T",
        help="also compare latency and load level at this output throughput",
    )
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.add_argument("--out", default=None, metavar="FILE", help="write here, not to stdout")


def add_sessions_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare `gputui sessions`' flags."""
    folder = default_sessions_dir()
    parser.description = (
        f"List the snapshots saved in {folder} (the TUI's and `gputui run`'s default folder; "
        "--dir for another): each file's whole path, which `gputui compare` takes as it is."
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--dir",
        default=None,
        metavar="DIR",
        help=f"folder of saved snapshots (default: {folder})",
    )
    parser.add_argument(
        "--recover",
        action="store_true",
        help="first rebuild a snapshot from each journal a crashed `tui` or `run` left there",
    )


def add_records_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare `gputui records`' arguments."""
    parser.add_argument("snapshot", metavar="SNAPSHOT", help="a saved session (snapshot JSON)")
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        metavar="FILE",
        help="write the JSON Lines here (default: stdout); the rows --records writes live",
    )


def add_scenarios_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `gputui scenarios`."""
    from gputui.workloads.scenario import SCENARIO_DIR

    parser.add_argument(
        "places",
        nargs="*",
        type=Path,
        metavar="PATH",
        help=f"scenario files or folders (default: ./{SCENARIO_DIR}, else those installed)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
