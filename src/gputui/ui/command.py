"""`gputui tui` and the TUI of `gputui demo`: flags in, a live controller and the app out.

Importing this module loads no Textual (the CLI imports it to declare flags); `run_tui` imports the
app only when it runs. A --scenario (`gputui.workloads.scenario`: a TOML file or a name) sets the
endpoint, SLA, warm-up, starting load and fixed lengths; flags on the command line win over it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gputui.argtypes import non_negative_float, positive_float, positive_int
from gputui.errors import GputuiError

if TYPE_CHECKING:
    from gputui.live import LiveController

DEFAULTS: dict[str, Any] = {
    "endpoint": "completions",
    "api_key_env": "OPENAI_API_KEY",
    "input_tokens": 512,
    "output_tokens": 128,
    "ignore_eos": True,
    "sla_ttft_p95": 1.0,
    "sla_tpot_p95": 0.035,
    "max_error_rate": None,
    "start_mode": "concurrency",
    "start_level": 1.0,
    "factor": 2.0,
    "burst_size": 16,
    "warmup_seconds": 3.0,
    "window_seconds": 15.0,
    "label": None,
    "metrics_url": None,
    "dcgm_url": None,
    "gpu_telemetry": "auto",
    "snapshot_dir": None,
}
"""Values of the flags that may also come from --scenario (None in argparse = not given)."""


def _positive(kind: type[float] | type[int]) -> Any:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
        return value

    return parse


def add_tui_arguments(parser: argparse.ArgumentParser, *, demo: bool = False) -> None:
    """The flags of `gputui tui`; `demo=True` leaves out --url and --model (the demo sets them)."""
    target = parser.add_argument_group("target")
    if not demo:
        target.add_argument("--url", required=True, help="server base URL, with or without /v1")
        target.add_argument("--model", required=True, help="model name to request")
    target.add_argument("--endpoint", choices=("completions", "chat"), default=None)
    target.add_argument("--api-key-env", default=None, metavar="VAR")
    target.add_argument(
        "--scenario",
        type=Path,
        default=None,
        metavar="FILE",
        help="a scenario file or name (flags win)",
    )
    tele = parser.add_argument_group("telemetry")
    tele.add_argument(
        "--metrics-url",
        default=None,
        metavar="URL",
        help="the server's Prometheus /metrics (default: the target's)",
    )
    tele.add_argument(
        "--dcgm-url",
        default=None,
        metavar="URL",
        help="a dcgm-exporter to read the GPUs from (instead of NVML)",
    )
    tele.add_argument("--gpu-telemetry", choices=("auto", "nvml", "smi", "none"), default=None)
    load = parser.add_argument_group("load and workload")
    load.add_argument("--start-mode", choices=("concurrency", "rate"), default=None)
    load.add_argument("--start-level", type=_positive(float), default=None)
    load.add_argument("--factor", type=_positive(float), default=None, help="step factor (2)")
    load.add_argument("--burst-size", type=_positive(int), default=None)
    load.add_argument(
        "--warmup-seconds", type=float, default=None, help="excluded from each step (3)"
    )
    load.add_argument(
        "--window-seconds",
        type=_positive(float),
        default=None,
        help="rolling window of the latency table (15)",
    )
    client = parser.add_argument_group("client")
    client.add_argument("--request-timeout", type=positive_float, default=600.0, metavar="S")
    client.add_argument("--connect-timeout", type=positive_float, default=10.0, metavar="S")
    client.add_argument("--stall-timeout", type=positive_float, default=60.0, metavar="S")
    client.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        help="engine processes sharing the load, when one client core saturates",
    )
    client.add_argument("--ray", default=None, metavar="ADDRESS", help="place --workers on Ray")
    load.add_argument("--input-tokens", type=_positive(int), default=None)
    load.add_argument("--output-tokens", type=_positive(int), default=None)
    load.add_argument("--ignore-eos", action=argparse.BooleanOptionalAction, default=None)
    sla = parser.add_argument_group("SLA")
    sla.add_argument("--sla-ttft-p95", type=_positive(float), default=None, metavar="SECONDS")
    sla.add_argument("--sla-tpot-p95", type=_positive(float), default=None, metavar="SECONDS")
    sla.add_argument("--max-error-rate", type=float, default=None, metavar="F")
    out = parser.add_argument_group("output and display")
    out.add_argument(
        "--snapshot-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where snapshots and the journal go (default: user data dir)",
    )
    out.add_argument("--label", default=None, help="default snapshot label")
    out.add_argument(
        "--price-per-hour",
        type=non_negative_float,
        default=None,
        metavar="PRICE",
        help="hourly price of this node, saved in the snapshot for `gputui compare`",
    )
    if not demo:  # the demo's --precision picks the simulated weights, and is recorded
        out.add_argument(
            "--precision",
            default=None,
            metavar="DTYPE",
            help="the served weights' precision (e.g. bf16, fp8), saved for `gputui compare`",
        )
    out.add_argument("--no-color", action="store_true", help="monochrome")
    out.add_argument("--ascii", action="store_true", help="ASCII charts and borders")


def _from_scenario(name: str | Path) -> dict[str, Any]:
    """The settings a scenario file gives (`gputui.workloads.scenario`), by flag name."""
    from gputui.workloads.scenario import load_scenario

    scenario = load_scenario(name)
    found: dict[str, Any] = {"endpoint": scenario.endpoint}
    found["sla_ttft_p95"] = scenario.sla.ttft_p95_s
    found["sla_tpot_p95"] = scenario.sla.tpot_p95_s
    found["max_error_rate"] = scenario.sla.max_error_rate
    found["ignore_eos"] = scenario.workload.ignore_eos
    if scenario.load.warmup_seconds is not None:
        found["warmup_seconds"] = scenario.load.warmup_seconds
    if scenario.load.mode != "auto":
        found["start_mode"] = scenario.load.mode
        found["start_level"] = float(scenario.load.levels[0])
    nominal = scenario.flag_values()
    for key in ("input_tokens", "output_tokens"):
        found[key] = nominal[
            key
        ]  # a distribution's mean; the prepared workload sends the real ones
    found["label"] = scenario.name or None
    return found


def resolve(args: argparse.Namespace) -> dict[str, Any]:
    """Flag values, then the scenario file's, then the defaults."""
    values = dict(DEFAULTS)
    if args.scenario is not None:
        values.update(_from_scenario(args.scenario))
    for name in DEFAULTS:
        given = getattr(args, name, None)
        if given is not None:
            values[name] = given
    if values["snapshot_dir"] is None:
        from gputui.snapshot.sessions import default_sessions_dir

        values["snapshot_dir"] = default_sessions_dir()
    values["snapshot_dir"] = Path(values["snapshot_dir"]).expanduser()
    return values


