#!/usr/bin/env bash
# Learning signal on CPU (not run in CI): ~20 GRPO steps of verl's real trainer with SmolLM2-135M on an
# easy tool task (synthetic arithmetic function calling with two worked examples in the prompt, ToolRL's
# format + correctness reward; config/agent_tune_toolcall_cpu.yaml holds every hyper-parameter). Writes
# the reward per step ($WORK_DIR/checkpoints/metrics.jsonl) and a PNG curve ($WORK_DIR/learning_signal.png).
# SHOTS=0 drops the examples (then SmolLM2 almost never calls).
# A rising curve is the evidence that advantages, masks and weight sync point the right way.
#   bash examples/cpu/learning_signal.sh [hydra overrides...]      (~90 s per step on 2 cores: 20 steps ~34 min)
# Passed only when set: STEPS (trainer.total_training_steps), LR (actor_rollout_ref.actor.optim.lr).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../_common.sh"

WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/learning_signal}"
SHOTS="${SHOTS:-2}"

"$PYTHON" "$REPO_DIR/data_preprocess/toolcall.py" --synthetic arith --n 512 --val-size 16 --shots "$SHOTS" \
  --out "$WORK_DIR/data"
OVERRIDES+=(data.train_files="$WORK_DIR/data/train.parquet" data.val_files="$WORK_DIR/data/val.parquet"
  trainer.default_local_dir="$WORK_DIR/checkpoints")
pass STEPS trainer.total_training_steps
pass LR actor_rollout_ref.actor.optim.lr

cd "$REPO_DIR"
"$PYTHON" -m agent_tune.launch.train --config-name agent_tune_toolcall_cpu "${OVERRIDES[@]}" "$@"
"$PYTHON" -m agent_tune.cli plot "$WORK_DIR/checkpoints/metrics.jsonl" \
  --out "$WORK_DIR/learning_signal.png" --title "GRPO, SmolLM2-135M, synthetic tool calling (CPU)"
