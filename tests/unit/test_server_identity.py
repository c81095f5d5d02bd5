"""Each engine's own account of itself (tests/fixtures/real-servers/identity/README.md says where
each document came from), parsed into engine, version, model, context limit and knee settings."""

from __future__ import annotations

from typing import Any

import orjson

from gputui.engine.context_limit import ContextLimit, context_limit
from gputui.engine.identity import (
    ServerIdentity,
    describe_server,
    llamacpp_identity,
    sglang_identity,
    tgi_identity,
    vllm_identity,
)
from gputui.snapshot.assemble import identity_fields
from tests.support.fixtures import fixture_path


def _doc(name: str) -> Any:
    return orjson.loads(fixture_path("identity/" + name).read_bytes())


def test_tgi_info_from_its_source() -> None:
    found = tgi_identity(_doc("tgi-info.json"))
    assert found is not None
    assert (found.engine, found.version, found.model) == (
        "tgi",
        "3.3.6-dev0",
        "bigscience/blomm-560m",
    )
    assert (found.context_tokens, found.max_input_tokens) == (2048, 1024)
    assert found.settings["max_concurrent_requests"] == 128
    assert found.max_batch_tokens is None and found.kv_tokens is None  # 3.x does not say
    assert found.context_limit() == ContextLimit(2048, "/info", input_tokens=1024)


def test_tgi_1x_names_and_batch_figures() -> None:
    old = {
        "model_id": "m",
        "version": "1.4.5",
        "max_input_length": 4095,
        "max_total_tokens": 4096,
        "max_batch_total_tokens": 160000,
        "max_batch_prefill_tokens": 4096,
        "max_batch_size": None,
    }
    found = tgi_identity(old)
    assert found is not None
    assert (found.max_input_tokens, found.context_tokens) == (4095, 4096)
    assert (found.kv_tokens, found.max_batch_tokens, found.max_sequences) == (160000, 4096, None)
    assert tgi_identity({"model_id": "x"}) is None  # not TGI's document
    assert tgi_identity([1, 2]) is None


def test_sglang_server_info_from_its_docs() -> None:
    doc = _doc("sglang-get-server-info.json")
    found = sglang_identity(doc, "/get_server_info")
    assert found is not None
    assert found.engine == "sglang"
    assert found.version == "0.0.0.dev1+gf97c09dac"
    assert found.model == "qwen/qwen2.5-0.5b-instruct"
    assert found.context_tokens is None  # context_length null: not set on the command line
    assert found.max_input_tokens == 20474
    assert (found.max_sequences, found.max_batch_tokens, found.kv_tokens) == (128, 8192, 20480)
    assert found.settings["schedule_policy"] == "fcfs"
    assert found.sources == ("/get_server_info",)
    # The input bound alone: at least one output token after it.
    assert found.context_limit() == ContextLimit(20475, "/get_server_info", input_tokens=20474)
    # The document holds the server's keys; only the named figures are kept.
    assert "api_key" in doc and not any("key" in name for name in found.settings)
    assert sglang_identity({"context_length": 5}) is None


def test_vllm_version_and_dev_server_info_from_the_real_server() -> None:
    found = vllm_identity(_doc("vllm-version.json"), _doc("vllm-server-info.json"))
    assert (found.engine, found.version) == ("vllm", "0.32.0")
    assert found.model is not None and found.model.endswith("tiny-llama-hd32")
    assert found.context_tokens == 2048
    assert (found.max_sequences, found.max_batch_tokens) == (128, 2048)
    assert (found.kv_blocks, found.kv_tokens) == (32768, 32768 * 128)
    assert found.sources == ("/version", "/server_info")
    plain = vllm_identity(_doc("vllm-version.json"), None)  # without dev mode: 404
    assert (plain.version, plain.context_tokens, plain.sources) == ("0.32.0", None, ("/version",))


def test_llamacpp_props_from_the_real_server() -> None:
    found = llamacpp_identity(_doc("llamacpp-props.json"))
    assert found is not None
    assert (found.engine, found.version) == ("llamacpp", "b1-0c1e570")
    assert (found.context_tokens, found.max_sequences) == (2048, 4)  # -c 8192 over 4 slots
    assert found.model is not None and found.model.endswith("tiny-llama.gguf")
    assert found.context_limit() == ContextLimit(2048, "/props")


def test_llamacpp_props() -> None:
    props = {
        "default_generation_settings": {"n_ctx": 4096, "n_predict": -1},
        "total_slots": 4,
        "model_path": "/models/tiny.gguf",
        "build_info": "b6914-3a8d5ac",
    }
    found = llamacpp_identity(props)
    assert found is not None
    assert (found.version, found.context_tokens, found.max_sequences) == ("b6914-3a8d5ac", 4096, 4)
    assert found.context_limit() == ContextLimit(4096, "/props")
    assert llamacpp_identity({"n_ctx": 1}) is None


def test_the_listed_limit_and_the_servers_own_combine() -> None:
    models = {"data": [{"id": "m", "max_model_len": 32768}]}
    sglang = ServerIdentity("sglang", max_input_tokens=20474, sources=("/server_info",))
    assert context_limit(models, "m", sglang) == ContextLimit(
        32768, "/v1/models max_model_len", input_tokens=20474
    )
    smaller = ServerIdentity("tgi", context_tokens=2048, sources=("/info",))
    assert context_limit(models, "m", smaller) == ContextLimit(2048, "/info")
    assert context_limit({"data": []}, "m", None) is None
    assert context_limit(models, "m", None) == ContextLimit(32768, "/v1/models max_model_len")


def test_the_snapshot_target_fields() -> None:
    found = tgi_identity(_doc("tgi-info.json"))
    fields = identity_fields(found, ContextLimit(2048, "/info", input_tokens=1024), "tgi")
    assert fields["engine"] == "tgi" and fields["version"] == "3.3.6-dev0"
    assert (fields["context_limit"], fields["max_input_tokens"]) == (2048, 1024)
    assert fields["engine_settings"] == {
        "max_input_tokens": 1024,
        "max_total_tokens": 2048,
        "max_concurrent_requests": 128,
        "max_client_batch_size": 32,
        "max_best_of": 2,
    }
    assert fields["identity_sources"] == ["/info"]
    assert identity_fields(None, None, "vllm") == {"engine": "vllm"}


def test_the_run_header_line() -> None:
    found = vllm_identity(_doc("vllm-version.json"), _doc("vllm-server-info.json"))
    line = describe_server(found, ContextLimit(2048, "/v1/models max_model_len"))
    assert line == (
        "server vllm 0.32.0; context 2048 tokens (/v1/models max_model_len); max_num_seqs 128, "
        "max_num_batched_tokens 2048, num_gpu_blocks 32768, block_size 128 "
        "(/version, /server_info)"
    )
    tgi = tgi_identity(_doc("tgi-info.json"))
    assert tgi is not None
    assert describe_server(tgi, tgi.context_limit()) == (
        "server tgi 3.3.6-dev0; context 2048 tokens, input at most 1024 (/info); "
        "max_concurrent_requests 128, max_client_batch_size 32, max_best_of 2 (/info)"
    )
    assert describe_server(None, None) is None
