#!/usr/bin/env bash
# GRPO from the base model, no SFT (cold start), on the toolcall env's synthetic arithmetic task (ToolRL's reward:
# one call, its name and arguments exact): the base model and every GRPO checkpoint evaluated on held-out
# questions (examples/chain/_chain.sh, run_rl).
#   bash examples/chain/toolcall_arith_rl.sh
# Data: data_preprocess/toolcall.py --synthetic arith: 256 training questions and 64 held-out ones (the source's
# `val` split, drawn with the training ones and never trained on: the test rows here), 2 worked examples each.
# Settings: config/agent_tune_toolcall_cpu.yaml + config/chain/toolcall_arith_rl.yaml (GRPO: steps, batch,
# checkpoints), examples/eval/chain_toolcall_arith_cpu.yaml (the evals' sampling). Outputs under $WORK_DIR (default
# outputs/chain/toolcall_arith_rl): eval/<base|grpo_step_K>.report.json, table.md, grpo/curve.png.
set -euo pipefail
CHAIN=toolcall_arith_rl
ENV_NAME=toolcall
RESULT_ENV="toolcall arith"
GRPO_CONFIG=agent_tune_toolcall_cpu
GRPO_OVERLAY=+chain=toolcall_arith_rl
EVAL_PRESET=examples/eval/chain_toolcall_arith_cpu.yaml
. "$(dirname "${BASH_SOURCE[0]}")/_chain.sh"

chain_data() {
  "$PYTHON" data_preprocess/toolcall.py --synthetic arith --n 256 --val-size 64 --shots 2 --out "$DATA_DIR"
  mv "$DATA_DIR/val.parquet" "$DATA_DIR/test.parquet"
}

run_rl
