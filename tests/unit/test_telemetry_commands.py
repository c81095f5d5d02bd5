"""`gputui kv`, `gpu` and `metrics`: output, JSON keys, exit codes, one-line errors."""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from gputui.catalog.memory import plan_kv
from gputui.catalog.specs import GPUS, MODELS
from gputui.cli.tool_flags import add_gpu_arguments, add_kv_arguments, add_metrics_arguments
from gputui.cli.typed import take
from gputui.telemetry import smi
from gputui.telemetry.commands import (
    GpuOptions,
    KvOptions,
    MetricsOptions,
    run_gpu,
    run_kv,
    run_metrics,
)
from tests.fakes.fake_nvml import A100_80GB_PCIE, RTX_4090, FakeNvml
from tests.support.fixtures import split_response

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"
KV_KEYS = {
    "gpu",
    "model",
    "weights_bytes",
    "kv_bytes_per_token",
    "kv_capacity_tokens",
    "max_concurrent_requests",
    "fits",
}
METRICS_KEYS = {
    "backend",
    "requests_running",
    "requests_waiting",
    "kv_cache_usage",
    "preemptions_total",
    "gpus",
}
GPU_KEYS = {
    "temperature_c",
    "sm_clock_mhz",
    "memory_used_bytes",
    "memory_total_bytes",
    "power_w",
    "throttle_reasons",
}


OPTIONS: dict[object, type[KvOptions | GpuOptions | MetricsOptions]] = {
    add_kv_arguments: KvOptions,
    add_gpu_arguments: GpuOptions,
    add_metrics_arguments: MetricsOptions,
}


def parse(add: object, argv: list[str]) -> Any:
    parser = argparse.ArgumentParser(prog="gputui")
    add(parser)  # type: ignore[operator]
    return take(OPTIONS[add], parser.parse_args(argv))


