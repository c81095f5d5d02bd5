"""GPU and model datasheets: the one place their figures live, each with its source.

Data, not logic: the one deliberate exception to the ~400-line module limit (issue 22).

Contract: `GPUS` and `MODELS` map a CLI name to a frozen spec; `get_gpu` / `get_model` raise
`CatalogError` (a `KeyError`) that lists the valid names. Everything downstream (the KV
calculator, the simulator's roofline and thermal model, telemetry's headroom, the node checks)
reads its hardware and model figures from here and nowhere else, so a corrected datasheet figure
changes one line.

Figures whose source is `reference.md` are quoted from ../shared/docs/reference.md §6 (GPUs) and
§7.2 (model shapes, from the HF `config.json` files). Memory sizes are what `nvidia-smi` reports
(`memory.total`, MiB), because domain.md §5 says to budget with the memory the device reports, not
the number in the product name. Thermal figures are modelling estimates, labelled as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Precision = Literal["bf16", "fp8", "int4"]
"""Weight precision: BF16, FP8 (W8A8 where the GPU has FP8 tensor cores, else weight-only) or a
4-bit weight-only format such as AWQ/GPTQ (W4A16)."""
KvDtype = Literal["bf16", "fp8"]
"""KV-cache element type (vLLM `--kv-cache-dtype auto|fp8`)."""

PRECISIONS: Final[tuple[Precision, ...]] = ("bf16", "fp8", "int4")
KV_DTYPES: Final[tuple[KvDtype, ...]] = ("bf16", "fp8")

_MIB: Final = 1 << 20
_GB: Final = 10**9


class CatalogError(KeyError):
    """An unknown GPU, model or precision name; the message lists the valid ones."""

    def __str__(self) -> str:
        # KeyError's str() is the repr of its argument (quotes and escapes); show the plain message.
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU as the simulator models it."""

    name: str
    """CLI name, e.g. "a100-80gb-pcie"."""
    nvml_name: str
    """What NVML / dcgm-exporter report as the device name (`modelName` label)."""
    memory_bytes: int
    """Total framebuffer as `nvidia-smi` reports it (MiB x 2^20)."""
    mem_bandwidth_bytes_per_s: float
    """Datasheet peak DRAM bandwidth."""
    bf16_tflops: float
    """Dense BF16 tensor throughput with FP32 accumulate (what vLLM's GEMMs use)."""
    fp8_tflops: float | None
    """Dense FP8 tensor throughput with FP32 accumulate; None where the GPU has no FP8 (A100)."""
    tdp_w: float
    """Board power limit (default enforced limit)."""
    idle_power_w: float
    """Power drawn with the model loaded and nothing running (estimate)."""
    boost_clock_mhz: int
    """SM clock at which the datasheet TFLOPS are quoted; the simulated clock never exceeds it."""
    idle_clock_mhz: int
    """SM clock reported when idle (estimate, typical of `nvidia-smi` on an idle card)."""
    mem_clock_mhz: int
    """Memory clock as NVML reports it (`clocks.max.memory`); constant in the model."""
    sw_thermal_limit_c: float
    """Above this the driver bins the SM clock down (NVML reason SW thermal slowdown, 0x20)."""
    hw_slowdown_c: float
    """At this temperature hardware halves the clock (HW thermal slowdown 0x40 with 0x08)."""
    ambient_c: float
    """Inlet air temperature assumed for the card's usual enclosure (estimate)."""
    thermal_resistance_c_per_w: float
    """Steady-state rise of GPU temperature per watt with the cooler at full effort (estimate)."""
    thermal_time_constant_s: float
    """First-order time constant of the die + heatsink (estimate: tens of seconds to minutes)."""
    source: str


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One decoder-only transformer's shape (HF `config.json` names in the docstrings)."""

    name: str
    hf_id: str
    params: int
    """Total parameter count, embeddings included."""
    num_layers: int
    """`num_hidden_layers`."""
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    """`num_key_value_heads` (GQA): this, not the query-head count, sizes the KV cache."""
    head_dim: int
    vocab_size: int
    intermediate_size: int
    """MLP width; sizes the activation workspace."""
    max_position_embeddings: int
    tied_embeddings: bool
    """`tie_word_embeddings`: when False the LM head is a second vocab x hidden matrix."""
    source: str

    @property
    def embedding_params(self) -> int:
        """Parameters in the input embedding and LM head (quantised checkpoints keep them BF16)."""
        tables = 1 if self.tied_embeddings else 2
        return tables * self.vocab_size * self.hidden_size


