"""S2's rate-16 cell through S2's own client: is the missing TTFT the client's? (issue 31)

S2 (benchmarks/sim_published.py) publishes the TTFT that `vllm bench serve` measured on its client,
so its 38.9 ms holds the client's own overhead as well as the server's time. This starts the HTTP
simulator with S2's server (h100-sxm, qwen3-0.6b, --gpu-memory-utilization 0.5), drives it with
`vllm bench serve` (the client of the vLLM build the real-server tests use, `GPUTUI_VLLM_PYTHON`:
its TTFT code is the same as 0.19's) at S2's rate, lengths and seeds, and prints the client's TTFT
beside the simulator's own record of the same requests (the `vllm:time_to_first_token_seconds`
histogram's sum and count before and after), and the same for `gputui run`. The prompts are ones the
simulator bills at exactly 512 tokens (`gputui.sim.tokenizer.make_prompt`), given to the client as
its samples, each run its own (S2's random prompts never hit the prefix cache). Needs the vLLM
build (scripts/setup_vllm.sh prints its python); about 2 minutes.

    GPUTUI_VLLM_PYTHON=... python benchmarks/sim_through_vllm_bench.py [--num-prompts 500]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

import httpx

from gputui.sim.gpu_profile import GpuProfileSpec
from gputui.sim.runner import start_background
from gputui.sim.tokenizer import make_prompt
from gputui.telemetry.prom import parse

RATE = 16.0
PROMPT_TOKENS = 512
OUTPUT_TOKENS = 128
SEEDS = (42, 99, 7)
PUBLISHED_TTFT_MS = 38.9
MODEL = "qwen"
SPEC = GpuProfileSpec("h100-sxm", "qwen3-0.6b", gpu_memory_utilization=0.5, served_model_name=MODEL)

CLIENT = """
import argparse, json, sys
PROMPT_TOKENS, OUTPUT_TOKENS = int(sys.argv[2]), int(sys.argv[3])
import vllm.benchmarks.serve as serve
from vllm.benchmarks.datasets import SampleRequest
prompts = json.load(open(sys.argv[1]))
def samples(args, tokenizer):
    chosen = prompts[: args.num_prompts]
    return [SampleRequest(prompt=p, prompt_len=PROMPT_TOKENS,
                          expected_output_len=OUTPUT_TOKENS, request_id=str(i))
            for i, p in enumerate(chosen)]
serve.get_samples = samples
parser = argparse.ArgumentParser()
serve.add_cli_args(parser)
serve.main(parser.parse_args(sys.argv[4:]))
"""
"""`vllm bench serve` with our prompts as its samples (its own dataset code needs pandas)."""


def server_ttft(base: str) -> tuple[float, float]:
    """The simulator's TTFT histogram: (sum in s, count)."""
    index = parse(httpx.get(f"{base}/metrics", timeout=10).text)
    name = "vllm:time_to_first_token_seconds"
    return index.total(f"{name}_sum") or 0.0, index.total(f"{name}_count") or 0.0


def vllm_bench(vllm_python: str, base: str, seed: int, n: int, tmp: Path) -> float:
    """Run the client once on prompts of its own (no prefix-cache hit across runs); mean TTFT ms."""
    model_dir = os.environ.get("GPUTUI_VLLM_MODEL", "")
    result = tmp / f"bench-{seed}.json"
    prompts = tmp / f"prompts-{seed}.json"
    prompts.write_text(
        json.dumps([make_prompt(PROMPT_TOKENS, seed * 100_000 + i) for i in range(n)])
    )
    args = [vllm_python, "-c", CLIENT, str(prompts), str(PROMPT_TOKENS), str(OUTPUT_TOKENS)]
    args += ["--backend", "vllm", "--base-url", base]
    args += ["--model", MODEL, "--tokenizer", model_dir, "--dataset-name", "random"]
    args += ["--num-prompts", str(n), "--request-rate", str(RATE), "--seed", str(seed)]
    args += ["--ignore-eos", "--save-result", "--result-dir", str(tmp)]
    args += ["--result-filename", result.name]
    subprocess.run(args, check=True, capture_output=True, timeout=600)
    return float(json.loads(result.read_text())["mean_ttft_ms"])


def gputui_run(base: str, seconds: float, tmp: Path) -> float:
    """One open-loop step of `gputui run` at the same rate and lengths; its mean TTFT in ms."""
    out = tmp / "gputui.json"
    exe = str(Path(sys.executable).with_name("gputui"))
    args = [exe, "run", "--url", base, "--rate", str(RATE), "--step-seconds", str(seconds)]
    args += ["--input-tokens", str(PROMPT_TOKENS), "--output-tokens", str(OUTPUT_TOKENS)]
    args += ["--out", str(out)]
    subprocess.run(args, check=True, capture_output=True, timeout=600)
    step = json.loads(out.read_text())["steps"][0]
    return float(step["ttft_s"]["mean"]) * 1e3


def measured(label: str, base: str, run: Callable[[], float]) -> tuple[str, float, float]:
    """(label, client mean TTFT ms, the simulator's own mean over the same requests ms)."""
    sum0, count0 = server_ttft(base)
    client_ms = run()
    sum1, count1 = server_ttft(base)
    return label, client_ms, (sum1 - sum0) / (count1 - count0) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-prompts", type=int, default=500)
    opts = parser.parse_args()
    vllm_python = os.environ.get("GPUTUI_VLLM_PYTHON")
    if not vllm_python:
        sys.exit("set GPUTUI_VLLM_PYTHON (scripts/setup_vllm.sh prints it)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name, start_background(SPEC) as sim:
        tmp = Path(tmp_name)
        base = f"http://{sim.host}:{sim.port}"
        load = os.getloadavg()[0]
        for seed in SEEDS:
            run = partial(vllm_bench, vllm_python, base, seed, opts.num_prompts, tmp)
            rows.append(measured(f"vllm bench serve, seed {seed}", base, run))
        seconds = opts.num_prompts / RATE
        rows.append(measured("gputui run", base, partial(gputui_run, base, seconds, tmp)))
        load = max(load, os.getloadavg()[0])
    print(
        f"rate {RATE:g}, {PROMPT_TOKENS} in / {OUTPUT_TOKENS} out, h100-sxm qwen3-0.6b (HTTP sim),"
    )
    print(f"{opts.num_prompts} requests a run; host load average up to {load:.1f}\n")
    print(f"{'client':<28}{'client TTFT ms':>15}{'sim record ms':>15}{'client - sim':>14}")
    for label, client_ms, sim_ms in rows:
        print(f"{label:<28}{client_ms:>15.2f}{sim_ms:>15.2f}{client_ms - sim_ms:>+14.2f}")
    bench = [client for label, client, _ in rows if label.startswith("vllm")]
    mean = statistics.fmean(bench)
    print(
        f"\nS2 published (vllm bench serve 0.19 on its H100 host): {PUBLISHED_TTFT_MS} ms mean TTFT"
    )
    print(f"the sim through the same client: {mean:.2f} ms = {mean / PUBLISHED_TTFT_MS:.2f}x")


if __name__ == "__main__":
    main()
