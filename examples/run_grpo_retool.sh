#!/usr/bin/env bash
# GRPO on ReTool (code-interleaved math reasoning) with a real sandbox. GPU by default: Qwen3-4B from
# ReTool's SFT cold start on 8 GPUs (config/agent_tune_retool.yaml). On a CPU-only machine:
#   CONFIG_NAME=agent_tune_retool_cpu MODEL_PATH=smollm2 bash examples/run_grpo_retool.sh
# The data comes from a local math file (or a dataset name, for users with internet):
#   INPUT=data/math.jsonl QUESTION_FIELD=problem ANSWER_FIELD=answer bash examples/run_grpo_retool.sh
#   DATASET=BytedTsinghua-SIA/DAPO-Math-17k QUESTION_FIELD=prompt ANSWER_FIELD=solution bash examples/run_grpo_retool.sh
# The env's stop string (</code>) reaches the sampler by itself. Every variable can be overridden;
# extra arguments are Hydra overrides. Re-running resumes from the latest checkpoint.
set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$REPO_DIR/.venv/bin/python}"
CONFIG_NAME="${CONFIG_NAME:-agent_tune_retool}"
MODEL_PATH="${MODEL_PATH:-russwest404/Qwen3-4B-ReTool-SFT}"
WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/retool}"
DATA_DIR="${DATA_DIR:-$WORK_DIR/data}"
CKPT_DIR="${CKPT_DIR:-$WORK_DIR/checkpoints}"
INPUT="${INPUT:-$REPO_DIR/tests/fixtures/retool/math_small.jsonl}"
DATASET="${DATASET:-}"
QUESTION_FIELD="${QUESTION_FIELD:-problem}"
ANSWER_FIELD="${ANSWER_FIELD:-answer}"
VAL_SIZE="${VAL_SIZE:-2}"
GROUP_SIZE="${GROUP_SIZE:-}"
BATCH_SIZE="${BATCH_SIZE:-}"
TOTAL_STEPS="${TOTAL_STEPS:-}"

if [[ ! -f "$DATA_DIR/train.parquet" ]]; then
  if [[ -n "$DATASET" ]]; then src=(--dataset "$DATASET"); else src=(--input "$INPUT"); fi
  "$PYTHON" "$REPO_DIR/data_preprocess/retool.py" "${src[@]}" --out "$DATA_DIR" \
    --question-field "$QUESTION_FIELD" --answer-field "$ANSWER_FIELD" --val-size "$VAL_SIZE"
fi

overrides=(
  actor_rollout_ref.model.path="$MODEL_PATH"
  data.train_files="$DATA_DIR/train.parquet"
  data.val_files="$DATA_DIR/val.parquet"
  trainer.default_local_dir="$CKPT_DIR"
)
[[ -n "$GROUP_SIZE" ]] && overrides+=(actor_rollout_ref.rollout.n="$GROUP_SIZE")
[[ -n "$BATCH_SIZE" ]] && overrides+=(data.train_batch_size="$BATCH_SIZE" actor_rollout_ref.actor.ppo_mini_batch_size="$BATCH_SIZE")
[[ -n "$TOTAL_STEPS" ]] && overrides+=(trainer.total_training_steps="$TOTAL_STEPS" trainer.save_freq="$TOTAL_STEPS")

cd "$REPO_DIR"
exec "$PYTHON" -m verl_ext.train --config-name "$CONFIG_NAME" "${overrides[@]}" "$@"
