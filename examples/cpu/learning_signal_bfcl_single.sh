#!/usr/bin/env bash
# Learning signal on BFCL single-turn rows on CPU (not run in CI): ~20 GRPO steps of verl's real trainer with
# SmolLM2-135M on BFCL's simple_python train rows, each showing 2 worked examples of the call format (other
# train entries' questions and reference calls), ToolRL's reward mapped onto [0, 1] and BFCL's AST verdict as
# acc (config/agent_tune_toolcall_bfcl_cpu.yaml holds every hyper-parameter). Writes the metrics per step
# ($WORK_DIR/checkpoints/metrics.jsonl) and a PNG of reward, acc, format errors, calls and groups with signal
# per step ($WORK_DIR/learning_signal_bfcl_single.png). Running it again resumes from the last checkpoint.
#   bash examples/cpu/learning_signal_bfcl_single.sh [hydra overrides...]   (estimated ~2 min a step on 2 cores)
# Passed only when set: STEPS (trainer.total_training_steps), LR (actor_rollout_ref.actor.optim.lr).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../_common.sh"

WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/learning_signal_bfcl_single}"
# The data recipe (data_preprocess/toolcall.py --source bfcl): worked examples per row; the config's
# data.max_prompt_length is measured for it.
SHOTS=2

"$PYTHON" "$REPO_DIR/data_preprocess/toolcall.py" --source bfcl --categories simple_python --shots "$SHOTS" \
  --out "$WORK_DIR/data"
OVERRIDES+=(data.train_files="$WORK_DIR/data/train.parquet" data.val_files="$WORK_DIR/data/val.parquet"
  trainer.default_local_dir="$WORK_DIR/checkpoints")
pass STEPS trainer.total_training_steps
pass LR actor_rollout_ref.actor.optim.lr

cd "$REPO_DIR"
"$PYTHON" -m agent_tune.launch.train --config-name agent_tune_toolcall_bfcl_cpu "${OVERRIDES[@]}" "$@"
"$PYTHON" -m agent_tune.cli plot "$WORK_DIR/checkpoints/metrics.jsonl" \
  --out "$WORK_DIR/learning_signal_bfcl_single.png" \
  --keys reward acc format_errors num_calls zero_call groups_with_signal response_length \
  --title "GRPO, SmolLM2-135M, BFCL simple_python with 2 shots (CPU)"