def _prepared_workload(
    args: argparse.Namespace, target: Any, model: str, values: dict[str, Any]
) -> Any:
    """The scenario's workload with token-exact prompts (None without a scenario).

    Sizing prompts exactly needs the server (its /tokenize, or usage probes). When it cannot be
    reached the prompts are approximate, and the line printed before the TUI opens says so.
    """
    if args.scenario is None:
        return None
    from gputui.workloads.scenario import load_scenario

    scenario = load_scenario(args.scenario)
    try:
        prepared = scenario.prepare(
            target,
            model,
            api_key=os.environ.get(values["api_key_env"]) or None,
            endpoint=values["endpoint"],
        )
    except GputuiError as exc:
        fixed = all(
            getattr(dist, "kind", None) == "fixed"
            for dist in (scenario.workload.input, scenario.workload.output)
        )
        if not fixed:
            raise GputuiError(
                f"--scenario {args.scenario}: its prompts are sized with the server, "
                f"which cannot be reached: {exc}"
            ) from None
        sys.stderr.write(f"gputui: {exc}; prompts will be approximate\n")
        return None
    if not prepared.exact:
        sys.stderr.write(f"gputui: prompt lengths: {prepared.method}\n")
    return prepared.spec


def live_controller(
    args: argparse.Namespace,
    *,
    url: str | None = None,
    model: str | None = None,
    simulated: str | None = None,
) -> tuple[LiveController, dict[str, Any]]:
    """The live controller (with its telemetry sampler) that parsed flags ask for, unstarted."""
    from gputui.engine.client import ClientConfig, Timeouts
    from gputui.engine.load import RequestShape
    from gputui.engine.process import EngineConfig
    from gputui.engine.target import parse_target
    from gputui.live import LiveController, LiveSettings
    from gputui.metrics.sla import Sla
    from gputui.telemetry.setup import TelemetryConfig, build_sampler, default_metrics_url

    values = resolve(args)
    target = parse_target(url or args.url)
    workload = _prepared_workload(args, target, model or args.model, values)
    extra_body: dict[str, Any] = {"ignore_eos": True} if values["ignore_eos"] else {}
    settings = LiveSettings(
        engine=EngineConfig(
            client=ClientConfig(
                target=target,
                model=model or args.model,
                endpoint=values["endpoint"],
                api_key=os.environ.get(values["api_key_env"]) or None,
                extra_body=extra_body,
                timeouts=Timeouts(
                    connect_s=args.connect_timeout,
                    request_s=args.request_timeout,
                    stall_s=args.stall_timeout,
                ),
            ),
            shape=RequestShape(values["input_tokens"], values["output_tokens"]),
            workload=workload,
        ),
        sla=Sla(values["sla_ttft_p95"], values["sla_tpot_p95"], values["max_error_rate"]),
        warmup_s=values["warmup_seconds"],
        window_s=values["window_seconds"],
        start_mode=values["start_mode"],
        start_level=float(values["start_level"]),
        factor=float(values["factor"]),
        burst_size=int(values["burst_size"]),
        snapshot_dir=values["snapshot_dir"],
        label=values["label"],
        gpu_description=simulated,
        workers=args.workers,
        ray_address=args.ray,
        price_per_hour=args.price_per_hour,
        precision=args.precision,
    )
    root = target.base_url + target.root_prefix
    sampler = build_sampler(
        TelemetryConfig(
            gpu="none" if simulated else values["gpu_telemetry"],
            dcgm_url=values["dcgm_url"],
            metrics_url=values["metrics_url"] or default_metrics_url(root),
        )
    )
    return LiveController(settings, sampler), values


