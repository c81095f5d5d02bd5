"""`gputui sim`'s flags and its exit codes."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys

import pytest

from gputui.cli.sim_flags import add_sim_arguments
from gputui.cli.typed import take
from gputui.sim.command import SimOptions, profile_spec, run_sim_command
from gputui.sim.fixed import FixedProfileSpec
from gputui.sim.gpu_profile import GpuProfileSpec

pytestmark = pytest.mark.timeout(60)

ENTRY = (
    "import argparse, sys\n"
    "from gputui.cli.sim_flags import add_sim_arguments\n"
    "from gputui.cli.typed import take\n"
    "from gputui.sim.command import SimOptions, run_sim_command\n"
    "p = argparse.ArgumentParser()\n"
    "add_sim_arguments(p)\n"
    "sys.exit(run_sim_command(take(SimOptions, p.parse_args(sys.argv[1:]))))\n"
)


def parse(*argv: str) -> SimOptions:
    parser = argparse.ArgumentParser()
    add_sim_arguments(parser)
    return take(SimOptions, parser.parse_args(argv))


def test_defaults() -> None:
    args = parse()
    assert (args.profile, args.ttft_ms, args.itl_ms, args.eos_after) == (None, 50.0, 10.0, None)
    assert (args.host, args.port, args.served_model_name) == ("127.0.0.1", 8000, "sim-model")
    assert profile_spec(args) == FixedProfileSpec(served_model_name="sim-model")


def test_gpu_flags_select_the_gpu_profile() -> None:
    spec = profile_spec(parse("--gpu", "rtx4090-48gb", "--model", "qwen2.5-14b", "--seed", "3"))
    assert spec == GpuProfileSpec(gpu="rtx4090-48gb", model="qwen2.5-14b", seed=3)
    off = profile_spec(parse("--gpu", "h200", "--model", "llama-3.1-8b", "--no-prefix-caching"))
    assert off == GpuProfileSpec(gpu="h200", model="llama-3.1-8b", prefix_caching=False)


@pytest.mark.parametrize(
    "argv",
    [("--profile", "fixed", "--gpu", "h200"), ("--profile", "gpu"), ("--gpu", "h200")],
)
def test_contradicting_profile_flags(argv: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="--gpu"):
        profile_spec(parse(*argv))


def test_model_too_big_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse("--gpu", "rtx4090-24gb", "--model", "qwen2.5-14b", "--port", "0")
    assert run_sim_command(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "short by" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["--ttft-ms", "-1"],
        ["--itl-ms", "-0.5"],
        ["--itl-ms", "nan"],
        ["--ttft-ms", "abc"],
        ["--eos-after", "0"],
        ["--port", "70000"],
        ["--profile", "gpu-nope"],
    ],
)
def test_bad_values_are_argparse_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        parse(*argv)
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_port_in_use_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert run_sim_command(parse("--port", str(port))) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"gputui sim: cannot listen on 127.0.0.1:{port}: ")
    assert "Traceback" not in err


def test_serves_until_sigint_then_exits_0() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", ENTRY, "--port", "0", "--ttft-ms", "5", "--itl-ms", "1"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("gputui sim: serving fixed on http://127.0.0.1:")
        port = int(line.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
            assert sock.recv(1024).startswith(b"HTTP/1.1 200 OK")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0
        assert proc.stderr.read() == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
