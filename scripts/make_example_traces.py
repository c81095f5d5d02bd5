"""Write the synthetic example traces under scenarios/traces/, one per format gputui replays.

Synthetic on purpose: no published trace is copied; each file only has the published columns and
plausible shapes (bursty arrivals, long-tailed lengths), so `gputui run --trace` can be tried and
tested offline. The arrivals follow a gamma process (burstiness 0.5), lengths a lognormal.
Usage: python scripts/make_example_traces.py [--requests N] [--seconds S] [--out DIR]
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import orjson


def arrivals_s(rng: np.random.Generator, n: int, seconds: float, shape: float = 0.5) -> list[float]:
    """Arrival times over about `seconds`, gamma gaps (shape < 1: burstier than Poisson)."""
    gaps = rng.gamma(shape, 1.0 / shape, size=n)
    t = np.cumsum(gaps) - gaps[0]
    return (t * (seconds / t[-1])).tolist() if t[-1] > 0 else t.tolist()


def lengths(rng: np.random.Generator, n: int, mean: float, sigma: float, hi: int) -> list[int]:
    """Lognormal lengths with about this mean, clipped to [1, hi]."""
    mu = np.log(mean) - sigma**2 / 2
    return np.clip(rng.lognormal(mu, sigma, size=n).round(), 1, hi).astype(int).tolist()


def azure_csv(n: int, seconds: float, seed: int) -> str:
    """Azure LLM inference trace (2023/2024) columns: TIMESTAMP,ContextTokens,GeneratedTokens."""
    rng = np.random.default_rng([seed, 1])
    start = datetime(2023, 11, 16, 18, 15, 46, tzinfo=UTC)
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for t, n_in, n_out in zip(
        arrivals_s(rng, n, seconds),
        lengths(rng, n, 1024, 0.8, 8192),
        lengths(rng, n, 128, 0.7, 1024),
        strict=True,
    ):
        stamp = (start + timedelta(seconds=t)).strftime("%Y-%m-%d %H:%M:%S.%f") + "0"
        lines.append(f"{stamp},{n_in},{n_out}")
    return "\n".join(lines) + "\n"


def burstgpt_csv(n: int, seconds: float, seed: int) -> str:
    """BurstGPT: Timestamp (s),Model,Request tokens,Response tokens,Total tokens,Log Type."""
    rng = np.random.default_rng([seed, 2])
    lines = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    models = ("ChatGPT", "GPT-4")
    for t, n_in, n_out, m in zip(
        arrivals_s(rng, n, seconds, 0.3),
        lengths(rng, n, 600, 1.0, 8192),
        lengths(rng, n, 250, 0.9, 2048),
        rng.integers(0, 2, size=n).tolist(),
        strict=True,
    ):
        lines.append(f"{round(t)},{models[m]},{n_in},{n_out},{n_in + n_out},Conversation log")
    return "\n".join(lines) + "\n"


def mooncake_jsonl(n: int, seconds: float, seed: int, block: int = 512) -> str:
    """Mooncake lines; requests reuse a few long shared prefixes (hash_ids), as the trace shows."""
    rng = np.random.default_rng([seed, 3])
    prefixes = [list(range(k * 100, k * 100 + int(rng.integers(2, 8)))) for k in range(8)]
    next_id = 10_000
    out = []
    for t, tail, n_out in zip(
        arrivals_s(rng, n, seconds),
        lengths(rng, n, 700, 0.8, 4096),
        lengths(rng, n, 200, 0.6, 1024),
        strict=True,
    ):
        shared = prefixes[int(rng.integers(0, len(prefixes)))] if rng.random() < 0.7 else []
        own = -(-tail // block)
        ids = [*shared, *range(next_id, next_id + own)]
        next_id += own
        n_in = len(shared) * block + tail
        line = {"timestamp": round(t * 1e3), "input_length": n_in, "output_length": n_out}
        out.append(orjson.dumps({**line, "hash_ids": ids}).decode())
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent.parent / "scenarios/traces"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    n, s, seed = args.requests, args.seconds, args.seed
    (args.out / "azure_example.csv").write_text(azure_csv(n, s, seed))
    (args.out / "burstgpt_example.csv").write_text(burstgpt_csv(n, s, seed))
    (args.out / "mooncake_example.jsonl").write_text(mooncake_jsonl(n, s, seed))


if __name__ == "__main__":
    main()
