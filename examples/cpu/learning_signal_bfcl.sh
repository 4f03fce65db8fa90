#!/usr/bin/env bash
# Learning signal on BFCL, stage 1 of the curriculum on CPU (not run in CI): ~20 GRPO steps of the main job's
# setting (config/agent_tune_bfcl_cpu.yaml: SmolLM2-135M, train_base with worked examples, the syntax
# reward) and a PNG of the syntax reward, the valid-call rate, format errors and groups with signal per step
# ($WORK_DIR/learning_signal_bfcl.png). Running it again resumes.
#   bash examples/cpu/learning_signal_bfcl.sh [hydra overrides...]
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../_common.sh"
WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/learning_signal_bfcl}"

WORK_DIR="$WORK_DIR" TOTAL_STEPS="${TOTAL_STEPS:-20}" \
  bash "$REPO_DIR/examples/run_grpo_bfcl_cpu.sh" trainer.save_freq=10 "$@"
"$PYTHON" -m agent_tune.cli plot "$WORK_DIR/checkpoints/metrics.jsonl" \
  --out "$WORK_DIR/learning_signal_bfcl.png" \
  --keys reward valid_call_rate format_error_rate zero_call groups_with_signal pg_loss \
  --title "GRPO stage 1 (syntax reward), SmolLM2-135M, BFCL train_base (CPU)"
