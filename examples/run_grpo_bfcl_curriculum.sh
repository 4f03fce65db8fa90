#!/usr/bin/env bash
# A whole BFCL curriculum in one command: Environment Tuning's four stages (config/curriculum/bfcl_et_gpu.yaml:
# syntax reward on base, progress + augmentation on base, then on the harder categories, then all data
# without augmentation) with Qwen3-4B-Instruct-2507 on one node of 8 GPUs. Each stage starts from the
# previous stage's model, exported to <RUN_DIR>/<stage>/model; killed and run again, it resumes in the
# stage and at the step it had reached (<RUN_DIR>/curriculum_state.json).
#   MODEL_PATH=/models/Qwen3-4B-Instruct-2507 bash examples/run_grpo_bfcl_curriculum.sh trainer.logger='[console,wandb]'
#   CURRICULUM=bfcl_t3rl_gpu bash examples/run_grpo_bfcl_curriculum.sh       (T3RL's two stages)
#
# The script passes the data folder and the run folder, and only the variables you set, each to its key
# (below); extra arguments go to agent-tune curriculum: Hydra overrides for every stage, or
# curriculum.KEY=VALUE for the curriculum file (curriculum.stages.0.end.max_steps=10).
# Paths: RUN_DIR (outputs/bfcl_curriculum), DATA_DIR (outputs/bfcl_data, built if missing). Variables,
# passed only when set: MODEL_PATH (the first stage's model), NNODES, GPUS_PER_NODE; CURRICULUM picks the
# curriculum (default bfcl_et_gpu).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

CURRICULUM="${CURRICULUM:-bfcl_et_gpu}"
RUN_DIR="${RUN_DIR:-$REPO_DIR/outputs/bfcl_curriculum}"
DATA_DIR="${DATA_DIR:-$REPO_DIR/outputs/bfcl_data}"

for split in train train_base train_hard val; do
  if [[ ! -f "$DATA_DIR/$split.parquet" ]]; then
    "$PYTHON" "$REPO_DIR/data_preprocess/bfcl.py" --out "$DATA_DIR"
    break
  fi
done

OVERRIDES+=(curriculum.data_dir="$DATA_DIR")
pass MODEL_PATH actor_rollout_ref.model.path
pass NNODES trainer.nnodes
pass GPUS_PER_NODE trainer.n_gpus_per_node

cd "$REPO_DIR"
exec "$PYTHON" -m agent_tune.launch.curriculum --curriculum "$CURRICULUM" --run-dir "$RUN_DIR" "${OVERRIDES[@]}" "$@"
