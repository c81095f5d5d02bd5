"""Read a model's shape from a local Hugging Face `config.json` (`--model-config PATH`).

Contract: `load_model_config(path)` returns a catalog `ModelSpec` built from the config's
`hidden_size`, `num_hidden_layers`, `num_attention_heads`, `num_key_value_heads` (default: the
attention-head count, i.e. no GQA), `head_dim` (default hidden / heads), `vocab_size`,
`intermediate_size`, `max_position_embeddings` and `tie_word_embeddings`; multimodal configs are
read from their `text_config`. Configs carry no parameter count, so `estimate_params` adds up the
weight matrices of a Llama-style decoder (attention, gated MLP, norms, embeddings; Qwen2's QKV
biases; MoE experts): for Llama-3.1-8B and Qwen2.5-7B it gives the model cards' exact counts.
Latent-attention (MLA) models are refused: their KV cache does not follow the per-head formula.
Every problem is a `UsageError` with one line saying what is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from gputui.catalog.specs import ModelSpec
from gputui.errors import UsageError


def _get_int(cfg: Mapping[str, object], key: str, default: int | None = None) -> int:
    value = cfg.get(key)
    if value is None:
        if default is None:
            raise UsageError(f"model config has no {key!r}")
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UsageError(f"model config {key!r} must be a positive integer, got {value!r}")
    return value


def estimate_params(cfg: Mapping[str, object]) -> int:
    """Parameter count of a Llama-style decoder from its config (embeddings included)."""
    hidden = _get_int(cfg, "hidden_size")
    layers = _get_int(cfg, "num_hidden_layers")
    heads = _get_int(cfg, "num_attention_heads")
    kv_heads = _get_int(cfg, "num_key_value_heads", heads)
    head_dim = _get_int(cfg, "head_dim", hidden // heads)
    intermediate = _get_int(cfg, "intermediate_size", 4 * hidden)
    vocab = _get_int(cfg, "vocab_size")
    experts = _get_int(cfg, "num_local_experts", _get_int(cfg, "num_experts", 1))
    q_width, kv_width = heads * head_dim, kv_heads * head_dim
    attention = hidden * q_width + 2 * hidden * kv_width + q_width * hidden
    if cfg.get("attention_bias") or cfg.get("model_type") == "qwen2":
        attention += q_width + 2 * kv_width  # Qwen2 keeps biases on q, k and v
    mlp = experts * 3 * hidden * intermediate + (hidden * experts if experts > 1 else 0)
    per_layer = attention + mlp + 2 * hidden  # two RMSNorm weights
    tables = 1 if cfg.get("tie_word_embeddings") else 2
    return layers * per_layer + tables * vocab * hidden + hidden  # + final norm


def model_from_config(cfg: Mapping[str, object], name: str, source: str) -> ModelSpec:
    """A ModelSpec from a parsed config dict (see the module docstring)."""
    text_config = cfg.get("text_config")
    if isinstance(text_config, dict):
        cfg = {**cfg, **text_config}
    if "kv_lora_rank" in cfg:
        raise UsageError(
            "latent-attention (MLA) models such as DeepSeek-V2/V3 are not supported by the "
            "KV calculator: their cache is not 2 x KV heads x head dim per layer"
        )
    hidden = _get_int(cfg, "hidden_size")
    heads = _get_int(cfg, "num_attention_heads")
    if hidden % heads and cfg.get("head_dim") is None:
        raise UsageError("model config has no 'head_dim' and hidden_size is not divisible by heads")
    declared = cfg.get("num_parameters")
    if isinstance(declared, int) and declared > 0:
        params, source = declared, f"{source}; parameter count from the config"
    else:
        params, source = estimate_params(cfg), f"{source}; parameter count estimated from shapes"
    return ModelSpec(
        name=name,
        hf_id=str(cfg.get("_name_or_path") or name),
        params=params,
        num_layers=_get_int(cfg, "num_hidden_layers"),
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=_get_int(cfg, "num_key_value_heads", heads),
        head_dim=_get_int(cfg, "head_dim", hidden // heads),
        vocab_size=_get_int(cfg, "vocab_size"),
        intermediate_size=_get_int(cfg, "intermediate_size", 4 * hidden),
        max_position_embeddings=_get_int(cfg, "max_position_embeddings", 4096),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        source=source,
    )


def load_model_config(path: Path) -> ModelSpec:
    """Read `config.json` (or a directory holding one) into a ModelSpec."""
    file = path / "config.json" if path.is_dir() else path
    try:
        cfg = json.loads(file.read_text())
    except FileNotFoundError:
        raise UsageError(f"--model-config: no such file: {file}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--model-config: cannot read {file}: {exc}") from None
    if not isinstance(cfg, dict):
        raise UsageError(f"--model-config: {file} is not a JSON object")
    name = str(cfg.get("_name_or_path") or file.resolve().parent.name or "model")
    return model_from_config(cfg, name, f"HF config.json at {file}")
