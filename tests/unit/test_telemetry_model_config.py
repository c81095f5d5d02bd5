"""HF config.json -> ModelSpec, with the parameter count estimated from the shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gputui.catalog.memory import kv_bytes_per_token
from gputui.catalog.specs import MODELS, ModelSpec
from gputui.errors import UsageError
from gputui.telemetry.model_config import estimate_params, load_model_config


def hf_config(m: ModelSpec, **extra: Any) -> dict[str, Any]:
    """The fields of the model's config.json (reference.md §7.2) that the reader uses."""
    return {
        "_name_or_path": m.hf_id,
        "hidden_size": m.hidden_size,
        "num_hidden_layers": m.num_layers,
        "num_attention_heads": m.num_attention_heads,
        "num_key_value_heads": m.num_kv_heads,
        "vocab_size": m.vocab_size,
        "intermediate_size": m.intermediate_size,
        "max_position_embeddings": m.max_position_embeddings,
        "tie_word_embeddings": m.tied_embeddings,
        **extra,
    }


@pytest.mark.parametrize(
    ("name", "extra"),
    [
        ("llama-3.1-8b", {"model_type": "llama"}),
        ("llama-3.1-70b", {"model_type": "llama"}),
        ("qwen2.5-7b", {"model_type": "qwen2"}),
        ("qwen2.5-14b", {"model_type": "qwen2"}),
        ("mistral-7b", {"model_type": "mistral", "head_dim": 128}),
    ],
)
def test_estimated_params_match_the_model_cards(name: str, extra: dict[str, Any]) -> None:
    m = MODELS[name]
    assert estimate_params(hf_config(m, **extra)) == m.params


def test_load_from_file_and_directory(tmp_path: Path) -> None:
    m = MODELS["llama-3.1-8b"]
    (tmp_path / "config.json").write_text(json.dumps(hf_config(m, model_type="llama")))
    for path in (tmp_path, tmp_path / "config.json"):
        spec = load_model_config(path)
        assert spec.name == m.hf_id
        assert spec.params == m.params
        assert spec.head_dim == 128  # derived: hidden / heads
        assert kv_bytes_per_token(spec, "bf16") == 131_072
        assert "estimated" in spec.source


def test_gqa_default_declared_params_and_text_config(tmp_path: Path) -> None:
    cfg = {
        "architectures": ["SomeVLM"],
        "text_config": {
            "hidden_size": 2048,
            "num_hidden_layers": 16,
            "num_attention_heads": 16,
            "vocab_size": 32000,
            "head_dim": 256,
        },
        "num_parameters": 1_234_567_890,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    spec = load_model_config(tmp_path / "config.json")
    assert spec.num_kv_heads == 16  # no num_key_value_heads: plain multi-head attention
    assert spec.head_dim == 256
    assert spec.params == 1_234_567_890
    assert spec.name == tmp_path.name


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("not json", "cannot read"),
        ("[1, 2]", "not a JSON object"),
        ('{"hidden_size": 4096}', "no 'num_attention_heads'"),
        ('{"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": -1}', "positive"),
        ('{"hidden_size": 7168, "num_attention_heads": 128, "kv_lora_rank": 512}', "MLA"),
    ],
)
def test_bad_configs_are_usage_errors(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "config.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UsageError, match=message):
        load_model_config(path)
