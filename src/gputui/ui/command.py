"""`gputui tui` and the TUI of `gputui demo`: typed options in, a live controller and the app out.

Importing this module loads no Textual; `run_tui` imports the app only when it runs. A --scenario
(`gputui.workloads.scenario`: a TOML file or a name) sets the endpoint, SLA, warm-up, starting load
and fixed lengths; flags on the command line win over it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gputui.errors import GputuiError

if TYPE_CHECKING:
    from gputui.frontends.live import LiveController
    from gputui.settings import DemoOptions, SharedFlags, TuiOptions

TUI_DEFAULTS: dict[str, Any] = {
    "start_mode": "concurrency",
    "start_level": 1.0,
    "factor": 2.0,
    "burst_size": 16,
    "warmup_seconds": None,
    "window_seconds": 15.0,
}
"""The TUI's own flags that may also come from --scenario (the shared ones: `gputui.settings`)."""


def _from_scenario(name: str | Path) -> dict[str, Any]:
    """The TUI's own settings a scenario file gives (`gputui.workloads.scenario`), by flag name."""
    from gputui.workloads.scenario import load_scenario

    scenario = load_scenario(name)
    found: dict[str, Any] = {}
    if scenario.load.warmup_seconds is not None:
        found["warmup_seconds"] = scenario.load.warmup_seconds
    if scenario.load.mode != "auto":
        found["start_mode"] = scenario.load.mode
        found["start_level"] = float(scenario.load.levels[0])
    return found


def resolve(options: TuiOptions) -> dict[str, Any]:
    """Flag values, then the scenario file's, then the defaults (shared and the TUI's own)."""
    from dataclasses import asdict

    from gputui.settings import session_settings
    from gputui.workloads.scenario import load_scenario

    named = options.shared.scenario
    scenario = load_scenario(named) if named is not None else None
    values = dict(TUI_DEFAULTS)
    if named is not None:
        values.update(_from_scenario(named))
    for name in TUI_DEFAULTS:
        given = getattr(options, name)
        if given is not None:
            values[name] = given
    values.update(asdict(session_settings(options.shared, scenario)))
    return values


def _prepared_workload(
    flags: SharedFlags, target: Any, model: str, values: dict[str, Any], backend: str | None
) -> Any:
    """The session's workload with token-exact prompts, as `gputui run` prepares it.

    The scenario's workload, else the fixed lengths; sized with the server's /tokenize or
    --tokenizer (approximate only when neither counts), salted per session unless
    --reuse-prompts. When a scenario's server cannot be reached the prompts are approximate
    (None: the engine's fixed-shape prompts) and the line printed before the TUI opens says so.
    """
    from gputui.workloads.config import WorkloadConfig
    from gputui.workloads.prepare import prepare_workload
    from gputui.workloads.scenario import load_scenario

    common: dict[str, Any] = {
        "api_key": os.environ.get(values["api_key_env"]) or None,
        "endpoint": values["endpoint"],
        "token_counter": flags.token_counter,
        "tokenizer": flags.tokenizer,
        "backend": backend,
        "isolate": not values["reuse_prompts"],
    }
    if flags.scenario is None:
        from gputui.workloads.distributions import FixedDist

        config = WorkloadConfig(
            input=FixedDist(tokens=values["input_tokens"]),
            output=FixedDist(tokens=values["output_tokens"]),
            ignore_eos=values["ignore_eos"],
        )
        prepared = prepare_workload(config, target=target, model=model, **common)
    else:
        scenario = load_scenario(flags.scenario)
        try:
            prepared = scenario.prepare(target, model, **common)
        except GputuiError as exc:
            fixed = all(
                getattr(dist, "kind", None) == "fixed"
                for dist in (scenario.workload.input, scenario.workload.output)
            )
            if not fixed:
                raise GputuiError(
                    f"--scenario {flags.scenario}: its prompts are sized with the server, "
                    f"which cannot be reached: {exc}"
                ) from None
            sys.stderr.write(f"gputui: {exc}; prompts will be approximate\n")
            return None
    if not prepared.exact:
        sys.stderr.write(f"gputui: prompt lengths: {prepared.method}\n")
    return prepared


