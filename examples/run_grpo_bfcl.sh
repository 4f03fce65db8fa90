#!/usr/bin/env bash
# Stage 1 of the BFCL curriculum on GPUs: GRPO on train_base (100 base entries) with
# Qwen3-4B-Instruct-2507 on one node of 8 GPUs (config/agent_tune_bfcl.yaml).
#
# Every path and hyperparameter can be overridden from the environment; extra arguments are passed on
# as Hydra overrides. Re-running resumes from the latest checkpoint in CKPT_DIR.
#   MODEL_PATH=/models/Qwen3-4B-Instruct-2507 bash examples/run_grpo_bfcl.sh trainer.logger='[console,wandb]'
# Multi-node: start a Ray cluster (ray start --head / ray start --address=...), then on the head node
#   NNODES=2 RAY_ADDRESS=auto bash examples/run_grpo_bfcl.sh
# Export a checkpoint to a Hugging Face folder afterwards: bash examples/export_hf.sh CKPT_DIR/global_step_N OUT_DIR
set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$REPO_DIR/.venv/bin/python}"
MODEL_PATH="${MODEL_PATH:-Qwen/Qwen3-4B-Instruct-2507}"
WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/bfcl_stage1}"
DATA_DIR="${DATA_DIR:-$REPO_DIR/outputs/bfcl_data}"
TRAIN_FILE="${TRAIN_FILE:-$DATA_DIR/train_base.parquet}"
VAL_FILE="${VAL_FILE:-$DATA_DIR/val.parquet}"
CKPT_DIR="${CKPT_DIR:-$WORK_DIR/checkpoints}"
NNODES="${NNODES:-1}"
GPUS_PER_NODE="${GPUS_PER_NODE:-8}"
BATCH_SIZE="${BATCH_SIZE:-32}"
MINI_BATCH_SIZE="${MINI_BATCH_SIZE:-16}"
GROUP_SIZE="${GROUP_SIZE:-16}"
LR="${LR:-1e-6}"
MAX_PROMPT_LENGTH="${MAX_PROMPT_LENGTH:-8192}"
MAX_RESPONSE_LENGTH="${MAX_RESPONSE_LENGTH:-8192}"
TP="${TP:-1}"
SP="${SP:-1}"
EPOCHS="${EPOCHS:-5}"
SAVE_FREQ="${SAVE_FREQ:-20}"
TEST_FREQ="${TEST_FREQ:-10}"
REWARD="${REWARD:-progress}"
EXPERIMENT="${EXPERIMENT:-bfcl_qwen3_4b_stage1}"
CONFIG_NAME="${CONFIG_NAME:-agent_tune_bfcl}"

if [[ ! -f "$TRAIN_FILE" || ! -f "$VAL_FILE" ]]; then
  "$PYTHON" "$REPO_DIR/data_preprocess/bfcl.py" --out "$DATA_DIR"
fi

cd "$REPO_DIR"
exec "$PYTHON" -m verl_ext.train --config-name "$CONFIG_NAME" \
  actor_rollout_ref.model.path="$MODEL_PATH" \
  data.train_files="$TRAIN_FILE" \
  data.val_files="$VAL_FILE" \
  data.train_batch_size="$BATCH_SIZE" \
  data.max_prompt_length="$MAX_PROMPT_LENGTH" \
  data.max_response_length="$MAX_RESPONSE_LENGTH" \
  actor_rollout_ref.actor.ppo_mini_batch_size="$MINI_BATCH_SIZE" \
  actor_rollout_ref.actor.optim.lr="$LR" \
  actor_rollout_ref.actor.ulysses_sequence_parallel_size="$SP" \
  actor_rollout_ref.rollout.n="$GROUP_SIZE" \
  actor_rollout_ref.rollout.tensor_model_parallel_size="$TP" \
  agent_tune.env_kwargs.bfcl.reward="$REWARD" \
  trainer.nnodes="$NNODES" \
  trainer.n_gpus_per_node="$GPUS_PER_NODE" \
  trainer.total_epochs="$EPOCHS" \
  trainer.save_freq="$SAVE_FREQ" \
  trainer.test_freq="$TEST_FREQ" \
  trainer.default_local_dir="$CKPT_DIR" \
  trainer.experiment_name="$EXPERIMENT" \
  "$@"
