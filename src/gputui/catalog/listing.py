"""Both catalogs as one plain-text table (`gputui sim --list`)."""

from __future__ import annotations

from typing import Final

from gputui.catalog.specs import GPUS, KV_DTYPES, MODELS, PRECISIONS

_GB: Final = 10**9


def list_catalogs() -> str:
    """Both catalogs as a plain-text table, for `gputui sim --list`."""
    lines = [
        "GPUs (memory as nvidia-smi reports it; GB = 10^9 bytes)",
        f"{'name':<16}{'memory GB':>10}{'BW GB/s':>9}{'BF16 TF':>9}{'FP8 TF':>8}{'TDP W':>7}"
        f"{'throttle C':>11}  reported name",
    ]
    for g in GPUS.values():
        fp8 = f"{g.fp8_tflops:.0f}" if g.fp8_tflops is not None else "-"
        lines.append(
            f"{g.name:<16}{g.memory_bytes / _GB:>10.1f}{g.mem_bandwidth_bytes_per_s / 1e9:>9.0f}"
            f"{g.bf16_tflops:>9.1f}{fp8:>8}{g.tdp_w:>7.0f}{g.sw_thermal_limit_c:>11.0f}  "
            f"{g.nvml_name}"
        )
    lines += [
        "",
        "Models (KV per token at BF16 = 2 x layers x KV heads x head dim x 2 bytes)",
        f"{'name':<15}{'params B':>9}{'layers':>7}{'hidden':>7}{'heads':>6}{'kv':>4}{'hdim':>5}"
        f"{'vocab':>8}{'KV KiB/tok':>11}  hf id",
    ]
    for m in MODELS.values():
        kv_kib = 2 * m.num_layers * m.num_kv_heads * m.head_dim * 2 / 1024
        lines.append(
            f"{m.name:<15}{m.params / 1e9:>9.2f}{m.num_layers:>7}{m.hidden_size:>7}"
            f"{m.num_attention_heads:>6}{m.num_kv_heads:>4}{m.head_dim:>5}{m.vocab_size:>8}"
            f"{kv_kib:>11.0f}  {m.hf_id}"
        )
    lines += ["", f"precisions: {', '.join(PRECISIONS)}; KV dtypes: {', '.join(KV_DTYPES)}"]
    return "\n".join(lines)