def live_controller(
    options: TuiOptions,
    *,
    url: str | None = None,
    model: str | None = None,
    simulated: str | None = None,
) -> tuple[LiveController, dict[str, Any]]:
    """The live controller (with its telemetry sampler) that parsed flags ask for, unstarted."""
    from gputui.engine.client import ClientConfig, Timeouts
    from gputui.engine.context_limit import check_context
    from gputui.engine.event_tokens import stream_counting
    from gputui.engine.load import RequestShape
    from gputui.engine.process import EngineConfig
    from gputui.engine.target import parse_target
    from gputui.frontends.live import LiveController, LiveSettings
    from gputui.metrics.precision import DEFAULT_TARGET_PRECISION
    from gputui.metrics.sla import Sla
    from gputui.settings import tui_source_plan
    from gputui.telemetry.setup import build_sampler, telemetry_config
    from gputui.workloads.context_need import longest_prepared, longest_request
    from gputui.workloads.report import prompt_notices

    options, source = tui_source_plan(options)
    values = resolve(options)
    target = parse_target(url or options.url or "")
    model = model or options.model
    context, model = _context_and_model(target, model, values)
    need = longest_request(_configured_workload(options.shared, values), source)
    check_context(context, need)  # before any load: one line, exit 2
    prepared = _prepared_workload(
        options.shared, target, model, values, "gputui-sim" if simulated else None
    )
    if prepared is not None:
        check_context(context, longest_prepared(prepared.spec, source))
    driven = source.trace is not None or source.conversations or source.dataset_order != "sample"
    workload = source.engine_workload(prepared.spec) if prepared is not None else None
    shape = (
        RequestShape(prepared.nominal_input, prepared.nominal_output)
        if prepared is not None
        else RequestShape(values["input_tokens"], values["output_tokens"])
    )
    extra_body: dict[str, Any] = {"ignore_eos": True} if values["ignore_eos"] else {}
    settings = LiveSettings(
        engine=EngineConfig(
            client=ClientConfig(
                target=target,
                model=model,
                endpoint=values["endpoint"],
                api_key=os.environ.get(values["api_key_env"]) or None,
                extra_body=extra_body,
                timeouts=Timeouts(
                    connect_s=values["connect_timeout"],
                    request_s=values["request_timeout"],
                    stall_s=values["stall_timeout"],
                ),
                **stream_counting(
                    "gputui-sim" if simulated else None,
                    None if options.shared.tokenizer is None else str(options.shared.tokenizer),
                ),
            ),
            shape=shape,
            workload=workload,
        ),
        sla=Sla(
            values["sla_ttft_p95"],
            values["sla_tpot_p95"],
            values["max_error_rate"],
            values["sla_e2e_p95"],
            values["sla_ttfat_p95"],
        ),
        warmup_s=values["warmup_seconds"],
        window_s=values["window_seconds"],
        start_mode=values["start_mode"],
        start_level=float(values["start_level"]),
        factor=float(values["factor"]),
        burst_size=int(values["burst_size"]),
        snapshot_dir=values["snapshot_dir"],
        label=values["label"],
        gpu_description=simulated,
        workers=values["workers"],
        ray_address=values["ray"],
        price_per_hour=values["price_per_hour"],
        energy_price=values["energy_price"],
        pue=values["pue"],
        precision=values["precision"],
        source=source if driven else None,
        workload_details=prepared.details if prepared is not None else {},
        notices=prompt_notices(prepared),
        target_precision=values["target_precision"] or DEFAULT_TARGET_PRECISION,
        max_step_s=values["max_step_seconds"],
        records=options.shared.records,
        serve_metrics=options.shared.serve_metrics,
    )
    config = telemetry_config(options.telemetry, target.base_url + target.root_prefix)
    sampler = build_sampler(dataclasses.replace(config, gpu="none") if simulated else config)
    settings = dataclasses.replace(settings, metrics_url=config.metrics_url)
    return LiveController(settings, sampler), values


def _context_and_model(target: Any, model: str | None, values: dict[str, Any]) -> tuple[Any, str]:
    """The server's context limit (None when it says none or cannot be reached yet) and the model.

    Without --model the server must answer: it names the model. With one, an unreachable server
    is no error here: the TUI opens and keeps retrying (and checks no limit).
    """
    from gputui.engine.preflight import preflight

    api_key = os.environ.get(values["api_key_env"]) or None
    timeout_s = values["connect_timeout"]
    if model is None:  # the only model the server serves
        checked = preflight(target, None, api_key=api_key, timeout_s=timeout_s)
        return checked.context, checked.model
    try:  # a short look: a server that does not answer must not hold the screen back
        checked = preflight(target, model, api_key=api_key, timeout_s=min(timeout_s, 3.0))
    except GputuiError:
        return None, model
    return checked.context, model


def _configured_workload(flags: SharedFlags, values: dict[str, Any]) -> Any:
    """The scenario's workload, else the fixed lengths the TUI asks for."""
    from gputui.workloads.config import WorkloadConfig
    from gputui.workloads.distributions import FixedDist
    from gputui.workloads.scenario import load_scenario

    if flags.scenario is not None:
        return load_scenario(flags.scenario).workload
    return WorkloadConfig(
        input=FixedDist(tokens=values["input_tokens"]),
        output=FixedDist(tokens=values["output_tokens"]),
    )


def run_tui(
    options: TuiOptions,
    *,
    url: str | None = None,
    model: str | None = None,
    simulated: str | None = None,
) -> int:
    """Run the live TUI until q or a signal; print where the snapshot went."""
    from gputui.snapshot.recovery import find_leftovers

    controller, values = live_controller(options, url=url, model=model, simulated=simulated)
    settings = controller.settings
    if options.no_color:
        os.environ["NO_COLOR"] = "1"
    leftovers = tuple(find_leftovers(settings.snapshot_dir))
    from gputui.ui.app import AppOptions, make_app

    app = make_app(
        controller,
        AppOptions(
            ascii=options.ascii,
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
    if app.signalled is not None:
        return 128 + app.signalled
    if not controller.connected:  # nothing was measured: a failure, as for `gputui run`
        with contextlib.suppress(OSError):
            url = settings.engine.client.target.base_url
            sys.stderr.write(f"gputui: never reached {url} ({controller.connect_state})\n")
        return 1
    return 0


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


def run_demo_tui(demo: DemoOptions, spec: Any) -> int:
    """Start the simulator in the background and open the TUI on it."""
    from gputui.sim.runner import start_background

    description = f"{demo.gpu} {demo.model} {demo.precision} (simulated)"
    with start_background(spec) as sim:
        return run_tui(demo.tui, url=sim.url, model=spec.served_model_name, simulated=description)
