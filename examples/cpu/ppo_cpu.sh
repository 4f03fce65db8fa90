#!/usr/bin/env bash
# PPO on CPU (not run in CI): 2 steps of verl's real trainer with GAE and a learned critic (config/recipe/ppo.yaml
# on top of config/agent_tune_toolrl_cpu.yaml: SmolLM2-135M as policy and as critic, ToolRL's answer format and
# reward, FSDP2 on gloo for both). The YAML holds every hyper-parameter; this script names the recipe and the run
# length. Rows: ToolRL's rlla data when RLLA_FILE is set (its rlla_rl.json), else synthetic arithmetic tool tasks.
# Prints each step's critic and actor metrics (value loss and prediction, policy loss, grad norms, reward) from
# verl's log ($WORK_DIR/checkpoints/verl_metrics.jsonl, through agent-tune plot --table).
#   bash examples/cpu/ppo_cpu.sh [hydra overrides...]      (~10 min on 2 cores)
# STEPS: trainer.total_training_steps (default 2).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../_common.sh"

WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/ppo_cpu}"
DATA_DIR="${DATA_DIR:-$WORK_DIR/data}"
RLLA_FILE="${RLLA_FILE:-}"
STEPS="${STEPS:-2}"

if [[ ! -f "$DATA_DIR/train.parquet" || ! -f "$DATA_DIR/val.parquet" ]]; then
  if [[ -n "$RLLA_FILE" ]]; then
    "$PYTHON" "$REPO_DIR/data_preprocess/toolcall.py" --source rlla "$RLLA_FILE" --val-size 16 --out "$DATA_DIR"
  else
    "$PYTHON" "$REPO_DIR/data_preprocess/toolcall.py" --synthetic arith --n 64 --val-size 8 --shots 0 --out "$DATA_DIR"
  fi
fi
OVERRIDES+=(+recipe=ppo trainer.total_training_steps="$STEPS"
  data.train_files="$DATA_DIR/train.parquet" data.val_files="$DATA_DIR/val.parquet"
  trainer.default_local_dir="$WORK_DIR/checkpoints")

cd "$REPO_DIR"
"$PYTHON" -m agent_tune.launch.train --config-name agent_tune_toolrl_cpu "${OVERRIDES[@]}" "$@"
"$PYTHON" -m agent_tune.cli plot --table "$WORK_DIR/checkpoints/verl_metrics.jsonl" --keys \
  critic/vf_loss critic/vpred_mean critic/vf_explained_var critic/grad_norm actor/pg_loss actor/grad_norm \
  critic/score/mean critic/advantages/mean critic/returns/mean timing_s/values timing_s/update_critic \
  timing_s/update_actor timing_s/step