_GEFORCE_THERMAL: Final = (
    "thermal: 83 C is the RTX 40 GPU Boost temperature target above which clocks bin down once "
    "the fans are at their limit, 90 C NVIDIA's maximum GPU temperature for the 4090; power, "
    "ambient, resistance and time constant are modelling estimates"
)
_DC_THERMAL: Final = (
    "thermal: max-operating and slowdown temperatures as typically shown by "
    "`nvidia-smi -q -d TEMPERATURE` (verify on hardware); idle power, ambient, resistance and time "
    "constant are modelling estimates for a passively cooled card in a server's airflow"
)

GPUS: Final[dict[str, GpuSpec]] = {
    g.name: g
    for g in (
        GpuSpec(
            name="rtx4090-24gb",
            nvml_name="NVIDIA GeForce RTX 4090",
            memory_bytes=24564 * _MIB,
            mem_bandwidth_bytes_per_s=1008e9,
            bf16_tflops=165.2,
            fp8_tflops=330.3,
            tdp_w=450.0,
            idle_power_w=30.0,
            boost_clock_mhz=2520,
            idle_clock_mhz=210,
            mem_clock_mhz=10501,
            sw_thermal_limit_c=83.0,
            hw_slowdown_c=90.0,
            ambient_c=32.0,
            thermal_resistance_c_per_w=0.12,
            thermal_time_constant_s=75.0,
            source=(
                "reference.md §6 [S21] (Ada whitepaper v2.02: 1008 GB/s, 165.2 BF16 FP32-acc, "
                "330.3 FP8, 450 W); 24564 MiB as nvidia-smi reports; open-air triple-fan cooler; "
                + _GEFORCE_THERMAL
            ),
        ),
        GpuSpec(
            name="rtx4090-48gb",
            nvml_name="NVIDIA GeForce RTX 4090",
            memory_bytes=49140 * _MIB,
            mem_bandwidth_bytes_per_s=1008e9,
            bf16_tflops=165.2,
            fp8_tflops=330.3,
            tdp_w=450.0,
            idle_power_w=35.0,
            boost_clock_mhz=2520,
            idle_clock_mhz=210,
            mem_clock_mhz=10501,
            sw_thermal_limit_c=83.0,
            hw_slowdown_c=90.0,
            ambient_c=32.0,
            thermal_resistance_c_per_w=0.15,
            thermal_time_constant_s=90.0,
            source=(
                "reference.md §6 [S22]: modified card, AD102 on a clamshell PCB with a blower; "
                "bandwidth and compute taken equal to the 24GB card (unverified: measure it); "
                "49140 MiB as reported by such cards; the blower and the second bank of GDDR6X "
                "raise its thermal resistance; " + _GEFORCE_THERMAL
            ),
        ),
        GpuSpec(
            name="a100-80gb-pcie",
            nvml_name="NVIDIA A100 80GB PCIe",
            memory_bytes=81920 * _MIB,
            mem_bandwidth_bytes_per_s=1935e9,
            bf16_tflops=312.0,
            fp8_tflops=None,
            tdp_w=300.0,
            idle_power_w=45.0,
            boost_clock_mhz=1410,
            idle_clock_mhz=210,
            mem_clock_mhz=1512,
            sw_thermal_limit_c=85.0,
            hw_slowdown_c=89.0,
            ambient_c=30.0,
            thermal_resistance_c_per_w=0.11,
            thermal_time_constant_s=60.0,
            source="reference.md §6 [S24] (A100 datasheet: 1935 GB/s, 312 TFLOPS, 300 W); "
            + _DC_THERMAL,
        ),
        GpuSpec(
            name="a100-80gb-sxm",
            nvml_name="NVIDIA A100-SXM4-80GB",
            memory_bytes=81920 * _MIB,
            mem_bandwidth_bytes_per_s=2039e9,
            bf16_tflops=312.0,
            fp8_tflops=None,
            tdp_w=400.0,
            idle_power_w=55.0,
            boost_clock_mhz=1410,
            idle_clock_mhz=210,
            mem_clock_mhz=1593,
            sw_thermal_limit_c=85.0,
            hw_slowdown_c=89.0,
            ambient_c=30.0,
            thermal_resistance_c_per_w=0.09,
            thermal_time_constant_s=60.0,
            source="reference.md §6 [S24] (A100 datasheet: 2039 GB/s, 312 TFLOPS, 400 W); "
            + _DC_THERMAL,
        ),
        GpuSpec(
            name="h100-sxm",
            nvml_name="NVIDIA H100 80GB HBM3",
            memory_bytes=81559 * _MIB,
            mem_bandwidth_bytes_per_s=3350e9,
            bf16_tflops=989.5,
            fp8_tflops=1979.0,
            tdp_w=700.0,
            idle_power_w=70.0,
            boost_clock_mhz=1980,
            idle_clock_mhz=345,
            mem_clock_mhz=2619,
            sw_thermal_limit_c=87.0,
            hw_slowdown_c=90.0,
            ambient_c=30.0,
            thermal_resistance_c_per_w=0.07,
            thermal_time_constant_s=60.0,
            source="reference.md §6 [S25] (H100 SXM datasheet: 3350 GB/s, 989.5 BF16, 1979 FP8, "
            "700 W); " + _DC_THERMAL,
        ),
        GpuSpec(
            name="h200",
            nvml_name="NVIDIA H200",
            memory_bytes=143771 * _MIB,
            mem_bandwidth_bytes_per_s=4800e9,
            bf16_tflops=989.5,
            fp8_tflops=1979.0,
            tdp_w=700.0,
            idle_power_w=75.0,
            boost_clock_mhz=1980,
            idle_clock_mhz=345,
            mem_clock_mhz=3201,
            sw_thermal_limit_c=87.0,
            hw_slowdown_c=90.0,
            ambient_c=30.0,
            thermal_resistance_c_per_w=0.07,
            thermal_time_constant_s=60.0,
            source="reference.md §6 [S26] (H200 SXM: 141 GB HBM3e, 4800 GB/s, 989.5 BF16, "
            "1979 FP8, 700 W); " + _DC_THERMAL,
        ),
        GpuSpec(
            name="l40s",
            nvml_name="NVIDIA L40S",
            memory_bytes=46068 * _MIB,
            mem_bandwidth_bytes_per_s=864e9,
            bf16_tflops=362.05,
            fp8_tflops=733.0,
            tdp_w=350.0,
            idle_power_w=35.0,
            boost_clock_mhz=2520,
            idle_clock_mhz=210,
            mem_clock_mhz=9001,
            sw_thermal_limit_c=88.0,
            hw_slowdown_c=93.0,
            ambient_c=30.0,
            thermal_resistance_c_per_w=0.13,
            thermal_time_constant_s=75.0,
            source="reference.md §6 [S23] (L40S datasheet: 864 GB/s, 362.05 BF16, 733 FP8, "
            "350 W); " + _DC_THERMAL,
        ),
    )
}

