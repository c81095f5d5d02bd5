"""`gputui run` as a user runs it: a subprocess against the simulator on loopback."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputui.sim.runner import SimProcess
from gputui.snapshot.store import load_snapshot

GPUTUI = [sys.executable, "-m", "gputui"]


def run_args(url: str, out: Path, *extra: str) -> list[str]:
    return [
        *GPUTUI,
        "run",
        "--url",
        url,
        "--model",
        "sim",
        "--input-tokens",
        "16",
        "--output-tokens",
        "16",
        "--out",
        str(out),
        *extra,
    ]


def test_sweep_writes_a_faithful_snapshot(fixed_sim: SimProcess, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    result = subprocess.run(
        run_args(
            fixed_sim.url + "/v1",
            out,
            "--concurrency",
            "1,4",
            "--step-seconds",
            "2",
            "--warmup-seconds",
            "0.5",
            "--sla-ttft-p95",
            "0.5",
            "--sla-tpot-p95",
            "0.05",
            "--label",
            "fixed 20/5",
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    lines = [
        line for line in result.stdout.splitlines() if line.startswith("step ") and ":" in line
    ]
    assert len(lines) == 2
    snap = load_snapshot(out)
    assert snap.complete
    assert snap.label == "fixed 20/5"
    assert snap.target.model == "sim"
    assert [s.level for s in snap.steps] == [1.0, 4.0]
    for step in snap.steps:
        assert step.requests_failed == 0
        assert step.requests_ok > 5
        assert step.output_tokens_from_usage
        assert step.ttft_s.mean is not None and 0.019 < step.ttft_s.mean < 0.030
        assert step.itl_s.mean is not None and 0.0045 < step.itl_s.mean < 0.0055
        assert step.tpot_s.p95 is not None and step.tpot_s.p95 < 0.006
        assert step.sla_ok
    # Each request takes 20 + 15 x 5 = 95 ms: 4 streams give ~42 req/s and ~670 tok/s.
    c4 = snap.steps[1]
    assert 36 < c4.requests_per_s < 44
    assert 580 < c4.output_tokens_per_s < 700
    assert c4.goodput_requests_per_s == pytest.approx(c4.requests_ok / c4.duration_s, rel=0.01)
    assert snap.network is not None and snap.network.rtt_s.n >= 1


def test_open_loop_rate(fixed_sim: SimProcess, tmp_path: Path) -> None:
    out = tmp_path / "rate.json"
    result = subprocess.run(
        run_args(
            fixed_sim.url,
            out,
            "--rate",
            "20",
            "--arrival",
            "constant",
            "--step-seconds",
            "3",
            "--warmup-seconds",
            "0.5",
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    (step,) = load_snapshot(out).steps
    assert step.mode == "rate"
    assert step.requests_per_s == pytest.approx(20, rel=0.1)
    assert step.requests_ok == pytest.approx(60, abs=3)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "http://127.0.0.1:1"], "cannot reach http://127.0.0.1:1"),
        (["--model", "nope"], "does not serve model 'nope'"),
    ],
)
def test_bad_target_fails_before_any_load(
    fixed_sim: SimProcess, tmp_path: Path, args: list[str], message: str
) -> None:
    base = run_args(fixed_sim.url, tmp_path / "x.json", "--concurrency", "1", "--step-seconds", "1")
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[base.index(flag) + 1] = value
    result = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert message in result.stderr
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize(
    "bad",
    [
        ["--concurrency", "0"],
        ["--concurrency", "1,x"],
        ["--rate", "-1"],
        ["--url", "ftp://host"],
        ["--max-error-rate", "2"],
        ["--extra-body", "{nope"],
    ],
)
def test_bad_flags_are_usage_errors(tmp_path: Path, bad: list[str]) -> None:
    args = run_args("http://127.0.0.1:9", tmp_path / "x.json", "--step-seconds", "1")
    if "--url" in bad:
        args[args.index("--url") + 1] = bad[1]
        args += ["--concurrency", "1"]
    else:
        args += bad if bad[0] in ("--concurrency", "--rate") else [*bad, "--concurrency", "1"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "error:" in result.stderr.splitlines()[-1]


def wait_for_line(proc: subprocess.Popen[str], prefix: str, timeout_s: float) -> str:
    """Read the process's stdout until a line starts with `prefix`; returns what was read."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    seen = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            line = proc.stdout.readline()
            seen += line
            if line.startswith(prefix):
                return seen
    raise AssertionError(f"no line starting with {prefix!r} in {timeout_s} s: {seen!r}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_interrupted_run_saves_what_it_measured(
    fixed_sim: SimProcess, tmp_path: Path, sig: signal.Signals
) -> None:
    out = tmp_path / "interrupted.json"
    proc = subprocess.Popen(
        run_args(
            fixed_sim.url,
            out,
            "--concurrency",
            "2,4",
            "--step-seconds",
            "3",
            "--warmup-seconds",
            "0",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = wait_for_line(proc, "step 1 ", timeout_s=40)  # step 1 is finished: step 2 runs
    time.sleep(1.0)
    os.kill(proc.pid, sig)
    rest, stderr = proc.communicate(timeout=30)
    stdout = seen + rest
    assert proc.returncode == 128 + sig
    assert "Traceback" not in stderr
    snap = load_snapshot(out)
    assert not snap.complete
    assert snap.interrupted_by == sig.name
    first, second = snap.steps
    assert not first.incomplete
    assert first.requests_ok > 20
    assert second.incomplete
    assert second.requests_ok > 0
    assert second.requests_failed == 0  # requests aborted by the signal are not failures
    assert "incomplete" in stdout


def test_demo_sweeps_the_built_in_gpu_simulator(tmp_path: Path) -> None:
    out = tmp_path / "demo.json"
    result = subprocess.run(
        [
            *GPUTUI,
            "demo",
            "--concurrency",
            "1,8",
            "--step-seconds",
            "2",
            "--output-tokens",
            "32",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, result.stderr
    snap = load_snapshot(out)
    one, eight = snap.steps
    assert one.requests_failed == 0
    assert eight.requests_failed == 0
    # Each step settles as in `run` (its first wave back: about one lifetime at its level), not
    # a fixed 2 s: 0.40 s at 1 stream (E2E p50 0.40 s), 1.4 s at 8 (0.74 s) on a quiet host.
    assert snap.plan is not None and snap.plan.warmup_seconds is None
    assert "steady-state warm-up" in result.stdout
    for step in (one, eight):
        lifetime_s = step.e2e_s.p50
        assert lifetime_s is not None
        assert 0.9 * lifetime_s <= step.warmup_s <= 4 * lifetime_s, (step.level, step.warmup_s)
    # Batching: eight streams give several times the single stream's token rate (not 8x).
    assert 3.0 < eight.output_tokens_per_s / one.output_tokens_per_s < 8.0
    # The simulated GPU is seen the way a real node is: through dcgm-exporter's metric names.
    assert snap.hardware is not None
    assert snap.hardware.gpus is not None
    assert snap.hardware.gpus[0].name == "NVIDIA A100 80GB PCIe"
    assert snap.telemetry is not None and snap.telemetry.gpu is not None
    temps = [t for p in snap.telemetry.gpu if isinstance(t := p["temperature_c"], int | float)]
    assert len(temps) >= 3
    assert all(20 < t < 95 for t in temps)
    # The simulator speaks vLLM's metric names, but names itself in /v1/models (engine.backend).
    assert snap.target.backend == "gputui-sim"


@pytest.mark.alone  # precision steps and the bisection read timings
def test_auto_sweep_finds_capacity_and_validates_it(tmp_path: Path) -> None:
    from gputui.metrics.knee_summary import knee_summary
    from gputui.sim.gpu_profile import GpuProfileSpec
    from gputui.sim.runner import start_background

    out = tmp_path / "auto.json"
    with start_background(GpuProfileSpec(gpu="a100-80gb-pcie", model="llama-3.1-8b")) as sim:
        result = subprocess.run(
            [
                *GPUTUI,
                "run",
                "--url",
                sim.url,
                "--model",
                "llama-3.1-8b",
                "--auto",
                "--max-level",
                "8",
                "--step-seconds",
                "10",  # enough requests (~70 at concurrency 1) for a two-sided P95 interval
                "--warmup-seconds",
                "0.5",
                "--seconds",
                "4",
                "--input-tokens",
                "512",
                "--output-tokens",
                "8",  # 16 sent 2/3 as many requests: steps stayed inconclusive, rerun
                "--sla-ttft-p95",
                "0.12",
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=150,
        )
    assert result.returncode == 0, result.stderr
    snap = load_snapshot(out)
    levels = [s.level for s in snap.steps if s.mode == "concurrency"]
    assert levels[:3] == [1.0, 2.0, 4.0]  # the geometric ramp
    assert snap.capacity is not None
    assert snap.capacity.mode == "concurrency"
    # P95 TTFT crosses 120 ms between 4 and 8 streams on this profile (prefill 512 tokens; 60 ms
    # at 2 streams, 100 ms at 4, 200 ms at 8, with 8 output tokens as with 16): the bisection
    # lands between them (3 when 4 itself straddles it).
    assert 3 <= snap.capacity.level < 8
    # The sweep bisects on three-way verdicts: capacity is the highest level that passed, and the
    # next level tested above it (its bracket) did not pass and is at most one stream higher.
    verdict_pass = [
        s.level for s in snap.steps if s.mode == "concurrency" and s.sla_verdict == "pass"
    ]
    assert snap.capacity.level in verdict_pass
    assert snap.capacity.above_level is not None and snap.capacity.above_verdict != "pass"
    assert snap.capacity.above_level - snap.capacity.level <= 1  # bisected to neighbours
    # The level below passed or stayed inconclusive (a 10 s step at 2 streams reads P95 TTFT
    # ~99 ms against the 120 ms bound, and its interval can straddle it on a host hiccup: the
    # sweep's retest of it then stays inconclusive, seen on a quiet CI host); it never failed.
    assert snap.capacity.below_verdict in ("pass", "inconclusive")
    assert snap.capacity.output_tokens_per_s_ci is not None
    assert snap.validation is not None
    assert snap.validation.rate == pytest.approx(0.9 * snap.capacity.requests_per_s, rel=0.01)
    assert snap.validation.queue_bounded is not None
    assert snap.steps[-1].mode == "rate"
    assert "capacity: concurrency" in result.stdout
    # One knee everywhere (issue 28): the saved knee is knee_summary's over every concurrency
    # step (the bisection's too), not the ramp planner's; its ramp gains stay as evidence.
    summary = knee_summary(snap.steps, snap.sla.to_sla(), mode="concurrency")
    saved = None if snap.knee is None else (snap.knee.level, snap.knee.method)
    expected = None if summary.knee is None else (summary.knee.level, summary.knee.method)
    assert saved == expected
    if snap.knee is not None:
        assert (snap.knee.model_extra or {}).get("gains_per_doubling")
        assert f"knee: concurrency {snap.knee.level:g}" in result.stdout
    assert "knee at concurrency" not in result.stdout  # the planner names no knee of its own
