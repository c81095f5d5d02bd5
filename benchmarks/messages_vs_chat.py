"""Messages against chat at the same streams, before and after a change, side by side (issue 30).

The Messages stream carries no per-event usage, so where a delta carried several tokens gputui
counts its text with the server's /tokenize; chat gets a running usage on every event (vLLM's
`continuous_usage_stats`) and needs none. Before issue 30's fix a closed-loop user waited for
that counting before its next request (Messages read 171 out tok/s against chat's 254 at 4
streams on vLLM's CPU build). This runs `gputui run` for each endpoint and each source tree in
turn (interleaved, `--repeats` rounds), against a given server (`--url`, e.g. vLLM) or the
simulator (fixed profile, `--tokens-per-event` tokens per delta for both endpoints), and prints
one row per run: output tok/s, requests, TTFT p50, ITL mean, how events were counted.

    python benchmarks/messages_vs_chat.py --before-src /tmp/before/src [--url URL --model M]
        [--concurrency 4] [--seconds 8] [--repeats 2] [--input-tokens 512] [--output-tokens 32]

`--before-src` is the `src` folder of the tree to compare with (e.g. `git archive REV src`);
without it only this tree runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.runner import start_background
from gputui.sim.stream_style import StreamStyle

ENDPOINTS = ("messages", "chat")


def run_once(url: str, model: str, endpoint: str, src: Path | None, args: Any) -> dict[str, Any]:
    """One `gputui run` (one step); its step's figures."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        env = dict(os.environ)
        if src is not None:
            env["PYTHONPATH"] = str(src)
        command = [
            sys.executable,
            "-m",
            "gputui",
            "run",
            "--url",
            url,
            "--model",
            model,
            "--endpoint",
            endpoint,
            "--concurrency",
            str(args.concurrency),
            "--step-seconds",
            str(args.seconds),
            "--warmup-seconds",
            "1",
            "--input-tokens",
            str(args.input_tokens),
            "--output-tokens",
            str(args.output_tokens),
            "--no-host-telemetry",
            "--out",
            str(out),
        ]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
        if done.returncode != 0:
            raise SystemExit(f"gputui run failed ({endpoint}): {done.stderr[-800:]}")
        snap = json.loads(out.read_text())
    step = snap["steps"][0]
    totals = snap["totals"]
    return {
        "tok_s": step["output_tokens_per_s"],
        "requests": step["requests_ok"],
        "failed": step["requests_failed"],
        "ttft_p50_ms": step["ttft_s"]["p50"] * 1e3,
        "itl_ms": step["itl_s"]["mean"] * 1e3,
        "methods": totals.get("event_tokens_methods"),
        "out_tokens": totals["output_tokens_total"],
        "requests_all": totals["requests"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running server (default: start the simulator)")
    parser.add_argument("--model", default="sim")
    parser.add_argument("--before-src", type=Path)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--input-tokens", type=int, default=512)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--tokens-per-event", type=int, default=2, help="simulator only")
    parser.add_argument("--ttft-ms", type=float, default=20.0, help="simulator only")
    parser.add_argument("--itl-ms", type=float, default=5.0, help="simulator only")
    args = parser.parse_args()
    trees: list[tuple[str, Path | None]] = [("after", None)]
    if args.before_src is not None:
        trees.insert(0, ("before", args.before_src.resolve()))
    rows: list[tuple[int, str, str, dict[str, Any]]] = []

    def sweep(url: str, model: str) -> None:
        for repeat in range(args.repeats):
            for name, src in trees:
                for endpoint in ENDPOINTS:
                    row = run_once(url, model, endpoint, src, args)
                    rows.append((repeat, name, endpoint, row))
                    print(f"  {repeat} {name:6} {endpoint:8} {row['tok_s']:8.1f} tok/s", flush=True)

    if args.url:
        server = args.url
        sweep(server, args.model)
    else:
        style = StreamStyle(tokens_per_event=args.tokens_per_event)
        spec = FixedProfileSpec(
            ttft_ms=args.ttft_ms, itl_ms=args.itl_ms, served_model_name="sim", stream_style=style
        )
        with start_background(spec) as sim:
            server = f"sim ({args.tokens_per_event} tokens per event, {sim.url})"
            sweep(sim.url, "sim")
    print(f"\n{server}: {args.concurrency} streams, {args.seconds:g} s steps, ", end="")
    print(f"{args.input_tokens} in / {args.output_tokens} out tokens")
    print("| round | tree | endpoint | out tok/s | requests | TTFT p50 ms | ITL ms | counted |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for repeat, name, endpoint, r in rows:
        exact = r["out_tokens"] == r["requests_all"] * args.output_tokens
        print(
            f"| {repeat} | {name} | {endpoint} | {r['tok_s']:.1f} | {r['requests']}"
            f"{'' if not r['failed'] else ' +' + str(r['failed']) + ' failed'} "
            f"| {r['ttft_p50_ms']:.1f} | {r['itl_ms']:.2f} | {r['methods']}"
            f"{'' if exact else ' (lengths not exact)'} |"
        )
    print("\nmedian out tok/s, messages / chat:")
    for name, _ in trees:
        per = {
            e: statistics.median(r["tok_s"] for _, n, x, r in rows if n == name and x == e)
            for e in ENDPOINTS
        }
        ratio = per["messages"] / per["chat"]
        print(
            f"  {name}: messages {per['messages']:.1f}, chat {per['chat']:.1f}, ratio {ratio:.2f}"
        )


if __name__ == "__main__":
    main()
