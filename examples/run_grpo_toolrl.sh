#!/usr/bin/env bash
# GRPO with ToolRL's reward (Qian et al., 2025, "ToolRL: Reward is All Tool Learning Needs") on its rlla
# data: Qwen2.5-3B-Instruct (or 7B), GRPO with 4 samples per prompt, 512 prompts per step, lr 1e-6, 15
# epochs, ToolRL's answer format (<think> / <tool_call> / <response>). config/agent_tune_toolrl.yaml and
# config/recipe/toolrl.yaml hold every hyper-parameter; one node of 8 GPUs by default.
#   RLLA_FILE=/data/rlla_rl.json bash examples/run_grpo_toolrl.sh
#   MODEL_PATH=Qwen/Qwen2.5-7B-Instruct EXPERIMENT=toolrl_qwen2_5_7b RLLA_FILE=... bash examples/run_grpo_toolrl.sh
#   CONFIG_NAME=agent_tune_toolrl_cpu bash examples/run_grpo_toolrl.sh     (CPU, SmolLM2-135M: plumbing only)
# RLLA_FILE is ToolRL's dataset/rlla_4k_raw/rlla_rl.json; the rows are built once into DATA_DIR with
#   data_preprocess/toolcall.py --source rlla "$RLLA_FILE" --val-size "$VAL_SIZE" --out "$DATA_DIR"
#
# ToolRL's reward variants are options of the toolcall env (config/env/toolcall.yaml lists them all), set by
# Hydra override (extra arguments) or, for the three main switches, by REWARD_LENGTH / REWARD_SCALE /
# REWARD_GRANULARITY. ToolRL's environment variable -> override (R=agent_tune.env_kwargs.toolcall.reward):
#   WITHLENGTH=1                     R.length=fixed          (Section 5.1; R.length_target=512)
#   WITHLENGTH=1 SCHEDULELENGTH=1    R.length=scheduled      (5.1; 384 -> 640 words over trainer.total_training_steps)
#   CORRECTMAX1=1                    R.scale=max1            (5.2)
#   MAX1STEP30MAX3=1                 R.scale=two_stage       (5.2; R.two_stage_step=30)
#   SCHEDULEREWARD=1                 R.scale=smooth          (5.2; R.smooth_schedule_steps=150)
#   REFINEDREWARD=1                  R.granularity=finegrained   (5.3)
#   INTERMEDIATEREWARD=1             R.granularity=intermediate  (5.3)
#   COARSEREWARD=1                   R.granularity=coarse        (5.3)
# e.g. bash examples/run_grpo_toolrl.sh agent_tune.env_kwargs.toolcall.reward.scale=two_stage \
#        trainer.experiment_name=toolrl_two_stage
#   REWARD_LENGTH=scheduled EXPERIMENT=toolrl_dynamic_length bash examples/run_grpo_toolrl.sh
# The schedules read the trainer's global step (verl's global_steps, handed to the env by the agent loop).
#
# Paths: WORK_DIR (outputs/toolrl), DATA_DIR ($WORK_DIR/data), CKPT_DIR, RLLA_FILE, VAL_SIZE (rows held out
# for validation when the data is built: 80, ToolRL's 2%). Variables, passed only when set: MODEL_PATH,
# BATCH_SIZE, MINI_BATCH_SIZE, GROUP_SIZE, LR, EPOCHS, TOTAL_STEPS, SAVE_FREQ, TEST_FREQ, TP, EXPERIMENT,
# NNODES, GPUS_PER_NODE, REWARD_LENGTH, REWARD_SCALE, REWARD_GRANULARITY; CONFIG_NAME picks the config
# (default agent_tune_toolrl). Re-running resumes from CKPT_DIR.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

CONFIG_NAME="${CONFIG_NAME:-agent_tune_toolrl}"
WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/toolrl}"
DATA_DIR="${DATA_DIR:-$WORK_DIR/data}"
CKPT_DIR="${CKPT_DIR:-$WORK_DIR/checkpoints}"
RLLA_FILE="${RLLA_FILE:-}"
VAL_SIZE="${VAL_SIZE:-80}"

if [[ ! -f "$DATA_DIR/train.parquet" || ! -f "$DATA_DIR/val.parquet" ]]; then
  if [[ -z "$RLLA_FILE" ]]; then
    echo "no rows in $DATA_DIR: set RLLA_FILE to ToolRL's dataset/rlla_4k_raw/rlla_rl.json to build them" >&2
    exit 2
  fi
  "$PYTHON" "$REPO_DIR/data_preprocess/toolcall.py" --source rlla "$RLLA_FILE" --val-size "$VAL_SIZE" --out "$DATA_DIR"
fi

OVERRIDES+=(data.train_files="$DATA_DIR/train.parquet" data.val_files="$DATA_DIR/val.parquet"
  trainer.default_local_dir="$CKPT_DIR")
pass MODEL_PATH actor_rollout_ref.model.path
pass BATCH_SIZE data.train_batch_size
pass MINI_BATCH_SIZE actor_rollout_ref.actor.ppo_mini_batch_size
pass GROUP_SIZE actor_rollout_ref.rollout.n
pass LR actor_rollout_ref.actor.optim.lr
pass EPOCHS trainer.total_epochs
pass TOTAL_STEPS trainer.total_training_steps
pass SAVE_FREQ trainer.save_freq
pass TEST_FREQ trainer.test_freq
pass TP actor_rollout_ref.rollout.tensor_model_parallel_size
pass EXPERIMENT trainer.experiment_name
pass NNODES trainer.nnodes
pass GPUS_PER_NODE trainer.n_gpus_per_node
pass REWARD_LENGTH agent_tune.env_kwargs.toolcall.reward.length
pass REWARD_SCALE agent_tune.env_kwargs.toolcall.reward.scale
pass REWARD_GRANULARITY agent_tune.env_kwargs.toolcall.reward.granularity

cd "$REPO_DIR"
exec "$PYTHON" -m agent_tune.launch.train --config-name "$CONFIG_NAME" "${OVERRIDES[@]}" "$@"
