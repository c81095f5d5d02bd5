"""`gputui demo` (and bare `gputui`): the built-in simulated GPU server, driven by gputui.

The simulator runs in its own process on 127.0.0.1 (an ephemeral port), so a fresh machine without
a GPU gets the whole experience: the live TUI on it (every `gputui tui` flag but --url), or with
--concurrency LEVELS (or --headless) the scripted headless sweep that finds the knee. The
conversation and trace flags (`workloads.sources`) work in both.
"""

from __future__ import annotations

import sys
from typing import Final

from gputui.errors import UsageError
from gputui.settings import DemoOptions, LoadPlanFlags, RunOptions, SharedFlags

DEMO_LEVELS: Final = (1, 2, 4, 8, 16, 32, 64)
"""The headless sweep's concurrency ramp unless --concurrency gives one."""


def run_demo(options: DemoOptions) -> int:
    """Start the simulator, sweep it headless (or open the TUI on it), write the snapshot."""
    from gputui.frontends.run import run_command
    from gputui.sim.device import ModelDoesNotFit
    from gputui.sim.gpu_profile import GpuProfileSpec
    from gputui.sim.runner import start_background

    spec = GpuProfileSpec(gpu=options.gpu, model=options.model, precision=options.precision)
    try:
        spec.build_device()
    except (ModelDoesNotFit, KeyError) as exc:
        raise UsageError(str(exc.args[0] if exc.args else exc)) from None
    if not (options.headless or options.concurrency):
        from gputui.ui.command import run_demo_tui

        return run_demo_tui(options, spec)
    sys.stdout.write(
        f"gputui demo: simulated {options.gpu} serving {options.model} ({options.precision})\n"
    )
    with start_background(spec) as sim:
        return run_command(headless_run(options, sim.url, spec.served_model_name or options.model))


def headless_run(options: DemoOptions, url: str, model: str) -> RunOptions:
    """The sweep `gputui run` would make of the demo's flags; the others keep run's defaults."""
    given = options.tui.shared
    return RunOptions(
        url=url,
        model=model,
        shared=SharedFlags(
            input_tokens=given.input_tokens or 512,
            output_tokens=given.output_tokens or 128,
            sla_ttft_p95=given.sla_ttft_p95 or 1.0,
            sla_tpot_p95=given.sla_tpot_p95 or 0.035,
            max_error_rate=given.max_error_rate,
            sla_e2e_p95=given.sla_e2e_p95,
            sla_ttfat_p95=given.sla_ttfat_p95,
            label=f"demo {options.gpu} {options.model}",
            precision=options.precision,
            price_per_hour=given.price_per_hour or None,
            energy_price=given.energy_price,
            pue=given.pue,
            token_counter=given.token_counter,
            tokenizer=given.tokenizer,
            reuse_prompts=True if given.reuse_prompts else None,
            records=given.records,
            serve_metrics=given.serve_metrics,
        ),
        plan=_load_plan(options),
        source=options.tui.source,
        out=options.out,
    )


def _load_plan(options: DemoOptions) -> LoadPlanFlags:
    """The headless sweep's load: the demo's ramp, or what --sessions or --trace implies.

    Without --warmup-seconds each step settles as in `run` and `tui` (`session.settling`: its
    first wave back, at most a few lifetimes at its level): a fixed 2 s left a 32-stream step's
    first wave in its sample (P95 TTFT 0.76 s where a settled hold read 0.55 s).
    """
    if options.tui.source.trace is not None:  # one step as long as the trace, every request counted
        return LoadPlanFlags()
    ramp = options.concurrency or (DEMO_LEVELS if options.tui.source.sessions is None else None)
    return LoadPlanFlags(
        step_seconds=options.step_seconds,
        warmup_seconds=options.tui.warmup_seconds,
        concurrency=ramp,
    )