@pytest.fixture(autouse=True)
def no_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never fall back to a real nvidia-smi, present or not."""
    monkeypatch.setattr(smi, "find_nvidia_smi", lambda: None)


# --- kv -------------------------------------------------------------------------------------------


def test_kv_single_gpu_text(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse(add_kv_arguments, ["--model", "llama-3.1-8b", "--gpu", "rtx4090-48gb"])
    assert run_kv(args) == 0
    out = capsys.readouterr().out
    assert "llama-3.1-8b bf16 (KV bf16) on rtx4090-48gb" in out
    assert "GB (" in out
    assert "GiB)" in out
    assert "131072 B (128.0 KiB)" in out
    assert "fits            yes" in out


def test_kv_json_matches_the_calculator(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--model", "llama-3.1-8b", "--gpu", "rtx4090-48gb", "--context", "8192"]
    argv += ["--kv-dtype", "fp8", "--precision", "int4", "--json"]
    assert run_kv(parse(add_kv_arguments, argv)) == 0
    row = json.loads(capsys.readouterr().out)
    assert set(row) >= KV_KEYS
    plan = plan_kv(GPUS["rtx4090-48gb"].memory_bytes, MODELS["llama-3.1-8b"], "int4", "fp8")
    assert row["gpu"] == "rtx4090-48gb"
    assert row["model"] == "llama-3.1-8b"
    assert row["weights_bytes"] == plan.weight_bytes
    assert row["kv_bytes_per_token"] == 65536
    assert row["kv_capacity_tokens"] == plan.capacity_tokens
    assert row["max_concurrent_requests"] == plan.max_concurrent(8192)
    assert row["fits"] is True


def test_kv_all_gpus_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_kv(parse(add_kv_arguments, ["--model", "qwen2.5-14b", "--gpu", "all"])) == 0
    out = capsys.readouterr().out
    assert "GiB (2^30 bytes)" in out
    assert "rtx4090-24gb" in out
    assert (
        run_kv(parse(add_kv_arguments, ["--model", "qwen2.5-14b", "--gpu", "all", "--json"])) == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert [r["gpu"] for r in rows] == list(GPUS)
    assert all(set(r) >= KV_KEYS for r in rows)
    by_gpu = {r["gpu"]: r for r in rows}
    assert by_gpu["rtx4090-24gb"]["fits"] is False  # domain.md §5: 14B BF16 does not fit 24 GB
    assert by_gpu["rtx4090-24gb"]["max_concurrent_requests"] == 0
    assert by_gpu["rtx4090-48gb"]["fits"] is True


def test_kv_local_gpu_uses_nvml_memory(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse(add_kv_arguments, ["--model", "llama-3.1-8b", "--gpu", "local", "--json"])
    assert run_kv(args, nvml_module=FakeNvml(cards=(A100_80GB_PCIE, RTX_4090))) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["gpu"], r["memory_source"]) for r in rows] == [
        ("local0", "nvml"),
        ("local1", "nvml"),
    ]
    assert rows[1]["memory_total_bytes"] == RTX_4090.memory_total_bytes


def test_kv_model_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = MODELS["qwen2.5-7b"]
    cfg = {
        "_name_or_path": "Qwen/Qwen2.5-7B-Instruct",
        "model_type": "qwen2",
        "hidden_size": m.hidden_size,
        "num_hidden_layers": m.num_layers,
        "num_attention_heads": m.num_attention_heads,
        "num_key_value_heads": m.num_kv_heads,
        "vocab_size": m.vocab_size,
        "intermediate_size": m.intermediate_size,
        "max_position_embeddings": 32768,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    argv = ["--model-config", str(tmp_path), "--gpu", "a100-80gb-pcie", "--json"]
    assert run_kv(parse(add_kv_arguments, argv)) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["model"] == "Qwen/Qwen2.5-7B-Instruct"
    assert row["kv_bytes_per_token"] == 57_344  # reference.md §7.2
    assert row["weights_bytes"] == 2 * m.params


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (
            ["--model", "gpt-5", "--gpu", "h200"],
            "unknown model 'gpt-5'; choose one of: llama-3.1-8b",
        ),
        (["--model", "llama-3.1-8b", "--gpu", "b300"], "unknown GPU 'b300'; choose one of: "),
    ],
)
def test_kv_unknown_names_exit_2_listing_valid_ones(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_kv(parse(add_kv_arguments, argv)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("gputui: ")
    assert needle in captured.err
    assert captured.err.count("\n") == 1


def test_kv_bad_flags_are_argparse_usage_errors() -> None:
    for argv in (
        ["--gpu", "h200"],
        ["--model", "x", "--precision", "fp4"],
        ["--model", "x", "--context", "0"],
    ):
        with pytest.raises(SystemExit) as caught:
            parse(add_kv_arguments, argv)
        assert caught.value.code == 2


# --- gpu ------------------------------------------------------------------------------------------


def test_gpu_report_a100_and_geforce(capsys: pytest.CaptureFixture[str]) -> None:
    nvml = FakeNvml(cards=(A100_80GB_PCIE, RTX_4090))
    assert run_gpu(parse(add_gpu_arguments, []), nvml_module=nvml) == 0
    out = capsys.readouterr().out
    assert "2 NVIDIA GPU(s) via nvml; driver 570.133.20, CUDA 12.8" in out
    assert "GPU 0: NVIDIA A100 80GB PCIe" in out
    assert "GPU 1: NVIDIA GeForce RTX 4090" in out
    assert "ECC mode        enabled" in out
    assert "ECC mode        n/a" in out
    assert "throttle now    sw_power_cap, sw_thermal_slowdown (clocks held down)" in out
    assert "fan             n/a" in out  # the A100's passive cooler
    assert "do not pool memory" in out
    assert nvml.init_count == 0


def test_gpu_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        run_gpu(parse(add_gpu_arguments, ["--json"]), nvml_module=FakeNvml(cards=(RTX_4090,))) == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["source"] == "nvml"
    assert doc["driver_version"] == "570.133.20"
    (g,) = doc["gpus"]
    assert g["name"] == "NVIDIA GeForce RTX 4090"
    assert g["power_limit_w"] == 450.0
    assert g["mig_mode"] is None
    assert g["health"]["remapped_rows_correctable"] is None
    assert g["throttle_reasons"] == ["sw_power_cap", "sw_thermal_slowdown"]


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_gpu_without_a_gpu_is_a_plain_message(
    json_flag: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_gpu(parse(add_gpu_arguments, json_flag), nvml_module=FakeNvml(mode="no_library"))
    assert code == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("gputui: no NVIDIA GPU found here (NVML: NVML library")
    assert "Traceback" not in captured.err
    if json_flag:
        assert json.loads(captured.out)["gpus"] == []
    else:
        assert captured.out == ""


# --- metrics --------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, tuple[int, str]]] = {}

    def do_GET(self) -> None:
        status, body = self.routes.get(self.path, (404, '{"detail":"Not Found"}'))
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def metrics_server() -> Iterator[str]:
    _, _, llama = split_response("llama_server.metrics_under_load.txt")
    _Handler.routes = {
        "/metrics": (
            (
                200,
                (FIXTURES / "vllm_v1.txt").read_text()
                + (FIXTURES / "dcgm_exporter.txt").read_text(),
            )
        ),
        "/llama/metrics": (200, llama.decode()),
        "/dcgm": (200, (FIXTURES / "dcgm_exporter.txt").read_text()),
    }
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_metrics_json_keys_from_one_scrape(
    metrics_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parse(add_metrics_arguments, ["--url", metrics_server, "--json"])
    assert run_metrics(args, nvml_module=FakeNvml(mode="no_library")) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) >= METRICS_KEYS
    assert doc["url"] == metrics_server + "/metrics"
    assert doc["backend"] == "vllm"
    assert (doc["requests_running"], doc["requests_waiting"]) == (14, 3)
    assert doc["kv_cache_usage"] == pytest.approx(0.62)
    assert doc["preemptions_total"] == 3
    assert doc["gpu_source"] == "dcgm (same endpoint)"
    assert len(doc["gpus"]) == 2
    assert all(set(g) >= GPU_KEYS for g in doc["gpus"])
    assert doc["gpus"][1]["throttle_reasons"] == ["sw_power_cap", "sw_thermal_slowdown"]
    assert doc["headroom"]["method"] == "server"


def test_metrics_text_llamacpp_with_local_gpu(
    metrics_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parse(add_metrics_arguments, ["--url", metrics_server + "/llama/metrics"])
    assert run_metrics(args, nvml_module=FakeNvml(cards=(RTX_4090,))) == 0
    out = capsys.readouterr().out
    assert "backend llamacpp" in out
    assert "running 4, waiting 4" in out
    assert "KV cache usage  n/a" in out
    assert "GPU 0: NVIDIA GeForce RTX 4090 (nvml)" in out
    assert "headroom        unavailable" in out


def test_metrics_with_a_dcgm_url(metrics_server: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--url", metrics_server + "/llama/metrics", "--dcgm-url", metrics_server + "/dcgm"]
    assert run_metrics(parse(add_metrics_arguments, [*argv, "--json"])) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["gpu_source"] == "dcgm"
    assert [g["index"] for g in doc["gpus"]] == [0, 1]


def test_metrics_404_and_unreachable_and_bad_url(
    metrics_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parse(add_metrics_arguments, ["--url", metrics_server + "/nothing"])
    assert run_metrics(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("gputui: ")
    assert (
        "this server exposes no /metrics (llama.cpp needs --metrics, SGLang --enable-metrics)"
        in err
    )
    args = parse(add_metrics_arguments, ["--url", "http://127.0.0.1:9", "--timeout", "1"])
    assert run_metrics(args) == 1
    assert "unreachable" in capsys.readouterr().err
    assert run_metrics(parse(add_metrics_arguments, ["--url", "localhost:8000"])) == 2
    assert "must start with http://" in capsys.readouterr().err


def test_declaring_the_commands_loads_no_heavy_module() -> None:
    import subprocess
    import sys

    code = (
        "import sys, argparse; from gputui.cli import shared_flags, tool_flags; "
        "p = argparse.ArgumentParser(); s = p.add_subparsers(); "
        "tool_flags.add_kv_arguments(s.add_parser('kv')); "
        "tool_flags.add_gpu_arguments(s.add_parser('gpu')); "
        "tool_flags.add_metrics_arguments(s.add_parser('metrics')); "
        "shared_flags.add_telemetry_arguments(s.add_parser('run')); "
        "heavy = [m for m in ('httpx', 'prometheus_client', 'pynvml', 'numpy') "
        "if m in sys.modules]; "
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
