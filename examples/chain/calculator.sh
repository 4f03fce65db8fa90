#!/usr/bin/env bash
# The chain on the one-file calculator env (examples/envs/calculator.py), each stage measured on its held-out test
# questions (examples/chain/_chain.sh says what each stage does): base -> SFT on the training questions played right
# -> RFT -> GRPO, SmolLM2-135M on CPU.
#   bash examples/chain/calculator.sh
# Data: `agent-tune data --env examples.envs.calculator:CalculatorEnv --options '{"size": 64}'`: 64 train and 64 test
# questions (the test questions never appear in train). Settings: config/agent_tune_grpo_cpu.yaml +
# config/chain/calculator.yaml (GRPO), config/agent_tune_sft_cpu.yaml + config/chain/sft_calculator.yaml (both SFT
# stages), examples/eval/chain_calculator_cpu.yaml (sampling of the evals and of RFT). Outputs under $WORK_DIR
# (default outputs/chain/calculator): eval/<stage>.report.json, table.md.
set -euo pipefail
CHAIN=calculator
ENV_NAME=calculator
GRPO_CONFIG=agent_tune_grpo_cpu
GRPO_OVERLAY=+chain=calculator
SFT_CONFIG=agent_tune_sft_cpu
SFT_OVERLAY=+chain=sft_calculator
EVAL_PRESET=examples/eval/chain_calculator_cpu.yaml
. "$(dirname "${BASH_SOURCE[0]}")/_chain.sh"

chain_data() {
  "$PYTHON" -m agent_tune.cli data --env examples.envs.calculator:CalculatorEnv --split train test --out "$DATA_DIR" \
    --options '{"size": 64}'
}

run_chain
