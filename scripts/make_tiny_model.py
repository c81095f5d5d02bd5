"""Make a tiny random-weight Llama locally (no hub download) for testing real LLM servers on a CPU.

Writes a transformers checkpoint (config, safetensors weights, a byte-level BPE tokenizer trained
here on a built-in corpus, a chat template) under --out, which vLLM serves as it is. Needs numpy,
tokenizers, torch and transformers: run it with the Python of the vLLM virtualenv
(scripts/setup_vllm.sh does).

The random weights are shaped so that every server behaves the same way and load tests are exact:
- residual dimension 0 is a constant "bias channel" (embedding column 0 = C, o_proj/down_proj
  rows 0 = 0, layer-norm weight 0 = 0), and lm_head column 0 reads it as a per-token logit bias:
  end-of-sequence, the other special tokens and byte tokens outside printable ASCII get a large
  negative bias. So the model never ends a reply by itself (every request yields exactly
  max_tokens tokens) and its text is printable ASCII, so streaming never splits a UTF-8 character.
- everything else is seeded random (numpy, --seed), so the output varies with the prompt.

vLLM's CPU attention supports head sizes 32 to 512 only (hidden / heads): a head_dim of 16 kills
the server at the first request. The defaults give head_dim 32.

Adapted from the shared make_tiny_model.py (its GGUF writer left out: vLLM reads the checkpoint).
Usage: python scripts/make_tiny_model.py --out DIR [--hidden 128 --heads 4 --kv-heads 2 ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
MIN_HEAD_DIM = 32
"""vLLM's CPU attention rejects smaller heads (the server exits at the first request)."""

WORD_TEXT = (
    "the a an of to in and is it that for on with as was by at from this be are or not "
    "request token server model load test latency throughput stream chunk time first last "
    "queue batch worker client prompt output input length second minute hour fast slow "
    "data value number text word line file system user error retry limit rate count total "
    "hello world quick brown fox jumps over lazy dog one two three four five six seven eight "
    "nine ten zero llama python server benchmark metric report mean median percentile"
)


def corpus() -> list[str]:
    """A deterministic built-in English-ish corpus (no downloads) to train the tokenizer on."""
    words = WORD_TEXT.split()
    rng = np.random.default_rng(1234)
    lines: list[str] = []
    for _ in range(4000):
        n = int(rng.integers(4, 16))
        sentence = " ".join(words[int(i)] for i in rng.integers(0, len(words), n))
        lines.append(sentence.capitalize() + rng.choice([".", "?", "!", ",", ";", ":"]))
        word = words[int(rng.integers(0, len(words)))]
        lines.append(f"{int(rng.integers(0, 10000))} {word} = {rng.random():.3f}")
    return lines


def train_tokenizer(vocab_size: int) -> Any:
    """A byte-level BPE tokenizer with the chat template's special tokens."""
    from tokenizers import ByteLevelBPETokenizer

    tok = ByteLevelBPETokenizer(add_prefix_space=False)
    tok.train_from_iterator(
        corpus(),
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIALS,
        show_progress=False,
    )
    return tok


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte to unicode map (the same as tokenizers' ByteLevel)."""
    bs = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs), strict=True))


def token_bias(tokens: list[str], special_ids: set[int]) -> np.ndarray:
    """-40 for special tokens and tokens with bytes outside printable ASCII, else 0."""
    u2b = {u: b for b, u in bytes_to_unicode().items()}
    bias = np.zeros(len(tokens), np.float32)
    for tid, token in enumerate(tokens):
        raw = bytes(u2b[ch] for ch in token) if tid not in special_ids else b"\0"
        if not all(32 <= c < 127 for c in raw):
            bias[tid] = -40.0
    return bias


