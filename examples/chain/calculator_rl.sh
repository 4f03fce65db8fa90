#!/usr/bin/env bash
# GRPO from the base model, no SFT (cold start), on the one-file calculator env (examples/envs/calculator.py): the
# base model and every GRPO checkpoint evaluated on the held-out test questions (examples/chain/_chain.sh, run_rl).
#   bash examples/chain/calculator_rl.sh
#   OVERLAY=+chain=calculator_rl_lr1e-6 bash examples/chain/calculator_rl.sh   # a variant: one change, 8 steps
# Data: the calculator chain's (64 train and 64 test questions; the test questions never appear in train).
# Settings: config/agent_tune_grpo_cpu.yaml + config/chain/calculator_rl.yaml (GRPO: steps, batch, checkpoints),
# examples/eval/chain_calculator_cpu.yaml (the evals' sampling, as the chain's). Outputs under $WORK_DIR (default
# outputs/chain/<the overlay's name>): eval/<base|grpo_step_K>.report.json, table.md, grpo/curve.png.
set -euo pipefail
GRPO_OVERLAY="${OVERLAY:-+chain=calculator_rl}"
CHAIN="${GRPO_OVERLAY#+chain=}"
ENV_NAME=calculator
RESULT_ENV=calculator
RESULT_COMMAND="${OVERLAY:+OVERLAY=$OVERLAY }bash examples/chain/calculator_rl.sh"
RESULT_VARIANT="${OVERLAY:+${CHAIN#calculator_rl_}}"
GRPO_CONFIG=agent_tune_grpo_cpu
EVAL_PRESET=examples/eval/chain_calculator_cpu.yaml
. "$(dirname "${BASH_SOURCE[0]}")/_chain.sh"

chain_data() {
  "$PYTHON" -m agent_tune.cli data --env examples.envs.calculator:CalculatorEnv --split train test --out "$DATA_DIR" \
    --options '{"size": 64}'
}

run_rl
