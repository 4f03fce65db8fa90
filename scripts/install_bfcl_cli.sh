#!/usr/bin/env bash
# bfcl-eval's CLI (`.venv-bfcl-cli/bin/python -m bfcl_eval`) in ./.venv-bfcl-cli, for `bfcl evaluate` on agent-tune's
# result files (examples/eval/bfcl_official.sh, docs/eval.md) and its slow test (tests/scripts/test_bfcl_official.py,
# skipped without it). Idempotent; run it after scripts/install.sh, whose ./.venv it builds on.
#   bash scripts/install_bfcl_cli.sh
# Why a venv of its own: the CLI imports every provider SDK and tree-sitter at start-up, and a full bfcl-eval install
# pins numpy 1.26.4 under the trainer's 2.3.5. This one is an overlay (scripts/_overlay_venv.sh): the trainer's
# site-packages (bfcl-eval itself, torch, numpy, openai, ...) are on its path, and it adds, --no-deps, only the modules
# the CLI imports that the trainer lacks, each pinned.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/_steps.sh
. scripts/_overlay_venv.sh

overlay_venv .venv-bfcl-cli

# What bfcl_eval.__main__ imports beyond the trainer's venv (its provider clients, the tree-sitter parsers, the
# datamodel code generator, qwen-agent, ...) and, since --no-deps, what those import in turn.
step "pip install --no-deps bfcl-eval's CLI imports" \
  "$PY" -m pip install -q --disable-pip-version-check --no-deps \
  tree-sitter==0.21.3 tree-sitter-java==0.21.0 tree-sitter-javascript==0.21.4 \
  cohere==5.18.0 httpx-sse==0.4.3 fastavro==1.13.1 google-genai==3.6.1 mistralai==1.7.0 \
  boto3==1.44.8 botocore==1.44.8 s3transfer==0.19.3 qwen-agent==0.0.34 json5==0.17.3 soundfile==0.14.0 \
  dashscope==2.0.2 websocket-client==1.9.2 writer-sdk==3.0.0 datamodel-code-generator==0.25.7 black==26.10.1 \
  mypy_extensions==1.2.0 pathspec==1.1.1 pytokens==0.4.1 isort==9.0.2 inflect==7.6.0 jaraco.text==4.3.0 \
  jaraco.functools==4.6.0 jaraco.context==6.1.2 more-itertools==11.2.1 autocommand==2.2.2 typeguard==4.6.1 \
  tabulate==0.10.0
import_check "$PY" "bfcl_eval.__main__" ""
echo "bfcl-eval's CLI ready: $(pwd)/$PY -m bfcl_eval"