def make_weights(
    cfg: dict[str, int], tokens: list[str], special_ids: set[int], seed: int
) -> dict[str, np.ndarray]:
    """HF-named Llama weights (numpy float32, HF layout [out, in])."""
    rng = np.random.default_rng(seed)
    d, f, nh, nkv = cfg["hidden"], cfg["ffn"], cfg["heads"], cfg["kv_heads"]
    hd = d // nh
    channel = 4.0 * np.sqrt(d)  # the bias channel's magnitude

    def lin(out_f: int, in_f: int) -> np.ndarray:
        return (rng.standard_normal((out_f, in_f)) / np.sqrt(in_f)).astype(np.float32)

    w: dict[str, np.ndarray] = {}
    emb = rng.standard_normal((len(tokens), d)).astype(np.float32)
    emb[:, 0] = channel
    w["model.embed_tokens.weight"] = emb
    for i in range(cfg["layers"]):
        p = f"model.layers.{i}."
        norm = np.ones(d, np.float32)
        norm[0] = 0.0  # layers do not read the bias channel
        w[p + "input_layernorm.weight"] = norm.copy()
        w[p + "post_attention_layernorm.weight"] = norm.copy()
        w[p + "self_attn.q_proj.weight"] = lin(nh * hd, d) * 4.0
        w[p + "self_attn.k_proj.weight"] = lin(nkv * hd, d) * 4.0
        w[p + "self_attn.v_proj.weight"] = lin(nkv * hd, d)
        out = lin(d, nh * hd)
        out[0, :] = 0.0  # never write into the bias channel
        w[p + "self_attn.o_proj.weight"] = out
        w[p + "mlp.gate_proj.weight"] = lin(f, d) * 4.0
        w[p + "mlp.up_proj.weight"] = lin(f, d) * 4.0
        down = lin(d, f)
        down[0, :] = 0.0
        w[p + "mlp.down_proj.weight"] = down
    w["model.norm.weight"] = np.ones(d, np.float32)
    head = rng.standard_normal((len(tokens), d)).astype(np.float32) * 1.5
    # After the final RMSNorm channel 0 is C / rms(h), about 5..9: banned tokens get logits
    # <= -65, so p(banned) < 1e-10 even at temperature 1.5.
    head[:, 0] = token_bias(tokens, special_ids) / 3.0
    w["lm_head.weight"] = head
    return w


def write_hf(
    outdir: Path, cfg: dict[str, int], tok: Any, bos: int, w: dict[str, np.ndarray]
) -> None:
    """The transformers checkpoint, its tokenizer and generation config."""
    import torch
    from transformers import (
        GenerationConfig,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
    )

    conf = LlamaConfig(
        vocab_size=len(w["lm_head.weight"]),
        hidden_size=cfg["hidden"],
        intermediate_size=cfg["ffn"],
        num_hidden_layers=cfg["layers"],
        num_attention_heads=cfg["heads"],
        num_key_value_heads=cfg["kv_heads"],
        max_position_embeddings=cfg["ctx"],
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=bos,
        eos_token_id=bos,
        pad_token_id=bos,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(conf)
    state = {k: torch.from_numpy(v.copy()) for k, v in w.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if "rotary" not in m]
    if missing or unexpected:
        raise RuntimeError(f"weights do not fit the model: {missing} {unexpected}")
    model.generation_config = GenerationConfig(
        bos_token_id=bos,
        eos_token_id=bos,
        pad_token_id=bos,
        do_sample=True,
        temperature=0.8,
        top_p=0.95,
    )
    model.save_pretrained(outdir, safe_serialization=True)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok._tokenizer,
        bos_token=SPECIALS[0],
        eos_token=SPECIALS[0],
        pad_token=SPECIALS[0],
        unk_token=None,
        additional_special_tokens=SPECIALS[1:],
        model_max_length=cfg["ctx"],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(outdir)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", type=Path, default=Path("tiny-llama"))
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--ffn", type=int, default=384)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def main() -> int:
    a = parse_args()
    if a.hidden % a.heads or a.hidden // a.heads < MIN_HEAD_DIM:
        raise SystemExit(f"error: head_dim (hidden / heads) must be a whole >= {MIN_HEAD_DIM}")
    cfg = {
        "hidden": a.hidden,
        "ffn": a.ffn,
        "layers": a.layers,
        "heads": a.heads,
        "kv_heads": a.kv_heads,
        "ctx": a.ctx,
    }
    tok = train_tokenizer(a.vocab)
    vocab = tok.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    if [vocab[t] for t in tokens] != list(range(len(tokens))):
        raise RuntimeError("the tokenizer's ids are not contiguous")
    special_ids = {vocab[s] for s in SPECIALS}
    w = make_weights(cfg, tokens, special_ids, a.seed)
    a.out.mkdir(parents=True, exist_ok=True)
    write_hf(a.out, cfg, tok, vocab[SPECIALS[0]], w)
    params = sum(v.size for v in w.values())
    (a.out / "gputui-tiny-model.json").write_text(json.dumps({**cfg, "params": params}) + "\n")
    print(f"wrote {a.out}: vocab {len(tokens)}, {params} parameters")  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
