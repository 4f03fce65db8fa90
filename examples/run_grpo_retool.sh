#!/usr/bin/env bash
# GRPO on ReTool (code-interleaved math reasoning) with a real sandbox. GPU by default: Qwen3-4B from
# ReTool's SFT cold start on 8 GPUs (config/agent_tune_retool.yaml holds every hyper-parameter). On a
# CPU-only machine:
#   CONFIG_NAME=agent_tune_retool_cpu MODEL_PATH=smollm2 bash examples/run_grpo_retool.sh
# The data comes from a local math file (or a dataset name, for users with internet):
#   INPUT=data/math.jsonl QUESTION_FIELD=problem ANSWER_FIELD=answer bash examples/run_grpo_retool.sh
#   DATASET=BytedTsinghua-SIA/DAPO-Math-17k QUESTION_FIELD=prompt ANSWER_FIELD=solution bash examples/run_grpo_retool.sh
# The env's stop string (</code>) reaches the sampler by itself. The script passes the data files and the
# checkpoint folder, and only the variables you set: MODEL_PATH, GROUP_SIZE, BATCH_SIZE (prompts per step
# and per mini-batch), TOTAL_STEPS (steps, and a checkpoint at the last); extra arguments are Hydra
# overrides. Re-running resumes from the latest checkpoint.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

CONFIG_NAME="${CONFIG_NAME:-agent_tune_retool}"
WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/retool}"
DATA_DIR="${DATA_DIR:-$WORK_DIR/data}"
CKPT_DIR="${CKPT_DIR:-$WORK_DIR/checkpoints}"
# How the data is built (data_preprocess/retool.py), when $DATA_DIR has none yet.
INPUT="${INPUT:-$REPO_DIR/tests/fixtures/retool/math_small.jsonl}"
DATASET="${DATASET:-}"
QUESTION_FIELD="${QUESTION_FIELD:-problem}"
ANSWER_FIELD="${ANSWER_FIELD:-answer}"
VAL_SIZE="${VAL_SIZE:-2}"

if [[ ! -f "$DATA_DIR/train.parquet" ]]; then
  if [[ -n "$DATASET" ]]; then src=(--dataset "$DATASET"); else src=(--input "$INPUT"); fi
  "$PYTHON" "$REPO_DIR/data_preprocess/retool.py" "${src[@]}" --out "$DATA_DIR" \
    --question-field "$QUESTION_FIELD" --answer-field "$ANSWER_FIELD" --val-size "$VAL_SIZE"
fi

OVERRIDES+=(data.train_files="$DATA_DIR/train.parquet" data.val_files="$DATA_DIR/val.parquet"
  trainer.default_local_dir="$CKPT_DIR")
pass MODEL_PATH actor_rollout_ref.model.path
pass GROUP_SIZE actor_rollout_ref.rollout.n
pass BATCH_SIZE data.train_batch_size actor_rollout_ref.actor.ppo_mini_batch_size
pass TOTAL_STEPS trainer.total_training_steps trainer.save_freq

cd "$REPO_DIR"
exec "$PYTHON" -m agent_tune.launch.train --config-name "$CONFIG_NAME" "${OVERRIDES[@]}" "$@"
