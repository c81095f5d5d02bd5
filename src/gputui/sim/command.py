"""`gputui sim`: serve the simulator from the command line.

Contract: `add_sim_arguments` declares the flags on the subcommand's parser (bad values are argparse
errors, exit 2); `run_sim_command` prints one line, `gputui sim: serving <profile> on http://HOST:PORT`,
to stderr once listening, serves until SIGINT/SIGTERM and returns 0. A port that cannot be bound
(in use, no permission) gives one line on stderr and returns 1, with no traceback.

Faults: `--faults reset=0.01,http503=0.02,...` (names and behaviour in `faults.py`) with
`--faults-seed` and `--slow-start-ms`; `--die-after S` makes the process exit S seconds after the
first completion request (status `DIE_EXIT_CODE`), the crash case. A bad spec is an argparse error.

Streams (`stream_style.py`): `--reasoning-share F --reasoning-field reasoning|reasoning_content`,
`--tool-calls`, `--tokens-per-event K`, `--spec-decode-k K --spec-accept P`.
"""

from __future__ import annotations

import argparse
import sys

from gputui.argtypes import (
    fraction,
    milliseconds,
    non_negative_int,
    open_fraction,
    port,
    positive_int,
    seconds,
)
from gputui.sim.faults import DEFAULT_SLOW_START_MS, FAULTS, FaultSpec
from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.gpu_profile import DEFAULT_SERVER_OVERHEAD_S, GpuProfileSpec
from gputui.sim.netdelay import NetworkDelay
from gputui.sim.server import DEFAULT_MODEL_NAME
from gputui.sim.stream_style import REASONING_FIELDS, StreamStyle

PROFILES = ("fixed", "gpu")
PRECISIONS = ("bf16", "fp8", "int4")
KV_DTYPES = ("bf16", "fp8")


def _fault_probabilities(text: str) -> dict[str, float]:
    try:
        return dict(FaultSpec.parse(text).probabilities)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_sim_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare `gputui sim`'s flags."""
    parser.add_argument(
        "--profile",
        choices=PROFILES,
        default=None,
        help="timing model: fixed (deterministic) or gpu (default when --gpu is given)",
    )
    parser.add_argument("--list", action="store_true", help="print the GPU and model catalogs")
    _add_gpu_arguments(parser.add_argument_group("gpu profile"))
    _add_timing_arguments(parser)
    _add_stream_arguments(parser.add_argument_group("stream shape"))
    _add_fault_arguments(parser.add_argument_group("fault injection"))


def _add_gpu_arguments(gpu: argparse._ArgumentGroup) -> None:
    """The simulated card, model and server limits (the gpu profile)."""
    gpu.add_argument("--gpu", default=None, help="simulated GPU, e.g. a100-80gb-pcie (see --list)")
    gpu.add_argument("--model", default=None, help="simulated model, e.g. llama-3.1-8b")
    gpu.add_argument("--precision", choices=PRECISIONS, default="bf16")
    gpu.add_argument("--kv-dtype", choices=KV_DTYPES, default="bf16")
    gpu.add_argument("--gpu-memory-utilization", type=open_fraction, default=0.9)
    gpu.add_argument("--max-num-seqs", type=positive_int, default=None)
    gpu.add_argument("--max-batched-tokens", type=positive_int, default=None)
    gpu.add_argument("--seed", type=int, default=0)
    gpu.add_argument(
        "--no-prefix-caching",
        dest="prefix_caching",
        action="store_false",
        help="turn off automatic prefix caching (vLLM V1 has it on by default)",
    )
    gpu.add_argument(
        "--enable-prompt-tokens-details",
        dest="prompt_tokens_details",
        action="store_true",
        help="send usage.prompt_tokens_details.cached_tokens on the final usage chunk, as vLLM "
        "does with this flag (without it, as in vLLM, the cache shows only in /metrics)",
    )
    gpu.add_argument(
        "--server-overhead-ms",
        type=milliseconds,
        default=DEFAULT_SERVER_OVERHEAD_S * 1e3,
        help="the API server's own time before the engine queue: in the TTFT histogram, not in "
        f"queue or prefill (default {DEFAULT_SERVER_OVERHEAD_S * 1e3:g})",
    )


