"""Backend detection from /v1/models, /metrics names and the Server header (engine.backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from gputui.engine.backend import (
    BACKENDS,
    OPENAI_COMPATIBLE,
    backend_from_metric_names,
    detect_backend,
    metric_names,
)
from gputui.telemetry.server_metrics import read_metrics
from tests.support.fixtures import split_response

METRICS = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"


def _models(name: str) -> tuple[str, Any]:
    _, headers, body = split_response(name)
    server = next((v for k, v in headers if k.lower() == "server"), "")
    return server, orjson.loads(body)


@pytest.mark.parametrize(
    ("fixture", "backend", "evidence"),
    [
        ("llama_server.models.txt", "llamacpp", "owned_by=llamacpp"),
        ("llama_cpp_python.models.txt", OPENAI_COMPATIBLE, "no server-specific sign"),
        ("transformers_serve.models.txt", OPENAI_COMPATIBLE, "no server-specific sign"),
    ],
)
def test_real_model_lists(fixture: str, backend: str, evidence: str) -> None:
    server, payload = _models(fixture)
    found = detect_backend(server, payload)
    assert found.name == backend
    assert evidence in found.evidence


@pytest.mark.parametrize(
    ("owned_by", "backend"),
    [
        ("vllm", "vllm"),
        ("sglang", "sglang"),
        ("llamacpp", "llamacpp"),
        ("tensorrt_llm", "trtllm"),
        ("gputui-sim", "gputui-sim"),
        ("openai", OPENAI_COMPATIBLE),
        ("me", OPENAI_COMPATIBLE),
    ],
)
def test_owned_by(owned_by: str, backend: str) -> None:
    payload = {"object": "list", "data": [{"id": "m", "owned_by": owned_by, "max_model_len": 8}]}
    assert detect_backend("uvicorn", payload).name == backend


@pytest.mark.parametrize(
    ("text_file", "backend"),
    [
        ("vllm_v1.txt", "vllm"),
        ("vllm_v0.txt", "vllm"),
        ("sglang.txt", "sglang"),
        ("tgi.txt", "tgi"),
        ("llamacpp_old.txt", "llamacpp"),
        ("trtllm_triton.txt", "trtllm"),
        ("dcgm_exporter.txt", OPENAI_COMPATIBLE),
    ],
)
def test_metric_names_agree_with_telemetry(text_file: str, backend: str) -> None:
    path = METRICS / text_file
    if not path.exists():
        pytest.skip(f"{path} not found")
    text = path.read_text()
    found = detect_backend("", {"data": [{"id": "m", "owned_by": "m"}]}, text)
    assert found.name == backend
    assert (read_metrics(text, 0).backend or OPENAI_COMPATIBLE) == found.name


def test_real_llama_server_metrics() -> None:
    _, _, body = split_response("llama_server.metrics.txt")
    names = metric_names(body.decode())
    assert "llamacpp:tokens_predicted_total" in names
    assert backend_from_metric_names(names) == ("llamacpp", "llamacpp:")
    assert detect_backend("", None, body.decode()).evidence == "/metrics names llamacpp:*"


def test_owned_by_outranks_metrics() -> None:
    """The simulator exposes vLLM's metric names; it still names itself."""
    payload = {"data": [{"id": "sim", "owned_by": "gputui-sim"}]}
    vllm_text = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n"
    assert detect_backend("", payload, vllm_text).name == "gputui-sim"
    assert detect_backend("", {"data": []}, vllm_text).name == "vllm"


def test_server_header_when_nothing_else() -> None:
    assert detect_backend("llama.cpp", {"data": []}).name == "llamacpp"
    assert detect_backend("uvicorn", {"data": []}).name == OPENAI_COMPATIBLE


@pytest.mark.parametrize("payload", [None, [], "x", {"data": "x"}, {"data": [1, {"owned_by": 2}]}])
def test_odd_payloads_are_not_a_crash(payload: Any) -> None:
    assert detect_backend("", payload, "not prometheus {{{").name == OPENAI_COMPATIBLE


def test_every_name_is_listed() -> None:
    assert set(BACKENDS) == {"vllm", "sglang", "tgi", "llamacpp", "trtllm", "openai-compatible"}
