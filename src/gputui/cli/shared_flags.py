"""The flags `run`, `tui` and `demo` share: declared once, each with a type from `cli.argtypes`.

Contract: each `add_*_arguments(parser)` declares one group of shared flags, default None ("not
given"), so that `gputui.settings.session_settings` can put flags over a scenario over its
`DEFAULTS`. `tests/unit/test_settings.py` checks that run and tui reject bad values of every
shared flag with the same message.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gputui.cli.argtypes import (
    duration,
    fraction,
    host_port,
    non_negative_float,
    positive_float,
    positive_int,
    pue_float,
    seconds,
)
from gputui.durations import TPOT_IMPLAUSIBLE_S, TTFT_IMPLAUSIBLE_S
from gputui.sla_defaults import DEFAULT_MAX_ERROR_RATE


def add_target_arguments(parser: argparse.ArgumentParser, *, url: bool = True) -> None:
    """--url and --model (unless the demo sets them), --endpoint, --api-key-env, --scenario."""
    target = parser.add_argument_group("target")
    if url:
        target.add_argument("--url", required=True, help="server base URL, with or without /v1")
        target.add_argument(
            "--model", default=None, help="model name to request (default: the only one served)"
        )
    target.add_argument(
        "--endpoint",
        choices=("completions", "chat", "responses", "messages"),
        default=None,
        help="request kind: /v1/completions, /v1/chat/completions, /v1/responses or "
        "Anthropic's /v1/messages (default: the scenario's, else completions)",
    )
    target.add_argument(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="environment variable holding the API key (never logged or saved); sent as a "
        "bearer token, and with --endpoint messages also as x-api-key",
    )
    target.add_argument(
        "--scenario",
        default=None,
        metavar="FILE|NAME",
        help="a scenario TOML (or NAME for scenarios/NAME.toml): workload, SLA, endpoint and "
        "load plan; flags given here win over it (list them with `gputui scenarios`)",
    )


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """Fixed request lengths, --ignore-eos, how prompts are sized, and run isolation."""
    work = parser.add_argument_group("workload")
    work.add_argument("--input-tokens", type=positive_int, default=None, help="(default 512)")
    work.add_argument("--output-tokens", type=positive_int, default=None, help="(default 128)")
    work.add_argument(
        "--ignore-eos",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="ask the server to ignore EOS so outputs have the requested length (default on)",
    )
    work.add_argument(
        "--token-counter",
        choices=("auto", "server", "tokenizer", "approximate"),
        default="auto",
        help="how prompts are sized: the server's /tokenize, --tokenizer, or one token per "
        "word (auto: the first that works)",
    )
    work.add_argument(
        "--tokenizer",
        type=Path,
        default=None,
        metavar="FILE",
        help="a local tokenizer.json (needs: pip install 'gputui[tokenizers]')",
    )
    work.add_argument(
        "--reuse-prompts",
        action="store_true",
        default=None,
        help="send the same prompts as an earlier run with this seed, so its prefix cache can "
        "serve them (default: a new salt per run keeps every run cold)",
    )


def add_sla_arguments(parser: argparse.ArgumentParser) -> None:
    """The SLA a step is judged against."""
    sla = parser.add_argument_group("SLA")
    sla.add_argument(
        "--sla-ttft-p95",
        type=duration(implausible_above_s=TTFT_IMPLAUSIBLE_S, what="to the first token"),
        default=None,
        metavar="DURATION",
        help="bound on the P95 time to first token, e.g. 1s or 800ms (a bare number is seconds)",
    )
    sla.add_argument(
        "--sla-tpot-p95",
        type=duration(implausible_above_s=TPOT_IMPLAUSIBLE_S, what="per output token"),
        default=None,
        metavar="DURATION",
        help="bound on the P95 time per output token, e.g. 35ms (a bare number is seconds)",
    )
    sla.add_argument(
        "--sla-e2e-p95",
        type=duration(implausible_above_s=TTFT_IMPLAUSIBLE_S, what="for a whole request"),
        default=None,
        metavar="DURATION",
        help="bound on the P95 full-request latency (E2E), e.g. 20s (default: none)",
    )
    sla.add_argument(
        "--sla-ttfat-p95",
        type=duration(implausible_above_s=TTFT_IMPLAUSIBLE_S, what="to the first answer token"),
        default=None,
        metavar="DURATION",
        help="bound on the P95 time to the first answer token, after any thinking, e.g. 5s; a "
        "request that never answered counts at its E2E (default: none)",
    )
    sla.add_argument(
        "--max-error-rate",
        type=fraction,
        default=None,
        metavar="F",
        help=f"bound on the failed share of a step's requests (default {DEFAULT_MAX_ERROR_RATE:g}"
        f" = {DEFAULT_MAX_ERROR_RATE * 100:g} %%: every verdict has one; 1 allows any); a failed "
        "request is never good output",
    )


def add_client_arguments(parser: argparse.ArgumentParser) -> None:
    """Client timeouts and engine processes."""
    client = parser.add_argument_group("client")
    client.add_argument(
        "--request-timeout",
        type=seconds,
        default=None,
        metavar="S",
        help="give up on a request after S seconds in all (failure: timeout); the only bound "
        "before its first byte, so a long queue is measured, not cut short (default 600)",
    )
    client.add_argument(
        "--connect-timeout",
        type=seconds,
        default=None,
        metavar="S",
        help="give up opening a connection after S seconds (failure: connect; default 10)",
    )
    client.add_argument(
        "--stall-timeout",
        type=seconds,
        default=None,
        metavar="S",
        help="give up on a response silent for S seconds once its body has started "
        "(failure: stall; default 60)",
    )
    client.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        help="engine processes sharing the load (one core each) when one client core saturates",
    )
    client.add_argument(
        "--ray",
        default=None,
        metavar="ADDRESS",
        help="place the --workers on this Ray cluster (pip install 'gputui[distributed]')",
    )


def add_record_arguments(parser: argparse.ArgumentParser, *, precision: bool = True) -> None:
    """What the snapshot records beside the measurements, and where it goes."""
    out = parser.add_argument_group("snapshot")
    out.add_argument("--label", default=None, help="snapshot label")
    out.add_argument(
        "--price-per-hour",
        type=non_negative_float,
        default=None,
        metavar="PRICE",
        help="hourly price of this node, saved in the snapshot for `gputui compare`",
    )
    add_energy_price_arguments(out)
    if precision:  # the demo's own --precision picks the simulated weights, and is recorded
        out.add_argument(
            "--precision",
            default=None,
            metavar="DTYPE",
            help="the served weights' precision (e.g. bf16, fp8), saved for `gputui compare`",
        )
    out.add_argument(
        "--snapshot-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where snapshots and the crash journal go (default: the sessions folder, "
        "which `gputui sessions` lists)",
    )
    live = parser.add_argument_group("per-request records and live metrics")
    live.add_argument(
        "--records",
        type=Path,
        default=None,
        metavar="FILE",
        help="write one JSON line per request as each step finishes (schema in the README; "
        "`gputui records SNAPSHOT` writes the same from a saved session)",
    )
    live.add_argument(
        "--serve-metrics",
        type=host_port,
        default=None,
        metavar="HOST:PORT",
        help="serve gputui's own Prometheus metrics (gputui_*) at http://HOST:PORT/metrics "
        "while it runs (a bare PORT: 127.0.0.1; default off)",
    )


def add_energy_price_arguments(group: argparse._ActionsContainer) -> None:
    """`--energy-price` and `--pue`: an energy cost beside the hourly one (issue 29)."""
    group.add_argument(
        "--energy-price",
        type=non_negative_float,
        default=None,
        metavar="PER_KWH",
        help="electricity price per kWh: adds an energy cost per million output tokens beside "
        "the hourly cost (never folded into it); saved in the snapshot",
    )
    group.add_argument(
        "--pue",
        type=pue_float,
        default=None,
        metavar="F",
        help="power usage effectiveness of the facility, multiplies the energy cost (default 1.0)",
    )


def add_precision_arguments(parser: argparse.ArgumentParser) -> None:
    """Adaptive steps (issue 16): how precise a step must be, and how long it may run for it."""
    steps = parser.add_argument_group("adaptive steps")
    steps.add_argument(
        "--target-precision",
        type=positive_float,
        default=None,
        metavar="F",
        help="run each step until the 95 %% CI half-widths of P95 TTFT, P95 TPOT and output "
        "tok/s are within F of their values (default 0.05 under --auto, else off)",
    )
    steps.add_argument(
        "--max-step-seconds",
        type=seconds,
        default=None,
        metavar="S",
        help="end a step after S seconds (settling included) even when imprecise; it is then "
        "marked imprecise (default: --step-seconds, else 40)",
    )


def _hz(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 20:
        raise argparse.ArgumentTypeError(f"must be in (0, 20], got {text}")
    return value


def add_telemetry_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the telemetry flags of `gputui run` (and the TUI) in their own group."""
    group = parser.add_argument_group("telemetry")
    group.add_argument(
        "--metrics-url",
        default=None,
        metavar="URL",
        help="the server's Prometheus endpoint (default: the target's /metrics)",
    )
    group.add_argument(
        "--no-server-metrics", action="store_true", help="do not scrape the server's /metrics"
    )
    group.add_argument(
        "--dcgm-url", default=None, metavar="URL", help="read the GPUs from a dcgm-exporter"
    )
    group.add_argument(
        "--gpu-telemetry",
        choices=("auto", "nvml", "smi", "none"),
        default="auto",
        help="local GPU source: NVML, nvidia-smi, NVML then nvidia-smi (default), or none",
    )
    group.add_argument(
        "--gpu-hz", type=_hz, default=4.0, metavar="HZ", help="NVML sampling rate (default 4)"
    )
    group.add_argument(
        "--no-host-telemetry", action="store_true", help="do not sample this host's CPU/memory"
    )


