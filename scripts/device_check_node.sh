#!/usr/bin/env bash
# Device check for `gputui vram-check` and `gputui burn` on a real NVIDIA GPU (about 2-3 minutes).
#
# Run it from the repository root on a machine with a GPU, e.g. through the device tool:
#     run(command="bash scripts/device_check_node.sh", timeout_s=300)
# Everything it learns goes under $OUT (./out/device_check_node when OUT is unset):
#     env.txt             python, torch/cupy, nvidia-smi identity and clocks
#     vram_check.json     gputui vram-check --fraction 0.05 --json    (+ .stderr, .rc)
#     vram_check.txt      the same check as text, address pattern only (+ .rc)
#     fault_injection.txt a bit flipped on the device between write and verify: exact offset?
#     burn.json           gputui burn --seconds 60 --json              (+ .stderr, .rc)
#     summary.txt         the lines to paste into a closing note
#
# PyTorch: the machine's own, else a wheel found in $TORCH_WHEEL_DIR, wheels/ or shared/wheels/
# (installed with --no-index: the device machine reaches no registry; note that a CUDA torch wheel
# is far above the tool's 64 MiB carry limit, so in practice this means the machine's torch), else
# CuPy if installed. With neither, the checks still run and record gputui's exit-2 message.
# gputui itself runs from src/ (PYTHONPATH), as `python -m gputui` when the full CLI's
# dependencies import, else as `python -m gputui.node` (needs only torch; nvidia-ml-py optional).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-out/device_check_node}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

: >"$OUT/summary.txt"
note() { echo "$*" >>"$OUT/summary.txt"; }

{
  echo "== date: $(date -u +%FT%TZ)"
  echo "== python: $($PY --version 2>&1) at $(command -v "$PY")"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,power.limit,clocks.max.sm,uuid \
    --format=csv 2>&1 || echo "nvidia-smi failed"
  nvidia-smi topo -m 2>&1 | head -20 || true
} >"$OUT/env.txt" 2>&1

if ! $PY -c "import torch" >/dev/null 2>&1; then
  for dir in ${TORCH_WHEEL_DIR:-} wheels shared/wheels; do
    if ls "$dir"/torch-*.whl >/dev/null 2>&1; then
      echo "== installing torch from $dir" >>"$OUT/env.txt"
      $PY -m pip install --no-index --find-links "$dir" torch >>"$OUT/env.txt" 2>&1
      break
    fi
  done
fi
$PY - >>"$OUT/env.txt" 2>&1 <<'EOF'
for name in ("torch", "cupy", "pynvml", "numpy"):
    try:
        module = __import__(name)
    except Exception as exc:  # noqa: BLE001 - a report of what is there, nothing more
        print(f"== {name}: not importable ({type(exc).__name__}: {exc})")
        continue
    print(f"== {name}: {getattr(module, '__version__', '?')}")
    if name == "torch":
        print(f"   cuda build {module.version.cuda}, available {module.cuda.is_available()}, "
              f"devices {module.cuda.device_count()}")
EOF

if $PY -c "from gputui.cli import build_parser; build_parser()" >/dev/null 2>&1; then
  GPUTUI=("$PY" -m gputui)
else
  GPUTUI=("$PY" -m gputui.node)
fi
note "gputui entry: ${GPUTUI[*]}"
grep "^== \(torch\|cupy\)" "$OUT/env.txt" >>"$OUT/summary.txt"

timeout 240 "${GPUTUI[@]}" vram-check --fraction 0.05 --json \
  >"$OUT/vram_check.json" 2>"$OUT/vram_check.stderr"
echo $? >"$OUT/vram_check.rc"
timeout 120 "${GPUTUI[@]}" vram-check --fraction 0.05 --patterns address \
  >"$OUT/vram_check.txt" 2>&1
echo $? >"$OUT/vram_check_text.rc"
note "vram-check rc=$(cat "$OUT/vram_check.rc") $(head -c 300 "$OUT/vram_check.stderr")"
cat "$OUT/vram_check.txt" >>"$OUT/summary.txt"

# The device path of the fault report: flip one bit on the GPU between write and verify.
timeout 120 $PY - >"$OUT/fault_injection.txt" 2>&1 <<'EOF'
import sys

from gputui.node.backends import NodeUnavailable, allocate_chunks
from gputui.node.runtimes import open_runtime
from gputui.node.patterns import pattern_value, verify_region

try:
    backend = open_runtime("auto", "fault injection").open(0)
except NodeUnavailable as exc:
    sys.exit(f"fault injection SKIPPED: {exc}")
chunks, words = allocate_chunks(backend, 128 << 20, 64 << 20)

def flip(pattern, arrays):
    arrays[1][12345] ^= 1 << 7

result = verify_region(backend, chunks, words, ("address", "random"), seed=9, after_write=flip)
offset = (words[0] + 12345) * 4
for m in result.mismatches:
    ok = (m.offset_bytes, m.chunk, m.found ^ m.expected) == (offset, 1, 1 << 7)
    ok = ok and m.expected == pattern_value(m.pattern, 9, words[0] + 12345)
    print(f"{m.pattern}: offset {m.offset_bytes} chunk {m.chunk} expected {m.expected:#010x} "
          f"found {m.found:#010x} -> {'OK' if ok else 'WRONG'}")
print("fault injection", "PASSED" if result.mismatch_count == 2 and len(result.mismatches) == 2
      and all(m.offset_bytes == offset for m in result.mismatches) else "FAILED")
EOF
note "$(tail -1 "$OUT/fault_injection.txt")"

timeout 150 "${GPUTUI[@]}" burn --seconds 60 --json >"$OUT/burn.json" 2>"$OUT/burn.stderr"
echo $? >"$OUT/burn.rc"
note "burn rc=$(cat "$OUT/burn.rc") $(head -c 300 "$OUT/burn.stderr")"

$PY - "$OUT" >>"$OUT/summary.txt" 2>&1 <<'EOF'
import json, sys
from pathlib import Path

out = Path(sys.argv[1])
for name, keys in (
    ("vram_check.json", ["name", "checked_bytes", "usable_gib", "mismatch_count", "seconds",
                         "bandwidth_gbps", "catalog_bandwidth_gbps", "bandwidth_ratio",
                         "bandwidth_flag", "device_note", "verdict"]),
    ("burn.json", ["name", "seconds", "dtype", "tflops", "first_throttle_s",
                   "first_throttle_reasons", "steady_sm_clock_mhz", "max_sm_clock_mhz",
                   "steady_clock_fraction", "max_temperature_c", "compute_mismatches",
                   "samples", "telemetry", "verdict"]),
):
    try:
        doc = json.loads((out / name).read_text())
    except (OSError, ValueError) as exc:
        print(f"{name}: no JSON ({exc})")
        continue
    print(f"{name}: " + ", ".join(f"{k}={doc.get(k)!r}" for k in keys))
EOF
cat "$OUT/summary.txt"