def run_tui(
    args: argparse.Namespace,
    *,
    url: str | None = None,
    model: str | None = None,
    simulated: str | None = None,
) -> int:
    """Run the live TUI until q or a signal; print where the snapshot went."""
    from gputui.snapshot.recovery import find_leftovers

    controller, values = live_controller(args, url=url, model=model, simulated=simulated)
    settings = controller.settings
    if args.no_color:
        os.environ["NO_COLOR"] = "1"
    leftovers = tuple(find_leftovers(settings.snapshot_dir))
    from gputui.ui.app import AppOptions, make_app

    app = make_app(
        controller,
        AppOptions(
            ascii=args.ascii,
            handle_signals=True,
            label=values["label"],
            snapshot_dir=settings.snapshot_dir,
            leftovers=leftovers,
        ),
    )
    controller.start()
    try:
        app.run()
    finally:
        path = controller.stop(save=True, label=values["label"])
    _say(path, app.recovered)
    return 128 + app.signalled if app.signalled is not None else 0


def _say(path: Path | None, recovered: list[Path]) -> None:
    """Print the saved paths; a terminal that hung up is not an error."""
    lines = [f"gputui: recovered snapshot written to {p}" for p in recovered]
    lines.append(
        f"gputui: snapshot written to {path}"
        if path is not None
        else "gputui: no step finished: no snapshot written"
    )
    with contextlib.suppress(OSError):
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()


def run_demo_tui(args: argparse.Namespace, spec: Any) -> int:
    """Start the simulator in the background and open the TUI on it."""
    from gputui.sim.runner import start_background

    description = f"{args.gpu} {args.model} {args.precision} (simulated)"
    with start_background(spec) as sim:
        return run_tui(args, url=sim.url, model=spec.served_model_name, simulated=description)