_HF_CONFIG = (
    "reference.md §7.2 [S29] shape from HF config.json; parameter count from the model card"
)

MODELS: Final[dict[str, ModelSpec]] = {
    m.name: m
    for m in (
        ModelSpec(
            name="llama-3.1-8b",
            hf_id="meta-llama/Llama-3.1-8B-Instruct",
            params=8_030_261_248,
            num_layers=32,
            hidden_size=4096,
            num_attention_heads=32,
            num_kv_heads=8,
            head_dim=128,
            vocab_size=128_256,
            intermediate_size=14_336,
            max_position_embeddings=131_072,
            tied_embeddings=False,
            source=_HF_CONFIG,
        ),
        ModelSpec(
            name="mistral-7b",
            hf_id="mistralai/Mistral-7B-Instruct-v0.3",
            params=7_248_023_552,
            num_layers=32,
            hidden_size=4096,
            num_attention_heads=32,
            num_kv_heads=8,
            head_dim=128,
            vocab_size=32_768,
            intermediate_size=14_336,
            max_position_embeddings=32_768,
            tied_embeddings=False,
            source=_HF_CONFIG + " (v0.3: no sliding window, 32768-token vocabulary)",
        ),
        ModelSpec(
            name="qwen3-0.6b",
            hf_id="Qwen/Qwen3-0.6B",
            params=596_049_920,
            num_layers=28,
            hidden_size=1024,
            num_attention_heads=16,
            num_kv_heads=8,
            head_dim=128,
            vocab_size=151_936,
            intermediate_size=3072,
            max_position_embeddings=40_960,
            tied_embeddings=True,
            source="HF config.json (https://huggingface.co/Qwen/Qwen3-0.6B/raw/main/config.json): "
            "head_dim 128 set apart from hidden_size (16 x 128 = 2048 query width); parameters "
            "summed from that shape (q/k norms, tied embeddings): 596,049,920, the model card's "
            "0.6B (0.44B non-embedding)",
        ),
        ModelSpec(
            name="qwen2.5-7b",
            hf_id="Qwen/Qwen2.5-7B-Instruct",
            params=7_615_616_512,
            num_layers=28,
            hidden_size=3584,
            num_attention_heads=28,
            num_kv_heads=4,
            head_dim=128,
            vocab_size=152_064,
            intermediate_size=18_944,
            max_position_embeddings=32_768,
            tied_embeddings=False,
            source=_HF_CONFIG,
        ),
        ModelSpec(
            name="qwen2.5-14b",
            hf_id="Qwen/Qwen2.5-14B-Instruct",
            params=14_770_033_664,
            num_layers=48,
            hidden_size=5120,
            num_attention_heads=40,
            num_kv_heads=8,
            head_dim=128,
            vocab_size=152_064,
            intermediate_size=13_824,
            max_position_embeddings=32_768,
            tied_embeddings=False,
            source=_HF_CONFIG,
        ),
        ModelSpec(
            name="qwen2.5-32b",
            hf_id="Qwen/Qwen2.5-32B-Instruct",
            params=32_763_876_352,
            num_layers=64,
            hidden_size=5120,
            num_attention_heads=40,
            num_kv_heads=8,
            head_dim=128,
            vocab_size=152_064,
            intermediate_size=27_648,
            max_position_embeddings=32_768,
            tied_embeddings=False,
            source=_HF_CONFIG,
        ),
        ModelSpec(
            name="llama-3.1-70b",
            hf_id="meta-llama/Llama-3.1-70B-Instruct",
            params=70_553_706_496,
            num_layers=80,
            hidden_size=8192,
            num_attention_heads=64,
            num_kv_heads=8,
            head_dim=128,
            vocab_size=128_256,
            intermediate_size=28_672,
            max_position_embeddings=131_072,
            tied_embeddings=False,
            source=_HF_CONFIG,
        ),
    )
}


def get_gpu(name: str) -> GpuSpec:
    """Look a GPU up by CLI name, failing with the list of valid names."""
    try:
        return GPUS[name]
    except KeyError:
        raise CatalogError(f"unknown GPU {name!r}; choose one of: {', '.join(GPUS)}") from None


def get_model(name: str) -> ModelSpec:
    """Look a model up by CLI name, failing with the list of valid names."""
    try:
        return MODELS[name]
    except KeyError:
        raise CatalogError(f"unknown model {name!r}; choose one of: {', '.join(MODELS)}") from None


def check_precision(precision: str, kv_dtype: str) -> tuple[Precision, KvDtype]:
    """Validate precision names from the command line, failing with the valid choices."""
    for value in PRECISIONS:
        if value == precision:
            break
    else:
        raise CatalogError(
            f"unknown precision {precision!r}; choose one of: {', '.join(PRECISIONS)}"
        )
    for kv in KV_DTYPES:
        if kv == kv_dtype:
            return value, kv
    raise CatalogError(f"unknown KV dtype {kv_dtype!r}; choose one of: {', '.join(KV_DTYPES)}")
