#!/usr/bin/env bash
# GRPO from the base model, no SFT (cold start), on the MCP notes example: the base model and every GRPO checkpoint
# evaluated on the held-out test tasks (examples/chain/_chain.sh, run_rl).
#   bash examples/chain/mcp_notes_rl.sh
# Data: the MCP notes chain's (40 training tasks; 50 test tasks, 40 of them asking what no training task asks),
# 3 worked examples per row. Settings: config/agent_tune_mcp_notes_cpu.yaml + config/chain/mcp_notes_rl.yaml (GRPO:
# steps, batch, checkpoints), examples/eval/chain_mcp_notes_cpu.yaml (the evals' sampling, as the chain's). Outputs
# under $WORK_DIR (default outputs/chain/mcp_notes_rl): eval/<base|grpo_step_K>.report.json, table.md, grpo/curve.png.
set -euo pipefail
CHAIN=mcp_notes_rl
ENV_NAME=mcp
RESULT_ENV="mcp notes"
RESULT_CATEGORIES=1  # add, append, delete, read: GRPO learns some kinds and not others
GRPO_CONFIG=agent_tune_mcp_notes_cpu
GRPO_OVERLAY=+chain=mcp_notes_rl
EVAL_PRESET=examples/eval/chain_mcp_notes_cpu.yaml
. "$(dirname "${BASH_SOURCE[0]}")/_chain.sh"

chain_data() {
  "$PYTHON" -m examples.mcp.make_tasks --extra-test 40 --out "$DATA_DIR/tasks.jsonl"
  "$PYTHON" -m agent_tune.cli data --env mcp --split train test --out "$DATA_DIR" \
    --options "{\"path\": \"$DATA_DIR/tasks.jsonl\", \"shots\": 3}"
}

run_rl
