"""`gputui sim`: serve the simulator from the command line.

Contract: `gputui.cli.sim_flags` declares the flags (bad values are argparse errors, exit 2), read
into `SimOptions`; `run_sim_command` prints one line, `gputui sim: serving <profile> on
http://HOST:PORT`, to stderr once listening, serves until SIGINT/SIGTERM and returns 0. A port that
cannot be bound (in use, no permission) gives one line on stderr and returns 1, with no traceback.

Faults: `--faults reset=0.01,http503=0.02,...` (names and behaviour in `faults.py`) with
`--faults-seed` and `--slow-start-ms`; `--die-after S` makes the process exit S seconds after the
first completion request (status `DIE_EXIT_CODE`), the crash case. A bad spec is an argparse error.

Streams (`stream_style.py`): `--reasoning-share F --reasoning-field reasoning|reasoning_content`,
`--tool-calls`, `--tokens-per-event K`, `--spec-decode-k K --spec-accept P`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from gputui.sim.faults import DEFAULT_SLOW_START_MS, FaultSpec
from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.gpu_profile import DEFAULT_SERVER_OVERHEAD_S, GpuProfileSpec
from gputui.sim.netdelay import NetworkDelay
from gputui.sim.server import DEFAULT_MODEL_NAME
from gputui.sim.stream_style import ReasoningField, StreamStyle


@dataclass(frozen=True, slots=True)
class SimOptions:
    """`gputui sim`'s flags (the defaults are the flags' own)."""

    profile: str | None = None
    list: bool = False
    gpu: str | None = None
    model: str | None = None
    precision: str = "bf16"
    kv_dtype: str = "bf16"
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int | None = None
    max_batched_tokens: int | None = None
    seed: int = 0
    prefix_caching: bool = True
    prompt_tokens_details: bool = False
    server_overhead_ms: float = DEFAULT_SERVER_OVERHEAD_S * 1e3
    ttft_ms: float = 50.0
    itl_ms: float = 10.0
    eos_after: int | None = None
    served_model_name: str = DEFAULT_MODEL_NAME
    coalesce_writes: bool = False
    network_delay_ms: float = 0.0
    network_jitter_ms: float = 0.0
    host: str = "127.0.0.1"
    port: int = 8000
    reasoning_share: float = 0.0
    reasoning_field: ReasoningField = "reasoning"
    tool_calls: bool = False
    tokens_per_event: int = 1
    spec_decode_k: int = 0
    spec_accept: float = 0.7
    faults: dict[str, float] | None = None
    """Per-request fault probabilities by name (`--faults`, parsed by `FaultSpec.parse`)."""
    faults_seed: int = 0
    slow_start_ms: float = DEFAULT_SLOW_START_MS
    die_after: float | None = None


def run_sim_command(options: SimOptions) -> int:
    """Serve until interrupted; 0 on a clean stop, 1 when the port cannot be bound."""
    from gputui.sim.runner import serve

    if options.list:
        from gputui.catalog.listing import list_catalogs

        sys.stdout.write(list_catalogs() + "\n")
        return 0
    try:
        spec = profile_spec(options)
        profile = spec.build()
    except ValueError as exc:  # contradicting flags, or a model that does not fit
        sys.stderr.write(f"gputui sim: {exc}\n")
        return 2
    except KeyError as exc:
        sys.stderr.write(f"gputui sim: {exc.args[0] if exc.args else exc}\n")
        return 2
    host: str = options.host
    profile_name = (
        "fixed" if isinstance(spec, FixedProfileSpec) else f"{options.gpu} {options.model}"
    )

    faults = fault_spec(options)
    network = NetworkDelay(options.network_delay_ms, options.network_jitter_ms, seed=options.seed)

    def ready(port: int) -> None:
        shown = f"[{host}]" if ":" in host else host
        sys.stderr.write(f"gputui sim: serving {profile_name} on http://{shown}:{port}\n")
        if faults is not None:
            sys.stderr.write(
                f"gputui sim: faults {faults.describe() or 'none'} (seed {faults.seed}, "
                f"slow start {faults.slow_start_ms:g} ms)\n"
            )
        if network.active:
            sys.stderr.write(
                f"gputui sim: network delay {network.delay_ms:g} ms "
                f"(jitter +-{network.jitter_ms:g} ms) on every response\n"
            )
        if options.die_after is not None:
            sys.stderr.write(
                f"gputui sim: will exit {options.die_after:g} s "
                "after the first completion request\n"
            )
        sys.stderr.flush()

    try:
        serve(
            profile,
            host,
            options.port,
            ready,
            served_model_name=spec.served_model_name,
            faults=faults,
            die_after_s=options.die_after,
            network=network,
        )
    except OSError as exc:
        reason = exc.strerror or str(exc)
        sys.stderr.write(f"gputui sim: cannot listen on {host}:{options.port}: {reason}\n")
        return 1
    return 0


def fault_spec(options: SimOptions) -> FaultSpec | None:
    """The faults the flags ask for; None without `--faults`."""
    if options.faults is None:
        return None
    return FaultSpec(options.faults, seed=options.faults_seed, slow_start_ms=options.slow_start_ms)


def profile_spec(options: SimOptions) -> FixedProfileSpec | GpuProfileSpec:
    """The profile the flags ask for; ValueError when they contradict each other."""
    profile = options.profile or ("gpu" if options.gpu or options.model else "fixed")
    if profile == "fixed":
        if options.gpu or options.model:
            raise ValueError("--gpu/--model select the gpu profile; drop --profile fixed")
        return FixedProfileSpec(
            ttft_ms=options.ttft_ms,
            itl_ms=options.itl_ms,
            eos_after=options.eos_after,
            served_model_name=options.served_model_name,
            coalesce_writes=options.coalesce_writes,
            stream_style=stream_style(options),
        )
    if not options.gpu or not options.model:
        raise ValueError("the gpu profile needs --gpu and --model (see gputui sim --list)")
    served = options.served_model_name if options.served_model_name != DEFAULT_MODEL_NAME else ""
    return GpuProfileSpec(
        gpu=options.gpu,
        model=options.model,
        precision=options.precision,
        kv_dtype=options.kv_dtype,
        gpu_memory_utilization=options.gpu_memory_utilization,
        max_num_seqs=options.max_num_seqs,
        max_batched_tokens=options.max_batched_tokens,
        seed=options.seed,
        prefix_caching=options.prefix_caching,
        prompt_tokens_details=options.prompt_tokens_details,
        server_overhead_s=options.server_overhead_ms / 1e3,
        served_model_name=served,
        stream_style=stream_style(options),
    )


def stream_style(options: SimOptions) -> StreamStyle | None:
    """The stream shape the flags ask for; None for plain vLLM streams."""
    style = StreamStyle(
        reasoning_share=options.reasoning_share,
        reasoning_field=options.reasoning_field,
        tool_calls=options.tool_calls,
        tokens_per_event=options.tokens_per_event,
        spec_decode_k=options.spec_decode_k,
        spec_accept=options.spec_accept,
        seed=options.seed,
    )
    return None if style.plain else style