def add_workload_source_arguments(parser: argparse.ArgumentParser) -> None:
    """The multi-turn, trace-replay and dataset-order flags of `run`, `tui` and `demo`."""
    from gputui.workloads.source import DATASET_ORDERS  # numpy: only once a parser is built
    from gputui.workloads.traces import TRACE_FORMATS

    group = parser.add_argument_group("conversations, traces and dataset order")
    group.add_argument(
        "--sessions",
        type=positive_int,
        default=None,
        metavar="N",
        help="multi-turn: N simulated users, each holding one conversation (a closed loop of N); "
        "with --rate R, R new conversations a second, at most N under way at once",
    )
    group.add_argument(
        "--turns", type=positive_int, default=None, metavar="K", help="turns per conversation"
    )
    group.add_argument(
        "--think-time",
        default=None,
        metavar="DIST",
        help="pause between an answer and the next turn, in ms, as --input-dist (default 0)",
    )
    group.add_argument(
        "--trace",
        default=None,
        metavar="FILE",
        help="replay a trace on its own clock: Mooncake JSONL, Azure LLM inference CSV or BurstGPT",
    )
    group.add_argument("--trace-format", choices=TRACE_FORMATS, default=None)
    group.add_argument(
        "--time-scale",
        type=positive_float,
        default=None,
        metavar="S",
        help="multiply the trace's clock by S (0.5: twice as fast; default 1)",
    )
    group.add_argument(
        "--trace-window",
        default=None,
        metavar="START:END",
        help="replay only the arrivals from START to END seconds of the trace",
    )
    group.add_argument(
        "--dataset-order",
        choices=DATASET_ORDERS,
        default=None,
        help="sequential or shuffle: each dataset entry once; sample: with replacement (default)",
    )
