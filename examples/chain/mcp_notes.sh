#!/usr/bin/env bash
# The chain on the MCP notes example, each stage measured on held-out test tasks (examples/chain/_chain.sh says
# what each stage does): base -> SFT on the training tasks' solutions -> RFT -> GRPO, SmolLM2-135M on CPU.
#   bash examples/chain/mcp_notes.sh
# Data: examples/mcp/make_tasks.py's 50 tasks (40 train, 10 test) and 40 more test tasks whose questions no
# training task asks (--extra-test 40: 50 test tasks), 3 worked examples per row as the learning-signal run has them.
# Settings: config/agent_tune_mcp_notes_cpu.yaml + config/chain/mcp_notes.yaml (GRPO), config/agent_tune_sft_cpu.yaml
# + config/chain/sft_mcp_notes.yaml (both SFT stages), examples/eval/chain_mcp_notes_cpu.yaml (sampling of the
# evals and of RFT). Outputs under $WORK_DIR (default outputs/chain/mcp_notes): eval/<stage>.report.json, table.md.
set -euo pipefail
CHAIN=mcp_notes
ENV_NAME=mcp
GRPO_CONFIG=agent_tune_mcp_notes_cpu
GRPO_OVERLAY=+chain=mcp_notes
SFT_CONFIG=agent_tune_sft_cpu
SFT_OVERLAY=+chain=sft_mcp_notes
EVAL_PRESET=examples/eval/chain_mcp_notes_cpu.yaml
. "$(dirname "${BASH_SOURCE[0]}")/_chain.sh"

chain_data() {
  "$PYTHON" -m examples.mcp.make_tasks --extra-test 40 --out "$DATA_DIR/tasks.jsonl"
  "$PYTHON" -m agent_tune.cli data --env mcp --split train test --out "$DATA_DIR" \
    --options "{\"path\": \"$DATA_DIR/tasks.jsonl\", \"shots\": 3}"
}

run_chain
