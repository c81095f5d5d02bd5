"""Settings declared once: the flags `run`, `tui` and `demo` share, their defaults and their checks.

Contract: each `add_*_arguments(parser)` declares one group of shared flags with a type from
`gputui.argtypes` (so a bad value gives the same one-line error in every subcommand) and default
None ("not given"). `session_settings(args, scenario)` builds the one immutable `SessionSettings`
from flags > scenario file > `DEFAULTS`, which both front ends read.

Adding a flag: shared by run and the TUI, declare it in the matching `add_*_arguments` here, give
its default in `DEFAULTS` and its field in `SessionSettings`; used by one subcommand or feature
only, declare it in a small `add_<feature>_arguments(parser)` of its own module, called from that
subcommand's parser function (`cli._add_run_arguments`, `ui.command.add_tui_arguments`), and read
it from `args` there. `tests/unit/test_settings.py` checks that run and tui reject bad values of
every shared flag with the same message.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from gputui.argtypes import (
    duration,
    fraction,
    non_negative_float,
    positive_float,
    positive_int,
    seconds,
)

if TYPE_CHECKING:
    from gputui.metrics.sla import Sla
    from gputui.workloads.scenario import Scenario

Endpoint = Literal["completions", "chat", "responses"]

DEFAULTS: Final[dict[str, Any]] = {
    "endpoint": "completions",
    "api_key_env": "OPENAI_API_KEY",
    "input_tokens": 512,
    "output_tokens": 128,
    "ignore_eos": True,
    "sla_ttft_p95": 1.0,
    "sla_tpot_p95": 0.035,
    "max_error_rate": None,
    "request_timeout": 600.0,
    "connect_timeout": 10.0,
    "stall_timeout": 60.0,
    "workers": 1,
    "ray": None,
    "label": None,
    "price_per_hour": None,
    "precision": None,
    "snapshot_dir": None,
    "target_precision": None,
    "max_step_seconds": None,
}
"""The shared flags' values when neither the command line nor a scenario gives them."""

TTFT_IMPLAUSIBLE_S: Final = 600.0
"""A bare --sla-ttft-p95 above this many seconds is refused: 1000 was meant as 1000ms."""
TPOT_IMPLAUSIBLE_S: Final = 5.0
"""A bare --sla-tpot-p95 above this many seconds is refused: 35 was meant as 35ms."""


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
        choices=("completions", "chat", "responses"),
        default=None,
        help="request kind: /v1/completions, /v1/chat/completions or /v1/responses "
        "(default: the scenario's, else completions)",
    )
    target.add_argument(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="environment variable holding the API key (never logged or saved)",
    )
    target.add_argument(
        "--scenario",
        default=None,
        metavar="FILE|NAME",
        help="a scenario TOML (or NAME for scenarios/NAME.toml): workload, SLA, endpoint and "
        "load plan; flags given here win over it (list them with `gputui scenarios`)",
    )


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """Fixed request lengths and --ignore-eos."""
    work = parser.add_argument_group("workload")
    work.add_argument("--input-tokens", type=positive_int, default=None, help="(default 512)")
    work.add_argument("--output-tokens", type=positive_int, default=None, help="(default 128)")
    work.add_argument(
        "--ignore-eos",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="ask the server to ignore EOS so outputs have the requested length (default on)",
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
    sla.add_argument("--max-error-rate", type=fraction, default=None, metavar="F")


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


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """The shared settings of one session, whichever front end runs it."""

    endpoint: Endpoint
    api_key_env: str
    input_tokens: int
    output_tokens: int
    ignore_eos: bool
    sla_ttft_p95: float | None
    sla_tpot_p95: float | None
    max_error_rate: float | None
    request_timeout: float
    connect_timeout: float
    stall_timeout: float
    workers: int
    ray: str | None
    label: str | None
    price_per_hour: float | None
    precision: str | None
    snapshot_dir: Path
    target_precision: float | None = None
    max_step_seconds: float | None = None

    @property
    def sla(self) -> Sla:
        """The SLA as the metrics take it."""
        from gputui.metrics.sla import Sla

        return Sla(self.sla_ttft_p95, self.sla_tpot_p95, self.max_error_rate)


def from_scenario(scenario: Scenario) -> dict[str, Any]:
    """The shared settings a scenario gives, by flag name."""
    nominal = scenario.flag_values()
    return {
        "endpoint": scenario.endpoint,
        "sla_ttft_p95": scenario.sla.ttft_p95_s,
        "sla_tpot_p95": scenario.sla.tpot_p95_s,
        "max_error_rate": scenario.sla.max_error_rate,
        "ignore_eos": scenario.workload.ignore_eos,
        # a distribution's mean; the prepared workload sends the real lengths
        "input_tokens": nominal["input_tokens"],
        "output_tokens": nominal["output_tokens"],
        "label": scenario.name or None,
    }


def session_settings(args: argparse.Namespace, scenario: Scenario | None) -> SessionSettings:
    """Flags, then the scenario's values, then `DEFAULTS`."""
    values = dict(DEFAULTS)
    if scenario is not None:
        values.update({k: v for k, v in from_scenario(scenario).items() if v is not None})
        for key in ("sla_ttft_p95", "sla_tpot_p95", "max_error_rate"):
            values[key] = getattr(scenario.sla, key.replace("_p95", "_p95_s"), values[key])
    for name in DEFAULTS:
        given = getattr(args, name, None)
        if given is not None:
            values[name] = given
    if values["snapshot_dir"] is None:
        from gputui.snapshot.sessions import default_sessions_dir

        values["snapshot_dir"] = default_sessions_dir()
    values["snapshot_dir"] = Path(values["snapshot_dir"]).expanduser()
    return SessionSettings(**values)
