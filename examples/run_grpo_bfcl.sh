#!/usr/bin/env bash
# Stage 1 of the BFCL curriculum on GPUs: GRPO on train_base (100 base entries) with
# Qwen3-4B-Instruct-2507 on one node of 8 GPUs (config/agent_tune_bfcl.yaml holds every hyper-parameter).
#
# The script passes the data files and the checkpoint folder, and only the variables you set, each to its
# key (below); extra arguments are passed on as Hydra overrides. Re-running resumes from CKPT_DIR.
#   MODEL_PATH=/models/Qwen3-4B-Instruct-2507 bash examples/run_grpo_bfcl.sh trainer.logger='[console,wandb]'
# Multi-node: start a Ray cluster (ray start --head / ray start --address=...), then on the head node
#   NNODES=2 RAY_ADDRESS=auto bash examples/run_grpo_bfcl.sh
# Export a checkpoint to a Hugging Face folder afterwards: bash examples/export_hf.sh CKPT_DIR/global_step_N OUT_DIR
#
# Paths: WORK_DIR (outputs/bfcl_stage1), DATA_DIR (outputs/bfcl_data, built if missing), TRAIN_FILE,
# VAL_FILE, CKPT_DIR. Variables, passed only when set: MODEL_PATH, BATCH_SIZE, MINI_BATCH_SIZE, GROUP_SIZE,
# LR, MAX_PROMPT_LENGTH, MAX_RESPONSE_LENGTH, TP, SP, EPOCHS, SAVE_FREQ, TEST_FREQ, REWARD, EXPERIMENT,
# NNODES, GPUS_PER_NODE; CONFIG_NAME picks the config (default agent_tune_bfcl).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

CONFIG_NAME="${CONFIG_NAME:-agent_tune_bfcl}"
WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/bfcl_stage1}"
DATA_DIR="${DATA_DIR:-$REPO_DIR/outputs/bfcl_data}"
TRAIN_FILE="${TRAIN_FILE:-$DATA_DIR/train_base.parquet}"
VAL_FILE="${VAL_FILE:-$DATA_DIR/val.parquet}"
CKPT_DIR="${CKPT_DIR:-$WORK_DIR/checkpoints}"

if [[ ! -f "$TRAIN_FILE" || ! -f "$VAL_FILE" ]]; then
  "$PYTHON" "$REPO_DIR/data_preprocess/bfcl.py" --out "$DATA_DIR"
fi

OVERRIDES+=(data.train_files="$TRAIN_FILE" data.val_files="$VAL_FILE" trainer.default_local_dir="$CKPT_DIR")
pass MODEL_PATH actor_rollout_ref.model.path
pass BATCH_SIZE data.train_batch_size
pass MINI_BATCH_SIZE actor_rollout_ref.actor.ppo_mini_batch_size
pass GROUP_SIZE actor_rollout_ref.rollout.n
pass LR actor_rollout_ref.actor.optim.lr
pass MAX_PROMPT_LENGTH data.max_prompt_length
pass MAX_RESPONSE_LENGTH data.max_response_length
pass TP actor_rollout_ref.rollout.tensor_model_parallel_size
pass SP actor_rollout_ref.actor.ulysses_sequence_parallel_size
pass EPOCHS trainer.total_epochs
pass SAVE_FREQ trainer.save_freq
pass TEST_FREQ trainer.test_freq
pass REWARD agent_tune.env_kwargs.bfcl.reward
pass EXPERIMENT trainer.experiment_name
pass NNODES trainer.nnodes
pass GPUS_PER_NODE trainer.n_gpus_per_node

cd "$REPO_DIR"
exec "$PYTHON" -m agent_tune.launch.train --config-name "$CONFIG_NAME" "${OVERRIDES[@]}" "$@"