def _add_timing_arguments(parser: argparse.ArgumentParser) -> None:
    """The fixed profile's timings, the model name, the network delay and the address."""
    parser.add_argument(
        "--ttft-ms", type=milliseconds, default=50.0, help="time to first token (default 50)"
    )
    parser.add_argument(
        "--itl-ms",
        type=milliseconds,
        default=10.0,
        help="inter-token latency; 0 writes tokens as fast as possible (default 10)",
    )
    parser.add_argument(
        "--eos-after",
        type=positive_int,
        default=None,
        metavar="N",
        help="stop after N tokens (finish_reason stop) unless the request sets ignore_eos",
    )
    parser.add_argument(
        "--served-model-name",
        default=DEFAULT_MODEL_NAME,
        help=f"model name in responses (default {DEFAULT_MODEL_NAME})",
    )
    parser.add_argument(
        "--coalesce-writes",
        action="store_true",
        help="with --itl-ms 0: write 16 events per socket write (for client-capacity benchmarks)",
    )
    parser.add_argument(
        "--network-delay-ms",
        type=milliseconds,
        default=0.0,
        metavar="MS",
        help="play a far-away client: every response (and so the RTT probe) leaves MS later",
    )
    parser.add_argument(
        "--network-jitter-ms",
        type=milliseconds,
        default=0.0,
        metavar="MS",
        help="uniform jitter of +-MS on that delay (responses keep their order)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=port, default=8000, help="port; 0 picks a free one")


def _add_stream_arguments(streams: argparse._ArgumentGroup) -> None:
    """How each response streams: reasoning, tool calls, tokens per event, speculation."""
    streams.add_argument(
        "--reasoning-share",
        type=fraction,
        default=0.0,
        metavar="F",
        help="chat: the first F x max_tokens tokens are thinking (default 0)",
    )
    streams.add_argument(
        "--reasoning-field",
        choices=REASONING_FIELDS,
        default="reasoning",
        help="delta field of the thinking tokens (default reasoning, vLLM's name)",
    )
    streams.add_argument(
        "--tool-calls",
        action="store_true",
        help="chat: answer tokens stream as delta.tool_calls[].function.arguments",
    )
    streams.add_argument(
        "--tokens-per-event",
        type=positive_int,
        default=1,
        metavar="K",
        help="send K tokens per SSE event, like --stream-interval K (default 1)",
    )
    streams.add_argument(
        "--spec-decode-k",
        type=non_negative_int,
        default=0,
        metavar="K",
        help="speculative decoding, fixed profile: K draft tokens per step (default 0: off)",
    )
    streams.add_argument(
        "--spec-accept",
        type=fraction,
        default=0.7,
        metavar="P",
        help="probability that each draft token is accepted (default 0.7)",
    )


def _add_fault_arguments(faults: argparse._ArgumentGroup) -> None:
    """Injected faults: per-request probabilities, a slow start, a crash."""
    faults.add_argument(
        "--faults",
        type=_fault_probabilities,
        default=None,
        metavar="SPEC",
        help="per-request fault probabilities, e.g. reset=0.01,stall=0.005,http503=0.02 "
        f"(faults: {', '.join(FAULTS)}; at most one per request, drawn in arrival order)",
    )
    faults.add_argument(
        "--faults-seed", type=int, default=0, help="seed of the fault draws (default 0)"
    )
    faults.add_argument(
        "--slow-start-ms",
        type=milliseconds,
        default=DEFAULT_SLOW_START_MS,
        metavar="MS",
        help=f"how late a slow_start request's first token is (default {DEFAULT_SLOW_START_MS:g})",
    )
    faults.add_argument(
        "--die-after",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="crash: exit SECONDS after the first completion request, dropping every connection",
    )


def run_sim_command(args: argparse.Namespace) -> int:
    """Serve until interrupted; 0 on a clean stop, 1 when the port cannot be bound."""
    from gputui.sim.runner import serve

    if args.list:
        from gputui.catalog.listing import list_catalogs

        sys.stdout.write(list_catalogs() + "\n")
        return 0
    try:
        spec = profile_spec(args)
        profile = spec.build()
    except ValueError as exc:  # contradicting flags, or a model that does not fit
        sys.stderr.write(f"gputui sim: {exc}\n")
        return 2
    except KeyError as exc:
        sys.stderr.write(f"gputui sim: {exc.args[0] if exc.args else exc}\n")
        return 2
    host: str = args.host
    profile_name = "fixed" if isinstance(spec, FixedProfileSpec) else f"{args.gpu} {args.model}"

    faults = fault_spec(args)
    network = NetworkDelay(args.network_delay_ms, args.network_jitter_ms, seed=args.seed)

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
        if args.die_after is not None:
            sys.stderr.write(
                f"gputui sim: will exit {args.die_after:g} s after the first completion request\n"
            )
        sys.stderr.flush()

    try:
        serve(
            profile,
            host,
            args.port,
            ready,
            served_model_name=spec.served_model_name,
            faults=faults,
            die_after_s=args.die_after,
            network=network,
        )
    except OSError as exc:
        reason = exc.strerror or str(exc)
        sys.stderr.write(f"gputui sim: cannot listen on {host}:{args.port}: {reason}\n")
        return 1
    return 0


def fault_spec(args: argparse.Namespace) -> FaultSpec | None:
    """The faults the flags ask for; None without `--faults`."""
    if args.faults is None:
        return None
    return FaultSpec(args.faults, seed=args.faults_seed, slow_start_ms=args.slow_start_ms)


def profile_spec(args: argparse.Namespace) -> FixedProfileSpec | GpuProfileSpec:
    """The profile the flags ask for; ValueError when they contradict each other."""
    profile = args.profile or ("gpu" if args.gpu or args.model else "fixed")
    if profile == "fixed":
        if args.gpu or args.model:
            raise ValueError("--gpu/--model select the gpu profile; drop --profile fixed")
        return FixedProfileSpec(
            ttft_ms=args.ttft_ms,
            itl_ms=args.itl_ms,
            eos_after=args.eos_after,
            served_model_name=args.served_model_name,
            coalesce_writes=args.coalesce_writes,
            stream_style=stream_style(args),
        )
    if not args.gpu or not args.model:
        raise ValueError("the gpu profile needs --gpu and --model (see gputui sim --list)")
    served = args.served_model_name if args.served_model_name != DEFAULT_MODEL_NAME else ""
    return GpuProfileSpec(
        gpu=args.gpu,
        model=args.model,
        precision=args.precision,
        kv_dtype=args.kv_dtype,
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_num_seqs=args.max_num_seqs,
        max_batched_tokens=args.max_batched_tokens,
        seed=args.seed,
        prefix_caching=args.prefix_caching,
        prompt_tokens_details=args.prompt_tokens_details,
        server_overhead_s=args.server_overhead_ms / 1e3,
        served_model_name=served,
        stream_style=stream_style(args),
    )


def stream_style(args: argparse.Namespace) -> StreamStyle | None:
    """The stream shape the flags ask for; None for plain vLLM streams."""
    style = StreamStyle(
        reasoning_share=args.reasoning_share,
        reasoning_field=args.reasoning_field,
        tool_calls=args.tool_calls,
        tokens_per_event=args.tokens_per_event,
        spec_decode_k=args.spec_decode_k,
        spec_accept=args.spec_accept,
        seed=args.seed,
    )
    return None if style.plain else style
