#!/usr/bin/env bash
# The chain on BFCL v4 simple_python (the toolcall env, BFCL's AST verdict), each stage measured on the held-out
# test split (examples/chain/_chain.sh says what each stage does): base -> SFT on the training entries' ground
# truth -> RFT -> GRPO, SmolLM2-135M on CPU.
#   bash examples/chain/bfcl_simple_python.sh
# Data: data_preprocess/toolcall.py --source bfcl --categories simple_python --shots 2 (split by id, seed 42:
# 200 train / 50 val / 150 test entries; 2 worked examples per row, drawn from the train split only).
# Settings: config/agent_tune_toolcall_bfcl_cpu.yaml + config/chain/bfcl_simple_python.yaml (GRPO),
# config/agent_tune_sft_cpu.yaml + config/chain/sft_bfcl_simple_python.yaml (both SFT stages),
# examples/eval/chain_bfcl_simple_python_cpu.yaml (sampling of the evals and of RFT). Outputs under $WORK_DIR
# (default outputs/chain/bfcl_simple_python): eval/<stage>.report.json, table.md.
set -euo pipefail
CHAIN=bfcl_simple_python
ENV_NAME=toolcall
GRPO_CONFIG=agent_tune_toolcall_bfcl_cpu
GRPO_OVERLAY=+chain=bfcl_simple_python
SFT_CONFIG=agent_tune_sft_cpu
SFT_OVERLAY=+chain=sft_bfcl_simple_python
EVAL_PRESET=examples/eval/chain_bfcl_simple_python_cpu.yaml
. "$(dirname "${BASH_SOURCE[0]}")/_chain.sh"

chain_data() {
  "$PYTHON" data_preprocess/toolcall.py --source bfcl --categories simple_python --shots 2 --out "$DATA_DIR"
}

run_chain
