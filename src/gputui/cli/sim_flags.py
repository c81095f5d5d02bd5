"""The flags of `gputui sim`: profile, card and model, timings, stream shape, faults."""

from __future__ import annotations

import argparse

from gputui.cli.argtypes import (
    fraction,
    milliseconds,
    non_negative_int,
    open_fraction,
    port,
    positive_int,
    seconds,
)
from gputui.sim.faults import DEFAULT_SLOW_START_MS, FAULTS, FaultSpec
from gputui.sim.frontend import ADMIT_S_PER_PROMPT_TOKEN, TOKENIZER_WAIT_S
from gputui.sim.gpu_profile import DEFAULT_SERVER_OVERHEAD_S
from gputui.sim.server import DEFAULT_MODEL_NAME
from gputui.sim.stream_style import REASONING_FIELDS

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
        f"queue or prefill (default {DEFAULT_SERVER_OVERHEAD_S * 1e3:g}); never less than the "
        f"tokenizer's {TOKENIZER_WAIT_S * 1e3:g} ms batch window plus its CPU to admit the prompt "
        f"({ADMIT_S_PER_PROMPT_TOKEN * 1e6:g} us a token), and more when requests queue for that "
        "CPU",
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
